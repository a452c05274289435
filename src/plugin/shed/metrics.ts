// shed's metric (CoreDNS plugin/shed/metrics.go).

import { metricSet, once } from '../pkg/metrics.ts';
import { CounterVec } from '../pkg/vec.ts';

type Value = { labels: Record<string, string>; value: number };

/**
 * A counter vector whose series exist from the moment they are fetched, at 0 (Go's WithLabelValues without
 * Inc): CoreDNS's shed makes both series of a socket when the socket starts serving.
 */
class ZeroCounterVec extends CounterVec {
  override get(): { name: string; help: string; type: 'counter'; values: Value[]; aggregator: 'sum' } {
    const values: Value[] = [];
    for (const c of this.children.values()) values.push({ labels: c.labels, value: c.value });
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}

/** `coredns_shed_dropped_total{server, reason}`: reason `query` (dropped before the chain) or `response`. */
export const shedMetrics = metricSet((r): CounterVec => once(r, 'coredns_shed_dropped_total', () => new ZeroCounterVec(r, 'coredns_shed_dropped_total',
  'Counter of queries and responses dropped, per server, by reason.', ['server', 'reason'])));
