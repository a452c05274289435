// Capability: a handler whose zones the cache must not cache (CoreDNS's cache.ZoneBypasser). dynupdate
// declares its zone: its data changes with every UPDATE, so authoritative answers are read from the
// current snapshot each time. The cache of the same block reads its handlers' zones at start-up.

import type { Handler } from '../plugin.ts';

export interface ZoneBypasser extends Handler {
  /** Zones (lower-case FQDNs) whose queries pass the cache untouched. */
  cacheBypassZones(): string[];
}

export function isZoneBypasser(h: Handler): h is ZoneBypasser {
  return typeof (h as Partial<ZoneBypasser>).cacheBypassZones === 'function';
}
