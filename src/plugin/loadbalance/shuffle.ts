// Record reordering of CoreDNS plugin/loadbalance: round_robin (a shuffle with
// regrouping), prefer CIDR..., weighted. On Message records, and — for the
// plain round_robin on the hot path — directly on wire bytes when no
// compression pointer targets a record that moves.

import type { AData, ResourceRecord } from '../../wire/types.ts';
import { cidrContains, parseIP, type Cidr } from '../../wire/ip.ts';
import { skipName } from '../../wire/scan.ts';
import { RRType } from '../../wire/constants.ts';

function shuffleInPlace<T>(r: T[]): void {
  const l = r.length;
  if (l < 2) return;
  if (l === 2) {
    if (Math.random() < 0.5) { const t = r[0]!; r[0] = r[1]!; r[1] = t; }
    return;
  }
  for (let j = 0; j < l; j++) {
    const p = j + Math.floor(Math.random() * (l - j));
    if (p === j) continue;
    const t = r[j]!; r[j] = r[p]!; r[p] = t;
  }
}

/** A section split as all of CoreDNS's loadbalance policies split it, each group in section order. */
export interface TypeGroups<T> { cname: T[]; address: T[]; mx: T[]; rest: T[] }

/** Groups by type: CNAME; A and AAAA; MX; everything else. */
export function groupByType<T>(items: readonly T[], typeOf: (x: T) => number): TypeGroups<T> {
  const g: TypeGroups<T> = { cname: [], address: [], mx: [], rest: [] };
  for (const it of items) {
    switch (typeOf(it)) {
      case RRType.CNAME: g.cname.push(it); break;
      case RRType.A: case RRType.AAAA: g.address.push(it); break;
      case RRType.MX: g.mx.push(it); break;
      default: g.rest.push(it);
    }
  }
  return g;
}

/** The type of a record, for groupByType. */
export const recordType = (r: ResourceRecord): number => r.type;

/** CoreDNS roundRobin on one section, by record type: CNAMEs, others, shuffled A/AAAA, shuffled MX. */
export function roundRobinOrder<T>(items: T[], typeOf: (x: T) => number): T[] {
  let allA = true, allAAAA = true;
  for (const it of items) {
    const t = typeOf(it);
    if (t !== RRType.A) allA = false;
    if (t !== RRType.AAAA) allAAAA = false;
  }
  if (items.length > 0 && (allA || allAAAA)) {
    const out = items.slice();
    shuffleInPlace(out);
    return out;
  }
  const { cname, address, mx, rest } = groupByType(items, typeOf);
  shuffleInPlace(address);
  shuffleInPlace(mx);
  return cname.concat(rest, address, mx);
}

export function roundRobin(rrs: ResourceRecord[]): ResourceRecord[] {
  return roundRobinOrder(rrs, recordType);
}

/** CoreDNS reorderRecords: CNAMEs, addresses in preferred-subnet order, MX, the rest. */
export function reorderPreferred(rrs: ResourceRecord[], subnets: Cidr[]): ResourceRecord[] {
  const { cname, address, mx, rest } = groupByType(rrs, recordType);
  const matched: ResourceRecord[] = [];
  const seen = new Set<number>();
  const ips = address.map((r) => parseIP((r.data as AData).address));
  for (const sn of subnets) {
    for (let i = 0; i < address.length; i++) {
      if (seen.has(i)) continue;
      const ip = ips[i];
      if (ip !== undefined && cidrContains(sn, ip)) { matched.push(address[i]!); seen.add(i); }
    }
  }
  for (let i = 0; i < address.length; i++) if (!seen.has(i)) matched.push(address[i]!);
  return cname.concat(matched, mx, rest);
}

// ---- wire level -------------------------------------------------------------------------------

interface WireRR { start: number; end: number; type: number }

/**
 * round_robin on wire bytes. Returns the reordered copy, `b` itself when nothing moves, or
 * undefined when it cannot be done safely on bytes (the caller then decodes).
 */
