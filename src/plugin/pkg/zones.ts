// Zone matching as CoreDNS's plugin.Zones.Matches and plugin.Name.Matches.

import { isSubdomain } from '../../wire/name.ts';

/** The longest zone of `zones` that `qname` is equal to or below; '' when none. */
export function zonesMatches(zones: readonly string[], qname: string): string {
  let zone = '';
  for (let i = 0; i < zones.length; i++) {
    const z = zones[i];
    if (z.length > zone.length && isSubdomain(qname, z)) zone = z;
  }
  return zone;
}

/** CoreDNS plugin.Name(n).Matches(child): equal (exact text) or a subdomain (case-insensitive). */
export function nameMatches(n: string, child: string): boolean {
  return n === child || n === '.' || isSubdomain(child, n);
}
