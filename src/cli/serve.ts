// Starting and running the server from the command line: CoreDNS's flags, the
// Corefile load, startup output, pidfile and signals (coremain.Run and caddy's
// signal traps). Shared by `nodens` and `nodens node-cache`, which runs its own
// set-up first and hands in clean-up hooks, as node-cache drives coremain.Run.

import { writeFileSync, unlinkSync, writeSync } from 'node:fs';
import { Runtime } from '../core/runtime.ts';
import { loadCorefile } from '../core/loader.ts';
import { jsonRecord, log, setLogSink } from '../core/log.ts';
import type { PluginRegistry } from '../core/registry.ts';
import { versionLines } from '../version.ts';
import { goQuote } from '../corefile/address.ts';
import type { FlagSpec } from './flags.ts';
import { printsZoneLines, printsVersionLines, reportWorkerReady, takeRelayedSignals } from './workers.ts';
import { releaseCleanPages } from '../native/memory.ts';
import { inWorkerThread } from '../plugin/pkg/workers.ts';
import type { Supervisor } from './supervisor.ts';

/** CoreDNS's own flags (coremain/run.go, core/dnsserver/register.go). */
export const COREDNS_FLAGS: FlagSpec[] = [
  { name: 'conf', kind: 'string', default: '', usage: 'Corefile to load (default "Corefile")' },
  { name: 'log-format', kind: 'string', default: 'text', usage: 'Log format (text or json)' },
  { name: 'dns.port', kind: 'string', default: '53', usage: 'Default port' },
  { name: 'p', kind: 'string', default: '53', usage: 'Default port', aliasOf: 'dns.port' },
  { name: 'pidfile', kind: 'string', default: '', usage: 'Path to write pid file' },
  { name: 'plugins', kind: 'bool', default: 'false', usage: 'List installed plugins' },
  { name: 'quiet', kind: 'bool', default: 'false', usage: 'Quiet mode (no initialization output)' },
  { name: 'version', kind: 'bool', default: 'false', usage: 'Show version' },
];

/**
 * caddy.OnProcessExit: important clean-up (node-cache's teardown) run once before the process ends on
 * SIGTERM, SIGINT, SIGQUIT, and — unlike caddy — also after a [FATAL] line, a start-up failure or an
 * uncaught exception, so that a crash leaves nothing behind. Each hook runs synchronously, once.
 */
export const onProcessExit: Array<() => void> = [];
let exitHooksRan = false;

export function runProcessExitHooks(): void {
  if (exitHooksRan) return;
  exitHooksRan = true;
  for (const f of onProcessExit) {
    try { f(); } catch (e) { log.error(`process exit hook: ${e instanceof Error ? e.message : String(e)}`); }
  }
}

function out(s: string): void { writeSync(1, s); }
function err(s: string): void { writeSync(2, s); }

/**
 * A startup failure: message on stderr, exit 1 (CoreDNS's mustLogFatal). `goTimestamp`: Go's
 * logger still had its default date prefix (before the log flags were set); a JSON record has its own time.
 */
export function fatalStartup(message: string, goTimestamp = false): never {
  if (log.json) err(jsonRecord('FATAL', message) + '\n');
  else err((goTimestamp ? goLogTime() + ' ' : '') + message + '\n');
  runProcessExitHooks();
  process.exit(1);
}

/**
 * The command's log lines (the `log` plugin's too), written to fd 1 with one write(2) each and blocking while the
 * reader is behind, as Go's log writes block CoreDNS. `process.stdout` would queue what a full pipe does not take,
 * without limit (measured with `log` and a stalled reader: 890 MB in 8 s alone; in a -workers thread every line
 * also went through the main thread). Node may leave a pipe's fd 1 non-blocking, so EAGAIN is waited out here,
 * 1 ms at a time. One write(2) per line: lines of several -workers threads do not interleave.
 */
const pause = new Int32Array(new SharedArrayBuffer(4));
function writeLineBlocking(line: string): void {
  const s = line + '\n';
  let done = 0;
  try {
    done = writeSync(1, s); // the string as it is: no Buffer for the usual whole write
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw e;
  }
  const size = Buffer.byteLength(s);
  if (done === size) return;
  const b = Buffer.from(s);
  while (done < size) {
    try {
      done += writeSync(1, b, done);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw e;
      Atomics.wait(pause, 0, 0, 1);
    }
  }
}

/** -log-format: `text` (the default) or `json`; anything else is CoreDNS's start-up error. */
export function setLogFormat(format: string): void {
  if (format === 'text') return;
  if (format !== 'json') fatalStartup(`unknown log format ${goQuote(format)}: expected text or json`, true);
  // Every line from here on is a JSON record, as CoreDNS configures its logger before anything else.
  log.json = true;
}

