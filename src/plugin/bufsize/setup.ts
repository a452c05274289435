// bufsize's Corefile syntax (CoreDNS plugin/bufsize/setup.go).

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { Bufsize } from './bufsize.ts';

/** CoreDNS's default: the DNS Flag Day 2020 recommendation. */
export const DEFAULT_BUFSIZE = 1232;

/** What `bufsize [SIZE]` configures. */
export interface BufsizeOptions {
  /** The largest EDNS buffer size a query may advertise to the rest of the chain (512..4096). */
  size: number;
}

/** Go's strconv.Atoi as far as bufsize needs it: an optional sign and decimal digits, or undefined. */
function atoi(s: string): number | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
}

/**
 * Reads the first `bufsize` line of the block (CoreDNS returns on it). Every
 * error is CoreDNS's argument error, wrapped twice in `plugin/bufsize: ` as CoreDNS prints it.
 */
export function parse(c: SetupContext): BufsizeOptions {
  const d = c.dispenser;
  const fail = (): Error => new Error('plugin/bufsize: plugin/bufsize: ' + d.argErr().message);
  if (!d.next()) throw fail();
  const args = d.remainingArgs();
  if (args.length === 0) return { size: DEFAULT_BUFSIZE };
  if (args.length > 1) throw fail();
  const n = atoi(args[0]!);
  if (n === undefined || n < 512 || n > 4096) throw fail();
  return { size: n };
}

export const plugin: PluginDefinition = {
  name: 'bufsize',
  setup(c) {
    const o = parse(c);
    c.addPlugin((next) => new Bufsize(o.size, next));
  },
};
