// cache's Corefile syntax (CoreDNS plugin/cache/setup.go), messages kept.

import { cacheMetrics } from './metrics.ts';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { originsFromArgsOrServerBlock, normalizeName } from '../../corefile/address.ts';
import { isDomainName } from '../../wire/name.ts';
import { parseDuration, DurationError } from '../pkg/duration.ts';
import { Cache, defaultCacheOptions, type CacheOptions } from './cache.ts';
import { isZoneBypasser } from '../pkg/bypass.ts';

/** The cache's options (cache.ts): what parse returns. */
export type { CacheOptions };

/** Go strconv.Atoi, with Go's error text. */
function atoi(s: string): number {
  if (!/^[+-]?[0-9]+$/.test(s)) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: invalid syntax`);
  const n = Number(s);
  if (!Number.isSafeInteger(n)) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: value out of range`);
  return n;
}

function isAtoi(s: string): boolean {
  return /^[+-]?[0-9]+$/.test(s);
}

function durNs(s: string): bigint {
  try {
    return parseDuration(s);
  } catch (e) {
    throw new Error(e instanceof DurationError ? e.message : String(e));
  }
}

const S = 1000000000n;

/**
 * Reads the block's `cache [TTL] [ZONES...] { ... }` directive (once per block)
 * into the cache's options: defaultCacheOptions() with what the Corefile sets.
 */
