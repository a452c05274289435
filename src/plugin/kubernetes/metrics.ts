// CoreDNS's kubernetes plugin metrics (plugin/kubernetes/metrics.go, object/metrics.go), in the server's registry.

import { counter, histogram, metricSet } from '../pkg/metrics.ts';

/** prometheus.DefBuckets */
const DEF_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** prometheus.ExponentialBuckets(0.001, 2, 20) */
const PROGRAMMING_BUCKETS: number[] = Array.from({ length: 20 }, (_, i) => 0.001 * 2 ** i);

export const kubernetesMetrics = metricSet((r) => ({
  dnsProgrammingLatency: histogram(r,
    'coredns_kubernetes_dns_programming_duration_seconds',
    'Histogram of the time (in seconds) it took to program a dns instance.',
    ['service_kind'], PROGRAMMING_BUCKETS,
  ),
  restClientLatency: histogram(r,
    'coredns_kubernetes_rest_client_request_duration_seconds',
    'Request latency in seconds. Broken down by verb and host.',
    ['verb', 'host'], DEF_BUCKETS,
  ),
  restClientRateLimiter: histogram(r,
    'coredns_kubernetes_rest_client_rate_limiter_duration_seconds',
    'Client side rate limiter latency in seconds. Broken down by verb and host.',
    ['verb', 'host'], DEF_BUCKETS,
  ),
  restClientRequests: counter(r,
    'coredns_kubernetes_rest_client_requests_total',
    'Number of HTTP requests, partitioned by status code, method, and host.',
    ['code', 'method', 'host'],
  ),
}));
export type KubernetesMetrics = ReturnType<typeof kubernetesMetrics>;
