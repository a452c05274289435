// The local plugin's metric (CoreDNS plugin/local/metrics.go), on the shared registry:
//   coredns_local_localhost_requests_total   (counter) queries for names below localhost. (and, unless
//                                             `localhost_prefix off`, names starting with localhost.)

import { counter } from '../pkg/metrics.ts';

export const localhostCount = counter('coredns_local_localhost_requests_total', 'Counter of special localhost subdomain requests.');
