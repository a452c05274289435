import type { PluginDefinition } from '../plugin.ts';
import { Minimal } from './minimal.ts';

export const plugin: PluginDefinition = {
  name: 'minimal',
  setup(c) {
    const d = c.dispenser;
    d.next(); // 'minimal'
    if (d.nextArg()) throw d.argErr();
    c.addPlugin((next) => new Minimal(next));
  },
};
