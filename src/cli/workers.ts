// `-workers N`: serve on several cores. The primary process forks N workers
// that each run the whole configuration on SO_REUSEPORT sockets, so the kernel
// spreads queries over them. Each worker has its own cache; /metrics sums all
// workers (pkg/metrics). The primary forwards signals and keeps the set whole.

import cluster, { type Worker } from 'node:cluster';
import { writeFileSync, unlinkSync } from 'node:fs';
import { log } from '../core/log.ts';
import { PANIC_EXIT_STATUS } from './panic.ts';

export const READY_MESSAGE = 'nodens:worker-ready';

/** Tell the primary this worker serves (called after its start-up completed). */
export function reportWorkerReady(): void {
  if (cluster.isWorker && process.send !== undefined) process.send({ type: READY_MESSAGE });
}

/** Whether this process prints the banner's zone lines (the first worker does, for all). */
export function printsZoneLines(): boolean {
  return !cluster.isWorker || process.env.NODENS_WORKER_ID === '1';
}

/** Whether this process prints the version lines (the primary does, once every worker serves). */
export function printsVersionLines(): boolean {
  return !cluster.isWorker;
}

export async function runPrimary(count: number, pidfile: string, versionLines: string | undefined): Promise<void> {
  // Imported here, not at the top: serve.ts imports this module in every server, which never needs these
  // (prom-client's aggregator; node:crypto costs ~15 ms of start when an ES module imports it).
  await (await import('../plugin/pkg/metrics.ts')).serveAggregatedMetrics();
  const { randomBytes } = await import('node:crypto');
  const { LOOP_SECRET_ENV } = await import('../plugin/pkg/loopguard.ts');
  let stopping = false;
  let started = false;
  let pending: NodeJS.Signals | undefined;
  const workers = new Map<number, Worker>();
  // One loop identity for the whole server: every worker recognises the probes and hop nonces of the others.
  const loopSecret = randomBytes(32).toString('hex');

  const fork = (id: number): Promise<Worker> => new Promise((resolve, reject) => {
    const w = cluster.fork({ NODENS_WORKER_ID: String(id), [LOOP_SECRET_ENV]: loopSecret });
    workers.set(id, w);
    const onMessage = (m: { type?: string }): void => {
      if (m?.type === READY_MESSAGE) { w.off('message', onMessage); resolve(w); }
    };
    w.on('message', onMessage);
    w.once('exit', (code, signal) => {
      workers.delete(id);
      reject(new Error(`exit ${code ?? signal}`));
      if (stopping) return;
      if (code === 1 || code === PANIC_EXIT_STATUS) {
        // A fatal error (start-up failure, loop detected) or an unrecovered panic (debug on): the whole
        // server stops with that status, as CoreDNS would.
        stopAll('SIGTERM');
        process.exitCode = code;
        return;
      }
      log.error(`worker ${id} exited (${code ?? signal}); starting a new one`);
      fork(id).catch(() => { /* reported by its own exit */ });
    });
  });

  const stopAll = (signal: NodeJS.Signals): void => {
    stopping = true;
    for (const w of workers.values()) w.process.kill(signal);
  };

  const relay = (signal: NodeJS.Signals, stop: boolean) => () => {
    if (!started) { if (stop) pending = signal; return; }
    if (stop) stopping = true;
    for (const w of workers.values()) w.process.kill(signal);
    if (stop) {
      void allExited(workers).then(() => {
        if (pidfile !== '') { try { unlinkSync(pidfile); } catch { /* gone */ } }
        process.exit(Number(process.exitCode ?? 0));
      });
    }
  };
  process.on('SIGTERM', relay('SIGTERM', true));
  process.on('SIGINT', relay('SIGINT', true));
  process.on('SIGQUIT', relay('SIGQUIT', true));
  process.on('SIGUSR1', relay('SIGUSR1', false));
  process.on('SIGHUP', () => { /* ignored, as CoreDNS does */ });
  cluster.on('exit', (_w, code) => { if (stopping && code !== 0 && code !== null) process.exitCode = Math.max(Number(process.exitCode ?? 0), code); });

  // One worker first: a bad Corefile fails there, once, with CoreDNS's message and status.
  try {
    await fork(1);
    await Promise.all(Array.from({ length: count - 1 }, (_, i) => fork(i + 2)));
  } catch {
    stopAll('SIGTERM');
    await allExited(workers);
    process.exit(Number(process.exitCode ?? 1));
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
