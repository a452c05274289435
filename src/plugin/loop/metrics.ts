// The loop guard's metrics (nodens's own); in a module of their own so that the prometheus plugin
// can define them without loading the plugin.

import { counter, gauge, metricSet } from '../pkg/metrics.ts';
import type { Quarantine } from './guard.ts';

/** nodens's loop metrics, per server registry, with that server's set of quarantines (for the gauge). */
export const loopMetrics = metricSet((r) => ({
  detections: counter(r, 'nodens_loop_detections_total', 'Forwarding loops detected by the loop plugin.', ['zone', 'upstream'] as const),
  quarantinedGauge: gauge(r, 'nodens_loop_quarantined_upstreams', 'Upstreams currently out of rotation because they loop.'),
  allQuarantines: new Set<Quarantine>(),
}));
export type LoopMetrics = ReturnType<typeof loopMetrics>;
