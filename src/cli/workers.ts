// `-workers N`: serve on several cores. The main thread starts N worker threads (node:worker_threads) that each
// run the whole configuration on SO_REUSEPORT sockets, so the kernel spreads queries over them; each has its own
// cache. The main thread serves nothing: it relays signals, keeps the set whole, sums the workers' metrics for
// /metrics (pkg/metrics) and ends the process with the workers' status. Threads, not processes: one copy of Node
// in memory instead of N + 1 (src/plugin/pkg/workers.ts).

import { Worker } from 'node:worker_threads';
import { writeFileSync, unlinkSync } from 'node:fs';
import { log } from '../core/log.ts';
import { PANIC_EXIT_STATUS } from './panic.ts';
import { WORKER_ID_ENV, WorkerMessage, onSupervisorMessage, toSupervisor, workerId, type WorkerMessageData } from '../plugin/pkg/workers.ts';

/** Tell the supervisor this worker serves (called after its start-up completed). */
export function reportWorkerReady(): void {
  toSupervisor({ type: WorkerMessage.ready });
}

/** Whether this thread prints the banner's zone lines (the first worker does, for all). */
export function printsZoneLines(): boolean {
  const id = workerId();
  return id === 0 || id === 1;
}

/** Whether this thread prints the version lines (the supervisor does, once every worker serves). */
export function printsVersionLines(): boolean {
  return workerId() === 0;
}

/**
 * In a worker: the signals the supervisor relays are emitted on this thread's `process`, where the server's
 * handlers (serve.ts) wait for them as they would for the process's own.
 */
export function takeRelayedSignals(): void {
  onSupervisorMessage((m) => {
    if (m.type === WorkerMessage.signal && m.signal !== undefined) process.emit(m.signal, m.signal);
  });
}

/** How long a metrics collection waits for the workers before summing those that answered. */
const COLLECT_TIMEOUT_MS = 1500;

export async function runSupervisor(count: number, pidfile: string, versionLines: string | undefined): Promise<void> {
  // Imported here, not at the top: serve.ts imports this module in every server, which never needs these
  // (node:crypto costs ~15 ms of start when an ES module imports it).
  const { randomBytes } = await import('node:crypto');
  const { LOOP_SECRET_ENV } = await import('../plugin/pkg/loopguard.ts');
  const { aggregateMetrics } = await import('../plugin/pkg/metrics.ts');
  let stopping = false;
  let started = false;
  let pending: NodeJS.Signals | undefined;
  const workers = new Map<number, Worker>();
  // One loop identity for the whole server: every worker recognises the probes and hop nonces of the others.
  const loopSecret = randomBytes(32).toString('hex');
  // The script this thread runs (bin.js, or the bundle): each worker runs it again with the same arguments.
  const entry = process.argv[1]!;

  // Metrics collections in progress: the workers' JSON gathered for one scrape.
  let nextCollection = 0;
  const collections = new Map<number, { got: unknown[][]; want: number; done: () => void }>();
  const collect = (requester: Worker, id: number | undefined): void => {
    const rid = ++nextCollection;
    const got: unknown[][] = [];
    let finished = false;
    const done = (): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      collections.delete(rid);
      aggregateMetrics(got).then(
        (text) => { requester.postMessage({ type: WorkerMessage.aggregateReply, id, text }); },
        () => { requester.postMessage({ type: WorkerMessage.aggregateReply, id, text: '' }); },
      );
    };
    const timer = setTimeout(done, COLLECT_TIMEOUT_MS);
    collections.set(rid, { got, want: workers.size, done });
    for (const w of workers.values()) w.postMessage({ type: WorkerMessage.collect, rid });
  };
  const onMessage = (w: Worker, m: WorkerMessageData): void => {
    if (m?.type === WorkerMessage.aggregateRequest) {
      collect(w, m.id);
    } else if (m?.type === WorkerMessage.collected && m.rid !== undefined) {
      const c = collections.get(m.rid);
      if (c === undefined) return; // too late: summed without it
      c.got.push(m.json ?? []);
      if (c.got.length >= c.want) c.done();
    }
  };

  const start = (id: number): Promise<Worker> => new Promise((resolve, reject) => {
    const w = new Worker(entry, {
      argv: process.argv.slice(2),
      env: { ...process.env, [WORKER_ID_ENV]: String(id), [LOOP_SECRET_ENV]: loopSecret },
      // the thread's name in ps -L, top -H and /proc/<pid>/task/*/comm (15 characters at most)
      name: `nodens-worker-${id}`,
    });
    workers.set(id, w);
    let ready = false;
    w.on('message', (m: WorkerMessageData) => {
      if (m?.type === WorkerMessage.ready && !ready) {
        ready = true;
        resolve(w);
        return;
      }
      onMessage(w, m);
    });
    // An uncaught exception ends the thread (status 1), as it would end a process; serve.ts's panic handler
    // reports it first. Node also hands it to the supervisor: nothing more to print.
    w.on('error', () => { /* reported by the worker, and by its exit status */ });
    w.once('exit', (code) => {
      workers.delete(id);
      reject(new Error(`exit ${code}`));
      if (stopping) {
        if (code !== 0) process.exitCode = Math.max(Number(process.exitCode ?? 0), code);
        return;
      }
      if (code === 1 || code === PANIC_EXIT_STATUS || !started) {
        // A fatal error (start-up failure, loop detected), an unrecovered panic (debug on), or any end before
        // the server was up: the whole server stops with that status, as CoreDNS would.
        process.exitCode = code === 0 ? 1 : code;
        stopAll('SIGTERM');
        return;
      }
      log.error(`worker ${id} exited (${code}); starting a new one`);
      start(id).catch(() => { /* reported by its own exit */ });
    });
  });

  const signalAll = (signal: NodeJS.Signals): void => {
    for (const w of workers.values()) w.postMessage({ type: WorkerMessage.signal, signal });
  };
  const stopAll = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    signalAll(signal);
    void allExited(workers).then(() => { finish(); });
  };
  const finish = (): void => {
    if (pidfile !== '') { try { unlinkSync(pidfile); } catch { /* gone */ } }
    process.exit(Number(process.exitCode ?? 0));
  };

  const relay = (signal: NodeJS.Signals, stop: boolean) => () => {
    if (!started) { if (stop) pending = signal; return; }
    if (stop) stopAll(signal);
    else signalAll(signal);
  };
  process.on('SIGTERM', relay('SIGTERM', true));
  process.on('SIGINT', relay('SIGINT', true));
  process.on('SIGQUIT', relay('SIGQUIT', true));
  process.on('SIGUSR1', relay('SIGUSR1', false));
  process.on('SIGHUP', () => { /* ignored, as CoreDNS does */ });

  // One worker first: a bad Corefile fails there, once, with CoreDNS's message and status.
  try {
    await start(1);
    await Promise.all(Array.from({ length: count - 1 }, (_, i) => start(i + 2)));
  } catch {
    return; // a worker ended during start-up: its exit handler stops the rest and sets the status
  }
  if (pidfile !== '') {
    try { writeFileSync(pidfile, `${process.pid}\n`, { mode: 0o644 }); } catch (e) { log.error(`Could not write pidfile: ${(e as Error).message}`); }
  }

  if (versionLines !== undefined) process.stdout.write(versionLines);
  started = true;
  if (pending !== undefined) process.emit(pending, pending);
}

function allExited(workers: Map<number, Worker>): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => { if (workers.size === 0) resolve(); else setTimeout(check, 20); };
    check();
  });
}
