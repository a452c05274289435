// CoreDNS plugin/forward metrics, in the server's registry.

import { counter, metricSet } from '../pkg/metrics.ts';

export const forwardMetrics = metricSet((r) => ({
  healthcheckBrokenCount: counter(r,
    'coredns_forward_healthcheck_broken_total',
    'Counter of the number of complete failures of the healthchecks.',
  ),
  maxConcurrentRejectCount: counter(r,
    'coredns_forward_max_concurrent_rejects_total',
    'Counter of the number of queries rejected because the concurrent queries were at maximum.',
  ),
  /** nodens: upstream queries answered by joining an identical query already in flight. */
  coalescedCount: counter(r,
    'nodens_forward_coalesced_total',
    'Counter of queries that shared the upstream answer of an identical query in flight (nodens).',
  ),
}));
export type ForwardMetrics = ReturnType<typeof forwardMetrics>;
