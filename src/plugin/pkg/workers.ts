// `nodens -workers N`: N threads of one process (node:worker_threads), each running the whole configuration on
// SO_REUSEPORT sockets. Threads rather than processes: the node executable's pages, the shared libraries and the
// process's own overhead are paid once, not N + 1 times (measured at two workers under the hosts load: peak RSS
// 111 MB against 197 MB for a primary and two forked workers, at the same QPS; docs/performance-notes.md).
//
// What a plugin may need to know: whether this thread is one of those workers, and which. The main thread
// supervises (src/cli/workers.ts) and talks to each worker over its parentPort with the messages below.

import { isMainThread, parentPort } from 'node:worker_threads';

/** The environment variable that numbers a -workers thread (1..N); set only in those threads' environments. */
export const WORKER_ID_ENV = 'NODENS_WORKER_ID';

/** This thread's number under -workers (1..N); 0 when the process serves alone (or this is the supervisor). */
export function workerId(): number {
  if (isMainThread || parentPort === null) return 0;
  const v = process.env[WORKER_ID_ENV];
  if (v === undefined) return 0; // an embedding application's own worker thread
  const n = Number(v);
  return Number.isInteger(n) && n > 0 ? n : 0;
}

/** Messages between the supervisor and its workers. */
export const WorkerMessage = {
  /** worker -> supervisor: started, serving. */
  ready: 'nodens:worker-ready',
  /** supervisor -> worker: act as if the process had received `signal`. */
  signal: 'nodens:signal',
  /** worker -> supervisor: a scrape wants the sum of every worker's metrics (`id`). */
  aggregateRequest: 'nodens:metrics:request',
  /** supervisor -> worker: the exposition text for request `id`. */
  aggregateReply: 'nodens:metrics:reply',
  /** supervisor -> worker: send your registry's metrics as JSON for collection `rid`. */
  collect: 'nodens:metrics:collect',
  /** worker -> supervisor: this worker's metrics for collection `rid`. */
  collected: 'nodens:metrics:collected',
} as const;

export interface WorkerMessageData {
  type: string;
  id?: number;
  rid?: number;
  text?: string;
  signal?: NodeJS.Signals;
  json?: unknown[];
}

/** Post `m` to the supervisor (nothing outside -workers). */
export function toSupervisor(m: WorkerMessageData): void {
  if (workerId() > 0) parentPort!.postMessage(m);
}

/**
 * Calls `f` with each message the supervisor sends this worker. The port does not keep the thread alive: a worker
 * ends when its server does.
 */
export function onSupervisorMessage(f: (m: WorkerMessageData) => void): void {
  if (workerId() === 0) return;
  parentPort!.on('message', (m: WorkerMessageData) => { if (typeof m?.type === 'string') f(m); });
  parentPort!.unref();
}
