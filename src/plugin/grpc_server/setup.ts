// grpc_server's Corefile syntax (CoreDNS plugin/grpc_server/setup.go): limits of the block's DNS-over-gRPC
// listener, stored in the block's config for the core's gRPC listener. No handler. In a block that is not a
// `grpc://` one the values are read and unused, as in CoreDNS.

import type { PluginDefinition, SetupContext } from '../plugin.ts';

/** What `grpc_server { max_streams N; max_connections N }` configures; undefined: the server's default (256, 200). */
export interface GrpcServerOptions {
  /** `max_streams`: concurrent streams per connection (0: unbounded). */
  maxStreams: number | undefined;
  /** `max_connections`: concurrent connections of the listener (0: unbounded). */
  maxConnections: number | undefined;
}

const INT64_MAX = (1n << 63n) - 1n;

/** Go's strconv.Atoi (64-bit) with its error text. */
function atoi(s: string): bigint {
  if (!/^[+-]?[0-9]+$/.test(s)) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: invalid syntax`);
  const v = BigInt(s);
  if (v > INT64_MAX || v < -INT64_MAX - 1n) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: value out of range`);
  return v;
}

/** Reads the block's `grpc_server` directive (only its first line: CoreDNS reads one). */
export function parse(c: SetupContext): GrpcServerOptions {
  const d = c.dispenser;
  const o: GrpcServerOptions = { maxStreams: undefined, maxConnections: undefined };
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
    if (opt === 'max_streams') {
      if (o.maxStreams !== undefined) throw d.err('max_streams already defined for this server block');
      // CoreDNS hands grpc-go uint32(max_streams): larger values wrap, and a wrapped 0 means unbounded.
      o.maxStreams = Number(BigInt.asUintN(32, v));
    } else {
      if (o.maxConnections !== undefined) throw d.err('max_connections already defined for this server block');
      o.maxConnections = v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(v);
    }
  }
  return o;
}

export const plugin: PluginDefinition = {
  name: 'grpc_server',
  setup(c) {
    const o = parse(c);
    if (o.maxStreams !== undefined) c.config.maxGrpcStreams = o.maxStreams;
    if (o.maxConnections !== undefined) c.config.maxGrpcConnections = o.maxConnections;
  },
};
