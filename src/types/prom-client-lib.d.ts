// Types for prom-client's own modules, imported one by one instead of its index: the index loads 88
// modules (pushgateway with https and zlib, summaries, OpenTelemetry's API) that nodens never uses,
// ~70 ms of start and ~10 MB of idle RSS (docs/performance-notes.md). prom-client 15 has no exports
// map, and each of these files exports exactly the class or function its index re-exports.

declare module 'prom-client/lib/registry.js' {
  import type { Registry } from 'prom-client';
  const RegistryClass: typeof Registry;
  export = RegistryClass;
}
declare module 'prom-client/lib/counter.js' {
  import type { Counter } from 'prom-client';
  const CounterClass: typeof Counter;
  export = CounterClass;
}
declare module 'prom-client/lib/gauge.js' {
  import type { Gauge } from 'prom-client';
  const GaugeClass: typeof Gauge;
  export = GaugeClass;
}
declare module 'prom-client/lib/histogram.js' {
  import type { Histogram } from 'prom-client';
  const HistogramClass: typeof Histogram;
  export = HistogramClass;
}
declare module 'prom-client/lib/cluster.js' {
  import type { AggregatorRegistry } from 'prom-client';
  const AggregatorRegistryClass: typeof AggregatorRegistry;
  export = AggregatorRegistryClass;
}
declare module 'prom-client/lib/defaultMetrics.js' {
  import type { collectDefaultMetrics } from 'prom-client';
  const collect: typeof collectDefaultMetrics;
  export = collect;
}
