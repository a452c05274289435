// One upstream connection: a connected UDP socket (its own source port, the
// kernel drops datagrams from any other address) or a TCP / TLS stream. Each
// carries at most one outstanding query; a reply is taken only when its ID and
// question match the query (RFC 5452), anything else is skipped while waiting.

import { questionMatches } from '../../../wire/scan.ts';
import { questionIdentical } from '../../../wire/case.ts';
import dgram from 'node:dgram';
import dns from 'node:dns';
import net from 'node:net';
import { UpstreamError, dialFailure, errnoText, hostPort } from './errors.ts';

export type Proto = 'udp' | 'tcp' | 'tcp-tls';

interface Waiting {
  query: Uint8Array;
  qEnd: number;
  id: number;
  bufsize: number;
  resolve: (reply: Buffer) => void;
  reject: (e: UpstreamError) => void;
  timer: NodeJS.Timeout;
  /** A reply with the right ID but the wrong question: used only if nothing better arrives in time. */
  mismatch: Buffer | undefined;
  /** Letters of the query's name sent in random case (0x20; 0: none): the reply must repeat them byte for byte. */
  caseLetters: number;
  /** A reply with the right ID and question in another case came (0x20): skipped; if nothing else comes in time, kind `case`. */
  caseChanged: boolean;
}

/** CoreDNS truncateResponse: the header and question of an oversized reply, no records, TC set. */
export function truncatedReply(reply: Buffer, qEnd: number): Buffer {
  const out = Buffer.from(reply.subarray(0, qEnd));
  out[2] = out[2]! | 0x02;
  out.writeUInt16BE(0, 6);
  out.writeUInt16BE(0, 8);
  out.writeUInt16BE(0, 10);
  return out;
}

export abstract class Conn {
  readonly proto: Proto;
  readonly remote: string;
  created = Date.now();
  used = Date.now();
  closed = false;
  /** Set when the connection came out of the cache (for ErrCachedClosed). */
  reused = false;
  protected waiting: Waiting | undefined;
  protected local = '';

  constructor(proto: Proto, remote: string) {
    this.proto = proto;
    this.remote = remote;
  }

  abstract close(): void;
  protected abstract send(query: Uint8Array): void;

  /**
   * Send `query` (its ID already set) and wait up to `timeoutMs` for the matching reply. `caseLetters` > 0: the
   * name's letters went out in random case, and a reply whose question differs from the query in case only is
   * skipped like a forgery; if nothing else came when the time is up, the exchange fails with an UpstreamError of
   * kind `case` (the upstream does not preserve case).
   */
  exchange(query: Uint8Array, qEnd: number, timeoutMs: number, bufsize: number, caseLetters = 0): Promise<Buffer> {
    if (this.closed) {
      return Promise.reject(new UpstreamError('closed', `write ${this.netName()} ${this.localAddr()}->${this.remote}: use of closed network connection`, this.reused));
    }
    return new Promise<Buffer>((resolve, reject) => {
      const timer = setTimeout(() => this.onTimeout(), timeoutMs);
      this.waiting = {
        query, qEnd, id: (query[0]! << 8) | query[1]!, bufsize, resolve, reject, timer, mismatch: undefined, caseLetters,
        caseChanged: false,
      };
      try {
        this.send(query);
      } catch (e) {
        this.fail(new UpstreamError('write', `write ${this.netName()} ${this.localAddr()}->${this.remote}: ${errnoText(e)}`, this.reused));
      }
    });
  }

  /** `ip:port` of our end, for error texts (CoreDNS prints `read udp LOCAL->REMOTE: ...`). */
  protected localAddr(): string {
    return this.local;
  }

  /** `ip:port` of our end ('' when unknown), for dnstap's query address. */
  localEndpoint(): string {
    return this.localAddr();
  }

  protected netName(): string {
    return this.proto === 'udp' ? 'udp' : 'tcp';
  }

  private onTimeout(): void {
    const w = this.waiting;
    if (w === undefined) return;
    if (w.mismatch !== undefined) {
      // Only a reply with the wrong question came: hand it on (forward answers FORMERR, as CoreDNS).
      this.waiting = undefined;
      w.resolve(w.mismatch);
      return;
    }
    if (w.caseChanged) {
      this.fail(new UpstreamError('case', `read ${this.netName()} ${this.localAddr()}->${this.remote}: replies changed the letter case of the question`));
      return;
    }
    this.fail(new UpstreamError('timeout', `read ${this.netName()} ${this.localAddr()}->${this.remote}: i/o timeout`));
  }

  /** Ends the outstanding exchange with an error and closes the connection (never given back). */
  protected fail(e: UpstreamError): void {
    const w = this.waiting;
    this.waiting = undefined;
    this.close();
    if (w !== undefined) {
      clearTimeout(w.timer);
      w.reject(e);
    }
  }

