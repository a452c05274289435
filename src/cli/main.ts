// The `nodens` command: CoreDNS's flags, startup output, signals and exit
// statuses. The only module that ends the process.

import { writeFileSync, unlinkSync, writeSync } from 'node:fs';
import { createRegistry } from '../index.ts';
import { Runtime } from '../core/runtime.ts';
import { loadCorefile } from '../core/loader.ts';
import { log } from '../core/log.ts';
import { versionLines } from '../version.ts';
import { goQuote } from '../corefile/address.ts';
import { parseFlags, usage, type FlagError, type FlagSpec } from './flags.ts';
import { runPrimary, printsZoneLines, printsVersionLines, reportWorkerReady } from './workers.ts';
import { runDoctor } from './doctor.ts';
import { runValidate } from './validate.ts';
import { goPanicText, PANIC_EXIT_STATUS } from './panic.ts';
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';

const FLAGS: FlagSpec[] = [
  { name: 'conf', kind: 'string', default: '', usage: 'Corefile to load (default "Corefile")' },
  { name: 'dns.port', kind: 'string', default: '53', usage: 'Default port' },
  { name: 'p', kind: 'string', default: '53', usage: 'Default port', aliasOf: 'dns.port' },
  { name: 'pidfile', kind: 'string', default: '', usage: 'Path to write pid file' },
  { name: 'plugins', kind: 'bool', default: 'false', usage: 'List installed plugins' },
  { name: 'quiet', kind: 'bool', default: 'false', usage: 'Quiet mode (no initialization output)' },
  { name: 'version', kind: 'bool', default: 'false', usage: 'Show version' },
  { name: 'workers', kind: 'string', default: '1', usage: 'nodens: serve with N worker processes (0 = one per CPU)' },
];

function out(s: string): void { writeSync(1, s); }
function err(s: string): void { writeSync(2, s); }

/** A startup failure: message on stderr, exit 1 (CoreDNS's mustLogFatal). */
function fatalStartup(message: string): never {
  err(message + '\n');
  process.exit(1);
}

export async function main(argv: string[]): Promise<void> {
  if (argv[0] === 'doctor') process.exit(await runDoctor(argv.slice(1)));
  if (argv[0] === 'validate') process.exit(await runValidate(argv.slice(1)));
  // An exception nothing caught (a plugin's, rethrown by the core when the debug plugin is on, or a bug)
  // ends the process as an unrecovered Go panic ends CoreDNS: its report on stderr, exit status 2.
  process.on('uncaughtException', (e) => {
    err(goPanicText(e));
    process.exit(PANIC_EXIT_STATUS);
  });
  let parsed;
  try {
    parsed = parseFlags(FLAGS, argv);
  } catch (e) {
    const fe = e as FlagError;
    if (fe.helpRequested) {
      err(usage('nodens', FLAGS));
      process.exit(0);
    }
    err(`${fe.message}\n${usage('nodens', FLAGS)}`);
    process.exit(2);
  }
  const flag = (n: string): string => parsed.values.get(n) ?? '';
  // Go's logger still has its default timestamp at this point, so CoreDNS prints one here.
  if (parsed.rest.length > 0) fatalStartup(`${goLogTime()} extra command line arguments: [${parsed.rest.join(' ')}]`);

  const registry = createRegistry();
  if (flag('version') === 'true') {
    out(versionLines().join('\n') + '\n');
    process.exit(0);
  }
  if (flag('plugins') === 'true') {
    out(registry.listForFlag().map((n) => `${n}\n`).join('') + '\n');
    process.exit(0);
  }

  const port = flag('dns.port');
  const pidfile = flag('pidfile');
  const workers = parseWorkers(flag('workers'));
  if (workers > 1 && cluster.isPrimary) {
    await runPrimary(workers, pidfile, flag('quiet') === 'true' ? undefined : versionLines().join('\n') + '\n');
    return;
  }
  const quiet = flag('quiet') === 'true';
  let input;
  try {
    input = loadCorefile(flag('conf'), port);
  } catch (e) {
    fatalStartup((e as Error).message);
  }

  // The server logs through the CLI's logger, and a [FATAL] line ends the process with status 1, as in CoreDNS.
  log.onFatal = () => { process.exit(1); };
  // Signals are handled from here on, as CoreDNS installs its traps before starting.
  const running = installSignals(flag('conf'), port, pidfile);
  let runtime: Runtime;
  try {
    runtime = await Runtime.start({
      corefile: input.contents, file: input.file, defaultPort: port, registry,
      source: () => loadCorefile(flag('conf'), port), logger: log,
    });
  } catch (e) {
    fatalStartup(e instanceof Error ? e.message : String(e));
  }

  if (!quiet && printsZoneLines()) out(runtime.instance.bannerLines().map((l) => l + '\n').join(''));
  if (pidfile !== '' && !cluster.isWorker) {
    try {
      writeFileSync(pidfile, `${process.pid}\n`, { mode: 0o644 });
    } catch (e) {
      log.error(`Could not write pidfile: ${(e as Error).message}`);
    }
  }
  await runtime.announceStart();
  if (!quiet && printsVersionLines()) out(versionLines().join('\n') + '\n');
  reportWorkerReady();

  running.set(runtime);
}

/** -workers N: 0 means one per CPU. */
function parseWorkers(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) fatalStartup(`invalid -workers value: ${goQuote(v)}`);
  return n === 0 ? availableParallelism() : n;
}

/** `2006/01/02 15:04:05` in local time, Go's default log prefix. */
function goLogTime(): string {
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
      log.info('SIGINT: Force quit');
      removePidfile(pidfile);
      process.exit(2);
    }
    interrupted = true;
    log.info('SIGINT: Shutting down');
    removePidfile(pidfile);
    void runtime!.stop().then((errors) => {
      for (const e of errors) log.error(`SIGINT shutdown: ${e.message}`);
      process.exit(errors.length > 0 ? 4 : 0);
    });
  });
  process.on('SIGTERM', () => {
    if (deferred('SIGTERM')) return;
    log.info('SIGTERM: Shutting down servers then terminating');
    void runtime!.stop().then((errors) => {
      for (const e of errors) log.error(`SIGTERM shutdown: ${e.message}`);
      removePidfile(pidfile);
      process.exit(errors.length > 0 ? 4 : 0);
    });
  });
  process.on('SIGQUIT', () => {
    log.info('SIGQUIT: Quitting process immediately');
    removePidfile(pidfile);
    process.exit(0);
  });
  process.on('SIGHUP', () => { /* ignored, as CoreDNS does */ });
  process.on('SIGUSR1', () => {
    if (runtime === undefined) return;
    log.info('SIGUSR1: Reloading');
    let input;
    try {
      input = loadCorefile(conf, port);
    } catch (e) {
      log.error(`SIGUSR1: loading updated Caddyfile: ${(e as Error).message}`);
      return;
    }
    void runtime.reload(input.contents, input.file).then((e) => {
      if (e !== undefined) log.error(`SIGUSR1: starting with listener file descriptors: ${e.message}`);
    });
  });
  return {
    set(r: Runtime) {
      runtime = r;
      // A stop signal that came during start-up is carried out now.
      if (pending !== undefined) process.emit(pending, pending);
    },
  };
}

await main(process.argv.slice(2));
