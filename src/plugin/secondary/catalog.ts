// RFC 9432 catalog zones as CoreDNS's plugin/pkg/catalog reads them (schema version "2"): the member
// zones (zones.<catalog> PTRs), their group TXTs and change-of-ownership (coo) PTRs.

import type { NameData, ResourceRecord, TXTData } from '../../wire/types.ts';
import { RRClass, RRType } from '../../wire/constants.ts';
import { asciiLower, fqdn } from '../../wire/name.ts';
import { charStringToText, formatRecord } from '../../wire/text.ts';

export const CATALOG_VERSION = '2';

export interface CatalogMember {
  /** The member's unique label (the PTR owner's first label). */
  id: string;
  /** The member zone, lower-case FQDN. */
  zone: string;
  /** Its group properties, sorted. */
  groups: string[];
  /** Its coo property: the catalog the member migrates to ('' without). */
  changeOfOwnership: string;
}

export interface Catalog {
  origin: string;
  /** Sorted by ID. */
  members: CatalogMember[];
}

function normalizeName(name: string): string {
  return asciiLower(fqdn(name));
}

/** miekg's dns.SplitDomainName: the labels ('.' has none). */
function labelsOf(name: string): string[] {
  if (name === '.' || name === '') return [];
  return name.slice(0, -1).split('.');
}

function hasLabelSuffix(labels: readonly string[], suffix: readonly string[]): boolean {
  if (labels.length < suffix.length) return false;
  const off = labels.length - suffix.length;
  for (let i = 0; i < suffix.length; i++) if (labels[off + i] !== suffix[i]) return false;
  return true;
}

function txtValue(rr: ResourceRecord): string {
  return (rr.data as TXTData).strings.map((s) => charStringToText(s).slice(1, -1)).join('');
}

/** Reads the catalog `origin` from its transferred records; throws CoreDNS's texts for an invalid one. */
export function parseCatalog(originIn: string, rrs: readonly ResourceRecord[]): Catalog {
  const origin = normalizeName(originIn);
  const zonesLabels = ['zones', ...labelsOf(origin)];
  const versionOwner = 'version.' + origin;
  let hasSoa = false;
  let hasNs = false;
  const versionText: string[] = [];
  const memberPtr = new Map<string, string[]>();
  const groups = new Map<string, string[]>();
  const coo = new Map<string, string[]>();
  const add = (m: Map<string, string[]>, k: string, v: string): void => {
    const l = m.get(k);
    if (l === undefined) m.set(k, [v]);
    else l.push(v);
  };
  for (const rr of rrs) {
    if (rr.class !== RRClass.IN) throw new Error(`catalog zone ${origin} contains non-IN record ${formatRecord(rr)}`);
    const owner = normalizeName(rr.name);
    switch (rr.type) {
      case RRType.SOA:
        if (owner === origin) hasSoa = true;
        break;
      case RRType.NS:
        if (owner === origin) hasNs = true;
        break;
      case RRType.TXT: {
        if (owner === versionOwner) {
          versionText.push(txtValue(rr));
          break;
        }
        const labels = labelsOf(owner);
        if (labels.length === zonesLabels.length + 2 && hasLabelSuffix(labels, zonesLabels) && labels[0] === 'group') {
          add(groups, labels[1]!, txtValue(rr));
        }
        break;
      }
      case RRType.PTR: {
        const labels = labelsOf(owner);
        const target = normalizeName((rr.data as NameData).target);
        if (labels.length === zonesLabels.length + 1 && hasLabelSuffix(labels, zonesLabels)) {
          add(memberPtr, labels[0]!, target);
        } else if (labels.length === zonesLabels.length + 2 && hasLabelSuffix(labels, zonesLabels) && labels[0] === 'coo') {
          add(coo, labels[1]!, target);
        }
        break;
      }
    }
  }
  if (!hasSoa) throw new Error(`catalog zone ${origin} has no SOA record`);
  if (!hasNs) throw new Error(`catalog zone ${origin} has no NS record`);
  if (versionText.length !== 1) throw new Error(`catalog zone ${origin} must have exactly one version TXT record`);
  if (versionText[0] !== CATALOG_VERSION) throw new Error(`catalog zone ${origin} has unsupported version ${JSON.stringify(versionText[0])}`);
  const seen = new Map<string, string>();
  const members: CatalogMember[] = [];
  for (const [id, zones] of memberPtr) {
    if (zones.length !== 1) throw new Error(`catalog member ${id}.zones.${origin} must have exactly one PTR record`);
    const zone = zones[0]!;
    const prev = seen.get(zone);
    if (prev !== undefined) throw new Error(`catalog member zone ${zone} is listed by both ${prev} and ${id}`);
    seen.set(zone, id);
    const member: CatalogMember = { id, zone, groups: [...(groups.get(id) ?? [])].sort(), changeOfOwnership: '' };
    const c = coo.get(id) ?? [];
    if (c.length > 1) throw new Error(`catalog member ${id} has more than one coo PTR record`);
    if (c.length === 1) member.changeOfOwnership = c[0]!;
    members.push(member);
  }
  members.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { origin, members };
}