  /** A complete message arrived. */
  protected deliver(m: Buffer): void {
    const w = this.waiting;
    if (w === undefined) return; // nobody asked: a late or unsolicited message
    if (m.length < 12) return; // short read: skipped
    if (((m[0]! << 8) | m[1]!) !== w.id) return; // wrong ID: skipped (out of order or spoofed)
    if (this.proto === 'udp' && m.length > w.bufsize) {
      if (m.length >= w.qEnd && questionMatches(w.query, w.qEnd, m)) {
        if (w.caseLetters > 0 && !questionIdentical(w.query, w.qEnd, m)) w.caseChanged = true;
        else this.finish(w, truncatedReply(m, w.qEnd));
      }
      return;
    }
    if ((m[2]! & 0x80) === 0 || !questionMatches(w.query, w.qEnd, m)) {
      w.mismatch ??= m;
      return;
    }
    if (w.caseLetters > 0 && !questionIdentical(w.query, w.qEnd, m)) {
      // Skipped: a forger who got ID and port right but not the case must not end the exchange (nor turn 0x20 off
      // for this upstream while his flood goes on). The upstream's own reply in the right case may still come.
      w.caseChanged = true;
      return;
    }
    this.finish(w, m);
  }

  private finish(w: Waiting, m: Buffer): void {
    this.waiting = undefined;
    clearTimeout(w.timer);
    this.used = Date.now();
    w.resolve(m);
  }
}

/** Address families of IP literals seen, so opening a socket skips dns.lookup (a regex and a tick). */
const literalFamily = new Map<string, number>();

/**
 * dgram's `lookup` for sockets towards an upstream: IP literals (all that forward dials) answer
 * synchronously, which makes bind and connect complete within the call; names go to dns.lookup.
 */
function literalLookup(address: string, options: dns.LookupOneOptions, cb: (err: NodeJS.ErrnoException | null, ip: string, family: number) => void): void {
  let f = literalFamily.get(address);
  if (f === undefined) {
    f = net.isIP(address);
    if (f !== 0 && literalFamily.size < 1024) literalFamily.set(address, f);
  }
  if (f !== 0) { cb(null, address, f); return; }
  dns.lookup(address, options, cb);
}

export class UdpConn extends Conn {
  private readonly sock: dgram.Socket;

  constructor(sock: dgram.Socket, remote: string) {
    super('udp', remote);
    this.sock = sock;
    sock.on('message', (m) => { this.deliver(m); });
    sock.on('error', (e) => {
      if ((e as NodeJS.ErrnoException).syscall === 'connect') {
        // Go's net.Dial fails here: `dial udp 203.0.113.9:53: connect: network is unreachable`.
        this.fail(new UpstreamError('dial', `dial udp ${this.remote}: connect: ${errnoText(e)}`));
        return;
      }
      this.fail(new UpstreamError((e as NodeJS.ErrnoException).code === 'ECONNREFUSED' ? 'refused' : 'other',
        // Go wraps the errno of a failed recv in a SyscallError: `read: connection refused`.
        `read udp ${this.localAddr()}->${this.remote}: ${(e as NodeJS.ErrnoException).code?.startsWith('E') === true ? 'read: ' : ''}${errnoText(e)}`));
    });
    sock.unref();
  }

  /** Looked up only when an error text needs it: one getsockname less per query. */
  protected override localAddr(): string {
    if (this.local === '') {
      try {
        const a = this.sock.address();
        this.local = hostPort(a.address, a.port);
      } catch { /* closed */ }
    }
    return this.local;
  }

  /** The local port (tests: source-port checks); 0 once closed. */
  localPort(): number {
    try {
      return this.sock.address().port;
    } catch {
      return 0;
    }
  }

