// Record reordering of CoreDNS plugin/loadbalance: round_robin (a shuffle with
// regrouping), prefer CIDR..., weighted. On Message records, and — for the
// plain round_robin on the hot path — directly on wire bytes when no
// compression pointer targets a record that moves.

import type { AData, ResourceRecord } from '../../wire/types.ts';

const A = 1, NS = 2, CNAME = 5, SOA = 6, PTR = 12, MX = 15, AAAA = 28, SRV = 33;

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

/** CoreDNS roundRobin on one section, by record type: CNAMEs, others, shuffled A/AAAA, shuffled MX. */
export function roundRobinOrder<T>(items: T[], typeOf: (x: T) => number): T[] {
  let allA = true, allAAAA = true;
  for (const it of items) {
    const t = typeOf(it);
    if (t !== A) allA = false;
    if (t !== AAAA) allAAAA = false;
  }
  if (items.length > 0 && (allA || allAAAA)) {
    const out = items.slice();
    shuffleInPlace(out);
    return out;
  }
  const cname: T[] = [], address: T[] = [], mx: T[] = [], rest: T[] = [];
  for (const it of items) {
    switch (typeOf(it)) {
      case CNAME: cname.push(it); break;
      case A: case AAAA: address.push(it); break;
      case MX: mx.push(it); break;
      default: rest.push(it);
    }
  }
  shuffleInPlace(address);
  shuffleInPlace(mx);
  return cname.concat(rest, address, mx);
}

export function roundRobin(rrs: ResourceRecord[]): ResourceRecord[] {
  return roundRobinOrder(rrs, (r) => r.type);
}

export interface Cidr {
  v6: boolean;
  bytes: Uint8Array;
  bits: number;
}

export function ipBytes(s: string): Uint8Array | undefined {
  if (s.includes(':')) {
    // expand IPv6
    let head = s, tail = '';
    const dbl = s.indexOf('::');
    if (dbl >= 0) { head = s.slice(0, dbl); tail = s.slice(dbl + 2); }
    const parse = (part: string): number[] | undefined => {
      if (part === '') return [];
      const out: number[] = [];
      const groups = part.split(':');
      for (let i = 0; i < groups.length; i++) {
        const g = groups[i]!;
        if (g.includes('.')) {
          const v4 = ipBytes(g);
          if (v4 === undefined || v4.length !== 4 || i !== groups.length - 1) return undefined;
          out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
          continue;
        }
        if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
        out.push(parseInt(g, 16));
      }
      return out;
    };
    const h = parse(head), t = parse(tail);
    if (h === undefined || t === undefined) return undefined;
    const fill = 8 - h.length - t.length;
    if (dbl >= 0 ? fill < 1 : fill !== 0) return undefined;
    const words = [...h, ...new Array<number>(dbl >= 0 ? fill : 0).fill(0), ...t];
    const b = new Uint8Array(16);
    for (let i = 0; i < 8; i++) { b[2 * i] = words[i]! >> 8; b[2 * i + 1] = words[i]! & 0xff; }
    return b;
  }
  const parts = s.split('.');
  if (parts.length !== 4) return undefined;
  const b = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    if (!/^[0-9]{1,3}$/.test(p) || Number(p) > 255 || (p.length > 1 && p[0] === '0')) return undefined;
    b[i] = Number(p);
  }
  return b;
}

/** Go net.ParseCIDR; throws Go's error text. */
export function parseCidr(s: string): Cidr {
  const slash = s.indexOf('/');
  const err = new Error(`invalid CIDR address: ${s}`);
  if (slash < 0) throw err;
  const ip = ipBytes(s.slice(0, slash));
  const bitsText = s.slice(slash + 1);
  if (ip === undefined || !/^[0-9]+$/.test(bitsText)) throw err;
  const bits = Number(bitsText);
  if (bits > ip.length * 8) throw err;
  return { v6: ip.length === 16, bytes: ip, bits };
}

