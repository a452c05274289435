import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { Any } from './any.ts';

/** `any` takes no argument and no block: there is nothing to configure. */
export type AnyOptions = Record<never, never>;

/** Validates `any` (no argument, no block). Only the first `any` line of a block is read, as in CoreDNS. */
export function parse(c: SetupContext): AnyOptions {
  const d = c.dispenser;
  d.next(); // 'any'
  if (d.nextArg()) throw d.argErr();
  if (d.nextBlock()) throw d.errf(`unknown property '${d.val()}'`);
  return {};
}

export const plugin: PluginDefinition = {
  name: 'any',
  setup(c) {
    parse(c);
    c.addPlugin((next) => new Any(next));
  },
};