export interface ServeOptions {
  conf: string;
  port: string;
  pidfile: string;
  quiet: boolean;
  registry: PluginRegistry;
  /** -workers N: N > 1 makes this (main) thread worker 1 and starts N - 1 worker threads once it serves. */
  workers?: number;
}

/** When clean binary pages are released after start-up. */
const SETTLED_RELEASE_MS = 250;

/** How often clean binary pages are released while -workers threads start. */
const STARTING_RELEASE_MS = 10;

/** Load the Corefile, start the server, write the pidfile and handle signals until the process ends. */
export async function serve(o: ServeOptions): Promise<void> {
  // Node's bootstrap and loading the bundle touched ~36 MiB of the binary that the rest of the start does not
  // need: released now, they are not resident together with what setting up the servers touches next (TLS
  // above all). Measured peak RSS at start: DoH Corefile 65.1-65.7 -> 58.8-59.5 MiB, hosts 56.9 -> 55.0.
  // Its data only (the V8 snapshot, the builtins' sources and code caches): most of the code pages would be
  // faulted straight back in by the rest of the start; the release after start-up takes those.
  if (!inWorkerThread()) releaseCleanPages(true);
  setLogSink(writeLineBlocking);
  let input;
  try {
    input = loadCorefile(o.conf, o.port);
  } catch (e) {
    fatalStartup((e as Error).message);
  }

  // The server logs through the CLI's logger, and a [FATAL] line ends the process with status 1, as in CoreDNS.
  log.onFatal = () => { runProcessExitHooks(); process.exit(1); };
  // Signals are handled from here on, as CoreDNS installs its traps before starting.
  // Under -workers the main thread owns the pidfile: a worker thread that stops leaves it alone.
  const running = installSignals(o.conf, o.port, inWorkerThread() ? '' : o.pidfile);
  let runtime: Runtime;
  try {
    runtime = await Runtime.start({
      corefile: input.contents, file: input.file, defaultPort: o.port, registry: o.registry,
      source: () => loadCorefile(o.conf, o.port), logger: log,
    });
  } catch (e) {
    fatalStartup(e instanceof Error ? e.message : String(e));
  }

  if (!o.quiet && printsZoneLines()) {
    // JSON: one INFO record per server (listen address) with its zone lines, as CoreDNS's printStartup.
    if (log.json) for (const g of runtime.instance.bannerGroups()) log.info(g.join('\n'));
    else out(runtime.instance.bannerLines().map((l) => l + '\n').join(''));
  }
  if (o.pidfile !== '' && !inWorkerThread()) {
    try {
      writeFileSync(o.pidfile, `${process.pid}\n`, { mode: 0o644 });
    } catch (e) {
      log.std(`[ERROR] Could not write pidfile: ${(e as Error).message}`);
    }
  }
  await runtime.announceStart();
  if (!o.quiet && printsVersionLines()) out(versionText());
  reportWorkerReady();
  // Start-up touched much of Node's binary that serving does not: those pages go (once the threads of -workers
  // have started too), and again after every reload. One process: the main thread does it for all.
  if (!inWorkerThread()) {
    // Not at once but when the start's trailing work is done, and after the first queries have been answered
    // (a release costs 2-4 ms): V8 runs a scavenge it scheduled during start as a task on the next turns, and its
    // GC code (4-6 MiB of the binary) would otherwise stay resident in an idle server.
    if ((o.workers ?? 1) <= 1) setTimeout(releaseCleanPages, SETTLED_RELEASE_MS).unref();
    runtime.onStarted((_, reloaded) => { if (reloaded) releaseCleanPages(); });
  }

  if ((o.workers ?? 1) > 1) {
    // -workers N: this thread serves as worker 1; the others start now, and the version lines follow once all serve.
    releaseCleanPages(); // before the threads start: their start-up then begins from this thread's serving set
    const { startWorkers } = await import('./supervisor.ts');
    const supervisor = startWorkers(o.workers!, (signal) => { process.emit(signal, signal); });
    running.setSupervisor(supervisor);
    running.set(runtime);
    // Each thread's start-up faults in much of the binary again (V8's isolate and snapshot, Node's bootstrap,
    // compiling the bundle): ~27 MiB in its first 25 ms, on top of every thread's heap. Released every 10 ms while
    // they start, only the pages of the last few ms are resident at once (measured, -workers 2: peak RSS at start
    // 71.7 -> 58.6 MiB; this thread is idle meanwhile, and the threads' start time does not change measurably).
    const releasing = setInterval(releaseCleanPages, STARTING_RELEASE_MS);
    const ready = await supervisor.ready.finally(() => { clearInterval(releasing); });
    if (ready && !supervisor.stopping && !o.quiet) out(versionText());
    if (ready) {
      releaseCleanPages();
      setTimeout(releaseCleanPages, SETTLED_RELEASE_MS).unref();
    }
    return;
  }
  running.set(runtime);
}

