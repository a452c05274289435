import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { COREDNS_VERSION } from '../../core/directives.ts';
import { Chaos } from './chaos.ts';
import { OWNERS } from './owners.ts';

/** Go's sort.Strings order: plain byte-wise comparison. */
function byteCompare(a: string, b: string): number {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return Buffer.compare(x, y);
}

/** What `chaos [VERSION] [AUTHORS...]` configures. */
export interface ChaosOptions {
  /** The answer to version.bind and version.server: VERSION, or `CoreDNS-<version>` without arguments. */
  version: string;
  /** The answers to authors.bind: AUTHORS deduplicated and sorted byte-wise, or CoreDNS's owners. */
  authors: readonly string[];
}

/** Reads `chaos [VERSION] [AUTHORS...]`; only the first `chaos` line of a block counts, as in CoreDNS. */
export function parse(c: SetupContext): ChaosOptions {
  const d = c.dispenser;
  let version = '';
  let authors: readonly string[] = OWNERS;
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
  return { version, authors };
}

export const plugin: PluginDefinition = {
  name: 'chaos',
  setup(c) {
    const { version, authors } = parse(c);
    c.addPlugin((next) => new Chaos(next, version, authors));
  },
};
