// `dnstap listen SOCKET`: the receivers (sinks) connect to the server (CoreDNS
// plugin/dnstap listener.go). Each accepted connection gets the writer's side of
// the Frame Streams handshake (READY, ACCEPT from the sink, START); every
// message is then written to every connected sink at once, without a queue. A
// sink that does not keep up (more than 4 MiB waiting to be sent to it, where
// CoreDNS's write would time out after 4 s) or whose connection fails is
// dropped and its connection closed; the others are not affected.

import { existsSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import net from 'node:net';
import tls from 'node:tls';
import type { PluginLogger } from '../plugin.ts';
import { errnoText } from '../pkg/proxy/errors.ts';
import { TCP_TIMEOUT_MS, endSession, handshake, splitHostPort, type OutputProto } from './io.ts';

/** What a sink may have waiting before it counts as too slow. */
export const SINK_BACKLOG = 4 * 1024 * 1024;

export interface ListenerOptions {
  proto: OutputProto;
  /** A socket path (unix) or `host:port` (tcp, tls). */
  endpoint: string;
  certFile: string;
  keyFile: string;
  /** With a CA, sinks must present a certificate it signed (any certificate, verified if given, with skipverify). */
  caFile: string;
  skipVerify: boolean;
  timeoutMs?: number;
}

/** Go's text for a failed file open (`open PATH: no such file or directory`). */
function openError(path: string, e: unknown): Error {
  const code = (e as NodeJS.ErrnoException).code;
  const text = code === 'ENOENT' ? 'no such file or directory' : code === 'EISDIR' ? 'is a directory' : errnoText(e);
  return new Error(`open ${path}: ${text}`);
}

function readPem(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw openError(path, e);
  }
}

export class DnstapListener {
  readonly opts: ListenerOptions;
  private readonly log: PluginLogger;
  private readonly timeoutMs: number;
  private server: net.Server | undefined;
  private readonly sinks = new Set<net.Socket>();
  private closed = false;

  constructor(opts: ListenerOptions, log: PluginLogger) {
    this.opts = opts;
    this.log = log;
    this.timeoutMs = opts.timeoutMs ?? TCP_TIMEOUT_MS;
  }

  /** Connected sinks (after their handshake). */
  get connected(): number {
    return this.sinks.size;
  }

  /** A message is encoded only when some sink is connected. */
  get accepting(): boolean {
    return this.sinks.size > 0;
  }

  /** Nothing is counted: without a sink there is nobody to miss a message (CoreDNS does not count either). */
  drop(): void { /* nothing */ }

  send(frame: Buffer): void {
    for (const s of this.sinks) {
      if (s.writableLength > SINK_BACKLOG) {
        this.remove(s);
        continue;
      }
      s.write(frame);
    }
  }

  private remove(s: net.Socket): void {
    if (!this.sinks.delete(s)) return;
    void endSession(s, this.timeoutMs);
  }

  /** Start-up: listen; a failure is logged (CoreDNS: `Failed to start dnstap listener: ...`) and the server runs on. */
  async start(): Promise<void> {
    // Also after a close: a failed reload starts the old configuration's listener again.
    this.closed = false;
    try {
      await this.listen();
    } catch (e) {
      this.log.error(`Failed to start dnstap listener: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  private listen(): Promise<void> {
    const o = this.opts;
    let server: net.Server;
    if (o.proto === 'tls') {
      if (o.certFile === '' || o.keyFile === '') {
        this.log.warning('TLS listener requires cert and key files');
        return Promise.resolve();
      }
      const cert = readPem(o.certFile);
      const key = readPem(o.keyFile);
      const ca = o.caFile !== '' ? readPem(o.caFile) : undefined;
      try {
        tls.createSecureContext({ cert, key });
      } catch {
        throw new Error('tls: failed to find any PEM data in certificate input');
      }
      server = tls.createServer({
        cert, key, ca,
        requestCert: ca !== undefined,
        rejectUnauthorized: ca !== undefined && !o.skipVerify,
      });
      server.on('secureConnection', (s: tls.TLSSocket) => { this.accepted(s); });
      server.on('tlsClientError', () => { /* a failed TLS handshake: the connection is gone */ });
    } else {
      server = net.createServer((s) => { this.accepted(s); });
    }
    return new Promise<void>((resolve, reject) => {
      const onErr = (e: NodeJS.ErrnoException): void => {
        const net_ = o.proto === 'unix' ? 'unix' : 'tcp';
        // libuv reports a missing directory of a unix socket path as EACCES (for Windows' sake); Go says ENOENT.
        if (o.proto === 'unix' && e.code === 'EACCES' && !existsSync(dirname(o.endpoint))) e = Object.assign(e, { code: 'ENOENT' });
        const why = e.code === 'EADDRINUSE' ? 'bind: address already in use'
          : e.code === 'EACCES' ? 'bind: permission denied'
          : e.code === 'ENOENT' ? 'bind: no such file or directory'
          : e.code === 'EADDRNOTAVAIL' ? 'bind: cannot assign requested address' : e.message;
        reject(new Error(`listen ${net_} ${o.endpoint}: ${why}`));
      };
      server.once('error', onErr);
      const ready = (): void => {
        server.off('error', onErr);
        server.on('error', (e) => { this.log.warning(`Error accepting dnstap connection: ${e.message}`); });
        this.server = server;
        resolve();
      };
      if (o.proto === 'unix') server.listen(o.endpoint, ready);
      else {
        const hp = splitHostPort(o.endpoint);
        if (typeof hp === 'string') {
          reject(new Error(`listen tcp: ${hp}`));
          return;
        }
        server.listen({ host: hp.host === '' ? undefined : hp.host, port: hp.port }, ready);
      }
    });
  }

  private accepted(s: net.Socket): void {
    if (this.closed) {
      s.destroy();
      return;
    }
    if (!(s instanceof tls.TLSSocket)) s.setNoDelay(false);
    s.on('error', () => { /* 'close' follows */ });
    handshake(s, this.timeoutMs, `read ${this.opts.proto === 'unix' ? 'unix' : 'tcp'} ${s.remoteAddress ?? ''}: i/o timeout`).then(() => {
      if (this.closed) {
        void endSession(s, this.timeoutMs);
        return;
      }
      this.sinks.add(s);
      s.once('close', () => { this.sinks.delete(s); });
      // A sink sends nothing after ACCEPT but FINISH: anything else ends its session.
      s.on('data', () => { this.remove(s); });
    }, (e: unknown) => {
      this.log.warning(`Error creating encoder for dnstap client: ${e instanceof Error ? e.message : String(e)}`);
    });
  }

  /** Stops listening and ends every sink's session (STOP, FINISH). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const server = this.server;
    this.server = undefined;
    const ends: Promise<void>[] = [];
    for (const s of this.sinks) ends.push(endSession(s, this.timeoutMs));
    this.sinks.clear();
    if (server !== undefined) ends.push(new Promise<void>((resolve) => { server.close(() => { resolve(); }); }));
    await Promise.all(ends);
  }
}
