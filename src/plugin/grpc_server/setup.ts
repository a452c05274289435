// grpc_server's Corefile syntax (CoreDNS plugin/grpc_server/setup.go): limits of the block's DNS-over-gRPC
// listener, stored in the block's config for the core's gRPC listener. No handler. In a block that is not a
// `grpc://` one the values are read and unused, as in CoreDNS.

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { parseListenerLimits } from '../pkg/listener-limits.ts';

/** What `grpc_server { max_streams N; max_connections N }` configures; undefined: the server's default (256, 200). */
export interface GrpcServerOptions {
  /** `max_streams`: concurrent streams per connection (0: unbounded). */
  maxStreams: number | undefined;
  /** `max_connections`: concurrent connections of the listener (0: unbounded). */
  maxConnections: number | undefined;
}

/** Reads the block's `grpc_server` directive (only its first line: CoreDNS reads one). */
export function parse(c: SetupContext): GrpcServerOptions {
  const l = parseListenerLimits(c.dispenser);
  return {
    // CoreDNS hands grpc-go uint32(max_streams): larger values wrap, and a wrapped 0 means unbounded.
    maxStreams: l.maxStreams === undefined ? undefined : Number(BigInt.asUintN(32, l.maxStreams)),
    maxConnections: l.maxConnections === undefined ? undefined
      : l.maxConnections > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(l.maxConnections),
  };
}

export const plugin: PluginDefinition = {
  name: 'grpc_server',
  setup(c) {
    const o = parse(c);
    if (o.maxStreams !== undefined) c.config.maxGrpcStreams = o.maxStreams;
    if (o.maxConnections !== undefined) c.config.maxGrpcConnections = o.maxConnections;
  },
};
