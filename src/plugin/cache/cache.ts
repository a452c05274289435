// cache: answers from stored replies (CoreDNS plugin/cache). Replies are kept
// as wire bytes without their OPT record, every TTL already set to the cache
// duration; a hit copies the bytes and patches ID, flags, question and TTLs.

import { getHeapSpaceStatistics, getHeapStatistics } from 'node:v8';
import type { Handler, HandlerResult, PluginLogger, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { EdnsOption, Message, ResourceRecord, SOAData } from '../../wire/types.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { replyTo } from '../../wire/message.ts';
import { asciiLower } from '../../wire/name.ts';
import { Opcode, Rcode, RRType } from '../../wire/constants.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { zonesMatches } from '../pkg/zones.ts';
import { typify, ResponseType } from '../pkg/response.ts';
import { questionNameIs, removeOpt, scanPlainAnswer, scanRecords, writeTtl } from '../../wire/scan.ts';
import { cacheMetrics, type CacheMetrics } from './metrics.ts';

const SHARDS = 256;
/** dnsutil.MinimalDefaultTTL / MaximumDefaulTTL */
const MIN_DEFAULT_TTL = 5;
const MAX_DEFAULT_TTL = 3600;

export interface CacheOptions {
  zones: string[];
  pcap: number;
  ncap: number;
  /** seconds */
  pttl: number;
  minpttl: number;
  nttl: number;
  minnttl: number;
  failttl: number;
  prefetch: number;
  prefetchDurationMs: number;
  percentage: number;
  /** seconds; 0 = serve_stale off */
  staleUpTo: number;
  verifyStale: boolean;
  verifyTimeoutMs: number;
  staleResponseTtl: number;
  failureRecheckMs: number;
  preferPositive: boolean;
  pexcept: string[];
  nexcept: string[];
  keepttl: boolean;
}

export function defaultCacheOptions(): CacheOptions {
  return {
    zones: ['.'], pcap: 10000, ncap: 10000, pttl: MAX_DEFAULT_TTL, minpttl: MIN_DEFAULT_TTL,
    nttl: MAX_DEFAULT_TTL / 2, minnttl: MIN_DEFAULT_TTL, failttl: 5,
    prefetch: 0, prefetchDurationMs: 60000, percentage: 10,
    staleUpTo: 0, verifyStale: false, verifyTimeoutMs: 0, staleResponseTtl: 0, failureRecheckMs: 0, preferPositive: false,
    pexcept: [], nexcept: [], keepttl: false,
  };
}

/** Date.now() when this module loaded: `stored` is kept relative to it, a small integer instead of a heap number. */
const EPOCH = Date.now();
const DENIAL = 1;
const SERVFAIL = 2;

/** Where Item builds its string (grown when a reply is larger). */
let scratch = Buffer.allocUnsafe(4096);

/**
 * One cached reply. Its bytes are one latin1 string (the reply, then the offsets of its TTL fields, two chars
 * each): a string costs the V8 heap its length plus 16 bytes, where a Buffer cost a ~100-byte view object, an
 * array of offsets and a share of a pool slab kept alive by any one live slice (measured: ~300 bytes per entry
 * more at 100k entries).
 */
export class Item {
  private readonly data: string;
  /** The reply's length in `data`; the TTL offsets follow it. */
  private readonly wireLen: number;
  readonly qEnd: number;
  readonly origTtl: number;
  private readonly storedSinceEpoch: number;
  private readonly kind: number;
  hits = 0;
  last = 0;
  refreshing = false;
  failedAt = 0;
  /**
   * Extended DNS Errors nodens itself attached to the request that filled this
   * entry (e.g. a contained forwarding loop); replayed on hits. An upstream's
   * own OPT is not kept, as in CoreDNS.
   */
  extendedErrors: EdnsOption[] | undefined;

  /** `wire`: the reply without OPT, all TTLs = origTtl; `ttls`: where its TTL fields are. */
  constructor(wire: Uint8Array, ttls: readonly number[], qEnd: number, origTtl: number, stored: number, denial: boolean, servfail: boolean) {
    // Built in one buffer and decoded once: a flat string (concatenating would keep a rope of two). The buffer is
    // the module's scratch: a Buffer per entry was one more backing store per miss for malloc to churn through.
    const n = wire.length + 2 * ttls.length;
    if (scratch.length < n) scratch = Buffer.allocUnsafe(Math.max(n, 2 * scratch.length));
    const b = scratch;
    b.set(wire, 0);
    for (let i = 0; i < ttls.length; i++) b.writeUInt16BE(ttls[i]!, wire.length + 2 * i);
    this.data = b.toString('latin1', 0, n);
    this.wireLen = wire.length;
    this.qEnd = qEnd;
    this.origTtl = origTtl;
    this.storedSinceEpoch = stored - EPOCH;
    this.kind = (denial ? DENIAL : 0) | (servfail ? SERVFAIL : 0);
  }

  get stored(): number { return this.storedSinceEpoch + EPOCH; }
  get denial(): boolean { return (this.kind & DENIAL) !== 0; }
  get servfail(): boolean { return (this.kind & SERVFAIL) !== 0; }
  get rcode(): number { return this.data.charCodeAt(3) & 0x0f; }
  /** The stored reply's AA: a hit carries it as it was (CoreDNS 1.15.0; 1.14.7 always set AA). */
  get aa(): boolean { return (this.data.charCodeAt(2) & 0x04) !== 0; }
  get ad(): boolean { return (this.data.charCodeAt(3) & 0x20) !== 0; }
  get ra(): boolean { return (this.data.charCodeAt(3) & 0x80) !== 0; }

  /** A new copy of the stored reply (no OPT, every TTL = origTtl). */
  copyWire(): Buffer {
    const out = Buffer.allocUnsafe(this.wireLen);
    out.write(this.data, 0, this.wireLen, 'latin1');
    return out;
  }

  /** Set every TTL of `out` (a copyWire) to `ttl`. */
  writeTtls(out: Buffer, ttl: number): void {
    const d = this.data;
    for (let p = this.wireLen; p < d.length; p += 2) writeTtl(out, (d.charCodeAt(p) << 8) | d.charCodeAt(p + 1), ttl);
  }

  /** Remaining TTL in whole seconds (negative once expired). */
  ttl(now: number): number {
    return this.origTtl - Math.floor((now - this.stored) / 1000);
  }

  /** freq.Update: hits reset to 1 when the previous hit is older than `d`. */
  updateFreq(d: number, now: number): number {
    if (this.last < now - d) this.hits = 1;
    else this.hits++;
    this.last = now;
    return this.hits;
  }
}

function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The shard of `key` in every ShardedCache (they all have SHARDS shards). */
export function shardOf(key: string): number {
  return fnv1a(key) & (SHARDS - 1);
}

/** Fraction of V8's old-generation limit in use above which a cache gives entries back (and under HEAP_LOW grows again). */
export const HEAP_HIGH = 0.75;
export const HEAP_LOW = 0.5;
/** Adds between two looks at the heap (getHeapStatistics costs about a microsecond). */
const HEAP_CHECK_EVERY = 512;
/**
 * After a shrink, the heap figure still counts the evicted entries until a major GC has run; waiting
 * this long before shrinking again keeps one pressure spell from emptying the cache.
 */
const SHRINK_COOLDOWN_MS = 1000;

/** What the cache reads of the heap: old-generation use / its limit, and a clock (injected by tests). */
export interface HeapProbe { ratio(): number; now(): number }

/**
 * The old generation's limit in bytes: --max-old-space-size when given (in NODE_OPTIONS or on the
 * command line), since V8's heap_size_limit adds the young generation's reserve (192 MiB by default
 * in Node 24: 256 MiB reported for --max-old-space-size=64); else heap_size_limit, a little over.
 */
export function oldSpaceLimit(argv: readonly string[] = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)]): number {
  let mb: number | undefined;
  for (const a of argv) {
    const m = /^--max[-_]old[-_]space[-_]size=(\d+)$/.exec(a);
    if (m !== null) mb = Number(m[1]);
  }
  return mb !== undefined && mb > 0 ? mb * 1024 * 1024 : getHeapStatistics().heap_size_limit;
}