export function roundRobinWire(b: Uint8Array): Uint8Array | undefined {
  if (b.length < 12) return undefined;
  // No section with two records (a single-address answer, the usual cluster reply): nothing can move, so the
  // walk only checks the framing, without the arrays and record objects of a reordering.
  if (b[6] === 0 && b[7]! < 2 && b[8] === 0 && b[9]! < 2 && b[10] === 0 && b[11]! < 2) return walkable(b) ? b : undefined;
  const counts = [(b[6]! << 8) | b[7]!, (b[8]! << 8) | b[9]!, (b[10]! << 8) | b[11]!];
  const qd = (b[4]! << 8) | b[5]!;
  const targets: number[] = [];
  let p = 12;
  for (let i = 0; i < qd; i++) {
    p = skipName(b, p, targets);
    if (p < 0) return undefined;
    p += 4;
  }
  const sections: WireRR[][] = [[], [], []];
  for (let s = 0; s < 3; s++) {
    for (let i = 0; i < counts[s]!; i++) {
      const start = p;
      p = skipName(b, p, targets);
      if (p < 0 || p + 10 > b.length) return undefined;
      const type = (b[p]! << 8) | b[p + 1]!;
      const rdStart = p + 10;
      const end = rdStart + ((b[p + 8]! << 8) | b[p + 9]!);
      if (end > b.length) return undefined;
      switch (type) {
        case RRType.NS: case RRType.CNAME: case RRType.PTR:
          if (skipName(b, rdStart, targets) < 0) return undefined;
          break;
        case RRType.MX:
          if (skipName(b, rdStart + 2, targets) < 0) return undefined;
          break;
        case RRType.SRV:
          if (skipName(b, rdStart + 6, targets) < 0) return undefined;
          break;
        case RRType.SOA: {
          const q = skipName(b, rdStart, targets);
          if (q < 0 || skipName(b, q, targets) < 0) return undefined;
          break;
        }
        default:
      }
      sections[s]!.push({ start, end, type });
      p = end;
    }
  }
  let out: Uint8Array | undefined;
  for (let s = 0; s < 3; s++) {
    const rrs = sections[s]!;
    if (rrs.length < 2) continue;
    let interesting = false;
    for (const r of rrs) if (r.type === RRType.A || r.type === RRType.AAAA || r.type === RRType.MX) { interesting = true; break; }
    if (!interesting) continue;
    const order = roundRobinOrder(rrs, (r) => r.type);
    // Every record that moves must not be the target of a compression pointer.
    let pos = rrs[0]!.start;
    for (const r of order) {
      if (r.start !== pos) {
        for (const t of targets) if (t >= r.start && t < r.end) return undefined;
      }
      pos += r.end - r.start;
    }
    out ??= Buffer.from(b);
    pos = rrs[0]!.start;
    for (const r of order) {
      out.set(b.subarray(r.start, r.end), pos);
      pos += r.end - r.start;
    }
  }
  return out ?? b;
}

/** The walk of roundRobinWire succeeds on `b` (every name and record in bounds), for a message with at most one record per section. */
function walkable(b: Uint8Array): boolean {
  const qd = (b[4]! << 8) | b[5]!;
  let p = 12;
  for (let i = 0; i < qd; i++) {
    p = skipName(b, p);
    if (p < 0) return false;
    p += 4;
  }
  const records = b[7]! + b[9]! + b[11]!;
  for (let i = 0; i < records; i++) {
    p = skipName(b, p);
    if (p < 0 || p + 10 > b.length) return false;
    const type = (b[p]! << 8) | b[p + 1]!;
    const rdStart = p + 10;
    const end = rdStart + ((b[p + 8]! << 8) | b[p + 9]!);
    if (end > b.length) return false;
    switch (type) {
      case RRType.NS: case RRType.CNAME: case RRType.PTR:
        if (skipName(b, rdStart) < 0) return false;
        break;
      case RRType.MX:
        if (skipName(b, rdStart + 2) < 0) return false;
        break;
      case RRType.SRV:
        if (skipName(b, rdStart + 6) < 0) return false;
        break;
      case RRType.SOA: {
        const q = skipName(b, rdStart);
        if (q < 0 || skipName(b, q) < 0) return false;
        break;
      }
      default:
    }
    p = end;
  }
  return true;
}