function contains(c: Cidr, ip: Uint8Array): boolean {
  let b = ip;
  if (!c.v6 && ip.length === 16) {
    // IPv4-mapped IPv6 matches IPv4 networks (Go's To4)
    for (let i = 0; i < 10; i++) if (ip[i] !== 0) return false;
    if (ip[10] !== 0xff || ip[11] !== 0xff) return false;
    b = ip.subarray(12);
  } else if (c.v6 && ip.length === 4) {
    return false;
  }
  if (b.length !== c.bytes.length) return false;
  let bits = c.bits;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((b[i]! & mask) !== (c.bytes[i]! & mask)) return false;
  }
  return true;
}

/** CoreDNS reorderRecords: CNAMEs, addresses in preferred-subnet order, MX, the rest. */
export function reorderPreferred(rrs: ResourceRecord[], subnets: Cidr[]): ResourceRecord[] {
  const cname: ResourceRecord[] = [], address: ResourceRecord[] = [], mx: ResourceRecord[] = [], rest: ResourceRecord[] = [];
  for (const r of rrs) {
    switch (r.type) {
      case CNAME: cname.push(r); break;
      case A: case AAAA: address.push(r); break;
      case MX: mx.push(r); break;
      default: rest.push(r);
    }
  }
  const matched: ResourceRecord[] = [];
  const seen = new Set<number>();
  const ips = address.map((r) => ipBytes((r.data as AData).address));
  for (const sn of subnets) {
    for (let i = 0; i < address.length; i++) {
      if (seen.has(i)) continue;
      const ip = ips[i];
      if (ip !== undefined && contains(sn, ip)) { matched.push(address[i]!); seen.add(i); }
    }
  }
  for (let i = 0; i < address.length; i++) if (!seen.has(i)) matched.push(address[i]!);
  return cname.concat(matched, mx, rest);
}

// ---- wire level -------------------------------------------------------------------------------

interface WireRR { start: number; end: number; type: number }

/** Walk a name at p; records pointer targets; returns the offset after the name or -1. */
function walkName(b: Uint8Array, p: number, targets: number[]): number {
  const n = b.length;
  while (p < n) {
    const l = b[p]!;
    if (l === 0) return p + 1;
    if ((l & 0xc0) === 0xc0) {
      if (p + 1 >= n) return -1;
      targets.push(((l & 0x3f) << 8) | b[p + 1]!);
      return p + 2;
    }
    if ((l & 0xc0) !== 0) return -1;
    p += l + 1;
  }
  return -1;
}

/**
 * round_robin on wire bytes. Returns the reordered copy, `b` itself when nothing moves, or
 * undefined when it cannot be done safely on bytes (the caller then decodes).
 */
export function roundRobinWire(b: Uint8Array): Uint8Array | undefined {
  if (b.length < 12) return undefined;
  const counts = [(b[6]! << 8) | b[7]!, (b[8]! << 8) | b[9]!, (b[10]! << 8) | b[11]!];
  const qd = (b[4]! << 8) | b[5]!;
  const targets: number[] = [];
  let p = 12;
  for (let i = 0; i < qd; i++) {
    p = walkName(b, p, targets);
    if (p < 0) return undefined;
    p += 4;
  }
  const sections: WireRR[][] = [[], [], []];
  for (let s = 0; s < 3; s++) {
    for (let i = 0; i < counts[s]!; i++) {
      const start = p;
      p = walkName(b, p, targets);
      if (p < 0 || p + 10 > b.length) return undefined;
      const type = (b[p]! << 8) | b[p + 1]!;
      const rdStart = p + 10;
      const end = rdStart + ((b[p + 8]! << 8) | b[p + 9]!);
      if (end > b.length) return undefined;
      switch (type) {
        case NS: case CNAME: case PTR:
          if (walkName(b, rdStart, targets) < 0) return undefined;
          break;
        case MX:
          if (walkName(b, rdStart + 2, targets) < 0) return undefined;
          break;
        case SRV:
          if (walkName(b, rdStart + 6, targets) < 0) return undefined;
          break;
        case SOA: {
          const q = walkName(b, rdStart, targets);
          if (q < 0 || walkName(b, q, targets) < 0) return undefined;
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
    for (const r of rrs) if (r.type === A || r.type === AAAA || r.type === MX) { interesting = true; break; }
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
