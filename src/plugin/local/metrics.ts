// The local plugin's metric (CoreDNS plugin/local/metrics.go), in the server's registry:
//   coredns_local_localhost_requests_total   (counter) queries for names below localhost. (and, unless
//                                             `localhost_prefix off`, names starting with localhost.)

import { counter, metricSet } from '../pkg/metrics.ts';

export const localMetrics = metricSet((r) => counter(r, 'coredns_local_localhost_requests_total', 'Counter of special localhost subdomain requests.'));
