// shed's Corefile syntax (CoreDNS plugin/shed/setup.go).

import { shedMetrics } from './metrics.ts';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { goQuote } from '../../corefile/address.ts';
import { Shed, ShedSockets, ShedWriter } from './shed.ts';

/** `shed` takes no arguments and no options. */
export type ShedOptions = Record<string, never>;

/**
 * Reads the block's one `shed` line; then, as CoreDNS, refuses a block with a key of another transport
 * than plain DNS (the discipline exists only on plain-DNS UDP listeners).
 */
export function parse(c: SetupContext): ShedOptions {
  const d = c.dispenser;
  let i = 0;
  while (d.next()) {
    if (i > 0) throw new Error('plugin/shed: this plugin can only be used once per Server Block');
    i++;
    if (d.remainingArgs().length !== 0) throw d.argErr();
    if (d.nextBlock()) throw d.errf('shed takes no options');
  }
  for (const key of c.config.keys) {
    const m = /^([a-z0-9]+):\/\//.exec(key);
    const transport = m === null ? 'dns' : m[1]!;
    if (transport !== 'dns') {
      throw d.errf(`only plain DNS server blocks are supported; ${goQuote(key)} uses transport ${goQuote(transport)}`);
    }
  }
  return {};
}

export const plugin: PluginDefinition = {
  name: 'shed',
  setup(c) {
    parse(c);
    // The writers of this configuration's sockets, shared by its blocks with shed.
    const sockets = c.instance.shared('shed/sockets', () => new ShedSockets());
    c.config.setUdpWriter((sock, server, localAddress, localPort) =>
      sockets.add(new ShedWriter(sock, server, localAddress, localPort, c.log, undefined, undefined, shedMetrics(c.instance.metrics))));
    c.addPlugin((next) => new Shed(sockets, next));
  },
};
