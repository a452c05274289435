// The reload plugin's metrics, CoreDNS's names; in a module of their own so that the prometheus
// plugin can define them (as CoreDNS always lists them) without loading the plugin.

import { counter, gauge, metricSet } from '../pkg/metrics.ts';

export const reloadMetrics = metricSet((r) => ({
  failedCount: counter(r, 'coredns_reload_failed_total', 'Counter of the number of failed reload attempts.'),
  reloadInfo: gauge(r, 'coredns_reload_version_info',
    "A metric with a constant '1' value labeled by hash, and value which type of hash generated.", ['hash', 'value']),
}));
export type ReloadMetrics = ReturnType<typeof reloadMetrics>;
