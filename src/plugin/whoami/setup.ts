import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { Whoami } from './whoami.ts';

/** `whoami` takes no argument: there is nothing to configure. */
export type WhoamiOptions = Record<never, never>;

/** Validates `whoami` (no argument). Only the first `whoami` line of a block is read, as in CoreDNS. */
export function parse(c: SetupContext): WhoamiOptions {
  const d = c.dispenser;
  d.next(); // 'whoami'
  if (d.nextArg()) throw d.argErr();
  return {};
}

export const plugin: PluginDefinition = {
  name: 'whoami',
  setup(c) {
    parse(c);
    const h = new Whoami();
    c.addPlugin(() => h);
  },
};
