// The acl plugin's metrics (CoreDNS plugin/acl/metrics.go), in the server's registry the
// prometheus plugin serves. Children are fetched once per server and kept by the handler.

import { metricSet } from '../pkg/metrics.ts';
import { counterVec } from '../pkg/vec.ts';

export const aclMetrics = metricSet((r) => ({
  blockedRequests: counterVec(r, 'coredns_acl_blocked_requests_total',
    'Counter of DNS requests being blocked.', ['server', 'zone', 'view']),
  filteredRequests: counterVec(r, 'coredns_acl_filtered_requests_total',
    'Counter of DNS requests being filtered.', ['server', 'zone', 'view']),
  allowedRequests: counterVec(r, 'coredns_acl_allowed_requests_total',
    'Counter of DNS requests being allowed.', ['server', 'view']),
  droppedRequests: counterVec(r, 'coredns_acl_dropped_requests_total',
    'Counter of DNS requests being dropped.', ['server', 'zone', 'view']),
}));
export type AclMetrics = ReturnType<typeof aclMetrics>;
