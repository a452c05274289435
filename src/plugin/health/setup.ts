// health [ADDRESS] { lameduck DURATION }
//
// Not in the query chain: an HTTP endpoint, /health → 200 OK while the process
// runs, a self-check of that endpoint every second (with its metrics and
// warnings) and, on final shutdown, a lameduck pause while DNS is still served.

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { formatDuration, parseDuration, toMillis } from '../pkg/duration.ts';
import { httpSite, addressArgument } from '../pkg/httpserver.ts';
import { Health, healthMetrics } from './health.ts';

export const DEFAULT_ADDR = ':8080';

/** What `health [ADDRESS] { lameduck DURATION }` configures. */
export interface HealthOptions {
  /** The address /health is served on (host:port); DEFAULT_ADDR when none is given. */
  addr: string;
  /** How long to keep serving after the final shutdown began, in nanoseconds (0: no lameduck). */
  lameduck: bigint;
}

/** Reads every `health` line of the block; the last one wins. */
export function parse(c: SetupContext): HealthOptions {
  const d = c.dispenser;
  let addr = '';
  let lameduck = 0n;
  while (d.next()) {
    addr = addressArgument(d, addr);
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'lameduck': {
          const rest = d.remainingArgs();
          if (rest.length !== 1) throw d.argErr();
          try {
            lameduck = parseDuration(rest[0]!);
          } catch (e) {
            throw new Error(`unable to parse lameduck duration value: '${rest[0]}' : ${(e as Error).message}`);
          }
          break;
        }
        default:
          throw d.err(`unknown property '${d.val()}'`);
      }
    }
  }
  if (addr === '') addr = DEFAULT_ADDR;
  return { addr, lameduck };
}

export const plugin: PluginDefinition = {
  name: 'health',
  setup(c) {
    const { addr, lameduck } = parse(c);

    const site = httpSite(c);
    const h = new Health(addr, site, c.log, healthMetrics(c.instance.metrics));
    site.mount(addr, '/health', (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end('OK');
    }, 'fail');

    c.onStartup(() => { h.startSelfCheck(); });
    c.onRestartFailed(() => { h.startSelfCheck(); });
    // After a reload this instance's checker stops; the new instance runs its own.
    c.onShutdown(() => { if (site.retired) h.stopSelfCheck(); });
    c.onFinalShutdown(async () => {
      if (lameduck > 0n) {
        c.log.info(`Going into lameduck mode for ${formatDuration(lameduck)}`);
        await new Promise<void>((resolve) => { setTimeout(resolve, toMillis(lameduck)); });
      }
      h.stopSelfCheck();
      await site.unmount(addr, '/health');
    });
  },
};
