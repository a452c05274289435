// Zone matching as CoreDNS's plugin.Zones.Matches and plugin.Name.Matches.

import { countLabels, isSubdomain, nextLabel } from '../../wire/name.ts';

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

/**
 * CoreDNS dnsutil.TrimZone: `q` (a FQDN) without the labels of `z` and the dot before them, case
 * kept; undefined when `q` has no more labels than `z` (CoreDNS's "overshot qname" error). Used by
 * k8s_external and autopath.
 */
export function trimZone(q: string, z: string): string | undefined {
  const zl = countLabels(z);
  if (zl === 0) return q === '' ? undefined : q.slice(0, -1);
  const ql = countLabels(q);
  if (ql <= zl) return undefined;
  let i = 0;
  for (let n = ql - zl; n > 0; n--) i = nextLabel(q, i);
  return q.slice(0, i - 1);
}
