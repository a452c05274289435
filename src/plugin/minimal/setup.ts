import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { Minimal } from './minimal.ts';

/** `minimal` takes no argument: there is nothing to configure. */
export type MinimalOptions = Record<never, never>;

/** Validates `minimal` (no argument). Only the first `minimal` line of a block is read, as in CoreDNS. */
export function parse(c: SetupContext): MinimalOptions {
  const d = c.dispenser;
  d.next(); // 'minimal'
  if (d.nextArg()) throw d.argErr();
  return {};
}

export const plugin: PluginDefinition = {
  name: 'minimal',
  setup(c) {
    parse(c);
    c.addPlugin((next) => new Minimal(next));
  },
};
