// Capability: a handler that sends queries to upstream servers (forward) and
// lets another plugin (loop) see and steer them. The provider declares it with
// `implements UpstreamControl`; a consumer finds it among the block's handlers
// with `isUpstreamControl`, never by importing the provider's folder.

import type { Handler } from '../plugin.ts';

/** Where an upstream address came from, for diagnostics. */
export interface UpstreamOrigin {
  file: string;
  line: number;
  source: 'corefile' | 'resolvconf';
}

/** One upstream as the consumer sees it. */
export interface UpstreamView {
  /** `host:port` as the provider dials it (IPv6 in brackets). */
  addr: string;
  /** Transport: `dns`, `tls`, `https`, … */
  kind: string;
  origin: UpstreamOrigin;
  /** Out of rotation by `quarantine`. */
  quarantined: boolean;
  /** Not marked down by the provider's own health checks. */
  healthy: boolean;
}

export interface UpstreamControl extends Handler {
  /** The zone the handler forwards (`FROM`, lower-case FQDN). */
  readonly upstreamZone: string;
  /** Names below upstreamZone that it does not forward (`except`). */
  readonly upstreamExceptions: readonly string[];
  /** The upstreams in force now (they change when a resolv.conf is re-read). */
  upstreams(): UpstreamView[];
  /** Take the upstream `addr` out of rotation (true) or put it back (false); false when no upstream has that address. */
  quarantine(addr: string, on: boolean): boolean;
}

export function isUpstreamControl(h: Handler): h is UpstreamControl {
  const u = h as Partial<UpstreamControl>;
  return typeof u.upstreams === 'function' && typeof u.quarantine === 'function' && typeof u.upstreamZone === 'string';
}

/**
 * A request value (req.setValue) that keeps a query out of request coalescing in the
 * provider (a probe must reach the upstream itself, not share another's answer).
 */
export const NO_COALESCE = 'loop/no-coalesce';

/** The request value (req.setValue) and metadata label the provider sets to the upstream that answered (`host:port`). */
export const UPSTREAM_USED = 'forward/upstream';
