// Prometheus registries with CoreDNS's metric names. Each server owns one
// (an embedder may supply it; the nodens command uses the process's `registry`,
// which -workers aggregates), so two servers in one process count apart.
// A plugin's metrics are a metricSet: defined once per registry, so a reload
// sets plugins up again and gets the same metric objects back, and counters
// keep counting across reloads.

import type client from 'prom-client';
// prom-client's modules one by one, not its index (src/types/prom-client-lib.d.ts says why).
import Registry from 'prom-client/lib/registry.js';
import Counter from 'prom-client/lib/counter.js';
import Gauge from 'prom-client/lib/gauge.js';
import Histogram from 'prom-client/lib/histogram.js';
import { processMetricsRegistry, type MetricsRegistry } from '../plugin.ts';
import { WorkerMessage, inWorkerThread, onSupervisorMessage, toSupervisor, workerId, type WorkerMessageData } from './workers.ts';

export type { MetricsRegistry };

/** The process's registry: the nodens command's server, and code that runs outside any server. */
export const registry: MetricsRegistry = processMetricsRegistry;

/** A fresh registry (what each embedded server gets unless its embedder supplies one). */
export function newRegistry(): MetricsRegistry { return new Registry(); }

/** CoreDNS's duration buckets: 0.25 ms doubling up to 8.192 s (prometheus.ExponentialBuckets(0.00025, 2, 16)). */
export const TIME_BUCKETS: number[] = Array.from({ length: 16 }, (_, i) => 0.00025 * 2 ** i);
/** CoreDNS's request/response size buckets. */
export const SIZE_BUCKETS: number[] = [0, 100, 200, 300, 400, 511, 1023, 2047, 4095, 8291, 16e3, 32e3, 48e3, 64e3];

const defined = new WeakMap<MetricsRegistry, Map<string, unknown>>();

/** The metric `name` of `reg`, made once (plugins of several blocks share a family, as in CoreDNS). */
export function once<M>(reg: MetricsRegistry, name: string, make: () => M): M {
  let byName = defined.get(reg);
  if (byName === undefined) {
    byName = new Map();
    defined.set(reg, byName);
  }
  const m = byName.get(name);
  if (m !== undefined) return m as M;
  const made = make();
  byName.set(name, made);
  return made;
}

export function counter<L extends string>(reg: MetricsRegistry, name: string, help: string, labelNames: readonly L[] = []): client.Counter<L> {
  return once(reg, name, () => new Counter<L>({ name, help, labelNames, registers: [reg] }));
}

export function gauge<L extends string>(reg: MetricsRegistry, name: string, help: string, labelNames: readonly L[] = []): client.Gauge<L> {
  return once(reg, name, () => new Gauge<L>({ name, help, labelNames, registers: [reg] }));
}

export function histogram<L extends string>(reg: MetricsRegistry, name: string, help: string, labelNames: readonly L[], buckets: number[]): client.Histogram<L> {
  return once(reg, name, () => new Histogram<L>({ name, help, labelNames, buckets, registers: [reg] }));
}

/**
 * A plugin's metrics, defined once per registry: `const m = cacheMetrics(c.instance.metrics)` at
 * setup, then `m.hits...` on the query path (no lookup per query). Without a registry: the process's.
 */
export function metricSet<T>(define: (reg: MetricsRegistry) => T): (reg?: MetricsRegistry) => T {
  const sets = new WeakMap<MetricsRegistry, T>();
  const get = (reg: MetricsRegistry = registry): T => {
    let set = sets.get(reg);
    if (set === undefined) {
      set = define(reg);
      sets.set(reg, set);
    }
    return set;
  };
  everySet.push(get);
  return get;
}

const everySet: Array<(reg: MetricsRegistry) => unknown> = [];

let loadDefinitions: (() => Promise<unknown>) | undefined;

/**
 * How to import every plugin's metric definitions: plugin modules load on first use, so the
 * list of them (src/plugin/index.ts) supplies this for defineAllMetrics.
 */
export function setMetricDefinitionsLoader(load: () => Promise<unknown>): void {
  loadDefinitions = load;
}

/**
 * Define every plugin's metrics in `reg` (the prometheus plugin does, for the registry it serves):
 * CoreDNS registers all its metrics at start, so its /metrics lists the unlabelled ones of plugins a
 * Corefile does not use too (coredns_reload_failed_total, coredns_hosts_reload_timestamp_seconds...).
 */
export async function defineAllMetrics(reg: MetricsRegistry): Promise<void> {
  if (loadDefinitions !== undefined) await loadDefinitions();
  for (const get of everySet) get(reg);
}

// ---- several workers (nodens -workers N) ----
// Each worker (the main thread and the worker threads) counts in its own registry. A scrape reaches one of them
// (all listen on the metrics port); the main thread collects every worker's registry as JSON and sums them with
// prom-client's AggregatorRegistry.aggregate, so whichever worker answers, the answer covers the whole server.

let nextRequest = 0;
const waiting = new Map<number, (text: string) => void>();
/** In the main thread under -workers: the sum of every worker's registry (set by the supervisor). */
let sumOfWorkers: (() => Promise<string>) | undefined;

/** The supervisor's way to sum the workers' metrics, for scrapes that reach the main thread. */
export function setWorkersMetrics(sum: () => Promise<string>): void {
  sumOfWorkers = sum;
}

/** The exposition text for /metrics: the server's registry; the process's is the sum of all workers' under -workers. */
export function metricsText(reg: MetricsRegistry = registry): Promise<string> {
  if (reg !== registry || workerId() === 0) return reg.metrics();
  if (!inWorkerThread()) return sumOfWorkers !== undefined ? sumOfWorkers() : reg.metrics();
  const id = ++nextRequest;
  return new Promise((resolve, reject) => {
    // No answer in time (the main thread busy): this worker's own counts rather than nothing.
    const timer = setTimeout(() => { waiting.delete(id); registry.metrics().then(resolve, reject); }, 2000);
    waiting.set(id, (text) => { clearTimeout(timer); resolve(text); });
    toSupervisor({ type: WorkerMessage.aggregateRequest, id });
  });
}

/** The content type of metricsText(). */
export function metricsContentType(): string { return registry.contentType; }

onSupervisorMessage((m: WorkerMessageData) => {
  if (m.type === WorkerMessage.collect) {
    registry.getMetricsAsJSON().then(
      (json) => { toSupervisor({ type: WorkerMessage.collected, rid: m.rid, json }); },
      () => { toSupervisor({ type: WorkerMessage.collected, rid: m.rid, json: [] }); },
    );
  } else if (m.type === WorkerMessage.aggregateReply && m.id !== undefined) {
    const done = waiting.get(m.id);
    waiting.delete(m.id);
    done?.(m.text ?? '');
  }
});

/** The sum of several workers' registries (each one `getMetricsAsJSON()`), as exposition text. */
export async function aggregateMetrics(collected: unknown[][]): Promise<string> {
  const { default: AggregatorRegistry } = await import('prom-client/lib/cluster.js');
  return AggregatorRegistry.aggregate(collected as Parameters<typeof AggregatorRegistry.aggregate>[0]).metrics();
}
