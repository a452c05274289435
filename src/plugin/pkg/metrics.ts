// One process-wide Prometheus registry for every plugin, with CoreDNS's metric
// names. Definitions are idempotent: a reload sets plugins up again and gets
// the same metric objects back, so counters keep counting across reloads.

import cluster from 'node:cluster';
import client from 'prom-client';

export const registry = new client.Registry();

/** CoreDNS's duration buckets: 0.25 ms doubling up to 8.192 s (prometheus.ExponentialBuckets(0.00025, 2, 16)). */
export const TIME_BUCKETS: number[] = Array.from({ length: 16 }, (_, i) => 0.00025 * 2 ** i);
/** CoreDNS's request/response size buckets. */
export const SIZE_BUCKETS: number[] = [0, 100, 200, 300, 400, 511, 1023, 2047, 4095, 8291, 16e3, 32e3, 48e3, 64e3];

const defined = new Map<string, client.Metric<string>>();

function once<M extends client.Metric<string>>(name: string, make: () => M): M {
  const m = defined.get(name);
  if (m !== undefined) return m as M;
  const made = make();
  defined.set(name, made);
  return made;
}

export function counter<L extends string>(name: string, help: string, labelNames: readonly L[] = []): client.Counter<L> {
  return once(name, () => new client.Counter<L>({ name, help, labelNames, registers: [registry] }));
}

export function gauge<L extends string>(name: string, help: string, labelNames: readonly L[] = []): client.Gauge<L> {
  return once(name, () => new client.Gauge<L>({ name, help, labelNames, registers: [registry] }));
}

export function histogram<L extends string>(name: string, help: string, labelNames: readonly L[], buckets: number[]): client.Histogram<L> {
  return once(name, () => new client.Histogram<L>({ name, help, labelNames, buckets, registers: [registry] }));
}

// ---- several worker processes (nodens -workers N) ----
// Each worker counts in its own registry; the primary process sums them with
// prom-client's AggregatorRegistry, so whichever worker a scrape reaches, the
// answer covers the whole server.


const AGGREGATE_REQUEST = 'nodens:metrics:request';
const AGGREGATE_REPLY = 'nodens:metrics:reply';
let nextRequest = 0;
const waiting = new Map<number, (text: string) => void>();

/** The exposition text for /metrics: this process's, or the sum of all workers' under -workers. */
export function metricsText(): Promise<string> {
  if (!cluster.isWorker || process.send === undefined) return registry.metrics();
  const id = ++nextRequest;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { waiting.delete(id); registry.metrics().then(resolve, reject); }, 2000);
    waiting.set(id, (text) => { clearTimeout(timer); resolve(text); });
    process.send!({ type: AGGREGATE_REQUEST, id });
  });
}

/** The content type of metricsText(). */
export function metricsContentType(): string { return registry.contentType; }

if (cluster.isWorker) {
  // prom-client's aggregator asks each worker for these registries.
  client.AggregatorRegistry.setRegistries([registry]);
  process.on('message', (m: { type?: string; id?: number; text?: string }) => {
    if (m?.type !== AGGREGATE_REPLY || m.id === undefined) return;
    const done = waiting.get(m.id);
    waiting.delete(m.id);
    done?.(m.text ?? '');
  });
}

/** In the primary: answer workers' aggregate requests. Returns a function that stops doing so. */
export function serveAggregatedMetrics(): () => void {
  const aggregator = new client.AggregatorRegistry();
  const onMessage = (worker: import('node:cluster').Worker, m: { type?: string; id?: number }): void => {
    if (m?.type !== AGGREGATE_REQUEST) return;
    aggregator.clusterMetrics().then(
      (text) => { worker.send({ type: AGGREGATE_REPLY, id: m.id, text }); },
      () => { worker.send({ type: AGGREGATE_REPLY, id: m.id, text: '' }); },
    );
  };
  cluster.on('message', onMessage);
  return () => { cluster.off('message', onMessage); };
}
