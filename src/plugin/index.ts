// The built-in plugins, registered at their plugin.cfg positions.
import type { PluginDefinition } from './plugin.ts';

export const builtinPlugins: PluginDefinition[] = [];
