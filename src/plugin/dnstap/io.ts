// The dnstap output (CoreDNS plugin/dnstap io.go): one Frame Streams connection
// to a receiver over a unix socket, TCP or TLS, bidirectional (READY, ACCEPT,
// START, data frames, STOP, FINISH), fed from a bounded queue.
//
// As in CoreDNS:
//  * the query path never waits: a frame is queued, or dropped when the queue
//    (10000 × queue multiple) is full or when there is no connection;
//  * a failed connection is dialled again at once; when that fails, every
//    10 s (the error check) until it works, and meanwhile frames are dropped;
//  * every 10 s the number of dropped frames is logged as a warning;
//  * on shutdown the output sends STOP and waits (4 s at most) for FINISH.
// The writebuffer multiple (1 MiB units) bounds what is handed to the socket
// and not yet sent; past it frames wait in the queue.

import dns from 'node:dns';
import net from 'node:net';
import tls from 'node:tls';
import type { PluginLogger } from '../plugin.ts';
import { errnoText } from '../pkg/proxy/errors.ts';
import {
  CONTENT_TYPE, CONTROL_ACCEPT, CONTROL_READY, CONTROL_START, CONTROL_STOP, controlFrame, readControl,
} from './encode.ts';

export type OutputProto = 'unix' | 'tcp' | 'tls';

/** CoreDNS's sizes and intervals. */
export const QUEUE_SIZE = 10000;
export const WRITE_BUFFER_SIZE = 1024 * 1024;
export const TCP_TIMEOUT_MS = 4000;
export const ERROR_CHECK_MS = 10_000;

export interface OutputOptions {
  proto: OutputProto;
  /** A socket path (unix) or `host:port` (tcp, tls; IPv6 in brackets). */
  endpoint: string;
  /** Frames the queue holds (10000 × queue multiple). */
  queueSize: number;
  /** Bytes handed to the socket and not yet written (1 MiB × writebuffer multiple). */
  writeBuffer: number;
  skipVerify: boolean;
  /** Tests shorten these. */
  timeoutMs?: number;
  errorCheckMs?: number;
}

/** OpenSSL's codes for a chain Go reports as `certificate signed by unknown authority`. */
const UNKNOWN_AUTHORITY = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_GET_ISSUER_CERT',
]);

const READY = controlFrame(CONTROL_READY, true);
const START = controlFrame(CONTROL_START, true);
const STOP = controlFrame(CONTROL_STOP, false);

/** Splits `host:port` as Go's net.SplitHostPort does, with its error texts. */
export function splitHostPort(hp: string): { host: string; port: number } | string {
  if (hp === '') return 'missing address';
  let host: string;
  let rest: string;
  if (hp.startsWith('[')) {
    const end = hp.indexOf(']');
    if (end < 0) return `address ${hp}: missing ']' in address`;
    host = hp.slice(1, end);
    rest = hp.slice(end + 1);
    if (rest === '') return `address ${hp}: missing port in address`;
    if (!rest.startsWith(':')) return `address ${hp}: unexpected ']' in address`;
    rest = rest.slice(1);
  } else {
    const i = hp.lastIndexOf(':');
    if (i < 0) return `address ${hp}: missing port in address`;
    host = hp.slice(0, i);
    if (host.includes(':')) return `address ${hp}: too many colons in address`;
    rest = hp.slice(i + 1);
  }
  if (rest === '') return { host, port: 0 };
  if (!/^[0-9]{1,5}$/.test(rest) || Number(rest) > 65535) return `address ${rest}: invalid port`;
  return { host, port: Number(rest) };
}

export class DnstapOutput {
  readonly opts: OutputOptions;
  private readonly log: PluginLogger;
  private readonly timeoutMs: number;
  private readonly errorCheckMs: number;
  /** The connection, once the handshake is done. */
  private conn: net.Socket | undefined;
  private dialing = false;
  private closed = false;
  /** Bumped by close: a dial started before it must not install its connection. */
  private generation = 0;
  /** Queued frames: queue[head..] are pending. */
  private queue: Buffer[] = [];
  private head = 0;
  private pumpScheduled = false;
  private readonly pumpNow = (): void => { this.pumpScheduled = false; this.pump(); };
  private readonly onDrain = (): void => { this.pump(); };
  private ticker: NodeJS.Timeout | undefined;
  /** Frames dropped since the last error check. */
  dropped = 0;
  /** Frames handed to a socket (for tests). */
  written = 0;

  constructor(opts: OutputOptions, log: PluginLogger) {
    this.opts = opts;
    this.log = log;
    this.timeoutMs = opts.timeoutMs ?? TCP_TIMEOUT_MS;
    this.errorCheckMs = opts.errorCheckMs ?? ERROR_CHECK_MS;
  }

