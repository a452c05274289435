// The DNS listener's batched UDP socket (native/udp.c): recvmmsg → one JavaScript call per batch → one sendmmsg
// for the replies written during it. This file is the JavaScript half: it walks a batch, makes each query's reply
// sink and remote address text, and queues replies into the send area the addon shares with it.
//
// Memory shared with the addon (native/udp.c explains the layout): per datagram SLOT_INTS int32, [0] offset,
// [1] length, [2] port, [3] IPv6 scope, [4] send status, [5] has a local (destination) address, bytes 32..47 the
// peer's address, 48..63 the local one.

import { loadNative, nativeUnavailable } from '../native/index.ts';
import type { UdpSocket } from '../plugin/plugin.ts';
import type { ReplySink } from './serve.ts';
import { formatIPv4, formatIPv6Groups, isIPv4Mapped, parseIPv4, parseIPv6Into } from '../wire/ip.ts';

type Handle = object;

interface UdpAddon {
  open(host: string, port: number, v6: boolean, pktinfo: boolean, rcvbuf: number,
    onBatch: (pool: Buffer, n: number) => void): [Handle, number, ArrayBuffer, ArrayBuffer, ArrayBuffer];
  flush(h: Handle): number;
  pending(h: Handle): number;
  close(h: Handle, cb: () => void): void;
  recvBufferSize(h: Handle): number;
  readonly BATCH: number;
  readonly SEND_SLOTS: number;
  readonly SEND_SIZE: number;
  readonly SLOT_INTS: number;
}

let addon: UdpAddon | undefined | null = null;

/** The batched UDP addon, or undefined (NODENS_NATIVE=0, not built, not Linux): the listener then uses dgram. */
export function udpAddon(): UdpAddon | undefined {
  if (addon === null) addon = loadNative<UdpAddon>('udp');
  return addon;
}

/** Which UDP path a DNS listener runs, for `doctor` and debug output. */
export function udpPath(): string {
  if (udpAddon() !== undefined) return 'native (recvmmsg/sendmmsg batches, IP_PKTINFO replies)';
  return `node:dgram (${nativeUnavailable('udp') ?? 'native addon not loaded'})`;
}

const ADDR_CACHE = 256;
const F_OFF = 0, F_LEN = 1, F_PORT = 2, F_SCOPE = 3, F_STATUS = 4, F_HASDST = 5, F_ADDR = 8, F_DST = 12;

/** Called once per datagram of a batch; `wire` is valid for as long as it is referenced (never overwritten). */
export type OnQuery = (wire: Buffer, remote: string, remotePort: number, sink: NativeReplySink) => void;

/**
 * One bound native UDP socket. Also the UdpSocket a write discipline (shed) sends through: there the reply's
 * destination is text, and its local source address is found from the sink that last served that client.
 */
export class NativeUdp implements UdpSocket {
  readonly port: number;
  readonly v6: boolean;
  private readonly a: UdpAddon;
  private handle: Handle | undefined;
  private closing: Handle | undefined;
  private readonly meta: Int32Array;
  private readonly metaBytes: Uint8Array;
  private readonly sm: Int32Array;
  private readonly sendBytes: Uint8Array;
  private readonly hdr: number;
  private readonly slotInts: number;
  private readonly sendSlots: number;
  private readonly sendSize: number;
  private readonly onQuery: OnQuery;
  /** Remote address text by the address's bytes: direct-mapped, so a hit allocates nothing. */
  private readonly cacheKeys = new Int32Array(ADDR_CACHE * 4).fill(-1);
  /** The IPv6 scope (interface index) of each cached address: fe80::1 on two links are two peers. */
  private readonly cacheScopes = new Int32Array(ADDR_CACHE);
  private readonly cacheText: string[] = new Array<string>(ADDR_CACHE).fill('');
  private readonly cacheWire: string[] = new Array<string>(ADDR_CACHE).fill('');
  /** Send callbacks (a write discipline's), by send slot; counted so the common case skips them. */
  private readonly cbs: (((err: Error | null, bytes: number) => void) | undefined)[];
  private ncb = 0;
  private inBatch = false;
  private flushQueued = false;
  /** The sink that last served each client address text (write discipline only: its replies carry text). */
  private readonly byAddress = new Map<string, NativeReplySink>();
  /** The first exception a query's handling threw in the current batch: rethrown once the batch is done. */
  private batchError: unknown;
  private hasBatchError = false;

