// The `max_connections` / `max_streams` block that CoreDNS's https and grpc_server plugins both read (their
// setup.go files parse it the same way, with the same error texts); each plugin maps the values onto its
// listener afterwards (grpc_server wraps max_streams to uint32, https bounds it).

import type { Dispenser } from '../../corefile/dispenser.ts';

const INT64_MAX = (1n << 63n) - 1n;

/** Go's strconv.Atoi (64-bit) with its error text. */
function atoi(s: string): bigint {
  if (!/^[+-]?[0-9]+$/.test(s)) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: invalid syntax`);
  const v = BigInt(s);
  if (v > INT64_MAX || v < -INT64_MAX - 1n) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: value out of range`);
  return v;
}

/** The two limits as given (non-negative int64 values); undefined: not set. */
export interface ListenerLimits {
  maxConnections: bigint | undefined;
  maxStreams: bigint | undefined;
}

/**
 * Reads the directive's first line (no arguments) and its block. `maxStreamsBound`, when given, is checked
 * before the duplicate check, as https's setup does (`max_streams must not exceed N`).
 */
export function parseListenerLimits(d: Dispenser, maxStreamsBound?: bigint): ListenerLimits {
  const o: ListenerLimits = { maxConnections: undefined, maxStreams: undefined };
  d.next();
  if (d.remainingArgs().length > 0) throw d.argErr();
  while (d.nextBlock()) {
    const opt = d.val();
    if (opt !== 'max_connections' && opt !== 'max_streams') throw d.errf(`unknown property '${opt}'`);
    const args = d.remainingArgs();
    if (args.length !== 1) throw d.argErr();
    let v: bigint;
    try {
      v = atoi(args[0]!);
    } catch (e) {
      throw d.errf(`invalid ${opt} value '${args[0]}': ${(e as Error).message}`);
    }
    if (v < 0n) throw d.errf(`${opt} must be a non-negative integer: ${v}`);
    if (opt === 'max_streams' && maxStreamsBound !== undefined && v > maxStreamsBound) {
      throw d.errf(`max_streams must not exceed ${maxStreamsBound}: ${v}`);
    }
    if (opt === 'max_streams') {
      if (o.maxStreams !== undefined) throw d.err('max_streams already defined for this server block');
      o.maxStreams = v;
    } else {
      if (o.maxConnections !== undefined) throw d.err('max_connections already defined for this server block');
      o.maxConnections = v;
    }
  }
  return o;
}
