// What the HTTP-based listeners (DoH in doh.ts, gRPC in grpc.ts) share: binding on a wildcard with the IPv4
// fallback, the TLS server's events, and counting requests in flight for a graceful stop.

import type net from 'node:net';
import type tls from 'node:tls';
import { listenError } from './listener.ts';
import { clientAllowed } from './tls.ts';
import type { ServerTlsConfig } from '../plugin/plugin.ts';

/**
 * Binds through `bind(wildcard)`: '::' for an IPv6 or empty host, else '0.0.0.0'; an empty host on a machine
 * without IPv6 falls back to '0.0.0.0'.
 */
export async function listenWildcard(host: string, bind: (wildcard: string) => Promise<void>): Promise<void> {
  const isV6 = host.includes(':') || host === '';
  try {
    await bind(isV6 ? '::' : '0.0.0.0');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (host === '' && isV6 && (code === 'EAFNOSUPPORT' || code === 'EADDRNOTAVAIL')) {
      await bind('0.0.0.0');
      return;
    }
    throw e;
  }
}

/** Listens on host:port (SO_REUSEPORT, dual-stack); resolves with the port bound, rejects with Go's text. */
export function listenTcp(server: net.Server, host: string, port: number, wildcard: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => { reject(listenError('Listen', 'tcp', host, port, err)); };
    server.once('error', onError);
    // The IPv6 wildcard as no host at all, as the DNS listener binds it: Node then binds `::` (dual-stack), without
    // the dns.lookup of '::' whose net.isIP compiles the IPv6 pattern during the start.
    const where = host === '' && wildcard === '::' ? {} : { host: host === '' ? wildcard : host };
    server.listen({ port, ...where, reusePort: true, ipv6Only: false }, () => {
      server.removeListener('error', onError);
      server.on('error', () => { /* accept errors: keep serving */ });
      resolve((server.address() as net.AddressInfo).port);
    });
  });
}

/**
 * The TLS side of a secure server: key log lines to the current configuration's `keylog`, connections whose
 * client certificate the `client_auth` policy refuses closed (node:tls checks after the handshake), failed
 * handshakes ignored (their socket is closed). `current` gives the configuration in force (reloads change it).
 */
export function watchTlsServer(s: tls.Server, current: () => ServerTlsConfig | undefined, initial: ServerTlsConfig): void {
  s.on('keylog', (line: Buffer) => { current()?.keyLog?.(line); });
  s.on('secureConnection', (socket: tls.TLSSocket) => {
    if (!clientAllowed(current() ?? initial, socket)) socket.destroy();
  });
  s.on('tlsClientError', () => { /* failed handshake: the socket is closed */ });
}

/** Requests in flight, so that a graceful stop can wait for their answers. */
export class Inflight {
  count = 0;
  private waiters: Array<() => void> = [];

  begin(): void { this.count++; }

  end(): void {
    if (--this.count === 0 && this.waiters.length > 0) {
      const w = this.waiters;
      this.waiters = [];
      for (const f of w) f();
    }
  }

  /** Resolves when none is in flight, or after `graceMs`. */
  drained(graceMs: number): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const t = setTimeout(resolve, graceMs);
      this.waiters.push(() => { clearTimeout(t); resolve(); });
    });
  }
}
