// The acl plugin's metrics (CoreDNS plugin/acl/metrics.go), in the shared registry the
// prometheus plugin serves. Children are fetched once per server and kept by the handler.

import { CounterVec } from '../pkg/vec.ts';

export const blockedRequests = new CounterVec('coredns_acl_blocked_requests_total',
  'Counter of DNS requests being blocked.', ['server', 'zone', 'view']);
export const filteredRequests = new CounterVec('coredns_acl_filtered_requests_total',
  'Counter of DNS requests being filtered.', ['server', 'zone', 'view']);
export const allowedRequests = new CounterVec('coredns_acl_allowed_requests_total',
  'Counter of DNS requests being allowed.', ['server', 'view']);
export const droppedRequests = new CounterVec('coredns_acl_dropped_requests_total',
  'Counter of DNS requests being dropped.', ['server', 'zone', 'view']);