  private constructor(a: UdpAddon, opened: [Handle, number, ArrayBuffer, ArrayBuffer, ArrayBuffer], v6: boolean, onQuery: OnQuery) {
    this.a = a;
    this.handle = opened[0];
    this.port = opened[1];
    this.meta = new Int32Array(opened[2]);
    this.metaBytes = new Uint8Array(opened[2]);
    this.sm = new Int32Array(opened[3]);
    this.sendBytes = new Uint8Array(opened[4]);
    this.slotInts = a.SLOT_INTS;
    this.sendSlots = a.SEND_SLOTS;
    this.sendSize = a.SEND_SIZE;
    this.hdr = a.SEND_SLOTS * a.SLOT_INTS;
    this.cbs = new Array<undefined>(a.SEND_SLOTS).fill(undefined);
    this.v6 = v6;
    this.onQuery = onQuery;
  }

  /**
   * Binds `host` (an IP literal: '::' or '0.0.0.0' for the wildcard) with SO_REUSEPORT. Throws the bind's error,
   * with its `code` (EADDRINUSE...), as dgram's bind would report it.
   */
  static open(a: UdpAddon, host: string, port: number, rcvbuf: number, onQuery: OnQuery): NativeUdp {
    const v6 = host.includes(':');
    const wildcard = host === '::' || host === '0.0.0.0';
    let self: NativeUdp | undefined;
    const opened = a.open(host, port, v6, wildcard, rcvbuf, (pool, n) => { self!.batch(pool, n); });
    self = new NativeUdp(a, opened, v6, onQuery);
    return self;
  }

  /** SO_RCVBUF as the kernel set it (0 once closed); dgram's name for it. */
  getRecvBufferSize(): number { return this.handle === undefined ? 0 : this.a.recvBufferSize(this.handle); }

  private batch(pool: Buffer, n: number): void {
    const m = this.meta, si = this.slotInts;
    this.inBatch = true;
    try {
      for (let i = 0; i < n; i++) {
        const b = i * si;
        const off = m[b + F_OFF]!;
        const sink = new NativeReplySink(this, m[b + F_PORT]!, m[b + F_SCOPE]!, m[b + F_ADDR]!, m[b + F_ADDR + 1]!,
          m[b + F_ADDR + 2]!, m[b + F_ADDR + 3]!, m[b + F_HASDST]!, m[b + F_DST]!, m[b + F_DST + 1]!, m[b + F_DST + 2]!, m[b + F_DST + 3]!);
        const slot = this.remoteSlot(b);
        sink.address = this.cacheWire[slot]!;
        try {
          this.onQuery(pool.subarray(off, off + m[b + F_LEN]!), this.cacheText[slot]!, sink.port, sink);
        } catch (e) {
          // The rest of the batch is still served; the first error surfaces afterwards (uncaughtException, as
          // an exception in a dgram 'message' listener would).
          if (!this.hasBatchError) { this.hasBatchError = true; this.batchError = e; }
        }
      }
      // Send callbacks (a write discipline) run here, and what they send in turn; the addon sends the rest.
      while (this.ncb > 0) this.flushNow();
    } finally {
      this.inBatch = false;
    }
    if (this.hasBatchError) {
      const e = this.batchError;
      this.hasBatchError = false;
      this.batchError = undefined;
      throw e;
    }
  }

