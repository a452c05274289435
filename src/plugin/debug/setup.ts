// debug: turns off panic recovery for the block's listeners and turns on [DEBUG] logging.
// A setup-only directive: the core reads config.debug when it builds the listeners.

import type { PluginDefinition, SetupContext } from '../plugin.ts';

/** `debug` takes no argument: there is nothing to configure (its presence is the setting). */
export type DebugOptions = Record<never, never>;

/** Validates every `debug` line of the block (no argument). */
export function parse(c: SetupContext): DebugOptions {
  const d = c.dispenser;
  while (d.next()) {
    if (d.nextArg()) throw d.argErr();
  }
  return {};
}

export const plugin: PluginDefinition = {
  name: 'debug',
  setup(c) {
    parse(c);
    c.config.debug = true;
  },
};