  /** Whether a frame offered now could be sent (else it counts as dropped: the caller need not encode it). */
  get accepting(): boolean {
    return !this.closed && (this.conn !== undefined || this.dialing) && this.queue.length - this.head < this.opts.queueSize;
  }

  /** Counts a frame the caller did not encode because the output is not accepting. */
  drop(): void {
    if (!this.closed) this.dropped++;
  }

  /** Queues one encoded data frame; never blocks. */
  send(frame: Buffer): void {
    if (!this.accepting) {
      this.drop();
      return;
    }
    this.queue.push(frame);
    if (this.conn !== undefined && !this.pumpScheduled) {
      this.pumpScheduled = true;
      setImmediate(this.pumpNow);
    }
  }

  /** Start-up: dial once (an error is logged, as CoreDNS does) and start the error check. */
  async start(): Promise<void> {
    // Also after a close: a failed reload starts the old configuration's output again.
    this.closed = false;
    this.dropped = 0;
    if (this.ticker !== undefined) clearInterval(this.ticker);
    this.ticker = setInterval(() => { this.errorCheck(); }, this.errorCheckMs);
    this.ticker.unref();
    try {
      await this.dial();
    } catch (e) {
      this.log.error(`No connection to dnstap endpoint: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  private errorCheck(): void {
    const n = this.dropped;
    this.dropped = 0;
    if (n > 0) this.log.warning(`Dropped dnstap messages: ${n}`);
    if (this.conn === undefined && !this.dialing && !this.closed) this.redial();
  }

  /** Dial again; meanwhile frames queue up; on failure the queued ones are dropped. */
  private redial(): void {
    this.dial().catch(() => {
      this.dropped += this.queue.length - this.head;
      this.queue = [];
      this.head = 0;
    });
  }

  private async dial(): Promise<void> {
    this.dialing = true;
    const gen = this.generation;
    try {
      const sock = await this.open();
      if (this.closed || gen !== this.generation) {
        sock.destroy();
        return;
      }
      await handshake(sock, this.timeoutMs, `read ${this.netLabel()} ${this.opts.endpoint}: i/o timeout`);
      if (this.closed || gen !== this.generation) {
        sock.destroy();
        return;
      }
      this.conn = sock;
      sock.on('drain', this.onDrain);
      sock.on('close', () => { this.lost(sock); });
      sock.on('error', () => { /* 'close' follows */ });
      // Anything the receiver sends now (FINISH on its own shutdown) ends the session.
      sock.on('data', () => { sock.destroy(); });
    } finally {
      if (gen === this.generation) this.dialing = false;
    }
    this.pump();
  }

  private lost(sock: net.Socket): void {
    if (this.conn !== sock) return;
    this.conn = undefined;
    if (!this.closed) this.redial();
  }

  /** Opens the socket (connect timeout: 4 s), with Go's error texts. */
  private open(): Promise<net.Socket> {
    const o = this.opts;
    let label = o.proto === 'unix' ? 'unix' : 'tcp';
    let host = '';
    let port = 0;
    if (o.proto !== 'unix') {
      const hp = splitHostPort(o.endpoint);
      if (typeof hp === 'string') return Promise.reject(new Error(`dial tcp: ${hp}`));
      host = hp.host;
      port = hp.port;
    } else {
      label = 'unix';
    }
    return new Promise<net.Socket>((resolve, reject) => {
      let sock: net.Socket;
      const secure = o.proto === 'tls';
      if (o.proto === 'unix') sock = net.connect({ path: o.endpoint });
      else if (secure) {
        sock = tls.connect({
          host, port, rejectUnauthorized: !o.skipVerify,
          servername: net.isIP(host) === 0 ? host : undefined,
        });
      } else sock = net.connect({ host, port });
      const timer = setTimeout(() => {
        sock.destroy();
        reject(new Error(`dial ${label} ${o.endpoint}: i/o timeout`));
      }, this.timeoutMs);
      const onErr = (e: Error): void => {
        clearTimeout(timer);
        sock.destroy();
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') reject(new Error(`dial unix ${o.endpoint}: connect: no such file or directory`));
        else if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') reject(new Error(`dial tcp: lookup ${host}${resolverText()}: no such host`));
        else if (code !== undefined && code.startsWith('E') && !code.startsWith('ERR_')) reject(new Error(`dial ${label} ${o.endpoint}: connect: ${errnoText(e)}`));
        else if (code !== undefined && UNKNOWN_AUTHORITY.has(code)) reject(new Error('tls: failed to verify certificate: x509: certificate signed by unknown authority'));
        else if (code === 'CERT_HAS_EXPIRED') reject(new Error('tls: failed to verify certificate: x509: certificate has expired or is not yet valid'));
        else if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') reject(new Error(`tls: failed to verify certificate: x509: certificate is not valid for ${host}`));
        else reject(new Error(e.message));
      };
      sock.once('error', onErr);
      sock.once(secure ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer);
        sock.off('error', onErr);
        if (sock instanceof tls.TLSSocket === false) sock.setNoDelay(false);
        resolve(sock);
      });
    });
  }

  private netLabel(): string {
    return this.opts.proto === 'unix' ? 'unix' : 'tcp';
  }

  /** Hands queued frames to the socket while its buffer is under the write-buffer bound. */
  private pump(): void {
    const c = this.conn;
    if (c === undefined) return;
    const limit = this.opts.writeBuffer;
    if (c.writableLength >= limit) return; // 'drain' calls again
    const q = this.queue;
    if (this.head >= q.length) return;
    c.cork();
    while (this.head < q.length && c.writableLength < limit) {
      c.write(q[this.head]!);
      q[this.head++] = EMPTY;
      this.written++;
    }
    process.nextTick(uncork, c);
    if (this.head === q.length) {
      this.queue = [];
      this.head = 0;
    } else if (this.head > 4096 && this.head * 2 > q.length) {
      this.queue = q.slice(this.head);
      this.head = 0;
    }
  }

  /** Shutdown: pending frames are written, then STOP; FINISH is awaited for 4 s at most. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.generation++;
    this.dialing = false;
    if (this.ticker !== undefined) clearInterval(this.ticker);
    this.ticker = undefined;
    const c = this.conn;
    if (c !== undefined) {
      // Everything queued goes out before STOP (CoreDNS flushes its buffer), whatever the write-buffer bound.
      const q = this.queue;
      for (let i = this.head; i < q.length; i++) c.write(q[i]!);
      this.written += q.length - this.head;
    }
    this.closed = true;
    this.queue = [];
    this.head = 0;
    this.conn = undefined;
    if (c === undefined || c.destroyed) return;
    await endSession(c, this.timeoutMs);
  }
}

/** The writer's side of the Frame Streams handshake: READY, wait for ACCEPT (with our content type), START. */
export function handshake(sock: net.Socket, timeoutMs: number, timeoutText: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let buf: Buffer = Buffer.alloc(0);
    const done = (e?: Error): void => {
      clearTimeout(timer);
      sock.off('data', onData);
      sock.off('error', onErr);
      sock.off('close', onClose);
      if (e !== undefined) {
        sock.destroy();
        reject(e);
      } else resolve();
    };
    const timer = setTimeout(() => { done(new Error(timeoutText)); }, timeoutMs);
    const onErr = (e: Error): void => { done(new Error(errnoText(e))); };
    const onClose = (): void => { done(new Error('EOF')); };
    const onData = (d: Buffer): void => {
      buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
      let r;
      try {
        r = readControl(buf);
      } catch {
        done(new Error('decoding error'));
        return;
      }
      if (r === undefined) return;
      if (r.control.type !== CONTROL_ACCEPT) {
        done(new Error('decoding error'));
        return;
      }
      const types = r.control.contentTypes;
      if (types.length > 0 && !types.some((t) => t.equals(CONTENT_TYPE))) {
        done(new Error('content type mismatch'));
        return;
      }
      sock.write(START);
      done();
    };
    sock.on('data', onData);
    sock.once('error', onErr);
    sock.once('close', onClose);
    sock.write(READY);
  });
}

/** Ends a session: STOP, then FINISH is awaited (`timeoutMs` at most) and the socket closed. */
export function endSession(c: net.Socket, timeoutMs: number): Promise<void> {
  if (c.destroyed) return Promise.resolve();
  c.removeAllListeners('data');
  return new Promise<void>((resolve) => {
    let buf: Buffer = Buffer.alloc(0);
    const finish = (): void => {
      clearTimeout(timer);
      c.destroy();
      resolve();
    };
    const timer = setTimeout(finish, timeoutMs);
    c.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      try {
        // FINISH (or anything else complete) ends the wait.
        if (readControl(buf) !== undefined) finish();
      } catch {
        finish();
      }
    });
    c.on('error', finish);
    c.once('close', finish);
    c.write(STOP);
  });
}

const EMPTY = Buffer.alloc(0);

/** Go names the name server it asked in a lookup error (` on 10.0.0.53:53`). */
function resolverText(): string {
  const s = dns.getServers()[0];
  if (s === undefined) return '';
  if (s.startsWith('[') || net.isIPv4(s.split(':')[0]!) && s.includes(':')) return ' on ' + s;
  return ' on ' + (s.includes(':') ? `[${s}]:53` : `${s}:53`);
}

function uncork(c: net.Socket): void {
  c.uncork();
}
