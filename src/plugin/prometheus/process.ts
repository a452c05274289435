// The process_* metrics of Go's Prometheus process collector (what CoreDNS's
// /metrics shows), read from /proc at scrape time, with Go's names and help
// texts. Under -workers every worker thread reads the same process, so the
// aggregator keeps one value of each (the largest: the latest reading of a
// counter), never a sum.
//
// Where CoreDNS has the Go runtime's go_* metrics, nodens has prom-client's
// standard nodejs_* ones (event-loop lag, heap, GC, handles): see
// enableNodeRuntimeMetrics and the table in README.md.

import { readFileSync, readdirSync } from 'node:fs';
import type client from 'prom-client';
// prom-client's modules one by one, not its index (src/types/prom-client-lib.d.ts says why).
import Registry from 'prom-client/lib/registry.js';
import Counter from 'prom-client/lib/counter.js';
import Gauge from 'prom-client/lib/gauge.js';
import collectDefaultMetrics from 'prom-client/lib/defaultMetrics.js';
import { metricSet, registry } from '../pkg/metrics.ts';

let nodeRuntimeMetrics: Array<{ name: string; metric: client.Metric }> | undefined;

/**
 * prom-client's default nodejs_* metrics, made once, when the first prometheus
 * block is set up (not at import: an application that embeds nodens without
 * metrics gets no event-loop monitor and no GC observer), then registered in
 * each server's registry `into` (the same objects: they describe the one
 * process). Its process_* metrics are left out: the Go-compatible ones below
 * stand for them. Values are
 * read at scrape time, except the event-loop delay histogram (perf_hooks,
 * sampled by libuv every 10 ms) and the GC durations (a PerformanceObserver).
 */
export function enableNodeRuntimeMetrics(into: client.Registry = registry): void {
  if (nodeRuntimeMetrics === undefined) {
    const scratch = new Registry();
    collectDefaultMetrics({ register: scratch });
    nodeRuntimeMetrics = scratch.getMetricsAsArray().map((m) => m.name).filter((n) => n.startsWith('nodejs_'))
      .map((name) => ({ name, metric: scratch.getSingleMetric(name)! }));
  }
  for (const { name, metric } of nodeRuntimeMetrics) {
    if (into.getSingleMetric(name) === undefined) into.registerMetric(metric);
  }
}

const PAGE_SIZE = 4096;
const CLOCK_TICKS = 100;

function readProc(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** /proc/self/stat fields after the command name (field 3 is index 0). */
function statFields(): string[] | undefined {
  const s = readProc('/proc/self/stat');
  if (s === undefined) return undefined;
  return s.slice(s.lastIndexOf(')') + 2).split(' ');
}

function bootTime(): number | undefined {
  const s = readProc('/proc/stat');
  const m = s === undefined ? null : /^btime (\d+)$/m.exec(s);
  return m === null ? undefined : Number(m[1]);
}

function limit(name: string): number | undefined {
  const s = readProc('/proc/self/limits');
  if (s === undefined) return undefined;
  for (const line of s.split('\n')) {
    if (!line.startsWith(name)) continue;
    const soft = line.slice(name.length).trim().split(/\s+/)[0];
    if (soft === 'unlimited') return 18446744073709551615;
    return soft === undefined ? undefined : Number(soft);
  }
  return undefined;
}

function netTotals(): { rx: number; tx: number } | undefined {
  const s = readProc('/proc/self/net/dev');
  if (s === undefined) return undefined;
  let rx = 0;
  let tx = 0;
  for (const line of s.split('\n').slice(2)) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const f = line.slice(colon + 1).trim().split(/\s+/);
    rx += Number(f[0] ?? 0);
    tx += Number(f[8] ?? 0);
  }
  return { rx, tx };
}

function setGauge(g: client.Gauge, v: number | undefined): void {
  if (v !== undefined && Number.isFinite(v)) g.set(v);
}

function setCounter(c: client.Counter, v: number | undefined): void {
  if (v === undefined || !Number.isFinite(v)) return;
  c.reset();
  c.inc(v);
}

const startTime = (() => {
  const f = statFields();
  const bt = bootTime();
  if (f === undefined || bt === undefined) return Math.round((Date.now() - process.uptime() * 1000) / 10) / 100;
  return bt + Number(f[19]) / CLOCK_TICKS;
})();

/** Go's process collector's metrics, in a server's registry (read at scrape time). */
export const processMetrics = metricSet((r) => {
  new Counter({
    name: 'process_cpu_seconds_total', help: 'Total user and system CPU time spent in seconds.', registers: [r], aggregator: 'max',
    collect() {
      const f = statFields();
      if (f !== undefined) setCounter(this, (Number(f[11]) + Number(f[12])) / CLOCK_TICKS);
    },
  });

  new Gauge({
    name: 'process_max_fds', help: 'Maximum number of open file descriptors.', registers: [r], aggregator: 'max',
    collect() { setGauge(this, limit('Max open files')); },
  });

  new Counter({
    name: 'process_network_receive_bytes_total', help: 'Number of bytes received by the process over the network.',
    registers: [r], aggregator: 'max',
    collect() { setCounter(this, netTotals()?.rx); },
  });

  new Counter({
    name: 'process_network_transmit_bytes_total', help: 'Number of bytes sent by the process over the network.',
    registers: [r], aggregator: 'max',
    collect() { setCounter(this, netTotals()?.tx); },
  });

  new Gauge({
    name: 'process_open_fds', help: 'Number of open file descriptors.', registers: [r], aggregator: 'max',
    collect() {
      try {
        setGauge(this, readdirSync('/proc/self/fd').length);
      } catch { /* not on Linux */ }
    },
  });

  new Gauge({
    name: 'process_resident_memory_bytes', help: 'Resident memory size in bytes.', registers: [r], aggregator: 'max',
    collect() {
      const f = statFields();
      setGauge(this, f !== undefined ? Number(f[21]) * PAGE_SIZE : process.memoryUsage.rss());
    },
  });

  new Gauge({
    name: 'process_start_time_seconds', help: 'Start time of the process since unix epoch in seconds.',
    registers: [r], aggregator: 'min',
    collect() { setGauge(this, startTime); },
  });

  new Gauge({
    name: 'process_virtual_memory_bytes', help: 'Virtual memory size in bytes.', registers: [r], aggregator: 'max',
    collect() {
      const f = statFields();
      if (f !== undefined) setGauge(this, Number(f[20]));
    },
  });

  new Gauge({
    name: 'process_virtual_memory_max_bytes', help: 'Maximum amount of virtual memory available in bytes.',
    registers: [r], aggregator: 'max',
    collect() { setGauge(this, limit('Max address space')); },
  });
  return true;
});