const OLD_LIMIT = oldSpaceLimit();

export const v8Heap: HeapProbe = {
  ratio() {
    let used = 0;
    for (const s of getHeapSpaceStatistics()) {
      if (s.space_name !== 'new_space' && s.space_name !== 'new_large_object_space') used += s.space_used_size;
    }
    return used / OLD_LIMIT;
  },
  now: Date.now,
};

/**
 * CoreDNS plugin/pkg/cache: 256 shards, each capped; a full shard drops an arbitrary entry.
 * Unlike CoreDNS (Go has no heap limit to hit), a Node process aborts when its heap limit
 * (--max-old-space-size) is reached, and a cache of CoreDNS's configurable size (millions of entries)
 * can exceed a small limit; so the configured capacity is a ceiling, and while the heap is over
 * HEAP_HIGH of its limit each shard's cap drops to 3/4 of the entries it holds (growing back by
 * a quarter while under HEAP_LOW).
 */
export class ShardedCache {
  private readonly shards: Map<string, Item>[] = [];
  /** The configured cap of one shard. */
  readonly shardSize: number;
  /** The cap in force (below shardSize after heap pressure). */
  private limit: number;
  private count = 0;
  private adds = 0;
  private lastShrink = -Infinity;
  private readonly heap: HeapProbe;
  /** Told the new total cap after each shrink (the plugin logs it). */
  onShrink: ((capacity: number, heapRatio: number) => void) | undefined;

  constructor(capacity: number, heap: HeapProbe = v8Heap) {
    this.shardSize = Math.max(Math.floor(capacity / SHARDS), 4);
    this.limit = this.shardSize;
    this.heap = heap;
    for (let i = 0; i < SHARDS; i++) this.shards.push(new Map());
  }

  /** The configured capacity (CoreDNS's). */
  get capacity(): number {
    return this.shardSize * SHARDS;
  }

  /** The capacity in force now. */
  get effectiveCapacity(): number {
    return this.limit * SHARDS;
  }