  protected send(query: Uint8Array): void {
    // No callback: a failed send on a connected socket is reported through 'error' (handled above),
    // and leaving it out spares a callback per query.
    try {
      this.sock.send(query);
    } catch (e) {
      // Not connected: connect(2) failed in open() (no route...). dgram reports that on the next tick
      // as an 'error' event, handled above, which fails this query with Go's dial error.
      if ((e as NodeJS.ErrnoException).code !== 'ERR_SOCKET_BAD_PORT') throw e;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try { this.sock.close(); } catch { /* already closed */ }
  }

  /**
   * Open a UDP socket on a fresh port chosen by the kernel, connected to
   * host:port (the kernel then drops datagrams from any other source).
   * With an IP literal this completes before it returns: bind and connect are
   * local system calls, nothing waits on the network; a failure throws. (A
   * name would be looked up first: dgram queues the query until connected.)
   */
  static open(host: string, port: number, source: string | undefined): UdpConn {
    const sock = dgram.createSocket({ type: host.includes(':') ? 'udp6' : 'udp4', lookup: literalLookup });
    const remote = hostPort(host, port);
    let failed: Error | undefined;
    const onErr = (e: Error): void => { failed ??= e; };
    sock.on('error', onErr);
    try {
      if (source !== undefined) sock.bind({ address: source, port: 0, exclusive: true });
      sock.connect(port, host);
    } catch (e) {
      failed ??= e as Error;
    }
    sock.off('error', onErr);
    if (failed !== undefined) {
      try { sock.close(); } catch { /* ignore */ }
      const code = (failed as NodeJS.ErrnoException).code;
      throw new UpstreamError('dial', `dial udp ${remote}: ${code === 'EMFILE' || code === 'ENFILE' ? dialFailure(failed) : errnoText(failed)}`);
    }
    return new UdpConn(sock, remote);
  }

  /** `open` behind a promise, for callers that await a dial. */
  static dial(host: string, port: number, source: string | undefined, _timeoutMs: number): Promise<UdpConn> {
    try {
      return Promise.resolve(UdpConn.open(host, port, source));
    } catch (e) {
      return Promise.reject(e);
    }
  }
}

export interface TlsOptions {
  servername?: string;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  /** Skip verification (only when no CA is given and verification is off: not a CoreDNS option). */
  insecure?: boolean;
}

export class StreamConn extends Conn {
  private readonly sock: net.Socket;
  private buf: Buffer = Buffer.alloc(0);

  constructor(sock: net.Socket, proto: Proto, remote: string) {
    super(proto, remote);
    this.sock = sock;
    this.local = hostPort(sock.localAddress ?? '', sock.localPort ?? 0);
    sock.setNoDelay(true);
    sock.on('data', (d) => { this.onData(d); });
    const onEnd = (e?: Error): void => {
      const wasClosed = this.closed;
      this.closed = true;
      if (this.waiting !== undefined && !wasClosed) {
        const code = (e as NodeJS.ErrnoException | undefined)?.code;
        if (e !== undefined && code !== undefined) {
          // Go: `read tcp L->R: read: connection reset by peer`. Only an EOF on a cached connection is
          // CoreDNS's ErrCachedClosed (tried again on the same upstream); a reset is an attempt that
          // failed: counted, a health check, the next upstream.
          const op = (e as NodeJS.ErrnoException).syscall === 'write' ? 'write' : 'read';
          this.fail(new UpstreamError('closed', `${op} tcp ${this.localAddr()}->${this.remote}: ${code.startsWith('E') ? `${op}: ` : ''}${errnoText(e)}`));
        } else {
          this.fail(new UpstreamError('closed', 'EOF', this.reused));
        }
      }
    };
    sock.on('error', onEnd);
    sock.on('end', () => { onEnd(); });
    sock.on('close', () => { onEnd(); });
    sock.unref();
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    while (this.buf.length >= 2) {
      const len = this.buf.readUInt16BE(0);
      if (this.buf.length < 2 + len) break;
      const m = this.buf.subarray(2, 2 + len);
      this.buf = this.buf.subarray(2 + len);
      this.deliver(Buffer.from(m));
    }
  }

  protected send(query: Uint8Array): void {
    const out = Buffer.allocUnsafe(query.length + 2);
    out.writeUInt16BE(query.length, 0);
    out.set(query, 2);
    this.sock.write(out);
  }

  close(): void {
    if (this.closed && this.sock.destroyed) return;
    this.closed = true;
    this.sock.destroy();
  }

  static dial(host: string, port: number, proto: Proto, source: string | undefined, timeoutMs: number, tlsOpts?: TlsOptions): Promise<StreamConn> {
    return new Promise((resolve, reject) => {
      const remote = hostPort(host, port);
      let sock: net.Socket;
      const secure = proto === 'tcp-tls';
      if (secure) {
        const o = tlsOpts ?? {};
        const raw = source !== undefined ? net.connect({ host, port, localAddress: source }) : undefined;
        // node:tls is loaded by the first DNS-over-TLS exchange, not with the module (start-up cost, as for DoH).
        sock = process.getBuiltinModule('node:tls').connect({
          socket: raw, host, port, minVersion: 'TLSv1.2',
          servername: o.servername ?? (net.isIP(host) ? undefined : host),
          ca: o.ca, cert: o.cert, key: o.key,
          rejectUnauthorized: o.insecure !== true,
        });
      } else {
        sock = net.connect({ host, port, localAddress: source });
      }
      let done = false;
      const timer = setTimeout(() => {
        if (done) return;
        done = true;
        sock.destroy();
        reject(new UpstreamError('dial', `dial tcp ${remote}: i/o timeout`));
      }, timeoutMs);
      sock.once('error', (e) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        sock.destroy();
        reject(new UpstreamError('dial', `dial tcp ${remote}: ${dialFailure(e)}`));
      });
      sock.once(secure ? 'secureConnect' : 'connect', () => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(new StreamConn(sock, proto, remote));
      });
    });
  }
}
