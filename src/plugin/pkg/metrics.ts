// One process-wide Prometheus registry for every plugin, with CoreDNS's metric
// names. Definitions are idempotent: a reload sets plugins up again and gets
// the same metric objects back, so counters keep counting across reloads.

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
