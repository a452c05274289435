// debug: turns off panic recovery for the block's listeners and turns on [DEBUG] logging.
// A setup-only directive: the core reads config.debug when it builds the listeners.

import type { PluginDefinition } from '../plugin.ts';

export const plugin: PluginDefinition = {
  name: 'debug',
  setup(c) {
    const d = c.dispenser;
    while (d.next()) {
      if (d.nextArg()) throw d.argErr();
      c.config.debug = true;
    }
  },
};
