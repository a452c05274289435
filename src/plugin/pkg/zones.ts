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
 * Whether `name` is served by a forwarding plugin for zone `from` with `except` zones `ignored` (CoreDNS's
 * forward.match and grpc.match): at or below `from`, and not at or below an excepted zone unless it is `from`.
 */
export function fromMatches(from: string, ignored: readonly string[], name: string): boolean {
  if (!nameMatches(from, name)) return false;
  if (name === from) return true;
  for (let i = 0; i < ignored.length; i++) if (nameMatches(ignored[i]!, name)) return false;
  return true;
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