  get len(): number {
    return this.count;
  }

  get(key: string): Item | undefined {
    return this.shards[fnv1a(key) & (SHARDS - 1)]!.get(key);
  }

  /** get() with the shard already known (`shardOf(key)`): a lookup in both caches hashes the key once. */
  getIn(shard: number, key: string): Item | undefined {
    return this.shards[shard]!.get(key);
  }

  /** Adds; true when another entry had to be evicted. */
  add(key: string, item: Item): boolean {
    if (++this.adds % HEAP_CHECK_EVERY === 0) this.adapt();
    const s = this.shards[fnv1a(key) & (SHARDS - 1)]!;
    let evicted = false;
    if (!s.has(key)) {
      if (s.size >= this.limit) {
        const first = s.keys().next();
        if (!first.done) {
          s.delete(first.value);
          evicted = true;
          this.count--;
        }
      }
      this.count++;
    }
    s.set(key, item);
    return evicted;
  }

  remove(key: string): void {
    const s = this.shards[fnv1a(key) & (SHARDS - 1)]!;
    if (s.delete(key)) this.count--;
  }

  /** Shrinks under heap pressure, grows back when it has passed. */
  adapt(): void {
    const r = this.heap.ratio();
    if (r > HEAP_HIGH) {
      const now = this.heap.now();
      if (now - this.lastShrink < SHRINK_COOLDOWN_MS) return;
      this.lastShrink = now;
      const held = Math.ceil(this.count / SHARDS);
      const next = Math.max(1, Math.floor(Math.min(this.limit, held) * 0.75));
      if (next === this.limit) return;
      this.limit = next;
      for (const s of this.shards) {
        while (s.size > this.limit) {
          s.delete(s.keys().next().value!);
          this.count--;
        }
      }
      this.onShrink?.(this.effectiveCapacity, r);
    } else if (r < HEAP_LOW && this.limit < this.shardSize) {
      this.limit = Math.min(this.shardSize, Math.ceil(this.limit * 1.25));
    }
  }
}

interface Bound {
  requests: { inc(): void };
  hitsSuccess: { inc(): void };
  hitsDenial: { inc(): void };
  misses: { inc(): void };
  stale: { inc(): void };
  sizeSuccess: { set(v: number): void };
  sizeDenial: { set(v: number): void };
  evictionsSuccess: { inc(): void };
  evictionsDenial: { inc(): void };
}

/** CoreDNS dnsutil.MinimalTTL (plus the SOA MINIMUM for denials, RFC 2308 §5). */
export function minimalTtl(m: Message, mt: number): number {
  if (mt !== ResponseType.NoError && mt !== ResponseType.NameError && mt !== ResponseType.NoData) return MIN_DEFAULT_TTL;
  if (m.answer.length + m.authority.length + m.additional.length === 0) return MIN_DEFAULT_TTL;
  let min = MAX_DEFAULT_TTL;
  const denial = mt !== ResponseType.NoError;
  for (const sec of [m.answer, m.authority, m.additional]) {
    for (let i = 0; i < sec.length; i++) {
      const rr = sec[i]!;
      // An OPT kept as a record (a reply with more than one) carries flags, not a TTL.
      if (rr.type === RRType.OPT && sec === m.additional) continue;
      if (rr.ttl < min) min = rr.ttl;
      if (denial && rr.type === RRType.SOA && sec === m.authority) {
        const mm = (rr.data as SOAData).minimum;
        if (mm < min) min = mm;
      }
    }
  }
  return min;
}

function clamp(ttl: number, min: number, max: number): number {
  if (ttl < min) ttl = min;
  if (ttl > max) ttl = max;
  return ttl;
}

/**
 * The answer section reaches the question's type. Following the CNAME chain from the qname and, where it does not
 * reach the type (DNAME-synthesised or otherwise unusual answers), accepting any record of the type come to the
 * same: any record of the type.
 */
function answersQuestion(m: Message): boolean {
  const q = m.question[0];
  if (q === undefined) return true;
  if (q.type === RRType.ANY || q.type === RRType.CNAME) return true;
  const a = m.answer;
  for (let i = 0; i < a.length; i++) if (a[i]!.type === q.type) return true;
  return false;
}

function sameBytes(a: Uint8Array, b: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (a[i] !== b[i]) return false;
  return true;
}

function hasSoa(rrs: ResourceRecord[]): boolean {
  for (const rr of rrs) if (rr.type === RRType.SOA) return true;
  return false;
}

export class Cache implements Handler {
  readonly name = 'cache';
  next: Handler | undefined;
  readonly o: CacheOptions;
  /**
   * Zones of the block's handlers that must not be cached (ZoneBypasser: dynupdate's zone), read at start-up;
   * empty nearly always, so a query pays one length check.
   */
  bypass: string[] = [];
  readonly pcache: ShardedCache;
  readonly ncache: ShardedCache;
  readonly zonesLabel: string;
  view = '';
  /** Injected clock (tests). */
  now: () => number = Date.now;
  /** `[WARNING] plugin/cache: …` lines; set by setup. */
  log: PluginLogger | undefined;
  private readonly bound = new Map<string, Bound>();
  private lastServer: string | undefined;
  private lastBound: Bound | undefined;
  /** The server's cache metrics (the process's when built without one, as unit tests do). */
  readonly m: CacheMetrics;