export function parse(c: SetupContext): CacheOptions {
  const d = c.dispenser;
  const o = defaultCacheOptions();
  let j = 0;
  while (d.next()) {
    if (j > 0) throw new Error('plugin/cache: this plugin can only be used once per Server Block');
    j++;
    let args = d.remainingArgs();
    if (args.length > 0 && isAtoi(args[0]!)) {
      const ttl = atoi(args[0]!);
      if (ttl <= 0) throw new Error(`cache TTL can not be zero or negative: ${ttl}`);
      o.pttl = ttl;
      o.nttl = ttl;
      args = args.slice(1);
    }
    const origins = originsFromArgsOrServerBlock(args, c.config.keys);
    while (d.nextBlock()) {
      const prop = d.val();
      switch (prop) {
        case 'success':
        case 'denial': {
          const a = d.remainingArgs();
          if (a.length === 0) throw d.argErr();
          const cap = atoi(a[0]!);
          let ttl: number | undefined;
          let min: number | undefined;
          if (a.length > 1) {
            ttl = atoi(a[1]!);
            if (ttl <= 0) throw new Error(`cache TTL can not be zero or negative: ${ttl}`);
            if (a.length > 2) {
              min = atoi(a[2]!);
              if (min < 0) throw new Error(`cache min TTL can not be negative: ${min}`);
            }
          }
          if (prop === 'success') {
            o.pcap = cap;
            if (ttl !== undefined) o.pttl = ttl;
            if (min !== undefined) o.minpttl = min;
          } else {
            o.ncap = cap;
            if (ttl !== undefined) o.nttl = ttl;
            if (min !== undefined) o.minnttl = min;
          }
          break;
        }
        case 'prefetch': {
          const a = d.remainingArgs();
          if (a.length === 0 || a.length > 3) throw d.argErr();
          const amount = atoi(a[0]!);
          if (amount < 0) throw new Error(`prefetch amount should be positive: ${amount}`);
          o.prefetch = amount;
          if (a.length > 1) o.prefetchDurationMs = Number(durNs(a[1]!) / 1000000n);
          if (a.length > 2) {
            let pct = a[2]!;
            const x = pct[pct.length - 1]!;
            if (x !== '%') throw new Error(`last character of percentage should be \`%\`, but is: '${x}'`);
            pct = pct.slice(0, -1);
            const num = atoi(pct);
            if (num < 10 || num > 90) throw new Error(`percentage should fall in range [10, 90]: ${num}`);
            o.percentage = num;
          }
          break;
        }
        case 'serve_stale': {
          const a = d.remainingArgs();
          if (a.length > 5) throw d.argErr();
          o.staleUpTo = 3600;
          o.verifyStale = false;
          if (a.length > 0) {
            const v = durNs(a[0]!);
            if (v < 0n) throw new Error('invalid negative duration for serve_stale');
            o.staleUpTo = Number(v / S);
          }
          if (a.length > 1) {
            const mode = a[1]!.toLowerCase();
            if (mode !== 'immediate' && mode !== 'verify') throw new Error(`invalid value for serve_stale refresh mode: ${mode}`);
            o.verifyStale = mode === 'verify';
            let rest = a.slice(2);
            if (o.verifyStale && rest.length > 0) {
              const v = durNs(rest[0]!);
              if (v < 0n) throw new Error('invalid negative verify timeout for serve_stale');
              o.verifyTimeoutMs = Number(v / 1000000n);
              rest = rest.slice(1);
            }
            if (rest.length > 2) throw d.argErr();
            if (rest.length > 0) {
              const v = durNs(rest[0]!);
              if (v < 0n) throw new Error('invalid negative response TTL for serve_stale');
              if (v % S !== 0n) throw new Error(`serve_stale response TTL must be whole seconds: ${rest[0]}`);
              o.staleResponseTtl = Number(v / S);
            }
            if (rest.length > 1) {
              const v = durNs(rest[1]!);
              if (v < 0n) throw new Error('invalid negative failure recheck for serve_stale');
              if (v > 300n * S) throw new Error('serve_stale failure recheck over 5 minutes is not permitted');
              o.failureRecheckMs = Number(v / 1000000n);
            }
          } else if (a.length > 2) {
            throw d.argErr();
          }
          break;
        }
        case 'serve_stale_policy': {
          const a = d.remainingArgs();
          if (a.length !== 1) throw d.argErr();
          if (a[0] !== 'prefer_positive') throw new Error(`invalid value for serve_stale_policy: ${a[0]}`);
          o.preferPositive = true;
          break;
        }
        case 'servfail': {
          const a = d.remainingArgs();
          if (a.length !== 1) throw d.argErr();
          const v = durNs(a[0]!);
          if (v < 0n) throw new Error('invalid negative ttl for servfail');
          if (v > 300n * S) throw new Error('caching SERVFAIL responses over 5 minutes is not permitted');
          o.failttl = Number(v / S);
          break;
        }
        case 'disable': {
          const a = d.remainingArgs();
          if (a.length < 1) throw d.argErr();
          let zones: string[] = ['.'];
          if (a.length > 1) {
            zones = [];
            for (const z of a.slice(1)) {
              if (z === '' || !isDomainName(z)) throw new Error(`invalid disabled zone: ${z}`);
              zones.push(normalizeName(z));
            }
          }
          if (a[0] === 'denial') o.nexcept = zones;
          else if (a[0] === 'success') o.pexcept = zones;
          else throw new Error('cache type for disable must be "success" or "denial"');
          break;
        }
        case 'keepttl':
          if (d.remainingArgs().length !== 0) throw d.argErr();
          o.keepttl = true;
          break;
        default:
          throw d.argErr();
      }
    }
    o.zones = origins;
  }
  if (o.preferPositive && o.staleUpTo === 0) throw new Error('serve_stale_policy requires serve_stale');
  return o;
}

export const plugin: PluginDefinition = {
  name: 'cache',
  setup(c) {
    const cache = new Cache(parse(c), cacheMetrics(c.instance.metrics));
    cache.log = c.log;
    c.addPlugin((next) => { cache.next = next; return cache; });
    // CoreDNS reads the block's view name at startup (the view plugin is set up after cache), and the zones
    // the block's handlers want bypassed (dynupdate's).
    c.onStartup(() => {
      cache.view = c.config.viewName;
      const bypass: string[] = [];
      for (const h of c.config.handlers) if (isZoneBypasser(h)) bypass.push(...h.cacheBypassZones());
      cache.bypass = bypass;
    });
  },
};
