// The supervision of `-workers N`, loaded only then. The main thread serves as worker 1 and, once it serves, starts
// N - 1 worker threads (node:worker_threads) that each run the whole configuration on the same SO_REUSEPORT sockets,
// with a cache of their own. Beside its own server it relays signals to the threads (serve.ts's handlers call
// `relay` and `stopped`), starts a thread again if it ends, stops the server when one fails, and sums the workers'
// metrics for /metrics (pkg/metrics).

import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
import { randomBytes } from 'node:crypto';
import { log } from '../core/log.ts';
import { PANIC_EXIT_STATUS } from './panic.ts';
import { LOOP_SECRET_ENV } from '../plugin/pkg/loopguard.ts';
import { WORKER_ID_ENV, WorkerMessage, setWorkerCount, type WorkerMessageData } from '../plugin/pkg/workers.ts';

/**
 * In the main thread, before its own server starts: this process serves as `count` workers. Every worker shares
 * one loop identity (the secret in the environment the threads inherit), so each recognises the probes and hop
 * nonces of the others.
 */
export function prepareWorkers(count: number): void {
  setWorkerCount(count);
  process.env[LOOP_SECRET_ENV] = randomBytes(32).toString('hex');
}

/**
 * The largest semi-space (MiB) of a worker thread's young generation. Under load each thread's young generation
 * grew to its most with the 4 MiB of bin/nodens (7 MiB resident, where the main thread's settled at 4): with 2
 * they hold 3.75, and a cache hit allocates too little for the extra scavenges to show (-workers 2, cache hits:
 * peak RSS 72.6-74.0 -> 70.1 MiB, CoreDNS 60.4-61.2; QPS within the run-to-run noise).
 */
const WORKER_SEMI_SPACE_MB = 2;

/** How long a metrics collection waits for the worker threads before summing those that answered. */
const COLLECT_TIMEOUT_MS = 1500;

export interface Supervisor {
  /** Relay `signal` to every worker thread. */
  relay(signal: NodeJS.Signals): void;
  /** Stop every worker thread (relays `signal`) and resolve with the worst of their exit statuses once all ended. */
  stopped(signal: NodeJS.Signals): Promise<number>;
  /** Resolves when every thread serves, false when one ended during start-up (the server is being stopped). */
  ready: Promise<boolean>;
  /** A stop has begun. */
  readonly stopping: boolean;
}

/**
 * Starts worker threads 2..count once the main thread serves. A thread runs the same script (bin.js or the bundle)
 * with the same arguments. `stopServer` is the main thread's own stop path (which then waits for the threads with
 * `stopped`), taken when a worker thread fails.
 */
export function startWorkers(count: number, stopServer: (signal: NodeJS.Signals) => void): Supervisor {
  const metrics = import('../plugin/pkg/metrics.ts');
  let stopping = false;
  let worst = 0;
  const workers = new Map<number, Worker>();
  const entry = process.argv[1]!;
  // V8 reads the flag when it creates an isolate, and a flag outranks a Worker's resourceLimits (their
  // maxYoungGenerationSizeMb is ignored while the flag is set): lowered now, it applies to the threads alone.
  setFlagsFromString(`--max-semi-space-size=${WORKER_SEMI_SPACE_MB}`);

  // Metrics: a scrape on any worker is answered with the sum of the main thread's registry and every thread's.
  let nextCollection = 0;
  const collections = new Map<number, { got: unknown[][]; want: number; done: () => void }>();
  const sum = async (): Promise<string> => {
    const { aggregateMetrics, registry } = await metrics;
    const own = await registry.getMetricsAsJSON();
    return new Promise((resolve) => {
      const rid = ++nextCollection;
      const got: unknown[][] = [own];
      let finished = false;
      const done = (): void => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        collections.delete(rid);
        aggregateMetrics(got).then(resolve, () => { resolve(''); });
      };
      const timer = setTimeout(done, COLLECT_TIMEOUT_MS);
      collections.set(rid, { got, want: workers.size + 1, done });
      for (const w of workers.values()) w.postMessage({ type: WorkerMessage.collect, rid });
      if (workers.size === 0) done();
    });
  };
  void metrics.then((m) => { m.setWorkersMetrics(sum); });
  const onMessage = (w: Worker, m: WorkerMessageData): void => {
    if (m?.type === WorkerMessage.aggregateRequest) {
      sum().then((text) => { w.postMessage({ type: WorkerMessage.aggregateReply, id: m.id, text }); }, () => { /* cannot fail */ });
    } else if (m?.type === WorkerMessage.collected && m.rid !== undefined) {
      const c = collections.get(m.rid);
      if (c === undefined) return; // too late: summed without it
      c.got.push(m.json ?? []);
      if (c.got.length >= c.want) c.done();
    }
  };

  let started = false;
  const start = (id: number): Promise<void> => new Promise((resolve, reject) => {
    const w = new Worker(entry, {
      argv: process.argv.slice(2),
      env: { ...process.env, [WORKER_ID_ENV]: String(id) },
      // the thread's name in ps -L, top -H and /proc/<pid>/task/*/comm (15 characters at most)
      name: `nodens-worker-${id}`,
    });
    workers.set(id, w);
    let ready = false;
    w.on('message', (m: WorkerMessageData) => {
      if (m?.type === WorkerMessage.ready && !ready) {
        ready = true;
        resolve();
        return;
      }
      onMessage(w, m);
    });
    // An uncaught exception ends the thread (status 1), as it would end a process; serve.ts's panic handler
    // reports it first. Node also hands it to the main thread: nothing more to print.
    w.on('error', () => { /* reported by the worker, and by its exit status */ });
    w.once('exit', (code) => {
      workers.delete(id);
      if (!ready) reject(new Error(`exit ${code}`));
      if (code !== 0) worst = Math.max(worst, code);
      if (stopping) return;
      if (code === 1 || code === PANIC_EXIT_STATUS || !started) {
        // A fatal error (start-up failure, loop detected), an unrecovered panic (debug on), or any end before
        // the server was up: the whole server stops with that status, as CoreDNS would.
        if (code === 0) worst = Math.max(worst, 1);
        stopServer('SIGTERM');
        return;
      }
      log.error(`worker ${id} exited (${code}); starting a new one`);
      start(id).catch(() => { /* reported by its own exit */ });
    });
  });

  const supervisor: Supervisor = {
    ready: Promise.all(Array.from({ length: count - 1 }, (_, i) => start(i + 2))).then(
      () => { started = true; return true; },
      () => false, // a thread ended during start-up: its exit handler is stopping the server
    ),
    get stopping() { return stopping; },
    relay(signal) {
      for (const w of workers.values()) w.postMessage({ type: WorkerMessage.signal, signal });
    },
    stopped(signal) {
      if (!stopping) {
        stopping = true;
        supervisor.relay(signal);
      }
      return new Promise((resolve) => {
        const check = (): void => { if (workers.size === 0) resolve(worst); else setTimeout(check, 20); };
        check();
      });
    },
  };
  return supervisor;
}
