// The connection cache of one upstream (CoreDNS plugin/pkg/proxy persistent.go):
// idle connections per protocol, reused oldest first (source-port diversity),
// except that UDP sockets are by default used for one query only, so every
// upstream query leaves from a fresh random port (RFC 5452 §9.2; CoreDNS reuses
// them: `reuse_udp_sockets` restores that). Those one-use sockets are opened
// ahead of need ("spares": bound and connected, never used for a query yet),
// in batches after the queries of an event-loop turn, so a query finds one
// ready; a spare gives its port away only with the one query it carries, and
// is closed after it. Pooled connections are not reused
// when idle longer than `expire` or older than `maxAge`, at most
// `maxIdleConns` kept per protocol; a sweep every 10 s closes stale ones. The
// dial timeout follows twice a moving average of recent dial times, in [1 s, 30 s].
// With the `oneshot` addon (native-udp.ts) a one-use socket is opened, bound
// to a port drawn from the CSPRNG in 1024-65535 and sent on in one C call,
// so no spares are kept: the dgram spares are the fallback without it. With
// `reuse_udp_sockets` the addon's sockets are pooled like dgram's.

import { type Conn, StreamConn, UdpConn, type Proto, type TlsOptions } from './conn.ts';
import { UpstreamError } from './errors.ts';
import { proxyMetrics, type ProxyMetrics } from './metrics.ts';
import { NativeUdpConn, nativeTarget, oneshotAddon, trimNativeSockets, type NativeTarget } from './native-udp.ts';

const MIN_DIAL_MS = 1000;
const MAX_DIAL_MS = 30000;
const AVG_WEIGHT = 4;
const SWEEP_MS = 10000;
/** Most spare one-use UDP sockets kept open per upstream (a burst beyond it opens sockets inline). */
const MAX_SPARES = 64;

export interface TransportOptions {
  expireMs: number;
  maxAgeMs: number;
  maxIdleConns: number;
  source: string | undefined;
  tls: TlsOptions | undefined;
  /** Pool UDP sockets like TCP connections (CoreDNS's behaviour); off: one socket per query. */
  reuseUdp: boolean;
  /** The server's proxy metrics (default: the process's registry). */
  metrics?: ProxyMetrics;
}

export class Transport {
  readonly host: string;
  readonly port: number;
  readonly addr: string;
  readonly proxyName: string;
  opts: TransportOptions;
  private readonly pools: Record<Proto, Conn[]> = { udp: [], tcp: [], 'tcp-tls': [] };
  private avgDialMs = MAX_DIAL_MS / 2;
  private sweeper: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly hits: Partial<Record<Proto, { inc(): void }>> = {};
  private readonly misses: Partial<Record<Proto, { inc(): void }>> = {};
  /** Spare one-use UDP sockets, opened ahead of need; each carries one query, then is closed. */
  private readonly spares: UdpConn[] = [];
  /** One-use sockets taken since the last refill: how many the next refill opens. */
  private taken = 0;
  /** One-use sockets taken since the last sweep (none: the upstream is idle, its spares are closed). */
  private takenSinceSweep = 0;
  private refill: NodeJS.Immediate | undefined;
  /** The upstream (and source) packed for the addon, for the source it was packed with; null: use dgram. */
  private native: { source: string | undefined; target: NativeTarget | null } | undefined;

  constructor(host: string, port: number, addr: string, proxyName: string, opts: TransportOptions) {
    this.host = host;
    this.port = port;
    this.addr = addr;
    this.proxyName = proxyName;
    this.opts = opts;
  }

