import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { hostInterfaces, listIP, type InterfaceTable } from './bind.ts';

/** What the `bind` lines of a block configure. */
export interface BindOptions {
  /**
   * The addresses to listen on, in order: every line's addresses with interface
   * names expanded to their addresses, minus the line's `except` ones.
   */
  hosts: string[];
}

/** Reads every `bind ADDRESS|IFACE... { except ADDRESS|IFACE... }` line of the block. */
export function parse(c: SetupContext): BindOptions {
  const d = c.dispenser;
  let ifaces: InterfaceTable = {};
  try {
    ifaces = hostInterfaces();
  } catch (e) {
    c.log.warning(`failed to get interfaces list, cannot bind by interface name: ${(e as Error).message}`);
  }
  const all: string[] = [];
  while (d.next()) {
    const addrs = d.remainingArgs();
    if (addrs.length === 0) throw new Error('at least one address or interface name is expected');
    let except: string[] = [];
    while (d.nextBlock()) {
      if (d.val() !== 'except') throw new Error(`invalid option ${JSON.stringify(d.val())}`);
      except = d.remainingArgs();
      if (except.length === 0) throw new Error('at least one address or interface must be given to except subdirective');
    }
    const ips = listIP(addrs, ifaces);
    const excluded = listIP(except, ifaces);
    for (const ip of ips) if (!excluded.includes(ip)) all.push(ip);
  }
  return { hosts: all };
}

export const plugin: PluginDefinition = {
  name: 'bind',
  setup(c) {
    const { hosts } = parse(c);
    c.config.listenHosts = hosts;
  },
};
