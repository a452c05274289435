// The autopath plugin's metric (CoreDNS plugin/autopath/metrics.go), in the server's registry:
//   coredns_autopath_success_total{server}   (counter) queries answered from a search-path expansion

import { metricSet } from '../pkg/metrics.ts';
import { counterVec } from '../pkg/vec.ts';

export const autopathMetrics = metricSet((r) => counterVec(r, 'coredns_autopath_success_total', 'Counter of requests that did autopath.', ['server']));