  constructor(o: CacheOptions, metrics: CacheMetrics = cacheMetrics()) {
    this.m = metrics;
    this.o = o;
    this.pcache = new ShardedCache(o.pcap);
    this.ncache = new ShardedCache(o.ncap);
    this.zonesLabel = o.zones.join(',');
    for (const [c, kind] of [[this.pcache, 'success'], [this.ncache, 'denial']] as const) {
      c.onShrink = (cap, ratio) => {
        this.log?.warning(`heap at ${Math.round(ratio * 100)}% of its limit: ${kind} cache capacity lowered to ${cap} entries`);
      };
    }
  }

  private metrics(server: string): Bound {
    // Nearly every query of a cache comes through one listener: the last one's counters, without a map lookup.
    if (server === this.lastServer) return this.lastBound!;
    let b = this.bound.get(server);
    if (b === undefined) {
      const z = this.zonesLabel, v = this.view;
      b = {
        requests: this.m.cacheRequests.child(server, z, v),
        hitsSuccess: this.m.cacheHits.child(server, 'success', z, v),
        hitsDenial: this.m.cacheHits.child(server, 'denial', z, v),
        misses: this.m.cacheMisses.child(server, z, v),
        stale: this.m.servedStale.child(server, z, v),
        sizeSuccess: this.m.cacheSize.child(server, 'success', z, v),
        sizeDenial: this.m.cacheSize.child(server, 'denial', z, v),
        evictionsSuccess: this.m.evictions.child(server, 'success', z, v),
        evictionsDenial: this.m.evictions.child(server, 'denial', z, v),
      };
      this.bound.set(server, b);
    }
    this.lastServer = server;
    this.lastBound = b;
    return b;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    // The header as bits (req.flags): a hit needs no decoded Message of the query.
    const flags = req.flags;
    // Only QUERY is cached or answered from the cache (CoreDNS 1.15.0): a NOTIFY goes to the next plugin.
    if (((flags >> 11) & 0xf) !== Opcode.QUERY) return nextOrFailure(this.name, this.next, req, w);
    const qname = req.name;
    const zone = zonesMatches(this.o.zones, qname);
    if (zone === '') return nextOrFailure(this.name, this.next, req, w);
    if (this.bypass.length !== 0 && zonesMatches(this.bypass, qname) !== '') return nextOrFailure(this.name, this.next, req, w);

    const doBit = req.do;
    const cd = (flags & 0x10) !== 0;
    const ad = (flags & 0x20) !== 0;
    // DO and CD, type and class as three UTF-16 code units before the name: no number-to-text conversion per query.
    const key = String.fromCharCode((doBit ? 2 : 0) | (cd ? 1 : 0), req.qtype, req.qclass) + qname;
    const m = this.metrics(req.server);
    let now = this.now();
    m.requests.inc();

    const item = this.lookup(key, now, m);
    if (item === undefined) {
      m.misses.inc();
      return this.miss(req, w, key, doBit, ad);
    }
    let ttl = item.ttl(now);
    if (ttl <= 0) {
      if (this.o.verifyStale) return this.verify(req, w, key, item, doBit, ad);
      this.backgroundRefresh(req, key, item, false);
      m.stale.inc();
      ttl = this.staleTtl(item);
    } else {
      if (this.shouldPrefetch(item, now)) this.backgroundRefresh(req, key, item, true);
      if (this.o.keepttl) ttl = item.origTtl;
    }
    this.writeHit(req, w, item, ttl, doBit, ad);
    return 0;
  }

  /** A stale reply's TTL: RESPONSE_TTL when given, else 0, or with keepttl the stored duration (as CoreDNS). */
  private staleTtl(i: Item): number {
    const o = this.o;
    return o.staleResponseTtl > 0 ? o.staleResponseTtl : o.keepttl ? i.origTtl : 0;
  }

  private usable(i: Item | undefined, now: number): boolean {
    if (i === undefined) return false;
    const ttl = i.ttl(now);
    return ttl > 0 || (this.o.staleUpTo > 0 && -ttl < this.o.staleUpTo);
  }

  /**
   * CoreDNS getIfNotStale: denial cache first, then success; a SERVFAIL never shadows a positive entry
   * that is fresh or still within serve_stale's DURATION.
   */
  private lookup(key: string, now: number, m: Bound): Item | undefined {
    const shard = shardOf(key);
    const n = this.ncache.getIn(shard, key);
    const nOk = this.usable(n, now);
    if (nOk) {
      const p = this.pcache.getIn(shard, key);
      if ((n!.servfail || this.o.preferPositive) && this.usable(p, now)) {
        m.hitsSuccess.inc();
        return p;
      }
      m.hitsDenial.inc();
      return n;
    }
    const p = this.pcache.getIn(shard, key);
    if (this.usable(p, now)) {
      m.hitsSuccess.inc();
      return p;
    }
    return undefined;
  }

