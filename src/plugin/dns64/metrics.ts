// The dns64 plugin's metric (CoreDNS plugin/dns64/metrics.go), in the shared registry the
// prometheus plugin serves.

import { CounterVec } from '../pkg/vec.ts';

export const requestsTranslated = new CounterVec('coredns_dns64_requests_translated_total',
  'Counter of DNS requests translated by dns64.', ['server']);
