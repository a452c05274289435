// The autopath plugin's metric (CoreDNS plugin/autopath/metrics.go), in the shared registry:
//   coredns_autopath_success_total{server}   (counter) queries answered from a search-path expansion

import { CounterVec } from '../pkg/vec.ts';

export const autoPathCount = new CounterVec('coredns_autopath_success_total', 'Counter of requests that did autopath.', ['server']);
