// CoreDNS plugin/dnssec metrics (names, help and labels as CoreDNS).

import { gauge } from '../pkg/metrics.ts';
import { CounterVec } from '../pkg/vec.ts';

export const cacheSize = gauge('coredns_dnssec_cache_entries', 'The number of elements in the dnssec cache.', ['server', 'type']);
export const cacheHits = new CounterVec('coredns_dnssec_cache_hits_total', 'The count of cache hits.', ['server']);
export const cacheMisses = new CounterVec('coredns_dnssec_cache_misses_total', 'The count of cache misses.', ['server']);
