// The siit plugin's metric (CoreDNS plugin/siit/metrics.go), in the shared registry the
// prometheus plugin serves.

import { CounterVec } from '../pkg/vec.ts';

export const requestsTranslated = new CounterVec('coredns_siit_requests_translated_total',
  'Counter of DNS requests translated by siit.', ['server']);