/** The banner's version lines: plain, or with -log-format json one INFO record holding both. */
export function versionText(): string {
  const text = versionLines().join('\n');
  return (log.json ? jsonRecord('INFO', text) : text) + '\n';
}

/** `2006/01/02 15:04:05` in local time, Go's default log prefix. */
export function goLogTime(): string {
  const d = new Date();
  const p = (n: number): string => String(n).padStart(2, '0');
  return `${d.getFullYear()}/${p(d.getMonth() + 1)}/${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function removePidfile(pidfile: string): void {
  if (pidfile === '') return;
  try { unlinkSync(pidfile); } catch { /* already gone */ }
}

/**
 * Install CoreDNS's signal handling; `set` hands over the runtime once it has started. Under -workers the main
 * thread's handlers also relay each signal to the worker threads, and a stop waits for them all before the process
 * exits with the worst status.
 */
function installSignals(conf: string, port: string, pidfile: string): { set(r: Runtime): void; setSupervisor(s: Supervisor): void } {
  let runtime: Runtime | undefined;
  let supervisor: Supervisor | undefined;
  let pending: NodeJS.Signals | undefined;
  const othersStopped = (signal: NodeJS.Signals): Promise<number> => (supervisor === undefined ? Promise.resolve(0) : supervisor.stopped(signal));
  // A stop signal during start-up is remembered and carried out once the server runs.
  const deferred = (signal: NodeJS.Signals): boolean => {
    if (runtime !== undefined) return false;
    pending = signal;
    return true;
  };
  let interrupted = false;
  process.on('SIGINT', () => {
    if (deferred('SIGINT')) return;
    if (interrupted) {
      log.std('[INFO] SIGINT: Force quit');
      runProcessExitHooks();
      removePidfile(pidfile);
      process.exit(2);
    }
    interrupted = true;
    log.std('[INFO] SIGINT: Shutting down');
    const others = othersStopped('SIGINT');
    runProcessExitHooks();
    removePidfile(pidfile);
    void runtime!.stop().then(async (errors) => {
      for (const e of errors) log.std(`[ERROR] SIGINT shutdown: ${e.message}`);
      const worst = await others;
      process.exit(Math.max(errors.length > 0 ? 4 : 0, worst));
    });
  });
  process.on('SIGTERM', () => {
    if (deferred('SIGTERM')) return;
    log.std('[INFO] SIGTERM: Shutting down servers then terminating');
    const others = othersStopped('SIGTERM');
    // Interception rules go before the listeners close, so no client is steered to a closed port.
    runProcessExitHooks();
    void runtime!.stop().then(async (errors) => {
      for (const e of errors) log.std(`[ERROR] SIGTERM shutdown: ${e.message}`);
      const worst = await others;
      removePidfile(pidfile);
      process.exit(Math.max(errors.length > 0 ? 4 : 0, worst));
    });
  });
  process.on('SIGQUIT', () => {
    log.std('[INFO] SIGQUIT: Quitting process immediately');
    runProcessExitHooks();
    removePidfile(pidfile);
    process.exit(0);
  });
  process.on('SIGHUP', () => { /* ignored, as CoreDNS does */ });
  process.on('SIGUSR1', () => {
    if (runtime === undefined) return;
    supervisor?.relay('SIGUSR1');
    log.std('[INFO] SIGUSR1: Reloading');
    let input;
    try {
      input = loadCorefile(conf, port);
    } catch (e) {
      log.std(`[ERROR] SIGUSR1: loading updated Caddyfile: ${(e as Error).message}`);
      return;
    }
    void runtime.reload(input.contents, input.file).then((e) => {
      if (e !== undefined) log.std(`[ERROR] SIGUSR1: starting with listener file descriptors: ${e.message}`);
    });
  });
  // A -workers thread gets no signals of its own: the supervisor relays the process's.
  takeRelayedSignals();
  return {
    setSupervisor(s: Supervisor) {
      supervisor = s;
    },
    set(r: Runtime) {
      runtime = r;
      // A stop signal that came during start-up is carried out now.
      if (pending !== undefined) process.emit(pending, pending);
    },
  };
}