  private shouldPrefetch(i: Item, now: number): boolean {
    if (this.o.prefetch <= 0) return false;
    i.updateFreq(this.o.prefetchDurationMs, now);
    const threshold = Math.ceil((this.o.percentage / 100) * i.origTtl);
    return i.hits >= this.o.prefetch && i.ttl(now) <= threshold;
  }

  /** Build the reply for `req` from the stored bytes. */
  writeHit(req: Request, w: ResponseWriter, item: Item, ttl: number, doBit: boolean, ad: boolean, replayEde = true): void {
    if (replayEde && item.extendedErrors !== undefined && req.edns !== undefined) {
      for (const e of item.extendedErrors) req.addExtendedError(e);
    }
    const out = item.copyWire();
    const id = req.id;
    out[0] = id >> 8;
    out[1] = id & 0xff;
    const flags = req.flags;
    const opcode = (flags >> 11) & 0xf;
    out[2] = 0x80 | (opcode << 3) | (item.aa ? 0x04 : 0) | (opcode === Opcode.QUERY && (flags & 0x100) !== 0 ? 0x01 : 0);
    out[3] = (item.ra ? 0x80 : 0) | (item.ad && (doBit || ad) ? 0x20 : 0) | (opcode === Opcode.QUERY && (flags & 0x10) !== 0 ? 0x10 : 0) | item.rcode;
    // The client's question bytes (req.wire) stand in the reply when they equal the stored ones;
    // a plugin before us that rewrote the question makes them differ, which the rebuild handles.
    if (req.questionEnd !== item.qEnd || !sameBytes(req.wire, out, 12, item.qEnd)) {
      // The question differs from the stored one (letter case, or rewritten by an earlier plugin):
      // the records keep their stored names, so rebuild through the codec (CoreDNS toMsg).
      const m = decodeMessage(out);
      m.question = [{ ...req.msg.question[0]! }];
      for (const sec of [m.answer, m.authority, m.additional]) for (const rr of sec) rr.ttl = ttl;
      w.writeMsg(m);
      return;
    }
    item.writeTtls(out, ttl);
    w.writeWire(out);
  }

  private miss(req: Request, w: ResponseWriter, key: string, doBit: boolean, ad: boolean): HandlerResult {
    const crr = new CacheWriter(this, req, key, doBit, ad, w);
    // The next plugins see the query with AD set (CoreDNS hands on a copy with AD=1); plugins that run
    // around the cache keep seeing the client's query.
    const r = req.withAdBit();
    if (this.o.failttl <= 0) return nextOrFailure(this.name, this.next, r, crr);
    let res: HandlerResult;
    try {
      res = nextOrFailure(this.name, this.next, r, crr);
    } catch (e) {
      this.cacheFailure(e, r, crr);
      throw e;
    }
    if (typeof res === 'number') return res;
    return res.catch((e: unknown) => {
      this.cacheFailure(e, r, crr);
      throw e;
    });
  }

  /**
   * CoreDNS 1.15.0: when the rest of the chain fails with SERVFAIL without having written anything (forward
   * when every upstream failed), a SERVFAIL is stored for the servfail duration, so retries are answered from
   * the cache instead of reaching the upstreams again. It is not sent: the server answers this request.
   */
  private cacheFailure(e: unknown, r: Request, crr: CacheWriter): void {
    if (!(e instanceof PluginError) || e.rcode !== Rcode.SERVFAIL || crr.written) return;
    const fail = replyTo(r.msg);
    fail.rcode = Rcode.SERVFAIL;
    crr.storeOnly(fail);
  }

  /** A background refresh (prefetch, or serve_stale immediate): at most one per entry. */
  private backgroundRefresh(req: Request, key: string, item: Item, prefetch: boolean): void {
    if (item.refreshing) return;
    const now = this.now();
    if (!prefetch && this.o.failureRecheckMs > 0 && item.failedAt > 0 && now - item.failedAt < this.o.failureRecheckMs) return;
    item.refreshing = true;
    this.m.cachePrefetches.child(req.server, this.zonesLabel, this.view).inc(); // stale refreshes too (CoreDNS doPrefetch)
    const cw = new CacheWriter(this, req, key, req.do, req.msg.ad, undefined);
    // A stale refresh goes through the verify writer (CoreDNS doPrefetch), so an upstream failure leaves
    // the stale entry in place; with prefer_positive that writer caches every complete reply.
    if (!prefetch) cw.verify = true;
    const r = req.derive({ msg: { ...req.msg, ad: true }, proto: 'tcp' });
    const done = (): void => {
      item.refreshing = false;
      // Only a failed stale refresh delays the next one; anything else clears it (CoreDNS endRefresh).
      // A stale refresh succeeds when the verify writer takes the reply, whether or not it was stored.
      const refreshed = prefetch || cw.refreshed;
      item.failedAt = refreshed ? 0 : this.now();
      if (!refreshed || cw.stored === undefined) return;
      // Keep the popularity gathered so far (CoreDNS Freq.Reset).
      cw.stored.hits = item.hits;
      cw.stored.last = this.now();
    };
    queueMicrotask(() => {
      let res: HandlerResult;
      try {
        res = nextOrFailure(this.name, this.next, r, cw);
      } catch {
        done();
        return;
      }
      if (typeof res === 'number') done();
      else res.then(done, done);
    });
  }

