// The `nodens` command: CoreDNS's flags, startup output, signals and exit
// statuses. The only module that ends the process. `nodens doctor`,
// `nodens validate` and `nodens node-cache` are subcommands.

import { writeSync } from 'node:fs';
import { createRegistry } from '../index.ts';
import { versionLines } from '../version.ts';
import { goQuote } from '../corefile/address.ts';
import { parseFlags, usage, type FlagError, type FlagSpec } from './flags.ts';
import { goPanicText, PANIC_EXIT_STATUS } from './panic.ts';
import { COREDNS_FLAGS, fatalStartup, runProcessExitHooks, serve, setLogFormat } from './serve.ts';
import { inWorkerThread } from '../plugin/pkg/workers.ts';

const FLAGS: FlagSpec[] = [
  ...COREDNS_FLAGS,
  { name: 'workers', kind: 'string', default: '1', usage: 'nodens: serve with N worker threads (0 = one per CPU)' },
];

// After CoreDNS's flag usage, which stays byte for byte Go's: nodens's subcommands, one line each.
export const SUBCOMMANDS_USAGE = `Subcommands:
  nodens doctor [flags]      check a Corefile and this host for forwarding loops before deploying
  nodens validate [flags]    load a Corefile through every plugin's setup without serving; exit 1 on an error
  nodens node-cache [flags]  run as node-local-dns does (link-local address, iptables rules, health port)
Run "nodens <subcommand> -h" for its flags.
`;

function out(s: string): void { writeSync(1, s); }
function err(s: string): void { writeSync(2, s); }

export async function main(argv: string[]): Promise<void> {
  // Loaded only for the subcommand: a server's start does not pay for its imports.
  if (argv[0] === 'doctor') process.exit(await (await import('./doctor.ts')).runDoctor(argv.slice(1)));
  if (argv[0] === 'validate') process.exit(await (await import('./validate.ts')).runValidate(argv.slice(1)));
  // An exception nothing caught (a plugin's, rethrown by the core when the debug plugin is on, or a bug)
  // ends the process as an unrecovered Go panic ends CoreDNS: its report on stderr, exit status 2.
  process.on('uncaughtException', (e) => {
    err(goPanicText(e));
    runProcessExitHooks();
    process.exit(PANIC_EXIT_STATUS);
  });
  if (argv[0] === 'node-cache') {
    // Loaded only for this subcommand: plain nodens starts without node-cache's modules.
    const { runNodeCache } = await import('./nodecache.ts');
    await runNodeCache(argv.slice(1));
    return;
  }
  let parsed;
  try {
    parsed = parseFlags(FLAGS, argv);
  } catch (e) {
    const fe = e as FlagError;
    if (fe.helpRequested) {
      err(usage('nodens', FLAGS) + SUBCOMMANDS_USAGE);
      process.exit(0);
    }
    err(`${fe.message}\n${usage('nodens', FLAGS)}${SUBCOMMANDS_USAGE}`);
    process.exit(2);
  }
  const flag = (n: string): string => parsed.values.get(n) ?? '';
  setLogFormat(flag('log-format'));
  // Go's logger still has its default timestamp at this point, so CoreDNS prints one here.
  if (parsed.rest.length > 0) fatalStartup(`extra command line arguments: [${parsed.rest.join(' ')}]`, true);

  const registry = createRegistry();
  if (flag('version') === 'true') {
    out(versionLines().join('\n') + '\n');
    process.exit(0);
  }
  if (flag('plugins') === 'true') {
    out(registry.listForFlag().map((n) => `${n}\n`).join('') + '\n');
    process.exit(0);
  }

  const pidfile = flag('pidfile');
  const workers = parseWorkers(flag('workers'));
  // -workers N: this (main) thread serves as worker 1 and supervises the N - 1 threads serve() starts; a worker
  // thread runs this same code with the same flags, and serves alone.
  const asMain = workers > 1 && !inWorkerThread();
  if (asMain) (await import('./supervisor.ts')).prepareWorkers(workers);
  await serve({ conf: flag('conf'), port: flag('dns.port'), pidfile, quiet: flag('quiet') === 'true', registry, workers: asMain ? workers : 1 });
}

/** -workers N: 0 means one per CPU. */
function parseWorkers(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) fatalStartup(`invalid -workers value: ${goQuote(v)}`);
  return n === 0 ? process.getBuiltinModule('node:os').availableParallelism() : n;
}

void main(process.argv.slice(2));
