// CoreDNS plugin/cache metrics (names, help and label order as CoreDNS).

// The counters touched per query are plain-number vectors (pkg/vec.ts): a hit costs an
// addition, not a prom-client label lookup.
import { gauge } from '../pkg/metrics.ts';
import { CounterVec } from '../pkg/vec.ts';

export const cacheSize = gauge('coredns_cache_entries', 'The number of elements in the cache.', ['server', 'type', 'zones', 'view']);
export const cacheRequests = new CounterVec('coredns_cache_requests_total', 'The count of cache requests.', ['server', 'zones', 'view']);
export const cacheHits = new CounterVec('coredns_cache_hits_total', 'The count of cache hits.', ['server', 'type', 'zones', 'view']);
export const cacheMisses = new CounterVec('coredns_cache_misses_total',
  'The count of cache misses. Deprecated, derive misses from cache hits/requests counters.', ['server', 'zones', 'view']);
export const cachePrefetches = new CounterVec('coredns_cache_prefetch_total',
  'The number of times the cache has prefetched a cached item.', ['server', 'zones', 'view']);
export const cacheDrops = new CounterVec('coredns_cache_drops_total',
  'The number responses that are not cached, because the reply is malformed.', ['server', 'zones', 'view']);
export const servedStale = new CounterVec('coredns_cache_served_stale_total',
  'The number of requests served from stale cache entries.', ['server', 'zones', 'view']);
export const evictions = new CounterVec('coredns_cache_evictions_total', 'The count of cache evictions.', ['server', 'type', 'zones', 'view']);
