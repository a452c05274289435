// The plugin registry: which directives exist and in which order they run.
// Built-in plugins take their place from CoreDNS's plugin.cfg; an external
// plugin names a neighbour to sit before or after. A directive of plugin.cfg
// that nodens does not implement is not registered, so a Corefile using it
// fails with CoreDNS's own "Unknown directive" error.

import type { PluginDefinition } from '../plugin/plugin.ts';
import { COREDNS_DIRECTIVES } from './directives.ts';

export interface Placement {
  /** Run just before this directive (closer to the client). */
  before?: string;
  /** Run just after this directive (closer to the end of the chain). */
  after?: string;
}

export class PluginRegistry {
  private readonly order: string[] = [...COREDNS_DIRECTIVES];
  private readonly defs = new Map<string, PluginDefinition>();

  /** Register a plugin. Built-ins (names in plugin.cfg) need no placement; others must give one. */
  register(def: PluginDefinition, placement?: Placement): void {
    if (this.defs.has(def.name)) throw new Error(`plugin "${def.name}" is already registered`);
    if (!this.order.includes(def.name)) {
      const anchor = placement?.before ?? placement?.after;
      if (anchor === undefined) {
        throw new Error(`plugin "${def.name}" is not a CoreDNS directive: give { before } or { after } to place it in the chain`);
      }
      const at = this.order.indexOf(anchor);
      if (at < 0) throw new Error(`plugin "${def.name}": unknown directive "${anchor}" to place it next to`);
      this.order.splice(placement?.before !== undefined ? at : at + 1, 0, def.name);
    }
    this.defs.set(def.name, def);
  }

  has(name: string): boolean { return this.defs.has(name); }
  get(name: string): PluginDefinition | undefined { return this.defs.get(name); }

  /** Registered directives in execution order. */
  directives(): string[] { return this.order.filter((n) => this.defs.has(n)); }

  /** Names for `-plugins`: sorted like CoreDNS prints them (`on` last, as a non-DNS plugin). */
  listForFlag(): string[] {
    const names = [...this.defs.keys()].filter((n) => n !== 'on').sort();
    if (this.defs.has('on')) names.push('on');
    return names;
  }
}
