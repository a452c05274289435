// local's Corefile syntax (CoreDNS plugin/local/setup.go).

import { localMetrics } from './metrics.ts';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { Local } from './local.ts';

/** What `local { localhost_prefix on|off }` configures. */
export interface LocalOptions {
  /**
   * `localhost_prefix`: answer names that start with `localhost.` (e.g.
   * `localhost.example.net.`) with the loopback addresses (default on).
   */
  localhostPrefix: boolean;
}

/** Reads every `local` line of the block (the last `localhost_prefix` wins). */
export function parse(c: SetupContext): LocalOptions {
  const d = c.dispenser;
  let localhostPrefix = true;
  while (d.next()) {
    if (d.remainingArgs().length !== 0) throw d.argErr();
    while (d.nextBlock()) {
      const prop = d.val();
      if (prop !== 'localhost_prefix') throw d.errf(`unknown property '${prop}'`);
      const args = d.remainingArgs();
      if (args.length !== 1) throw d.argErr();
      const v = args[0]!;
      if (v === 'on') localhostPrefix = true;
      else if (v === 'off') localhostPrefix = false;
      else throw d.errf(`localhost_prefix expects 'on' or 'off', got ${JSON.stringify(v)}`);
    }
  }
  return { localhostPrefix };
}

export const plugin: PluginDefinition = {
  name: 'local',
  setup(c) {
    const o = parse(c);
    const count = localMetrics(c.instance.metrics);
    c.addPlugin((next) => new Local(o.localhostPrefix, c.log, next, count));
  },
};
