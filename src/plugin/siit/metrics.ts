// The siit plugin's metric (CoreDNS plugin/siit/metrics.go), in the server's registry the
// prometheus plugin serves.

import { metricSet } from '../pkg/metrics.ts';
import { counterVec } from '../pkg/vec.ts';

export const siitMetrics = metricSet((r) => counterVec(r, 'coredns_siit_requests_translated_total',
  'Counter of DNS requests translated by siit.', ['server']));