  /** serve_stale verify: ask upstream first; NOERROR/NXDOMAIN wins, anything else serves the stale entry. */
  private async verify(req: Request, w: ResponseWriter, key: string, item: Item, doBit: boolean, ad: boolean): Promise<number> {
    const now = this.now();
    const serveStale = (): number => {
      this.metrics(req.server).stale.inc();
      this.writeHit(req, w, item, this.staleTtl(item), doBit, ad);
      return 0;
    };
    // CoreDNS 1.15.0 trackRefresh: with FAILURE_RECHECK or VERIFY_TIMEOUT one verify at a time per entry (the
    // others serve stale at once); with neither, every request verifies for itself.
    const track = this.o.failureRecheckMs > 0 || this.o.verifyTimeoutMs > 0;
    if (track && (item.refreshing || (this.o.failureRecheckMs > 0 && item.failedAt > 0 && now - item.failedAt < this.o.failureRecheckMs))) {
      return serveStale();
    }
    const crr = new CacheWriter(this, req, key, doBit, ad, w);
    crr.verify = true;
    crr.hold = this.o.verifyTimeoutMs > 0;
    const r = req.derive({ msg: { ...req.msg, ad: true } });
    if (track) item.refreshing = true;
    let run: Promise<number>;
    try {
      run = Promise.resolve(nextOrFailure(this.name, this.next, r, crr));
    } catch (e) {
      run = Promise.reject(e);
    }
    const settled = run.then(() => true, () => true).finally(() => {
      if (!track) return;
      item.refreshing = false;
      item.failedAt = crr.refreshed ? 0 : this.now(); // a reply taken after the timeout counts too
    });
    if (this.o.verifyTimeoutMs > 0) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<boolean>((resolve) => { timer = setTimeout(() => { resolve(false); }, this.o.verifyTimeoutMs); });
      const inTime = await Promise.race([settled, timeout]);
      clearTimeout(timer);
      if (!inTime) {
        crr.late = true; // the refresh goes on in the background and only fills the cache
        return serveStale();
      }
      if (!crr.refreshed) return serveStale();
      // CoreDNS verifyWithTimeout: the client gets the new entry as a hit would show it (its
      // remaining TTL); the refresh already attached its Extended DNS Errors to the request.
      const s = crr.stored;
      if (s !== undefined) this.writeHit(req, w, s, this.o.keepttl ? s.origTtl : s.ttl(this.now()), doBit, ad, false);
      else if (crr.held instanceof Uint8Array) w.writeWire(crr.held);
      else if (crr.held !== undefined) w.writeMsg(crr.held);
      return 0;
    }
    await settled;
    if (crr.refreshed) return 0;
    return serveStale();
  }

  /**
   * Store `res` (already classified) as the reply for `key`. `prefetch`: written by a refresh that has
   * no client to answer (CoreDNS ResponseWriter.prefetch), which also drops the key's denial entry.
   */
  /**
   * Store the reply for `key` (whose question matched the request, so `lowerName` is its name): as `prepared`
   * bytes, or `res` encoded. `res` undefined: a plain positive answer (scanPlainAnswer), read without decoding.
   */
  set(
    res: Message | undefined, prepared: Prepared | undefined, lowerName: string, key: string, mt: number, duration: number,
    server: string, prefetch: boolean,
  ): Item | undefined {
    let cacheType: 'success' | 'denial';
    let except: string[];
    switch (mt) {
      case ResponseType.NoError:
      case ResponseType.Delegation:
        cacheType = 'success';
        except = this.o.pexcept;
        break;
      case ResponseType.NameError:
      case ResponseType.NoData:
      case ResponseType.ServerError:
        cacheType = 'denial';
        except = this.o.nexcept;
        break;
      default:
        return undefined;
    }
    if (except.length > 0 && zonesMatches(except, lowerName) !== '') return undefined;
    const stored = prepared ?? (res === undefined ? undefined : encodedReply(res, duration));
    if (stored === undefined) return undefined;
    const item = new Item(stored.wire, stored.ttls, stored.qEnd, duration, this.now(), cacheType === 'denial', mt === ResponseType.ServerError);
    const c = cacheType === 'success' ? this.pcache : this.ncache;
    const b = this.metrics(server);
    // A full cache evicts on every insert: the counter is bound once per server, not looked up per miss.
    if (c.add(key, item)) (cacheType === 'success' ? b.evictionsSuccess : b.evictionsDenial).inc();
    // A positive reply is the newest state of the key; with prefer_positive only one that answers the question.
    const positive = res === undefined || (res.rcode === Rcode.NOERROR && res.answer.length > 0 && answersQuestion(res));
    if (cacheType === 'success' && (this.o.preferPositive ? positive : prefetch)) {
      this.ncache.remove(key);
    }
    b.sizeSuccess.set(this.pcache.len);
    b.sizeDenial.set(this.ncache.len);
    return item;
  }
}

