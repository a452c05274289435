// RRSIG creation over an RRset (RFC 4034 3.1.8.1 and 6.2), as miekg/dns RRSIG.Sign does it for CoreDNS.

import { encodeMessage } from '../../wire/encode.ts';
import { newMessage } from '../../wire/message.ts';
import { asciiLower, countLabels } from '../../wire/name.ts';
import { RRType } from '../../wire/constants.ts';
import type {
  MXData, NameData, NAPTRData, ResourceRecord, RRSIGData, RData, SOAData, SRVData,
} from '../../wire/types.ts';
import type { SigningKey } from './keys.ts';

/** The original TTL CoreDNS puts in every RRSIG: it cannot see the RRset's own. */
export const ORIG_TTL = 3600;

/** The types whose rdata names are lower-cased in the canonical form (RFC 4034 6.2 as miekg applies it). */
function canonicalData(type: number, d: RData): RData {
  switch (type) {
    case RRType.NS: case RRType.MD: case RRType.MF: case RRType.CNAME: case RRType.MB: case RRType.MG:
    case RRType.MR: case RRType.PTR: case RRType.DNAME: {
      if (!('target' in d)) return d;
      return { target: asciiLower((d as NameData).target) };
    }
    case RRType.SOA: {
      const s = d as SOAData;
      if (!('mname' in d)) return d;
      return { ...s, mname: asciiLower(s.mname), rname: asciiLower(s.rname) };
    }
    case RRType.MX: {
      if (!('exchange' in d)) return d;
      const m = d as MXData;
      return { preference: m.preference, exchange: asciiLower(m.exchange) };
    }
    case RRType.SRV: {
      if (!('target' in d)) return d;
      const s = d as SRVData;
      return { ...s, target: asciiLower(s.target) };
    }
    case RRType.NAPTR: {
      if (!('replacement' in d)) return d;
      const n = d as NAPTRData;
      return { ...n, replacement: asciiLower(n.replacement) };
    }
    default:
      return d;
  }
}

/** Length of the uncompressed wire name at `off`. */
function nameLength(b: Uint8Array, off: number): number {
  let p = off;
  while (b[p]! !== 0) p += b[p]! + 1;
  return p + 1 - off;
}

/** The RRset's records in canonical form and order (sorted by rdata, duplicates dropped), concatenated. */
function canonicalRRset(rrs: readonly ResourceRecord[], labels: number): Buffer {
  const wires: Buffer[] = [];
  const rdataAt: number[] = [];
  for (const rr of rrs) {
    let owner = rr.name;
    if (countLabels(owner) > labels) {
      // a wildcard expansion: the owner is signed as the wildcard it came from (RFC 4034 6.2 (4))
      const parts = owner.split('.').filter((l) => l !== '');
      owner = '*.' + parts.slice(parts.length - labels).join('.') + '.';
    }
    const m = newMessage();
    m.answer.push({ name: asciiLower(owner), type: rr.type, class: rr.class, ttl: ORIG_TTL, data: canonicalData(rr.type, rr.data) });
    const w = encodeMessage(m, { compress: false }).subarray(12);
    wires.push(w);
    rdataAt.push(nameLength(w, 0) + 10);
  }
  const order = wires.map((_, i) => i);
  order.sort((a, b) => Buffer.compare(wires[a]!.subarray(rdataAt[a]!), wires[b]!.subarray(rdataAt[b]!)));
  const out: Buffer[] = [];
  let prev: Buffer | undefined;
  for (const i of order) {
    const w = wires[i]!;
    if (prev !== undefined && prev.equals(w)) continue;
    out.push(w);
    prev = w;
  }
  return Buffer.concat(out);
}

/** Wire form of an uncompressed, lower-cased name. */
function nameWire(name: string): Buffer {
  const m = newMessage();
  m.question.push({ name: asciiLower(name), type: 0, class: 0 });
  const w = encodeMessage(m, { compress: false });
  return w.subarray(12, w.length - 4);
}

/**
 * A signed RRSIG over `rrs` (one RRset) with `key`: owner and class of the set, TTL `ttl`, original TTL
 * 3600, signer `signer`, the label count less one for a wildcard owner.
 */
export function signRRset(
  key: SigningKey, rrs: readonly ResourceRecord[], signer: string, ttl: number, inception: number, expiration: number,
): ResourceRecord<RRSIGData> {
  const h0 = rrs[0]!;
  let labels = countLabels(h0.name);
  if (h0.name.startsWith('*')) labels--;
  const signerWire = nameWire(signer);
  const head = Buffer.alloc(18);
  head.writeUInt16BE(h0.type, 0);
  head[2] = key.algorithm;
  head[3] = labels;
  head.writeUInt32BE(ORIG_TTL, 4);
  head.writeUInt32BE(expiration >>> 0, 8);
  head.writeUInt32BE(inception >>> 0, 12);
  head.writeUInt16BE(key.tag, 16);
  const data = Buffer.concat([head, signerWire, canonicalRRset(rrs, labels)]);
  return {
    name: h0.name,
    type: RRType.RRSIG,
    class: h0.class,
    ttl,
    data: {
      typeCovered: h0.type, algorithm: key.algorithm, labels, originalTTL: ORIG_TTL,
      expiration: expiration >>> 0, inception: inception >>> 0, keyTag: key.tag, signerName: signer,
      signature: key.sign(data),
    },
  };
}
