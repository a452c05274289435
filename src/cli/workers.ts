// `-workers N`: serve on several cores. The main thread serves as worker 1 and starts N - 1 worker threads
// (node:worker_threads), each running the whole configuration on SO_REUSEPORT sockets, so the kernel spreads
// queries over them; each has its own cache. The main thread also relays signals to the threads, starts a thread
// again if it ends, sums the workers' metrics for /metrics (pkg/metrics) and, on stop, waits for every thread before
// the process exits with the worst status. Threads, not processes: one copy of Node in memory instead of N + 1
// (src/plugin/pkg/workers.ts).

// This module is what every server needs to know about -workers (serve.ts imports it); the supervision itself,
// loaded only with -workers N, is in supervisor.ts.

import { WorkerMessage, inWorkerThread, onSupervisorMessage, toSupervisor, workerId } from '../plugin/pkg/workers.ts';

/** Tell the main thread this worker thread serves (called after its start-up completed). */
export function reportWorkerReady(): void {
  toSupervisor({ type: WorkerMessage.ready });
}

/** Whether this thread prints the banner's zone lines (the main thread does, for all workers). */
export function printsZoneLines(): boolean {
  return !inWorkerThread();
}

/** Whether serve() prints the version lines (alone it does; under -workers the supervisor does, once all serve). */
export function printsVersionLines(): boolean {
  return workerId() === 0;
}

/**
 * In a worker thread: the signals the main thread relays are emitted on this thread's `process`, where the server's
 * handlers (serve.ts) wait for them as they would for the process's own.
 */
export function takeRelayedSignals(): void {
  onSupervisorMessage((m) => {
    if (m.type === WorkerMessage.signal && m.signal !== undefined) process.emit(m.signal, m.signal);
  });
}
