// The server side of CoreDNS's `tls` configuration for node:tls: TLS 1.2 at least (as CoreDNS's
// setTLSDefaults), the certificate, and Go's five client-authentication policies. node:tls has
// two switches (requestCert, rejectUnauthorized); the policies between them are checked once the
// handshake is done (`clientAllowed`), and a connection that fails them is closed before it is served.

import type tls from 'node:tls';
import type { ServerTlsConfig } from '../plugin/plugin.ts';

/**
 * CoreDNS's DefaultHTTPSMaxConnections and DefaultHTTPSMaxStreams. Here, not in doh.ts, so that a configuration
 * without an `https://` server never loads doh.ts (and node:http2 with it).
 */
export const DEFAULT_HTTPS_MAX_CONNECTIONS = 200;
export const DEFAULT_HTTPS_MAX_STREAMS = 250;
/** CoreDNS's DefaultGRPCMaxConnections and DefaultGRPCMaxStreams (core/dnsserver/server_grpc.go). */
export const DEFAULT_GRPC_MAX_CONNECTIONS = 200;
export const DEFAULT_GRPC_MAX_STREAMS = 256;

/** The node:tls server options of a block's TLS configuration (`alpn`: the protocols offered, DoH only). */
export function serverTlsOptions(cfg: ServerTlsConfig, handshakeTimeoutMs: number, alpn?: string[]): tls.TlsOptions {
  const o: tls.TlsOptions = {
    cert: cfg.cert,
    key: cfg.key,
    minVersion: 'TLSv1.2',
    handshakeTimeout: handshakeTimeoutMs,
    requestCert: cfg.clientAuth !== 'nocert',
    // Only require_and_verify fails the handshake itself on a missing or unverified certificate.
    rejectUnauthorized: cfg.clientAuth === 'require_and_verify',
  };
  if (cfg.ca !== undefined) o.ca = cfg.ca;
  // No client certificate is asked for, so nothing is verified against a store: an empty one spares Node loading
  // its built-in roots into the context, and the file NODE_EXTRA_CA_CERTS names (0.7 ms of a DoT/DoH start; 5 ms
  // with a system bundle of ~150 certificates there). Go sends the certificate file's chain as it is too, never
  // completing it from a store.
  else if (!o.requestCert) o.ca = [];
  if (alpn !== undefined) o.ALPNProtocols = alpn;
  return o;
}

/**
 * After the handshake: does the connection meet the policy? `require` (Go's RequireAnyClientCert) wants some
 * certificate, verified or not; `verify_if_given` wants a given certificate to verify.
 */
export function clientAllowed(cfg: ServerTlsConfig, socket: tls.TLSSocket): boolean {
  switch (cfg.clientAuth) {
    case 'require': return hasPeerCertificate(socket);
    case 'verify_if_given': return socket.authorized || !hasPeerCertificate(socket);
    default: return true;
  }
}

function hasPeerCertificate(socket: tls.TLSSocket): boolean {
  const c = socket.getPeerCertificate();
  return c !== null && Object.keys(c).length > 0;
}

/** CoreDNS's compatibleTLSConfig for the blocks sharing one listener: undefined when they agree, else why not. */
export function tlsConflict(a: ServerTlsConfig | undefined, b: ServerTlsConfig | undefined): string | undefined {
  if (a === undefined || b === undefined) return a === b ? undefined : 'TLS is configured for only one server block';
  if (a.clientAuth !== b.clientAuth) return 'client authentication policies differ';
  if (!sameBytes(a.ca, b.ca)) return 'client CA pools differ';
  if (!sameBytes(a.cert, b.cert)) return 'server certificates differ';
  return undefined;
}

function sameBytes(a: Buffer | undefined, b: Buffer | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.equals(b);
}
