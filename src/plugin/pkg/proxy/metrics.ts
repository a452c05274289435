// CoreDNS plugin/pkg/proxy metrics, same names, help texts and labels; plus
// one nodens addition (timeouts), documented in the forward README. In the
// server's registry. The ones recorded for every upstream query are vectors of
// ../vec.ts (children kept by the caller, no label hashing per query).

import { counter, metricSet, TIME_BUCKETS } from '../metrics.ts';
import { counterVec, histogramVec } from '../vec.ts';

export const proxyMetrics = metricSet((r) => ({
  requestDuration: histogramVec(r,
    'coredns_proxy_request_duration_seconds',
    'Histogram of the time each request took.',
    ['proxy_name', 'to', 'rcode'], TIME_BUCKETS,
  ),
  healthcheckFailureCount: counter(r,
    'coredns_proxy_healthcheck_failures_total',
    'Counter of the number of failed healthchecks.',
    ['proxy_name', 'to'],
  ),
  connCacheHitsCount: counterVec(r,
    'coredns_proxy_conn_cache_hits_total',
    'Counter of connection cache hits per upstream and protocol.',
    ['proxy_name', 'to', 'proto'],
  ),
  connCacheMissesCount: counterVec(r,
    'coredns_proxy_conn_cache_misses_total',
    'Counter of connection cache misses per upstream and protocol.',
    ['proxy_name', 'to', 'proto'],
  ),
  /** nodens: attempts that ended because the upstream did not answer within read_timeout. */
  timeoutsCount: counter(r,
    'nodens_proxy_timeouts_total',
    'Counter of upstream attempts that timed out waiting for a reply (nodens).',
    ['proxy_name', 'to', 'proto'],
  ),
}));
export type ProxyMetrics = ReturnType<typeof proxyMetrics>;
