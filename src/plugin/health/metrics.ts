// The health plugin's metrics, CoreDNS's names; in a module of their own so that the prometheus
// plugin can define them (as CoreDNS always lists them) without loading the plugin.

import { counter, histogram, metricSet } from '../pkg/metrics.ts';

/** CoreDNS's SlimTimeBuckets: 0.25 ms ×10 up to 2.5 s. */
const SLIM_TIME_BUCKETS = [0.00025, 0.0025, 0.025, 0.25, 2.5];

export const healthMetrics = metricSet((r) => ({
  healthDuration: histogram(r, 'coredns_health_request_duration_seconds',
    'Histogram of the time (in seconds) each request took.', [], SLIM_TIME_BUCKETS),
  healthFailures: counter(r, 'coredns_health_request_failures_total',
    'The number of times the health check failed.'),
}));
export type HealthMetrics = ReturnType<typeof healthMetrics>;
