// `-workers N`, what every server needs to know (serve.ts imports this module): which thread prints what, and how
// a worker thread hears of signals and says it serves. The main thread serves as worker 1 and supervises the others
// (supervisor.ts, loaded only with -workers N); src/plugin/pkg/workers.ts says why threads and not processes.

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
