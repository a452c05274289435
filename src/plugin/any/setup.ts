import type { PluginDefinition } from '../plugin.ts';
import { Any } from './any.ts';

export const plugin: PluginDefinition = {
  name: 'any',
  setup(c) {
    const d = c.dispenser;
    d.next(); // 'any'
    if (d.nextArg()) throw d.argErr();
    if (d.nextBlock()) throw d.errf(`unknown property '${d.val()}'`);
    c.addPlugin((next) => new Any(next));
  },
};
