// `nodens -workers N`: N threads of one process (node:worker_threads), each running the whole configuration on
// SO_REUSEPORT sockets. Threads rather than processes: the node executable's pages, the shared libraries and the
// process's own overhead are paid once, not N + 1 times (docs/performance-notes.md: "-workers N as threads").
//
// The main thread serves as worker 1 and supervises; worker threads 2..N talk to it over their parentPort with the
// messages below. What a plugin may need to know: whether it runs as one of several workers, and which.

import type { MessagePort } from 'node:worker_threads';

/** The environment variable that numbers a -workers thread (2..N); set only in those threads' environments. */
export const WORKER_ID_ENV = 'NODENS_WORKER_ID';

let workerCount = 0;

/** Called by the command in the main thread of `nodens -workers N` (N > 1), before its own server starts. */
export function setWorkerCount(n: number): void {
  workerCount = n;
}

/** This thread's number when it is a -workers thread (2..N), else 0; its environment does not change. */
let threadNumber: number | undefined;

/**
 * This thread's number under -workers: 1 for the main thread (which serves too), 2..N for the worker threads;
 * 0 when the process serves alone.
 */
export function workerId(): number {
  threadNumber ??= workerThreadNumber();
  return threadNumber > 1 ? threadNumber : workerCount > 1 ? 1 : 0;
}

function workerThreadNumber(): number {
  const v = process.env[WORKER_ID_ENV];
  // Without the variable this is the main thread, or an embedding application's own worker thread:
  // node:worker_threads, 1.4 ms of every start, is loaded only by threads that have it.
  if (v === undefined || supervisorPort() === null) return 0; // (null: the main thread, the variable inherited)
  const n = Number(v);
  return Number.isInteger(n) && n > 1 ? n : 0;
}

function supervisorPort(): MessagePort | null {
  return process.getBuiltinModule('node:worker_threads').parentPort;
}

/** Whether this is one of the worker threads (2..N) of -workers, not the main thread. */
export function inWorkerThread(): boolean {
  return workerId() > 1;
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

/** Post `m` to the supervisor (nothing outside a worker thread). */
export function toSupervisor(m: WorkerMessageData): void {
  if (inWorkerThread()) supervisorPort()!.postMessage(m);
}

/**
 * Calls `f` with each message the supervisor sends this worker. The port does not keep the thread alive: a worker
 * ends when its server does.
 */
export function onSupervisorMessage(f: (m: WorkerMessageData) => void): void {
  if (!inWorkerThread()) return;
  const port = supervisorPort()!;
  port.on('message', (m: WorkerMessageData) => { if (typeof m?.type === 'string') f(m); });
  port.unref();
}
