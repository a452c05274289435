// Walking a reply's wire form without decoding it: where every record's TTL
// sits and where the OPT record is, so a cached reply can be stored without its
// OPT and served by patching bytes (ID, flags, question, TTLs) in place.

import { skipName } from '../../wire/scan.ts';

export interface Scan {
  /** Offset just past the question section. */
  qEnd: number;
  /** Offsets of the 4-byte TTL fields of all non-OPT records, in wire order. */
  ttls: number[];
  /** Offset of the OPT record's first byte, -1 when there is none. */
  optStart: number;
  /** Offset just past the OPT record. */
  optEnd: number;
}

/** Scan a well-formed message; undefined when the framing does not add up. */
export function scan(b: Uint8Array): Scan | undefined {
  if (b.length < 12) return undefined;
  const qd = (b[4]! << 8) | b[5]!;
  const rrs = ((b[6]! << 8) | b[7]!) + ((b[8]! << 8) | b[9]!) + ((b[10]! << 8) | b[11]!);
  let p = 12;
  for (let i = 0; i < qd; i++) {
    p = skipName(b, p);
    if (p < 0) return undefined;
    p += 4;
  }
  if (p > b.length) return undefined;
  const out: Scan = { qEnd: p, ttls: [], optStart: -1, optEnd: -1 };
  for (let i = 0; i < rrs; i++) {
    const start = p;
    p = skipName(b, p);
    if (p < 0 || p + 10 > b.length) return undefined;
    const type = (b[p]! << 8) | b[p + 1]!;
    const rdlen = (b[p + 8]! << 8) | b[p + 9]!;
    const end = p + 10 + rdlen;
    if (end > b.length) return undefined;
    if (type === 41) {
      out.optStart = start;
      out.optEnd = end;
    } else {
      out.ttls.push(p + 4);
    }
    p = end;
  }
  return out;
}

export function writeTtl(b: Uint8Array, at: number, ttl: number): void {
  b[at] = ttl >>> 24;
  b[at + 1] = (ttl >>> 16) & 0xff;
  b[at + 2] = (ttl >>> 8) & 0xff;
  b[at + 3] = ttl & 0xff;
}
