// CoreDNS plugin/dnssec metrics (names, help and labels as CoreDNS), in the server's registry.

import { gauge, metricSet } from '../pkg/metrics.ts';
import { counterVec } from '../pkg/vec.ts';

export const dnssecMetrics = metricSet((r) => ({
  cacheSize: gauge(r, 'coredns_dnssec_cache_entries', 'The number of elements in the dnssec cache.', ['server', 'type']),
  cacheHits: counterVec(r, 'coredns_dnssec_cache_hits_total', 'The count of cache hits.', ['server']),
  cacheMisses: counterVec(r, 'coredns_dnssec_cache_misses_total', 'The count of cache misses.', ['server']),
}));
export type DnssecMetrics = ReturnType<typeof dnssecMetrics>;