  start(): void {
    if (this.sweeper !== undefined) return;
    this.stopped = false;
    this.sweeper = setInterval(() => { this.sweep(); }, SWEEP_MS);
    this.sweeper.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.sweeper !== undefined) clearInterval(this.sweeper);
    this.sweeper = undefined;
    for (const p of Object.values(this.pools)) {
      for (const c of p) c.close();
      p.length = 0;
    }
    this.closeSpares();
    trimNativeSockets();
    if (this.refill !== undefined) clearImmediate(this.refill);
    this.refill = undefined;
  }

  /** UDP sockets are used for one query each (the default, and no TLS): `oneShotUdp` gives them. */
  get udpOneShot(): boolean {
    return !this.opts.reuseUdp && this.opts.tls === undefined;
  }

  /** The addon's target for this upstream, or null when the addon is absent or cannot serve it. */
  private nativeTarget(): NativeTarget | null {
    const source = this.opts.source;
    if (this.native?.source !== source || this.native === undefined) {
      const a = oneshotAddon();
      this.native = { source, target: a === undefined ? null : nativeTarget(a, this.host, this.port, source, this.addr) ?? null };
    }
    return this.native.target;
  }

  /**
   * A UDP connection for one query. With the addon, its socket is opened at
   * the send on a port from the CSPRNG in 1024-65535; without it, a dgram
   * socket connected on a port the kernel picked at random: a spare when one
   * is ready, else opened here (which throws an UpstreamError when a socket
   * cannot be opened).
   */
  oneShotUdp(): Conn {
    if (this.stopped) throw new UpstreamError('stopped', 'proxy: transport stopped');
    (this.misses.udp ??= (this.opts.metrics ?? proxyMetrics()).connCacheMissesCount.child(this.proxyName, this.addr, 'udp')).inc();
    // A UDP "dial" is local and takes no measurable time; CoreDNS counts it in the dial-time average
    // (which sets the TCP dial timeout after a truncated reply), and so do we.
    this.observeDial(0);
    const target = this.nativeTarget();
    if (target !== null) return new NativeUdpConn(oneshotAddon()!, target);
    this.taken++;
    this.takenSinceSweep++;
    this.refill ??= setImmediate(() => { this.openSpares(); });
    let c = this.spares.pop();
    while (c !== undefined && c.closed) c = this.spares.pop();
    return c ?? UdpConn.open(this.host, this.port, this.opts.source);
  }

  /** Replaces the spares taken since the last refill (at most MAX_SPARES kept). */
  private openSpares(): void {
    this.refill = undefined;
    let n = Math.min(this.taken, MAX_SPARES - this.spares.length);
    this.taken = 0;
    if (this.stopped || !this.udpOneShot) return;
    for (; n > 0; n--) {
      try {
        this.spares.push(UdpConn.open(this.host, this.port, this.opts.source));
      } catch {
        return; // out of sockets or no source address: the next query opens its own and reports why
      }
    }
  }

  private closeSpares(): void {
    for (const c of this.spares) c.close();
    this.spares.length = 0;
  }

  /** Spare one-use UDP sockets open (tests). */
  spareCount(): number {
    return this.spares.length;
  }

  dialTimeoutMs(): number {
    const rt = this.avgDialMs;
    if (rt < MIN_DIAL_MS) return MIN_DIAL_MS;
    if (rt < MAX_DIAL_MS / 2) return 2 * rt;
    return MAX_DIAL_MS;
  }

  private observeDial(ms: number): void {
    this.avgDialMs += (ms - this.avgDialMs) / AVG_WEIGHT;
  }

  /** A cached connection or a new one; `cached` tells which. */
  async dial(proto: Proto): Promise<Conn> {
    if (this.opts.tls !== undefined) proto = 'tcp-tls';
    if (this.stopped) throw new UpstreamError('stopped', 'proxy: transport stopped');
    const pool = this.pools[proto];
    const now = Date.now();
    while (pool.length > 0) {
      const c = pool.shift()!;
      if (c.closed) continue;
      if (now - c.used > this.opts.expireMs || (this.opts.maxAgeMs > 0 && now - c.created > this.opts.maxAgeMs)) {
        c.close();
        continue;
      }
      (this.hits[proto] ??= (this.opts.metrics ?? proxyMetrics()).connCacheHitsCount.child(this.proxyName, this.addr, proto)).inc();
      c.reused = true;
      return c;
    }
    (this.misses[proto] ??= (this.opts.metrics ?? proxyMetrics()).connCacheMissesCount.child(this.proxyName, this.addr, proto)).inc();
    const t0 = Date.now();
    const timeout = this.dialTimeoutMs();
    try {
      if (proto === 'udp') {
        // reuse_udp_sockets with the addon: the same connections, pooled; the socket opens at the first send.
        const target = this.nativeTarget();
        if (target !== null) return new NativeUdpConn(oneshotAddon()!, target);
        return await UdpConn.dial(this.host, this.port, this.opts.source, timeout);
      }
      return await StreamConn.dial(this.host, this.port, proto, this.opts.source, timeout, this.opts.tls);
    } finally {
      this.observeDial(Date.now() - t0);
    }
  }

  /** Give a healthy connection back for reuse. */
  yield(c: Conn): void {
    if (c.closed || this.stopped || this.opts.expireMs <= 0 || (c.proto === 'udp' && !this.opts.reuseUdp)) { c.close(); return; }
    const pool = this.pools[c.proto];
    if (this.opts.maxIdleConns > 0 && pool.length >= this.opts.maxIdleConns) { c.close(); return; }
    c.used = Date.now();
    pool.push(c);
  }

  private sweep(): void {
    const now = Date.now();
    if (this.takenSinceSweep === 0) this.closeSpares();
    this.takenSinceSweep = 0;
    for (const p of Object.values(this.pools)) {
      let keep = 0;
      for (let i = 0; i < p.length; i++) {
        const c = p[i]!;
        const stale = c.closed || now - c.used > this.opts.expireMs || (this.opts.maxAgeMs > 0 && now - c.created > this.opts.maxAgeMs);
        if (stale) c.close();
        else p[keep++] = c;
      }
      p.length = keep;
    }
  }

  /** Idle connections per protocol (tests, debugging). */
  idle(proto: Proto): number {
    return this.pools[proto].length;
  }
}
