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
import { workerId } from '../plugin/pkg/workers.ts';

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
 * A -workers thread's log lines, written to fd 1 by the thread itself and blocking while the reader is behind, as a
 * process's stdout does: a thread's `process.stdout` would hand every line to the main thread, and a slow reader (a
 * full pipe) would then queue lines in memory without limit (measured: 650 MB in 10 s of logged queries behind a
 * stalled pipe) instead of holding the writer back. Node leaves a pipe's fd 1 non-blocking, so EAGAIN is waited out
 * here, 1 ms at a time. A line goes out in one write(2), so lines of several workers do not interleave.
 */
const pause = new Int32Array(new SharedArrayBuffer(4));
function writeLineBlocking(line: string): void {
  const b = Buffer.from(line + '\n');
  let off = 0;
  while (off < b.length) {
    try {
      off += writeSync(1, b, off);
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
}

/** Load the Corefile, start the server, write the pidfile and handle signals until the process ends. */
export async function serve(o: ServeOptions): Promise<void> {
  if (workerId() > 0) setLogSink(writeLineBlocking);
  let input;
  try {
    input = loadCorefile(o.conf, o.port);
  } catch (e) {
    fatalStartup((e as Error).message);
  }

  // The server logs through the CLI's logger, and a [FATAL] line ends the process with status 1, as in CoreDNS.
  log.onFatal = () => { runProcessExitHooks(); process.exit(1); };
  // Signals are handled from here on, as CoreDNS installs its traps before starting.
  // Under -workers the supervisor owns the pidfile: a worker that stops leaves it alone.
  const running = installSignals(o.conf, o.port, workerId() === 0 ? o.pidfile : '');
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
  if (o.pidfile !== '' && workerId() === 0) {
    try {
      writeFileSync(o.pidfile, `${process.pid}\n`, { mode: 0o644 });
    } catch (e) {
      log.std(`[ERROR] Could not write pidfile: ${(e as Error).message}`);
    }
  }
  await runtime.announceStart();
  if (!o.quiet && printsVersionLines()) out(versionText());
  reportWorkerReady();

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

/** Install CoreDNS's signal handling; `set` hands over the runtime once it has started. */
function installSignals(conf: string, port: string, pidfile: string): { set(r: Runtime): void } {
  let runtime: Runtime | undefined;
  let pending: NodeJS.Signals | undefined;
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
    runProcessExitHooks();
    removePidfile(pidfile);
    void runtime!.stop().then((errors) => {
      for (const e of errors) log.std(`[ERROR] SIGINT shutdown: ${e.message}`);
      process.exit(errors.length > 0 ? 4 : 0);
    });
  });
  process.on('SIGTERM', () => {
    if (deferred('SIGTERM')) return;
    log.std('[INFO] SIGTERM: Shutting down servers then terminating');
    // Interception rules go before the listeners close, so no client is steered to a closed port.
    runProcessExitHooks();
    void runtime!.stop().then((errors) => {
      for (const e of errors) log.std(`[ERROR] SIGTERM shutdown: ${e.message}`);
      removePidfile(pidfile);
      process.exit(errors.length > 0 ? 4 : 0);
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
    set(r: Runtime) {
      runtime = r;
      // A stop signal that came during start-up is carried out now.
      if (pending !== undefined) process.emit(pending, pending);
    },
  };
}