/** A reply's bytes without OPT, every TTL = the cache duration, and where the TTLs are: what an Item keeps. */
interface Prepared {
  wire: Buffer;
  ttls: number[];
  qEnd: number;
}

/**
 * The reply as it came, without its OPT (when the OPT is last, as every server writes it) and with every TTL =
 * `duration`: one scan and one copy, for the cache and the client both. Undefined when the bytes cannot be walked
 * or the OPT sits elsewhere (the message is encoded then).
 */
function preparedReply(wire: Uint8Array, duration: number): Prepared | undefined {
  const s = scanRecords(wire);
  if (s === undefined || (s.optStart >= 0 && s.optEnd !== wire.length)) return undefined;
  const b = s.optStart < 0 ? Buffer.from(wire) : removeOpt(wire, s.optStart, s.optEnd);
  for (const off of s.ttls) writeTtl(b, off, duration);
  return { wire: b, ttls: s.ttls, qEnd: s.qEnd };
}

/** The message encoded without OPT, every TTL = duration (a reply written as a message, or oddly framed bytes). */
function encodedReply(res: Message, duration: number): Prepared | undefined {
  let b: Buffer;
  try {
    b = encodeMessage({ ...res, edns: undefined });
  } catch {
    return undefined;
  }
  const s = scanRecords(b);
  if (s === undefined) return undefined;
  for (const off of s.ttls) writeTtl(b, off, duration);
  return { wire: b, ttls: s.ttls, qEnd: s.qEnd };
}

/** Watches what the rest of the chain writes: caches it and passes it on with the TTLs rewritten. */
export class CacheWriter implements ResponseWriter {
  private readonly c: Cache;
  private readonly req: Request;
  private readonly key: string;
  private readonly doBit: boolean;
  private readonly ad: boolean;
  /** undefined: a background refresh, nothing goes to a client. */
  private readonly inner: ResponseWriter | undefined;
  /**
   * serve_stale verify: only complete NOERROR/NXDOMAIN replies for the question are taken; with
   * prefer_positive only a positive answer, other complete replies being cached without being sent.
   */
  verify = false;
  /** verify timed out: the reply only fills the cache. */
  late = false;
  /** verify with VERIFY_TIMEOUT: the reply for the client is kept in `held`, verify() writes it. */
  hold = false;
  held: Buffer | Message | undefined;
  /** verify: the last reply was taken as a refresh (stored or not, in time or not). */
  refreshed = false;
  stored: Item | undefined;
  /** Something was written through this writer (CoreDNS lastResponse != nil). */
  written = false;
  /** storeOnly: cache the reply, send nothing (CoreDNS's prefetch flag on a client's writer). */
  private noSend = false;

  constructor(c: Cache, req: Request, key: string, doBit: boolean, ad: boolean, inner: ResponseWriter | undefined) {
    this.c = c;
    this.req = req;
    this.key = key;
    this.doBit = doBit;
    this.ad = ad;
    this.inner = inner;
  }

  /** Cache `reply` as if the chain had written it, without sending it anywhere. */
  storeOnly(reply: Message): void {
    this.noSend = true;
    try {
      this.process(reply, undefined);
    } finally {
      this.noSend = false;
    }
  }

  writeWire(reply: Uint8Array): void {
    this.written = true;
    // Most forwarded answers need no decoding (verify's checks are left to process()).
    if (!this.verify && this.processPlain(reply)) return;
    let m: Message;
    try {
      m = decodeMessage(reply);
    } catch {
      if (this.inner !== undefined && !this.verify) this.inner.writeWire(reply);
      return;
    }
    this.process(m, reply);
  }

  writeMsg(reply: Message): void {
    this.written = true;
    this.process(reply, undefined);
  }

  private process(res: Message, wire: Uint8Array | undefined): void {
    const c = this.c;
    const o = c.o;
    const now = c.now();
    let mt = typify(res, Math.floor(now / 1000));
    let send = true;
    if (this.verify) {
      // Not a usable refresh (CoreDNS verifyStaleResponseWriter): dropped unseen, the stale entry is served.
      this.refreshed = false;
      if (res.tc || !this.matches(res)) return;
      if (o.preferPositive) {
        // Only a positive answer to the question refreshes; anything else is cached but not sent.
        if (mt === ResponseType.NoError && res.answer.length > 0 && answersQuestion(res)) this.refreshed = true;
        else send = false;
      } else {
        if (mt === ResponseType.OtherError || mt === ResponseType.Meta || mt === ResponseType.Update) return;
        if (res.rcode !== 0 && res.rcode !== 3) return;
        this.refreshed = true;
      }
    }
    const noQuestion = res.question.length === 0;
    if (noQuestion && !res.tc) {
      // A reply without a question cannot be keyed (CoreDNS 1.15.0 warns instead of crashing).
      c.log?.warning(`Not caching malformed response with an empty question section for ${JSON.stringify(this.req.name)}`);
    }
    let cacheable = !res.tc && !noQuestion && mt !== ResponseType.OtherError && mt !== ResponseType.Meta && mt !== ResponseType.Update;
    if (cacheable && mt === ResponseType.NameError && !hasSoa(res.authority)) cacheable = false;
    if (cacheable && mt === ResponseType.NoError && res.answer.length > 0 && !answersQuestion(res)) {
      if (hasSoa(res.authority)) mt = ResponseType.NoData;
      else cacheable = false;
    }
    const msgTtl = minimalTtl(res, mt);
    let duration: number;
    if (mt === ResponseType.NameError || mt === ResponseType.NoData) duration = clamp(msgTtl, o.minnttl, o.nttl);
    else if (mt === ResponseType.ServerError) duration = o.failttl;
    else duration = clamp(msgTtl, o.minpttl, o.pttl);

    const prepared = wire === undefined ? undefined : preparedReply(wire, duration);
    let storedNow: Item | undefined;
    if (cacheable && duration > 0) {
      if (this.matches(res)) {
        storedNow = this.store(res, prepared, mt, duration);
      } else {
        c.m.cacheDrops.child(this.req.server, c.zonesLabel, c.view).inc();
      }
    }
    if (!send) return;
    this.send(prepared, storedNow, res, duration);
  }

