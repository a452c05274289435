// ready [ADDRESS] { monitor until-ready|continuously }
//
// /ready answers 200 OK once every plugin that can report readiness (of the
// blocks that contain `ready`) says so, else 503 with the sorted names of those
// that do not; 503 `Shutting down` once shutdown began.

import { isReadiness, type PluginDefinition, type SetupContext } from '../plugin.ts';
import { httpSite, addressArgument } from '../pkg/httpserver.ts';
import { ReadyList } from './list.ts';

export const DEFAULT_ADDR = ':8181';

/** What `ready [ADDRESS] { monitor until-ready|continuously }` configures. */
export interface ReadyOptions {
  /** The address /ready is served on (host:port), DEFAULT_ADDR when none is given. */
  addr: string;
  /** `until-ready` (default): a plugin that once said ready is not asked again; `continuously`: asked on every request. */
  monitor: 'until-ready' | 'continuously';
}

/** Reads the block's `ready` directive (once per block). */
export function parse(c: SetupContext): ReadyOptions {
  const d = c.dispenser;
  let addr = DEFAULT_ADDR;
  let monitor: ReadyOptions['monitor'] = 'until-ready';
  let i = 0;
  while (d.next()) {
    if (i > 0) throw new Error('plugin/ready: this plugin can only be used once per Server Block');
    i++;
    addr = addressArgument(d, addr);
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'monitor': {
          const rest = d.remainingArgs();
          if (rest.length !== 1) throw d.argErr();
          if (rest[0] === 'until-ready' || rest[0] === 'continuously') monitor = rest[0];
          else throw d.err(`monitor type '${rest[0]}' not supported`);
          break;
        }
        default:
          throw d.err(`unknown property '${d.val()}'`);
      }
    }
  }
  return { addr, monitor };
}

export const plugin: PluginDefinition = {
  name: 'ready',
  setup(c) {
    const { addr, monitor } = parse(c);

    // One list per instance (CoreDNS: process-wide, reset by every setup); the last block's mode wins.
    const list = c.instance.shared('ready/list', () => new ReadyList());
    list.keepReadiness = monitor === 'continuously';

    const site = httpSite(c);
    site.mount(addr, '/ready', (_req, res) => {
      const r = list.check();
      if (r.shuttingDown) {
        res.writeHead(503, { 'Content-Type': 'text/plain; charset=utf-8' });
        res.end('Shutting down');
        return;
      }
      if (r.ready) {
        res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' });
        res.end('OK');
        return;
      }
      c.log.info(`Plugins not ready: ${JSON.stringify(r.notReady)}`);
      res.writeHead(503, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end(r.notReady);
    }, 'ignore');

    const config = c.config;
    const inst = c.instance;
    // The handlers of this block that can report (CoreDNS), and those of any block that report for the whole server.
    const collect = (): void => {
      for (const b of inst.blockConfigs()) {
        for (const h of b.handlers) {
          if (isReadiness(h) && (b === config || h.readinessScope === 'server')) list.add(h.name, h);
        }
      }
    };
    c.onStartup(collect);
    c.onRestartFailed(() => { list.shuttingDown = false; collect(); });
    // Unlike CoreDNS, a reload does not close the endpoint: the old list answers until the new one is in force.
    c.onFinalShutdown(async () => {
      // 503 `Shutting down` while the listener is still open (shared with health in lameduck), then gone.
      list.shuttingDown = true;
      await site.unmount(addr, '/ready', true);
    });
  },
};
