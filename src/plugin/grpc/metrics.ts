// CoreDNS plugin/grpc metrics (metrics.go): same names, help texts, labels and buckets, in the server's
// registry. Vectors of ../pkg/vec.ts: each upstream keeps its children, no label hashing per query.

import { metricSet, TIME_BUCKETS } from '../pkg/metrics.ts';
import { counterVec, histogramVec } from '../pkg/vec.ts';

export const grpcMetrics = metricSet((r) => ({
  requestCount: counterVec(r, 'coredns_grpc_requests_total', 'Counter of requests made per upstream.', ['to']),
  rcodeCount: counterVec(r, 'coredns_grpc_responses_total', 'Counter of requests made per upstream.', ['rcode', 'to']),
  requestDuration: histogramVec(r, 'coredns_grpc_request_duration_seconds', 'Histogram of the time each request took.', ['to'], TIME_BUCKETS),
}));
export type GrpcMetrics = ReturnType<typeof grpcMetrics>;
