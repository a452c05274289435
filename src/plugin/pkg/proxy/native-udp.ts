// One-use UDP sockets through the `oneshot` addon (native/oneshot.c): per upstream query one C call opens a socket
// on a source port drawn from the CSPRNG in 1024-65535, connects it to the upstream and sends; replies of all
// sockets come back in one call per readable turn of a single epoll. Everything a client can see (ID and question
// checks, error texts, timeouts) is Conn's, as for the dgram sockets of conn.ts, which remain the fallback when
// the addon is not built (or NODENS_NATIVE=0). With reuse_udp_sockets the same connections are pooled by the
// transport and send again on their open socket. Sockets whose port the kernel picked are recycled by the addon
// (disconnected, so the port goes back, and connected again on a fresh random port); the idle ones are closed when
// no query went out for a sweep interval, and when a proxy stops. A query whose name carries enough letters in
// random case (0x20, see proxy.ts) skips the draw: any port the kernel picks in its range keeps it at >= 32 bits,
// so it always goes out on a recycled socket.

import { constants } from 'node:os';
import { loadNative } from '../../../native/index.ts';
import { Conn } from './conn.ts';
import { UpstreamError, dialFailure, errnoText } from './errors.ts';

interface OneshotAddon {
  setup(deliver: (n: number) => void): [ArrayBuffer, ArrayBuffer];
  sockaddr(ip: string, port: number): ArrayBuffer | null;
  send(dst: ArrayBuffer, src: ArrayBuffer | null, query: Uint8Array, anyKernelPort?: boolean): number;
  resend(fd: number, query: Uint8Array): number;
  close(fd: number): void;
  trim(): void;
  local(fd: number): string;
  open(): number;
  idle(): number;
  avoid(port: number): void;
  kernelPorts(): number;
}

let addon: OneshotAddon | undefined | null = null;
/**
 * Letters in random case (0x20) a query needs before any port of the kernel's range will do: ID (16 bits) + the
 * kernel's pick (log2 of the range's size: 14.8 bits for 32768-60999) + one bit per letter >= 32 bits, as the
 * addon's own draw over 1024-65535 gives (16 bits; 32 in all). Infinity when the range is unknown.
 */
let lettersForKernelPort = Infinity;
/** Replies of the current batch (shared with the addon) and their index: fd, offset, length or -errno. */
let data: Buffer;
let meta: Int32Array;
/** The connection waiting on each open descriptor. */
const conns: (NativeUdpConn | undefined)[] = [];

function deliverAll(n: number): void {
  for (let i = 0; i < 3 * n; i += 3) {
    const c = conns[meta[i]!];
    if (c === undefined) continue; // closed meanwhile (a timeout in the same turn)
    const len = meta[i + 2]!;
    if (len < 0) {
      c.onError(-len);
      continue;
    }
    // A copy: the shared memory is overwritten by the next batch, and the reply goes on to the cache and client.
    const off = meta[i + 1]!;
    const m = Buffer.allocUnsafe(len);
    data.copy(m, 0, off, off + len);
    c.onReply(m);
  }
}

/** Queries sent since the last idle check; none: the recycled sockets the addon keeps idle are closed. */
let sentSinceCheck = 0;
const IDLE_CHECK_MS = 10_000;

function checkIdle(): void {
  if (sentSinceCheck === 0) addon?.trim();
  sentSinceCheck = 0;
}

/** Closes the addon's idle recycled sockets (a proxy stopping: they are a cache, not state). */
export function trimNativeSockets(): void {
  addon?.trim();
}

/** Sets lettersForKernelPort from the ports the kernel may pick (its range less the ports to avoid). */
function countKernelPorts(a: OneshotAddon): void {
  const ports = a.kernelPorts();
  lettersForKernelPort = ports > 1 ? Math.max(1, Math.ceil(32 - 16 - Math.log2(ports))) : Infinity;
}

/** The addon, set up on first use; undefined when not built, not Linux, or NODENS_NATIVE=0. */
export function oneshotAddon(): OneshotAddon | undefined {
  if (addon === null) {
    const a = loadNative<OneshotAddon>('oneshot');
    if (a !== undefined) {
      const [d, m] = a.setup(deliverAll);
      countKernelPorts(a);
      data = Buffer.from(d);
      meta = new Int32Array(m);
      setInterval(checkIdle, IDLE_CHECK_MS).unref();
    }
    addon = a;
  }
  return addon;
}

/** Sockets of the addon carrying a query (tests: none left after timeouts). */
export function nativeOpenSockets(): number {
  return oneshotAddon()?.open() ?? 0;
}

