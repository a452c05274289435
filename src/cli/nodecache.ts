// `nodens node-cache`: a drop-in for k8s-dns-node-cache. Parses node-cache's
// flags together with CoreDNS's (one Go flag set, as there), runs node-cache's
// set-up (src/nodecache), registers its teardown as a process-exit hook, then
// starts the server from the generated Corefile like plain `nodens` does.

import { writeSync } from 'node:fs';
import { log } from '../core/log.ts';
import { versionLines, NODENS_VERSION, COREDNS_VERSION } from '../version.ts';
import { parseFlags, usage, type FlagError, type FlagSpec } from './flags.ts';
import { COREDNS_FLAGS, fatalStartup, onProcessExit, serve, setLogFormat } from './serve.ts';
import { NODECACHE_FLAGS, paramsFromFlags } from '../nodecache/params.ts';
import { CacheApp } from '../nodecache/app.ts';
import { nodeCacheRegistry } from '../nodecache/registry.ts';

const FLAGS: FlagSpec[] = [...NODECACHE_FLAGS, ...COREDNS_FLAGS];

function err(s: string): void { writeSync(2, s); }

function nodeCacheUsage(): string {
  const u = usage('nodens node-cache', FLAGS);
  const nl = u.indexOf('\n');
  return u.slice(0, nl + 1) + `Runs CoreDNS v${COREDNS_VERSION} as a nodelocal cache listening on the specified ip:port\n\n` + u.slice(nl + 1);
}

export async function runNodeCache(argv: string[]): Promise<void> {
  log.info(`Starting node-cache image: nodens ${NODENS_VERSION}`);
  let parsed;
  try {
    parsed = parseFlags(FLAGS, argv);
  } catch (e) {
    const fe = e as FlagError;
    if (fe.helpRequested) {
      err(nodeCacheUsage());
      process.exit(0);
    }
    err(`${fe.message}\n${nodeCacheUsage()}`);
    process.exit(2);
  }
  const flag = (n: string): string => parsed.values.get(n) ?? '';
  setLogFormat(flag('log-format'));
  const registry = nodeCacheRegistry();
  if (flag('version') === 'true') {
    writeSync(1, versionLines().join('\n') + '\n');
    process.exit(0);
  }
  if (flag('plugins') === 'true') {
    writeSync(1, registry.listForFlag().map((n) => `${n}\n`).join('') + '\n');
    process.exit(0);
  }
  let params;
  try {
    params = paramsFromFlags(parsed.values);
  } catch (e) {
    log.fatal(`Error parsing flags - ${(e as Error).message}, Exiting`);
    process.exit(1);
  }
  log.info(`Using Corefile ${params.coreFile}`);
  log.info(`Using Pidfile ${params.pidfile}`);
  if (parsed.rest.length > 0) fatalStartup(`extra command line arguments: [${parsed.rest.join(' ')}]`, true);

  const app = new CacheApp(params, log);
  await app.init();
  if (!params.skipTeardown) onProcessExit.push(() => { app.teardown(); });
  app.startPeriodic();
  await serve({ conf: flag('conf'), port: flag('dns.port'), pidfile: flag('pidfile'), quiet: flag('quiet') === 'true', registry });
}
