// Counters, gauges and histograms for the per-query metrics, cheap enough for the query
// path: a child (one label combination) is a plain object with numeric fields,
// fetched once and kept by the caller; recording is an addition, no label
// hashing and no string building. The vectors register into a server's
// prom-client registry as ordinary metrics (they implement what the registry
// and the cluster aggregator read: name, get(), reset()).

import type client from 'prom-client';
import { once, type MetricsRegistry } from './metrics.ts';

type Labels = Record<string, string>;
type Value = { labels: Labels; value: number; metricName?: string };

export class CounterChild {
  value = 0;
  readonly labels: Labels;
  constructor(labels: Labels) { this.labels = labels; }
  inc(by = 1): void { this.value += by; }
}

export class GaugeChild {
  value = 0;
  /** Set at least once: a series from then on, zero included (as a prom-client gauge's label set). */
  seen = false;
  readonly labels: Labels;
  constructor(labels: Labels) { this.labels = labels; }
  set(v: number): void {
    this.value = v;
    this.seen = true;
  }
}

export class HistogramChild {
  readonly labels: Labels;
  /** Non-cumulative counts per bucket; the last slot counts values above every bound. */
  readonly counts: Float64Array;
  readonly bounds: readonly number[];
  sum = 0;
  count = 0;
  constructor(labels: Labels, bounds: readonly number[]) {
    this.labels = labels;
    this.bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(v: number): void {
    const b = this.bounds;
    let i = 0;
    // Linear scan: 14-16 bounds, most values land in the first few.
    while (i < b.length && v > b[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }
}

abstract class Vec<C extends { labels: Labels }> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly aggregator = 'sum' as const;
  protected readonly children = new Map<string, C>();

  constructor(reg: MetricsRegistry, name: string, help: string, labelNames: readonly string[]) {
    this.name = name;
    this.help = help;
    this.labelNames = labelNames;
    reg.registerMetric(this as unknown as client.Metric);
  }

  protected abstract make(labels: Labels): C;

  /** The child for these label values (in labelNames order); slow path, cache the result. */
  child(...values: string[]): C {
    const key = values.join('\u0000');
    let c = this.children.get(key);
    if (c === undefined) {
      const labels: Labels = {};
      for (let i = 0; i < this.labelNames.length; i++) labels[this.labelNames[i]!] = values[i] ?? '';
      c = this.make(labels);
      this.children.set(key, c);
    }
    return c;
  }

  /** Zero every child; the children stay valid (callers keep them cached). */
  abstract reset(): void;
}

export class CounterVec extends Vec<CounterChild> {
  readonly type = 'counter' as const;
  protected make(labels: Labels): CounterChild { return new CounterChild(labels); }
  reset(): void { for (const c of this.children.values()) c.value = 0; }

  get(): { name: string; help: string; type: 'counter'; values: Value[]; aggregator: 'sum' } {
    const values: Value[] = [];
    // A child fetched ahead of use but never counted is not a series yet (as with Go's WithLabelValues + Inc).
    for (const c of this.children.values()) if (c.value !== 0) values.push({ labels: c.labels, value: c.value });
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}

export class GaugeVec extends Vec<GaugeChild> {
  readonly type = 'gauge' as const;
  protected make(labels: Labels): GaugeChild { return new GaugeChild(labels); }
  reset(): void {
    for (const c of this.children.values()) {
      c.value = 0;
      c.seen = false;
    }
  }

  get(): { name: string; help: string; type: 'gauge'; values: Value[]; aggregator: 'sum' } {
    const values: Value[] = [];
    for (const c of this.children.values()) if (c.seen) values.push({ labels: c.labels, value: c.value });
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}

export class HistogramVec extends Vec<HistogramChild> {
  readonly type = 'histogram' as const;
  readonly bounds: readonly number[];

  constructor(reg: MetricsRegistry, name: string, help: string, labelNames: readonly string[], bounds: readonly number[]) {
    super(reg, name, help, labelNames);
    this.bounds = bounds;
  }

  protected make(labels: Labels): HistogramChild { return new HistogramChild(labels, this.bounds); }

  reset(): void {
    for (const c of this.children.values()) {
      c.counts.fill(0);
      c.sum = 0;
      c.count = 0;
    }
  }

  get(): { name: string; help: string; type: 'histogram'; values: Value[]; aggregator: 'sum' } {
    const values: Value[] = [];
    const bucket = this.name + '_bucket';
    for (const c of this.children.values()) {
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += c.counts[i]!;
        values.push({ labels: { ...c.labels, le: String(this.bounds[i]) }, value: acc, metricName: bucket });
      }
      values.push({ labels: { ...c.labels, le: '+Inf' }, value: c.count, metricName: bucket });
      values.push({ labels: c.labels, value: c.sum, metricName: this.name + '_sum' });
      values.push({ labels: c.labels, value: c.count, metricName: this.name + '_count' });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}

/** The counter vector `name` of `reg`, made once. */
export function counterVec(reg: MetricsRegistry, name: string, help: string, labelNames: readonly string[]): CounterVec {
  return once(reg, name, () => new CounterVec(reg, name, help, labelNames));
}

/** The gauge vector `name` of `reg`, made once. */
export function gaugeVec(reg: MetricsRegistry, name: string, help: string, labelNames: readonly string[]): GaugeVec {
  return once(reg, name, () => new GaugeVec(reg, name, help, labelNames));
}

/** The histogram vector `name` of `reg`, made once. */
export function histogramVec(reg: MetricsRegistry, name: string, help: string, labelNames: readonly string[], bounds: readonly number[]): HistogramVec {
  return once(reg, name, () => new HistogramVec(reg, name, help, labelNames, bounds));
}
