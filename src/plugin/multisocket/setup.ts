// multisocket's Corefile syntax (CoreDNS plugin/multisocket/multisocket.go): how many SO_REUSEPORT sockets each
// listen address of the block opens. One Node.js process serves them all (see README: `-workers` for cores).

import { availableParallelism } from 'node:os';
import type { PluginDefinition, SetupContext } from '../plugin.ts';

/** CoreDNS's maxNumSockets. */
export const MAX_NUM_SOCKETS = 1024;

/** Go's strconv.Atoi error text for `s`, or the number. */
function atoi(s: string): number {
  if (!/^[+-]?[0-9]+$/.test(s)) throw new Error(`invalid num sockets: strconv.Atoi: parsing ${JSON.stringify(s)}: invalid syntax`);
  const v = BigInt(s);
  if (v > (1n << 63n) - 1n || v < -(1n << 63n)) throw new Error(`invalid num sockets: strconv.Atoi: parsing ${JSON.stringify(s)}: value out of range`);
  return Number(v);
}

/**
 * `multisocket [NUM_SOCKETS]`: the count, or GOMAXPROCS's default (the CPUs this process may use). A second
 * `multisocket` in the block is an argument error, as CoreDNS reads only one.
 */
export function parse(c: SetupContext): number {
  const d = c.dispenser;
  d.next();
  const args = d.remainingArgs();
  if (args.length > 1 || d.next()) throw d.argErr();
  if (args.length === 0) return availableParallelism();
  const n = atoi(args[0]!);
  if (n < 1) throw new Error(`num sockets can not be zero or negative: ${n}`);
  if (n > MAX_NUM_SOCKETS) throw new Error(`num sockets exceeds maximum (${MAX_NUM_SOCKETS}): ${n}`);
  return n;
}

export const plugin: PluginDefinition = {
  name: 'multisocket',
  setup(c) {
    c.config.numSockets = parse(c);
  },
};