  /**
   * A plain positive answer (scanPlainAnswer) to this request's question, taken as process() takes it, without
   * decoding: NOERROR with answers of the question's type (so typify's NoError, answersQuestion true, no RRSIG to
   * check), cached for its smallest TTL clamped to the positive bounds. False when the reply is of another shape
   * or for another question (process decides then).
   */
  private processPlain(wire: Uint8Array): boolean {
    const a = scanPlainAnswer(wire);
    if (a === undefined) return false;
    const req = this.req;
    const qt = a.qtype;
    if (qt !== req.qtype || a.qclass !== req.qclass || !questionNameIs(wire, req.name)) return false;
    // The answers hold the question's type (only A and AAAA records are plain), or the type is ANY or CNAME.
    if (qt !== RRType.ANY && qt !== RRType.CNAME && (a.types & (qt === RRType.A ? 1 : qt === RRType.AAAA ? 2 : 0)) === 0) return false;
    const c = this.c;
    const o = c.o;
    const duration = clamp(Math.min(a.minTtl, MAX_DEFAULT_TTL), o.minpttl, o.pttl);
    const prepared: Prepared = {
      wire: a.optStart < 0 ? Buffer.from(wire) : removeOpt(wire, a.optStart, a.optEnd), ttls: a.ttls, qEnd: a.qEnd,
    };
    for (const off of a.ttls) writeTtl(prepared.wire, off, duration);
    let storedNow: Item | undefined;
    if (duration > 0) storedNow = this.store(undefined, prepared, ResponseType.NoError, duration);
    this.send(prepared, storedNow, undefined, duration);
    return true;
  }

  /**
   * The reply (matching the request) into the cache, with the Extended DNS Errors of the request that filled it.
   * The Item copies the bytes: `prepared` can still go to the client.
   */
  private store(res: Message | undefined, prepared: Prepared | undefined, mt: number, duration: number): Item | undefined {
    const prefetch = this.inner === undefined || this.hold || this.noSend;
    const item = this.c.set(res, prepared, this.req.name, this.key, mt, duration, this.req.server, prefetch);
    if (item !== undefined) item.extendedErrors = this.req.extendedErrors?.slice();
    this.stored = item;
    return item;
  }

  /** The reply to the client (or to the verify writer's holder): without the upstream's OPT, TTLs = duration. */
  private send(prepared: Prepared | undefined, storedNow: Item | undefined, res: Message | undefined, duration: number): void {
    const inner = this.inner;
    if (inner === undefined || this.late || this.noSend) return;
    // The reply goes out without the upstream's OPT: the server gives it the client's (CoreDNS does the same).
    const clearAd = !this.doBit && !this.ad;
    if (prepared !== undefined) {
      const out = prepared.wire;
      if (clearAd) out[3] = out[3]! & ~0x20;
      if (this.hold) this.held = out;
      else inner.writeWire(out);
      return;
    }
    if (storedNow !== undefined) {
      // What was just stored is this reply as it goes out (no OPT, every TTL = duration): its bytes are
      // sent, instead of encoding the message a second time (a forwarded miss would otherwise be encoded
      // once for the cache and once for the client).
      const out = storedNow.copyWire();
      if (clearAd) out[3] = out[3]! & ~0x20;
      if (this.hold) this.held = out;
      else inner.writeWire(out);
      return;
    }
    if (res === undefined) return; // a plain answer always has `prepared`
    for (const sec of [res.answer, res.authority, res.additional]) for (const rr of sec) rr.ttl = duration;
    if (clearAd) res.ad = false;
    res.edns = undefined;
    if (this.hold) this.held = res;
    else inner.writeMsg(res);
  }

  /** request.Match: one question, same name (case-insensitive), type and class; a response. */
  private matches(res: Message): boolean {
    if (res.question.length !== 1 || !res.qr) return false;
    const q = res.question[0]!;
    return q.type === this.req.qtype && q.class === this.req.qclass && asciiLower(q.name) === this.req.name;
  }
}
