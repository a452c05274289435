// The plugins of `nodens node-cache`: every built-in, with the loop guard on for
// a plain `loop` (the Corefiles node-cache writes say `loop`; under CoreDNS that
// exits on a loop and leaves the node without DNS, seed 004).

import { PluginRegistry } from '../core/registry.ts';
import { builtinPlugins } from '../plugin/index.ts';
import { loopPlugin } from '../plugin/loop/setup.ts';

export function nodeCacheRegistry(): PluginRegistry {
  const registry = new PluginRegistry();
  for (const p of builtinPlugins) registry.register(p.name === 'loop' ? loopPlugin(true) : p);
  return registry;
}
