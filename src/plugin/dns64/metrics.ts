// The dns64 plugin's metric (CoreDNS plugin/dns64/metrics.go), in the server's registry the
// prometheus plugin serves.

import { metricSet } from '../pkg/metrics.ts';
import { counterVec } from '../pkg/vec.ts';

export const dns64Metrics = metricSet((r) => counterVec(r, 'coredns_dns64_requests_translated_total',
  'Counter of DNS requests translated by dns64.', ['server']));
