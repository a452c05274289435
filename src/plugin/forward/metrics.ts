// CoreDNS plugin/forward metrics.

import { counter } from '../pkg/metrics.ts';

export const healthcheckBrokenCount = counter(
  'coredns_forward_healthcheck_broken_total',
  'Counter of the number of complete failures of the healthchecks.',
);

export const maxConcurrentRejectCount = counter(
  'coredns_forward_max_concurrent_rejects_total',
  'Counter of the number of queries rejected because the concurrent queries were at maximum.',
);

/** nodens: upstream queries answered by joining an identical query already in flight. */
export const coalescedCount = counter(
  'nodens_forward_coalesced_total',
  'Counter of queries that shared the upstream answer of an identical query in flight (nodens).',
);
