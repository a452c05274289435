// nsid's Corefile syntax (CoreDNS plugin/nsid/setup.go).

import { hostname } from 'node:os';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { Nsid } from './nsid.ts';

/** What `nsid [DATA]` configures. */
export interface NsidOptions {
  /** The identifier sent back (the arguments joined by one space; by default the host name). */
  data: string;
}

/** Go's os.Hostname(), with CoreDNS's fallback when it fails. */
function defaultData(): string {
  try {
    return hostname();
  } catch {
    return 'localhost';
  }
}

/** Reads the block's `nsid` line; a second one is an error, as in CoreDNS. */
export function parse(c: SetupContext): NsidOptions {
  const d = c.dispenser;
  let data = defaultData();
  let i = 0;
  while (d.next()) {
    if (i > 0) throw new Error('plugin/nsid: this plugin can only be used once per Server Block');
    i++;
    const args = d.remainingArgs();
    if (args.length > 0) data = args.join(' ');
  }
  return { data };
}

export const plugin: PluginDefinition = {
  name: 'nsid',
  setup(c) {
    const o = parse(c);
    c.addPlugin((next) => new Nsid(o.data, next));
  },
};