  /** The address cache slot of the peer at meta int `b`, filled on a miss. */
  private remoteSlot(b: number): number {
    const m = this.meta;
    const a0 = m[b + F_ADDR]!, a1 = m[b + F_ADDR + 1]!, a2 = m[b + F_ADDR + 2]!, a3 = m[b + F_ADDR + 3]!;
    const h = (Math.imul(a3 ^ a0 ^ (a1 >>> 7) ^ (a2 >>> 13), 0x9e3779b1) >>> 24) & (ADDR_CACHE - 1);
    const k = this.cacheKeys, c = h * 4, scope = m[b + F_SCOPE]!;
    if (k[c] === a0 && k[c + 1] === a1 && k[c + 2] === a2 && k[c + 3] === a3 && this.cacheScopes[h] === scope &&
      this.cacheText[h] !== '') return h;
    k[c] = a0; k[c + 1] = a1; k[c + 2] = a2; k[c + 3] = a3;
    this.cacheScopes[h] = scope;
    const bytes = this.metaBytes, o = (b + F_ADDR) * 4;
    let text: string, wire: string;
    if (!this.v6) {
      text = wire = formatIPv4(bytes, o);
    } else if (isIPv4Mapped(bytes, o)) {
      // What dgram reports (`::ffff:a.b.c.d`) and, as Go does, the plain IPv4 text plugins see.
      text = formatIPv4(bytes, o + 12);
      wire = '::ffff:' + text;
    } else {
      text = wire = formatIPv6Groups(bytes, o);
    }
    if (scope !== 0) { text += '%' + scope; wire = text; }
    this.cacheText[h] = text;
    this.cacheWire[h] = wire;
    return h;
  }

  /** Queue one reply; sent at the end of the batch, or within this event loop turn when written later. */
  queue(wire: Uint8Array, s: NativeReplySink, cb?: (err: Error | null, bytes: number) => void): void {
    if (this.handle === undefined) {
      // Closed (a reply after the stop grace): nowhere to go, as with dgram after close.
      if (cb !== undefined) queueMicrotask(() => { cb(new Error('Not running'), 0); });
      return;
    }
    const len = wire.length;
    const sm = this.sm, hdr = this.hdr;
    if (sm[hdr]! >= this.sendSlots || sm[hdr + 1]! + len > this.sendSize) this.flushNow();
    const n = sm[hdr]!, off = sm[hdr + 1]!;
    this.sendBytes.set(wire, off);
    const b = n * this.slotInts;
    sm[b + F_OFF] = off; sm[b + F_LEN] = len; sm[b + F_PORT] = s.port; sm[b + F_SCOPE] = s.scope; sm[b + F_HASDST] = s.hasDst;
    sm[b + F_ADDR] = s.a0; sm[b + F_ADDR + 1] = s.a1; sm[b + F_ADDR + 2] = s.a2; sm[b + F_ADDR + 3] = s.a3;
    sm[b + F_DST] = s.d0; sm[b + F_DST + 1] = s.d1; sm[b + F_DST + 2] = s.d2; sm[b + F_DST + 3] = s.d3;
    sm[hdr] = n + 1;
    sm[hdr + 1] = off + len;
    if (cb !== undefined) { this.cbs[n] = cb; this.ncb++; }
    if (!this.inBatch && !this.flushQueued) {
      // Replies of queries that went asynchronous (forwarded): one sendmmsg for all those of this loop turn.
      this.flushQueued = true;
      setImmediate(this.flushLater);
    }
  }

  private readonly flushLater = (): void => {
    this.flushQueued = false;
    this.flushNow();
    while (this.ncb > 0) this.flushNow();
  };

  /** Send what is queued now; then run the send callbacks of what was just sent. */
  flushNow(): void {
    const h = this.handle;
    if (h === undefined) return;
    const sm = this.sm, n = sm[this.hdr]!;
    if (n === 0) return;
    this.a.flush(h);
    if (this.ncb === 0) return;
    const cbs = this.cbs;
    this.ncb = 0;
    for (let i = 0; i < n; i++) {
      const cb = cbs[i];
      if (cb === undefined) continue;
      cbs[i] = undefined;
      const status = sm[i * this.slotInts + F_STATUS]!;
      cb(status === 0 ? null : sendError(status), status === 0 ? sm[i * this.slotInts + F_LEN]! : 0);
    }
  }

