// forward: sends queries to upstream resolvers (CoreDNS plugin/forward), with
// CoreDNS's per-query algorithm (policy order, 5 s deadline, connect-attempt
// cap, health checks after failures, failover/next rcodes) and nodens's
// additions: coalescing of identical in-flight queries, attempts bounded by
// the deadline, periodic health checks and resolv.conf files followed live.

import { statSync } from 'node:fs';
import type { Handler, HandlerResult, PluginLogger, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import type { Message } from '../../wire/types.ts';
import { replyTo } from '../../wire/message.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { fromMatches } from '../pkg/zones.ts';
import { SingleFlight } from '../pkg/singleflight.ts';
import { NO_COALESCE, UPSTREAM_USED, type UpstreamControl, type UpstreamView } from '../pkg/upstreams.ts';
import { Proxy, type ExchangeInfo, type Origin, type ProxyOptions, type UpstreamKind } from '../pkg/proxy/proxy.ts';
import { TapType, tapNow, type TapMessage, type Tapper } from '../pkg/dnstap.ts';
import { expandNames, hasCompressionPointer, questionEnd, questionMatches } from '../../wire/scan.ts';
import { UpstreamError } from '../pkg/proxy/errors.ts';
import type { Policy } from './policy.ts';
import { RandomPolicy } from './policy.ts';
import { forwardMetrics, type ForwardMetrics } from './metrics.ts';
import { readResolvConf, stripZone } from '../pkg/resolvconf.ts';
import { Opcode, Rcode } from '../../wire/constants.ts';

/** CoreDNS defaultTimeout: the whole per-query budget. */
export const DEFAULT_TIMEOUT_MS = 5000;

export const ErrNoHealthy = 'no healthy proxies';

/** One upstream as configured: an address, or a nameserver line of a TO file. */
export interface UpstreamSpec {
  kind: UpstreamKind;
  host: string;
  port: number;
  /** per-upstream TLS server name (`tls://IP%NAME`) */
  serverName?: string;
  origin: Origin;
}

/** A TO argument: an address, or a resolv.conf-style file that yields addresses. */
export type ToEntry =
  | { type: 'addr'; spec: UpstreamSpec }
  | { type: 'file'; path: string; origin: Origin; specs: UpstreamSpec[]; stamp: string };

export interface ForwardOptions {
  from: string;
  ignored: string[];
  maxFails: number;
  /** undefined: CoreDNS's default, 2 × number of upstreams. */
  maxConnectAttempts: number | undefined;
  policy: Policy;
  forceTcp: boolean;
  preferUdp: boolean;
  maxConcurrent: number;
  nextRcodes: number[];
  nextOnNodata: boolean;
  failfast: boolean;
  failoverRcodes: number[];
  /** nodens: coalesce identical in-flight queries (default on). */
  coalesce: boolean;
  /** nodens: poll TO files for changes every N ms; 0 = read once (CoreDNS). */
  resolvConfReloadMs: number;
  proxy: ProxyOptions;
}

interface Outcome {
  reply?: Buffer;
  err?: Error;
  proxy?: Proxy;
}


function stampOf(path: string): string {
  try {
    const st = statSync(path, { bigint: true });
    return `${st.ino}:${st.size}:${st.mtimeNs}`;
  } catch {
    return 'missing';
  }
}

export function specKey(s: { kind: UpstreamKind; host: string; port: number }): string {
  return `${s.kind}|${s.host.includes(':') ? `[${s.host}]` : s.host}:${s.port}`;
}

/** The nameserver lines of a TO file as upstream specs (plain DNS, port 53, zone dropped). */
export function specsFromFile(path: string): UpstreamSpec[] {
  return readResolvConf(path).map((ns) => ({
    kind: 'dns' as const, host: stripZone(ns.address), port: 53,
    origin: { file: path, line: ns.line, source: 'resolvconf' as const },
  }));
}

export class Forward implements UpstreamControl {
  readonly name = 'forward';
  next: Handler | undefined;
  readonly opts: ForwardOptions;
  readonly to: ToEntry[];
  /** The upstreams in configuration order (deduplicated, first wins). */
  proxies: Proxy[] = [];
  private active: Proxy[] = [];
  private concurrent = 0;
  private readonly flights = new SingleFlight<Outcome>();
  private readonly random = new RandomPolicy();
  private watcher: NodeJS.Timeout | undefined;
  private readonly log: PluginLogger | undefined;
  private started = false;
  private readonly limitMessage: string;
  /** The block's dnstap plugins (set at start-up): each attempt is tapped as FORWARDER_QUERY/RESPONSE. */
  tappers: Tapper[] = [];

  private readonly metrics: ForwardMetrics;

  constructor(opts: ForwardOptions, to: ToEntry[], log?: PluginLogger, metrics: ForwardMetrics = forwardMetrics()) {
    this.metrics = metrics;
    this.opts = opts;
    this.to = to;
    this.log = log;
    this.limitMessage = `concurrent queries exceeded maximum ${opts.maxConcurrent}`;
    this.rebuild();
  }

  /** Number of upstreams. */
  get len(): number {
    return this.proxies.length;
  }

  private makeProxy(s: UpstreamSpec): Proxy {
    const o = this.opts.proxy;
    let tls = o.tls;
    if (s.kind === 'tls' && s.serverName !== undefined) tls = { ...(tls ?? {}), servername: s.serverName };
    const opts: ProxyOptions = { ...o, tls: s.kind === 'tls' ? (tls ?? {}) : undefined };
    return new Proxy(s.host, s.port, s.kind, s.origin, opts);
  }

  /** (Re)build the upstream list from the TO entries, keeping Proxy objects (and their health) that stay. */
  private rebuild(): void {
    const old = new Map<string, Proxy>();
    for (const p of this.proxies) old.set(specKey(p), p);
    const seen = new Set<string>();
    const next: Proxy[] = [];
    for (const t of this.to) {
      const specs = t.type === 'addr' ? [t.spec] : t.specs;
      for (const s of specs) {
        const k = specKey(s);
        if (seen.has(k)) continue;
        seen.add(k);
        let p = old.get(k);
        if (p === undefined) {
          p = this.makeProxy(s);
          if (this.started) p.start();
        } else {
          old.delete(k);
        }
        next.push(p);
      }
    }
    for (const p of old.values()) p.stop();
    this.proxies = next;
    this.refreshActive();
  }

  private refreshActive(): void {
    this.active = this.proxies.filter((p) => !p.quarantined);
  }

  onStartup(): void {
    this.started = true;
    for (const p of this.proxies) p.start();
    const every = this.opts.resolvConfReloadMs;
    if (every > 0 && this.to.some((t) => t.type === 'file') && this.watcher === undefined) {
      this.watcher = setInterval(() => { this.checkFiles(); }, every);
      this.watcher.unref();
    }
  }

  onShutdown(): void {
    this.started = false;
    if (this.watcher !== undefined) clearInterval(this.watcher);
    this.watcher = undefined;
    for (const p of this.proxies) p.stop();
  }

  /** Re-read TO files whose inode, size or mtime changed. */
  checkFiles(): void {
    let changed = false;
    for (const t of this.to) {
      if (t.type !== 'file') continue;
      const stamp = stampOf(t.path);
      if (stamp === t.stamp) continue;
      t.stamp = stamp;
      let specs: UpstreamSpec[];
      try {
        specs = specsFromFile(t.path);
      } catch (e) {
        this.log?.warning(`Failed to re-read ${t.path}: ${e instanceof Error ? e.message : String(e)}; keeping its upstreams`);
        continue;
      }
      if (specs.length === 0) {
        this.log?.warning(`No nameservers in ${t.path} any more; keeping its previous upstreams`);
        continue;
      }
      t.specs = specs;
      changed = true;
    }
    if (!changed) return;
    const before = this.proxies.map((p) => p.addr).join(', ');
    this.rebuild();
    const after = this.proxies.map((p) => p.addr).join(', ');
    if (before !== after) this.log?.info(`Upstreams changed from [${before}] to [${after}]`);
  }

  // --- UpstreamControl: what a loop-detection plugin uses --------------------------------------

  get upstreamZone(): string { return this.opts.from; }
  get upstreamExceptions(): readonly string[] { return this.opts.ignored; }

  upstreams(): UpstreamView[] {
    return this.proxies.map((p) => ({
      addr: p.addr, kind: p.kind, origin: p.origin, quarantined: p.quarantined, healthy: !p.down(this.opts.maxFails),
    }));
  }

  /** Take the upstream with address `addr` out of rotation (true) or put it back (false); false when unknown. */
  quarantine(addr: string, on: boolean): boolean {
    let found = false;
    for (const p of this.proxies) {
      if (p.addr === addr) {
        p.quarantined = on;
        found = true;
      }
    }
    if (found) this.refreshActive();
    return found;
  }

  // --- serving ------------------------------------------------------------------------------------

  private match(name: string): boolean {
    return fromMatches(this.opts.from, this.opts.ignored, name);
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    if (!this.match(req.name)) return nextOrFailure(this.name, this.next, req, w);
    const max = this.opts.maxConcurrent;
    if (max > 0 && this.concurrent >= max) {
      this.metrics.maxConcurrentRejectCount.inc();
      throw new PluginError(Rcode.REFUSED, this.limitMessage);
    }
    this.concurrent++;
    return this.serve(req, w);
  }

  private async serve(req: Request, w: ResponseWriter): Promise<number> {
    try {
      // The query as CoreDNS packs it: a scanned query's own bytes are that already (never changed below: the
      // proxy sends a copy), anything else is encoded.
      let query: Buffer;
      const wire = req.canonicalWire ? req.wire : undefined;
      if (wire !== undefined) {
        query = Buffer.isBuffer(wire) ? wire : Buffer.from(wire);
      } else {
        try {
          query = encodeMessage(req.msg);
        } catch (e) {
          throw new PluginError(Rcode.FORMERR, e instanceof Error ? e.message : String(e));
        }
      }
      const flags = req.flags;
      const qEnd = questionEnd(query);
      const o = this.opts;
      const proto: 'udp' | 'tcp' = o.forceTcp ? 'tcp' : o.preferUdp ? 'udp' : req.proto;
      const bufsize = req.size;
      let outcome: Outcome;
      let shared = false;
      /** The reply is this query's alone (no coalesced caller shares it): patched in place, not copied. */
      let owned = true;
      // (loop) `loop/no-coalesce`: a loop probe must be forwarded on every lap, as CoreDNS would.
      // (dnstap) every query's own upstream exchanges are tapped, as CoreDNS does: no coalescing then.
      if (this.tappers.length !== 0) {
        outcome = await this.resolve(query, qEnd, proto, bufsize, req.deadline, req);
      } else if (o.coalesce && ((flags >> 11) & 0xf) === Opcode.QUERY && (req.scannedQuestion || req.msg.question.length === 1)
        && req.value(NO_COALESCE) === undefined) {
        const f = this.flights.do(coalescingKey(req, flags, proto, bufsize), () => this.resolve(query, qEnd, proto, bufsize, req.deadline));
        shared = f.joined !== 0;
        if (shared) this.metrics.coalescedCount.inc();
        outcome = await f.promise;
        owned = !shared && f.joined === 0;
      } else {
        outcome = await this.resolve(query, qEnd, proto, bufsize, req.deadline);
      }
      const proxy = outcome.proxy;
      if (proxy !== undefined) {
        req.setMetadata(UPSTREAM_USED, proxy.addr);
        req.setValue(UPSTREAM_USED, proxy.addr);
      }
      if (outcome.reply === undefined) {
        throw new PluginError(Rcode.SERVFAIL, outcome.err !== undefined ? outcome.err.message : ErrNoHealthy, { cause: outcome.err });
      }
      const out = owned ? outcome.reply : Buffer.from(outcome.reply);
      const id = req.id;
      out[0] = id >> 8;
      out[1] = id & 0xff;
      if ((out[2]! & 0x80) === 0 || !questionMatches(query, qEnd, out)) {
        // CoreDNS: a reply that does not match the question is answered with FORMERR.
        const formerr = replyTo(req.msg);
        formerr.rcode = Rcode.FORMERR;
        w.writeMsg(formerr);
        return 0;
      }
      if (shared) out.set(query.subarray(12, qEnd), 12);
      const rcode = out[3]! & 0x0f;
      if (this.next instanceof Forward || (this.next !== undefined && this.next.name === 'forward')) {
        const nodata = o.nextOnNodata && rcode === Rcode.NOERROR && out[6] === 0 && out[7] === 0;
        if (nodata || o.nextRcodes.includes(rcode)) return await nextOrFailure(this.name, this.next, req, w);
      }
      // CoreDNS unpacks the upstream's reply and packs it again without name compression (unless it must
      // compress to fit the client): a compressed reply has its names expanded on the wire (the same bytes as
      // decoding and re-encoding, without building the message), an uncompressed one goes out as it is.
      if (hasCompressionPointer(out)) {
        const expanded = expandNames(out);
        if (expanded !== undefined) {
          w.writeWire(expanded);
          return 0;
        }
        // not plainly framed: the decoder's rules decide
        let m: Message | undefined;
        try {
          m = decodeMessage(out);
        } catch {
          m = undefined; // the writer reports what it cannot decode
        }
        if (m !== undefined) {
          w.writeMsg(m);
          return 0;
        }
      }
      w.writeWire(out);
      return 0;
    } finally {
      this.concurrent--;
    }
  }

  /**
   * The per-query upstream loop: a reply (matching or not), or the last error.
   * `cancelAt` is the request's deadline (the cancel plugin): as CoreDNS checks
   * `ctx.Err()`, no new attempt starts once it has passed.
   */
  private async resolve(
    query: Buffer, qEnd: number, proto: 'udp' | 'tcp', bufsize: number, cancelAt: number, tapReq?: Request,
  ): Promise<Outcome> {
    const o = this.opts;
    const tapStart = tapReq !== undefined ? tapNow() : 0;
    const all = this.active;
    const n = all.length;
    if (n === 0) return { err: new Error(ErrNoHealthy) };
    const list = n === 1 ? all : o.policy.list(all);
    const cap = o.maxConnectAttempts ?? 2 * n;
    const deadline = Date.now() + DEFAULT_TIMEOUT_MS;
    let i = 0;
    let fails = 0;
    let failovers = 0;
    let attempts = 0;
    let upstreamErr: Error | undefined;
    const stopAt = cancelAt < deadline ? cancelAt : deadline;
    while (Date.now() < stopAt && (cap === 0 || attempts < cap)) {
      if (i >= list.length) {
        i = 0;
        fails = 0;
      }
      let proxy = list[i++]!;
      if (proxy.down(o.maxFails)) {
        fails++;
        if (fails < n) continue;
        this.metrics.healthcheckBrokenCount.inc();
        if (o.failfast) break;
        proxy = this.random.list(all)[0]!;
      }
      let p = proto;
      let reply: Buffer | undefined;
      let err: Error | undefined;
      const info: ExchangeInfo | undefined = tapReq !== undefined ? { local: '', proto: p } : undefined;
      // CoreDNS sets forward/upstream before each attempt: dnstap's `extra` of the forwarder messages sees it.
      if (tapReq !== undefined) tapReq.setMetadata(UPSTREAM_USED, proxy.addr);
      for (;;) {
        reply = undefined;
        err = undefined;
        const left = deadline - Date.now();
        const timeout = Math.max(1, Math.min(o.proxy.readTimeoutMs, left));
        if (info !== undefined) {
          info.local = '';
          info.proto = p;
        }
        try {
          reply = await proxy.connect(query, p, bufsize, timeout, info);
        } catch (e) {
          err = e instanceof Error ? e : new Error(String(e));
          if (e instanceof UpstreamError && e.cachedClosed) continue;
        }
        if (reply !== undefined && (reply[2]! & 0x02) !== 0 && !o.forceTcp && o.preferUdp && p === 'udp') {
          p = 'tcp';
          continue;
        }
        break;
      }
      if (tapReq !== undefined) this.tap(tapReq, proxy, info!, query, reply, tapStart);
      if (err !== undefined || reply === undefined) {
        upstreamErr = err;
        if (o.maxFails !== 0) proxy.healthcheck();
        if (cap > 0) {
          attempts++;
          if (attempts >= cap) break;
        }
        if (fails < n) continue;
        break;
      }
      if ((reply[2]! & 0x80) === 0 || !questionMatches(query, qEnd, reply)) return { reply, proxy };
      const rcode = reply[3]! & 0x0f;
      if (o.failoverRcodes.length > 0 && o.failoverRcodes.includes(rcode) && failovers < n - 1) {
        failovers++; // not a down-skip: it does not count towards all upstreams being down
        continue;
      }
      return { reply, proxy };
    }
    return { err: upstreamErr ?? new Error(ErrNoHealthy) };
  }

  /** CoreDNS toDnstap: one attempt, seen from here (query address: our end) to the upstream (response address). */
  private tap(req: Request, proxy: Proxy, info: ExchangeInfo, query: Buffer, reply: Buffer | undefined, start: number): void {
    let local = '';
    let localPort = 0;
    if (info.local !== '') {
      const i = info.local.lastIndexOf(':');
      local = info.local.slice(0, i).replace(/^\[|\]$/g, '');
      localPort = Number(info.local.slice(i + 1));
    }
    for (const t of this.tappers) {
      const q: TapMessage = {
        type: TapType.FORWARDER_QUERY, proto: info.proto, responseAddress: proxy.host, responsePort: proxy.port, queryTime: start,
      };
      if (local !== '') {
        q.queryAddress = local;
        q.queryPort = localPort;
      }
      if (t.tapFull) q.queryMessage = query;
      t.tapMessage(q, req);
      if (reply === undefined) continue;
      const r: TapMessage = { ...q, type: TapType.FORWARDER_RESPONSE, queryMessage: undefined, responseTime: tapNow() };
      if (t.tapFull) r.responseMessage = repacked(reply);
      t.tapMessage(r, req);
    }
  }
}

/**
 * What makes two queries the same upstream question: the name, type and class, the DO, CD, RD and AD bits, the
 * EDNS buffer size (or none), the transport and the client's buffer size. After the name (which holds no raw NUL)
 * come a NUL and one UTF-16 code unit per field (each fits 16 bits), not a '|'-joined text: one concatenation
 * instead of a dozen strings per forwarded miss.
 */
function coalescingKey(req: Request, flags: number, proto: 'udp' | 'tcp', bufsize: number): string {
  const e = req.edns;
  const bits = (e === undefined ? 0 : e.do ? 3 : 1) | (flags & 0x10 ? 4 : 0) | (flags & 0x100 ? 8 : 0) | (flags & 0x20 ? 16 : 0)
    | (proto === 'tcp' ? 32 : 0);
  return req.name + String.fromCharCode(0, req.qtype, req.qclass, bits, e === undefined ? 0 : e.udpSize & 0xffff, bufsize & 0xffff);
}

/** The upstream's reply as CoreDNS packs the message it decoded: uncompressed (the bytes as they came when undecodable). */
function repacked(reply: Buffer): Uint8Array {
  try {
    return encodeMessage(decodeMessage(reply));
  } catch {
    return reply;
  }
}
