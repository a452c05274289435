// https's Corefile syntax (CoreDNS plugin/https/setup.go): limits of the block's DNS-over-HTTPS listener,
// stored in the block's config for the core's DoH listener. No handler.

import type { PluginDefinition, SetupContext } from '../plugin.ts';

/** What `https { max_connections N; max_streams N }` configures; undefined: the server's default (200, 250). */
export interface HttpsOptions {
  /** `max_connections`: concurrent connections of the listener (0: unlimited). */
  maxConnections: number | undefined;
  /** `max_streams`: concurrent HTTP/2 streams per connection (0: the HTTP/2 default). */
  maxStreams: number | undefined;
}

const INT64_MAX = (1n << 63n) - 1n;
const UINT32_MAX = 4294967295;

/** Go's strconv.Atoi (64-bit) with its error text. */
function atoi(s: string): bigint {
  if (!/^[+-]?[0-9]+$/.test(s)) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: invalid syntax`);
  const v = BigInt(s);
  if (v > INT64_MAX || v < -INT64_MAX - 1n) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: value out of range`);
  return v;
}

/** Reads the block's `https` directive (only its first line: CoreDNS reads one). */
export function parse(c: SetupContext): HttpsOptions {
  const d = c.dispenser;
  const o: HttpsOptions = { maxConnections: undefined, maxStreams: undefined };
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
    if (opt === 'max_streams' && v > BigInt(UINT32_MAX)) throw d.errf(`max_streams must not exceed ${UINT32_MAX}: ${v}`);
    if (opt === 'max_connections') {
      if (o.maxConnections !== undefined) throw d.err('max_connections already defined for this server block');
      o.maxConnections = Number(v);
    } else {
      if (o.maxStreams !== undefined) throw d.err('max_streams already defined for this server block');
      o.maxStreams = Number(v);
    }
  }
  return o;
}

export const plugin: PluginDefinition = {
  name: 'https',
  setup(c) {
    const o = parse(c);
    if (o.maxConnections !== undefined) c.config.maxHttpsConnections = o.maxConnections;
    if (o.maxStreams !== undefined) c.config.maxHttpsStreams = o.maxStreams;
  },
};