  /** UdpSocket (what a write discipline sends through): `address` is a client's address text. */
  send(msg: Uint8Array, port: number, address: string, callback?: (error: Error | null, bytes: number) => void): void {
    let s = this.byAddress.get(address);
    if (s === undefined || s.port !== port) s = this.sinkFor(address, port);
    if (s === undefined) {
      if (callback !== undefined) queueMicrotask(() => { callback(new Error(`bad address ${address}`), 0); });
      return;
    }
    this.queue(msg, s, callback);
  }

  /** Remember the sink of a client whose replies go through a write discipline (bounded). */
  remember(s: NativeReplySink): void {
    const m = this.byAddress;
    if (m.size >= 4096 && !m.has(s.address)) m.clear();
    m.set(s.address, s);
  }

  /** A sink for an address given as text (no local address known: the kernel picks the source). */
  private sinkFor(address: string, port: number): NativeReplySink | undefined {
    const b = new Uint8Array(16);
    const v4 = parseIPv4(address);
    if (v4 >= 0) {
      if (this.v6) { b[10] = 0xff; b[11] = 0xff; b[12] = v4 >>> 24; b[13] = (v4 >>> 16) & 255; b[14] = (v4 >>> 8) & 255; b[15] = v4 & 255; } else { b[0] = v4 >>> 24; b[1] = (v4 >>> 16) & 255; b[2] = (v4 >>> 8) & 255; b[3] = v4 & 255; }
    } else if (!this.v6 || !parseIPv6Into(address.split('%')[0]!, b, 0)) {
      return undefined;
    }
    const i = new Int32Array(b.buffer);
    const s = new NativeReplySink(this, port, 0, i[0]!, i[1]!, i[2]!, i[3]!, 0, 0, 0, 0, 0);
    s.address = address;
    return s;
  }

  /** Replies queued in JavaScript or kept by the addon after EAGAIN, not yet handed to the kernel. */
  pendingCount(): number {
    const h = this.handle;
    if (h === undefined) return 0;
    return this.sm[this.hdr]! + this.a.pending(h);
  }

  /** Send what is queued, then close; resolves once the socket is closed (further replies are dropped). */
  close(): Promise<void> {
    const h = this.handle;
    if (h === undefined) return Promise.resolve();
    this.flushNow();
    this.handle = undefined;
    // The handle stays referenced until the socket is closed: collected before, the addon would skip the callback.
    this.closing = h;
    return new Promise((resolve) => { this.a.close(h, () => { this.closing = undefined; resolve(); }); });
  }
}

function sendError(errno: number): Error {
  const e = new Error(`send errno ${errno}`) as NodeJS.ErrnoException;
  e.errno = -errno;
  e.syscall = 'send';
  return e;
}

/** Where one query's reply goes: the peer (address bytes, port) and, on a wildcard socket, the source to use. */
export class NativeReplySink implements ReplySink {
  private readonly sock: NativeUdp;
  readonly port: number;
  readonly scope: number;
  readonly a0: number; readonly a1: number; readonly a2: number; readonly a3: number;
  readonly hasDst: number;
  readonly d0: number; readonly d1: number; readonly d2: number; readonly d3: number;
  /** The peer's address as dgram would report it (`::ffff:a.b.c.d` on a dual-stack socket). */
  address = '';
  /** A write discipline (shed) this reply goes through; undefined: straight to the socket. */
  writer: { send(msg: Uint8Array, port: number, address: string): void } | undefined;

  constructor(sock: NativeUdp, port: number, scope: number, a0: number, a1: number, a2: number, a3: number,
    hasDst: number, d0: number, d1: number, d2: number, d3: number) {
    this.sock = sock;
    this.port = port;
    this.scope = scope;
    this.a0 = a0; this.a1 = a1; this.a2 = a2; this.a3 = a3;
    this.hasDst = hasDst;
    this.d0 = d0; this.d1 = d1; this.d2 = d2; this.d3 = d3;
    this.writer = undefined;
  }

  send(wire: Uint8Array): void {
    const w = this.writer;
    if (w === undefined) {
      this.sock.queue(wire, this);
      return;
    }
    this.sock.remember(this);
    w.send(wire, this.port, this.address);
  }
}