/** Recycled sockets the addon keeps idle, disconnected, for the next queries (tests). */
export function nativeIdleSockets(): number {
  return oneshotAddon()?.idle() ?? 0;
}

/**
 * Never draw `port` as a source port: the server's own UDP listener ports, so that a reload binding one does not
 * find it held for a moment by a query's socket (unbound's outgoing-port-avoid). Without the addon the kernel picks
 * ports in ip_local_port_range, which listeners keep clear of.
 */
export function avoidSourcePort(port: number): void {
  const a = oneshotAddon();
  if (a === undefined) return;
  a.avoid(port);
  countKernelPorts(a);
}

let errnoNames: Map<number, string> | undefined;
/** An errno number as the code Node would report it (EMFILE...), for errors.ts's texts. */
function errnoError(errno: number): NodeJS.ErrnoException {
  if (errnoNames === undefined) {
    errnoNames = new Map();
    for (const [name, n] of Object.entries(constants.errno)) errnoNames.set(n, name);
  }
  const code = errnoNames.get(errno) ?? `errno ${errno}`;
  return Object.assign(new Error(code), { code, errno });
}

/** Where one upstream's one-use sockets go and leave from, packed once for the addon. */
export interface NativeTarget {
  dst: ArrayBuffer;
  src: ArrayBuffer | null;
  remote: string;
}

/** The packed target, or undefined when the addon cannot serve it (not an IP literal: dgram looks names up). */
export function nativeTarget(a: OneshotAddon, host: string, port: number, source: string | undefined, remote: string): NativeTarget | undefined {
  const dst = a.sockaddr(host, port);
  if (dst === null) return undefined;
  const src = source === undefined ? null : a.sockaddr(source, 0);
  if (source !== undefined && src === null) return undefined;
  return { dst, src, remote };
}

export class NativeUdpConn extends Conn {
  private readonly target: NativeTarget;
  private readonly addon: OneshotAddon;
  private fd = -1;
  private port = 0;

  constructor(a: OneshotAddon, target: NativeTarget) {
    super('udp', target.remote);
    this.addon = a;
    this.target = target;
  }

  /**
   * Opens the socket and sends: one system-call sequence in C (or, pooled, sends again on the open socket). A
   * failure ends the exchange with Go's text.
   */
  protected send(query: Uint8Array): void {
    // A pooled connection (reuse_udp_sockets) sends again on its socket; a fresh one opens it.
    const r = this.fd >= 0
      ? this.addon.resend(this.fd, query)
      : this.addon.send(this.target.dst, this.target.src, query, (this.waiting?.caseLetters ?? 0) >= lettersForKernelPort);
    sentSinceCheck++;
    if (r === 0 && this.fd >= 0) return;
    if (r >= 0) {
      this.fd = Math.floor(r / 65536);
      this.port = r - this.fd * 65536;
      conns[this.fd] = this;
      return;
    }
    const stage = Math.floor(-r / 4096);
    const e = errnoError(-r - stage * 4096);
    if (stage === 4) {
      this.fail(new UpstreamError('write', `write udp ${this.localAddr()}->${this.remote}: ${errnoText(e)}`));
    } else {
      const code = e.code;
      // As UdpConn.open and dgram word them: socket(2) out of descriptors, bind's errno, connect's.
      const why = stage === 3 ? `connect: ${errnoText(e)}` : code === 'EMFILE' || code === 'ENFILE' ? dialFailure(e) : errnoText(e);
      this.fail(new UpstreamError('dial', `dial udp ${this.remote}: ${why}`));
    }
  }

  onReply(m: Buffer): void {
    this.deliver(m);
  }

  onError(errno: number): void {
    const e = errnoError(errno);
    // Go wraps the errno of a failed recv in a SyscallError: `read: connection refused`.
    this.fail(new UpstreamError(e.code === 'ECONNREFUSED' ? 'refused' : 'other', `read udp ${this.localAddr()}->${this.remote}: read: ${errnoText(e)}`));
  }

  /** Looked up only when a text needs it (error, dnstap): one getsockname less per query. */
  protected override localAddr(): string {
    if (this.local === '' && this.fd >= 0) this.local = this.addon.local(this.fd);
    return this.local;
  }

  /** The local port (tests: source-port checks); 0 before the send. Looked up only when asked for a kernel pick. */
  localPort(): number {
    if (this.port === 0 && this.fd >= 0) {
      const l = this.localAddr();
      this.port = Number(l.slice(l.lastIndexOf(':') + 1));
    }
    return this.port;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.fd >= 0) {
      conns[this.fd] = undefined;
      this.addon.close(this.fd);
      this.fd = -1;
    }
  }
}
