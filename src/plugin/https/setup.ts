// https's Corefile syntax (CoreDNS plugin/https/setup.go): limits of the block's DNS-over-HTTPS listener,
// stored in the block's config for the core's DoH listener. No handler.

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { parseListenerLimits } from '../pkg/listener-limits.ts';

/** What `https { max_connections N; max_streams N }` configures; undefined: the server's default (200, 250). */
export interface HttpsOptions {
  /** `max_connections`: concurrent connections of the listener (0: unlimited). */
  maxConnections: number | undefined;
  /** `max_streams`: concurrent HTTP/2 streams per connection (0: the HTTP/2 default). */
  maxStreams: number | undefined;
}

const UINT32_MAX = 4294967295n;

/** Reads the block's `https` directive (only its first line: CoreDNS reads one). */
export function parse(c: SetupContext): HttpsOptions {
  const l = parseListenerLimits(c.dispenser, UINT32_MAX);
  return {
    maxConnections: l.maxConnections === undefined ? undefined : Number(l.maxConnections),
    maxStreams: l.maxStreams === undefined ? undefined : Number(l.maxStreams),
  };
}

export const plugin: PluginDefinition = {
  name: 'https',
  setup(c) {
    const o = parse(c);
    if (o.maxConnections !== undefined) c.config.maxHttpsConnections = o.maxConnections;
    if (o.maxStreams !== undefined) c.config.maxHttpsStreams = o.maxStreams;
  },
};
