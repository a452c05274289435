// CoreDNS plugin/cache metrics (names, help and label order as CoreDNS), in the server's registry.

// The counters touched per query, and the entries gauge set at each insert, are plain-number vectors
// (pkg/vec.ts): a hit costs an addition, not a prom-client label lookup.
import { metricSet } from '../pkg/metrics.ts';
import { counterVec, gaugeVec } from '../pkg/vec.ts';

export const cacheMetrics = metricSet((r) => ({
  cacheSize: gaugeVec(r, 'coredns_cache_entries', 'The number of elements in the cache.', ['server', 'type', 'zones', 'view']),
  cacheRequests: counterVec(r, 'coredns_cache_requests_total', 'The count of cache requests.', ['server', 'zones', 'view']),
  cacheHits: counterVec(r, 'coredns_cache_hits_total', 'The count of cache hits.', ['server', 'type', 'zones', 'view']),
  cacheMisses: counterVec(r, 'coredns_cache_misses_total',
    'The count of cache misses. Deprecated, derive misses from cache hits/requests counters.', ['server', 'zones', 'view']),
  cachePrefetches: counterVec(r, 'coredns_cache_prefetch_total',
    'The number of times the cache has prefetched a cached item.', ['server', 'zones', 'view']),
  cacheDrops: counterVec(r, 'coredns_cache_drops_total',
    'The number responses that are not cached, because the reply is malformed.', ['server', 'zones', 'view']),
  servedStale: counterVec(r, 'coredns_cache_served_stale_total',
    'The number of requests served from stale cache entries.', ['server', 'zones', 'view']),
  evictions: counterVec(r, 'coredns_cache_evictions_total', 'The count of cache evictions.', ['server', 'type', 'zones', 'view']),
}));
export type CacheMetrics = ReturnType<typeof cacheMetrics>;
