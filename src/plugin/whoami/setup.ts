import type { PluginDefinition } from '../plugin.ts';
import { Whoami } from './whoami.ts';

export const plugin: PluginDefinition = {
  name: 'whoami',
  setup(c) {
    const d = c.dispenser;
    d.next(); // 'whoami'
    if (d.nextArg()) throw d.argErr();
    const h = new Whoami();
    c.addPlugin(() => h);
  },
};
