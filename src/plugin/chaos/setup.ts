import type { PluginDefinition } from '../plugin.ts';
import { COREDNS_VERSION } from '../../core/directives.ts';
import { Chaos } from './chaos.ts';
import { OWNERS } from './owners.ts';

/** Go's sort.Strings order: plain byte-wise comparison. */
function byteCompare(a: string, b: string): number {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return Buffer.compare(x, y);
}

export const plugin: PluginDefinition = {
  name: 'chaos',
  setup(c) {
    const d = c.dispenser;
    let version = '';
    let authors: readonly string[] = OWNERS;
    // Only the first `chaos` line of a block counts, as in CoreDNS.
    if (d.next()) {
      const args = d.remainingArgs();
      if (args.length === 0) {
        // What `-version` prints first: the CoreDNS release whose behaviour nodens reproduces.
        version = 'CoreDNS-' + COREDNS_VERSION;
      } else if (args.length === 1) {
        version = args[0];
      } else {
        version = args[0];
        authors = [...new Set(args.slice(1))].sort(byteCompare);
      }
      if (d.nextBlock()) throw d.errf(`unknown property '${d.val()}'`);
    }
    c.addPlugin((next) => new Chaos(next, version, authors));
  },
};
