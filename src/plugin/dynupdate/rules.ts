// The record-level rules of dynupdate (CoreDNS 1.15.0 plugin/dynupdate zone.go, limits.go): which types it
// knows and refuses, the zone invariants a seed, a database or an updated zone must keep, RR identity as
// miekg's IsDuplicate sees it, RFC 1982 serial arithmetic, and the size limits. Everything here works on plain
// record lists; updates are rare, so clarity wins over allocation here (none of it is on the query path).

import type { OpaqueData, RData, ResourceRecord, SOAData } from '../../wire/types.ts';
import { RRClass, RRType, typeToString } from '../../wire/constants.ts';
import { asciiLower, fqdn, isSubdomain } from '../../wire/name.ts';
import { nameWireLength, rdataLength } from '../../wire/msglen.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newMessage } from '../../wire/message.ts';

export const DEFAULT_MAX_RECORDS = 10000;
export const DEFAULT_MAX_BYTES = 8 << 20;
export const DEFAULT_MAX_UPDATE_RECORDS = 1024;

/** `max_records`, `max_bytes`, `max_update_records` (0: the default). */
export interface Limits {
  records: number;
  bytes: number;
  updateRecords: number;
}

export function withDefaults(l: Limits): Limits {
  return {
    records: l.records === 0 ? DEFAULT_MAX_RECORDS : l.records,
    bytes: l.bytes === 0 ? DEFAULT_MAX_BYTES : l.bytes,
    updateRecords: l.updateRecords === 0 ? DEFAULT_MAX_UPDATE_RECORDS : l.updateRecords,
  };
}

/** miekg's dns.Len without compression: the record's uncompressed wire length. */
export function recordLength(rr: ResourceRecord): number {
  return nameWireLength(rr.name) + 10 + rdataLength(rr.type, rr.data);
}

/** limits.check: the zone's record count and uncompressed bytes. Throws the error CoreDNS returns. */
export function checkLimits(records: readonly ResourceRecord[], l: Limits): void {
  if (records.length > l.records) throw new Error(`zone exceeds max_records (${l.records})`);
  let remaining = l.bytes;
  for (const rr of records) {
    const size = recordLength(rr);
    if (size > remaining) throw new Error(`zone exceeds max_bytes (${l.bytes})`);
    remaining -= size;
  }
}

/** The types miekg/dns v1.1.73 has a structure for (dns.TypeToRR): what dynupdate calls "known". */
const KNOWN = new Set<number>([
  1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,
  35, 36, 37, 39, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65,
  99, 100, 101, 102, 104, 105, 106, 107, 108, 109, 128, 249, 250, 255, 256, 257, 258, 260, 261, 32768, 32769,
]);

export function knownType(t: number): boolean {
  return KNOWN.has(t);
}

/**
 * DNSSEC and zone-digest types: their contents go stale when another RRset changes and dynupdate cannot
 * regenerate them, so they are refused in seeds, databases and updates (CoreDNS's unsupportedRRType).
 */
export function unsupportedType(t: number): boolean {
  switch (t) {
    case RRType.SIG: case RRType.KEY: case RRType.NXT: case RRType.DS: case RRType.RRSIG: case RRType.NSEC:
    case RRType.DNSKEY: case RRType.NSEC3: case RRType.NSEC3PARAM: case RRType.TALINK: case RRType.CDS:
    case RRType.CDNSKEY: case RRType.ZONEMD: case RRType.TA: case RRType.DLV:
      return true;
    default:
      return false;
  }
}

/** Query-only meta types (CoreDNS's isQueryMetaType). */
export function isQueryMetaType(t: number): boolean {
  switch (t) {
    case RRType.ANY: case RRType.AXFR: case RRType.IXFR: case RRType.MAILA: case RRType.MAILB:
    case RRType.OPT: case RRType.TKEY: case RRType.TSIG:
      return true;
    default:
      return false;
  }
}

/** A type an `allow` rule may name (CoreDNS's validPolicyType): ANY is allowed, for deleting every RRset of a name. */
export function validPolicyType(t: number): boolean {
  if (!knownType(t) || t === 0 || unsupportedType(t)) return false;
  if (t === RRType.ANY) return true;
  return !isQueryMetaType(t);
}

/** A type a prerequisite may carry; ANY only in the name-in-use forms (CoreDNS's validPrerequisiteType). */
export function validPrerequisiteType(t: number, allowAny: boolean): boolean {
  if (!knownType(t) || t === 0) return false;
  if (t === RRType.ANY) return allowAny;
  return !isQueryMetaType(t);
}

/** strings.ToLower(dns.CanonicalName(name)). */
export function canonicalName(name: string): string {
  return asciiLower(fqdn(name));
}

/** `name` is `origin` (canonical) or below it. */
export function inZone(origin: string, name: string): boolean {
  const n = canonicalName(name);
  return n === origin || isSubdomain(n, origin);
}

/** A record decoded from an rdlength of 0 (miekg's bare RR_Header). */
export function noRdata(rr: ResourceRecord): boolean {
  const raw = (rr.data as Partial<OpaqueData>).raw;
  return raw !== undefined && raw.length === 0;
}

/** The record's SOA data, undefined when it has none in structured form (an empty or opaque rdata). */
export function soaData(rr: ResourceRecord): SOAData | undefined {
  return rr.type === RRType.SOA && (rr.data as Partial<SOAData>).mname !== undefined ? rr.data as SOAData : undefined;
}

/** A copy the caller may change (names and TTL) without touching `rr`. */
export function copyRecord(rr: ResourceRecord): ResourceRecord {
  return { name: rr.name, type: rr.type, class: rr.class, ttl: rr.ttl, data: { ...rr.data } as RData };
}

/** The rdata with the domain names miekg compares case-insensitively lower-cased. */
function foldedData(type: number, d: RData): RData {
  if ((d as Partial<OpaqueData>).raw !== undefined) return d;
  const x = d as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = { ...x };
  for (const f of ['target', 'mname', 'rname', 'exchange', 'replacement', 'signerName', 'nextName']) {
    if (typeof x[f] === 'string') out[f] = asciiLower(x[f]);
  }
  void type;
  return out as unknown as RData;
}

/** The rdata's wire bytes with names folded: equal bytes are equal rdata (miekg's generated isDuplicate). */
function rdataKey(rr: ResourceRecord): string {
  const m = newMessage();
  m.answer.push({ name: '.', type: rr.type, class: RRClass.IN, ttl: 0, data: foldedData(rr.type, rr.data) });
  // header (12) + root owner (1) + type, class, TTL, rdlength (10)
  return encodeMessage(m, { compress: false }).subarray(23).toString('latin1');
}

/**
 * miekg's dns.IsDuplicate after both classes are set to IN (CoreDNS's sameRR): same owner (any case), same
 * type, same rdata; the TTL is not compared.
 */
export function sameRR(a: ResourceRecord, b: ResourceRecord): boolean {
  if (a.type !== b.type || canonicalName(a.name) !== canonicalName(b.name)) return false;
  const ea = noRdata(a), eb = noRdata(b);
  if (ea || eb) return ea && eb;
  return rdataKey(a) === rdataKey(b);
}

/** The set comparison of a value-dependent prerequisite: duplicates ignored, order ignored. */
export function sameRRset(have: readonly ResourceRecord[], want: readonly ResourceRecord[]): boolean {
  const h = unique(have), w = unique(want);
  if (h.length !== w.length) return false;
  const used = new Array<boolean>(h.length).fill(false);
  for (const x of w) {
    let found = false;
    for (let i = 0; i < h.length; i++) {
      if (!used[i] && sameRR(h[i]!, x)) {
        used[i] = true;
        found = true;
        break;
      }
    }
    if (!found) return false;
  }
  return true;
}

function unique(rrs: readonly ResourceRecord[]): ResourceRecord[] {
  const out: ResourceRecord[] = [];
  for (const rr of rrs) if (!out.some((u) => sameRR(u, rr))) out.push(rr);
  return out;
}

export function rrsetOf(records: readonly ResourceRecord[], name: string, type: number): ResourceRecord[] {
  const n = canonicalName(name);
  return records.filter((rr) => rr.type === type && canonicalName(rr.name) === n);
}

export function nameInUse(records: readonly ResourceRecord[], name: string): boolean {
  const n = canonicalName(name);
  return records.some((rr) => canonicalName(rr.name) === n);
}

export function findRR(records: readonly ResourceRecord[], want: ResourceRecord): number {
  for (let i = 0; i < records.length; i++) if (sameRR(records[i]!, want)) return i;
  return -1;
}

/** RFC 1982: `a` is greater than `b`; the half-space distance is not (RFC 1982 leaves it undefined). */
export function serialGreater(a: number, b: number): boolean {
  return a !== b && ((a - b) >>> 0) < 0x80000000;
}

/** The zone's SOA serial plus one, never zero after a wrap (RFC 2136 7.11). Edits `records` in place. */
export function bumpSerial(records: ResourceRecord[]): void {
  for (let i = 0; i < records.length; i++) {
    const rr = records[i]!;
    const soa = soaData(rr);
    if (soa === undefined) continue;
    let serial = (soa.serial + 1) >>> 0;
    if (serial === 0) serial = 1;
    records[i] = { ...rr, data: { ...soa, serial } };
    return;
  }
}

/**
 * CoreDNS's validateRecords: every record IN, in the zone, of a supported type; no CNAME beside other data;
 * exactly one SOA, at the apex, with a non-zero serial.
 */
export function validateRecords(records: readonly ResourceRecord[], origin: string): void {
  let soaCount = 0;
  const types = new Map<string, Set<number>>();
  for (const rr of records) {
    if (rr.class !== RRClass.IN) throw new Error('zone contains a non-IN record');
    if (!inZone(origin, rr.name)) throw new Error('zone contains an out-of-zone record');
    if (unsupportedType(rr.type)) throw new Error(`zone contains unsupported RR type ${typeToString(rr.type)}`);
    const name = canonicalName(rr.name);
    let t = types.get(name);
    if (t === undefined) types.set(name, t = new Set());
    if (rr.type === RRType.CNAME && t.size !== 0) throw new Error(`zone contains CNAME data conflict at ${rr.name}`);
    if (rr.type !== RRType.CNAME && t.has(RRType.CNAME)) throw new Error(`zone contains CNAME data conflict at ${rr.name}`);
    t.add(rr.type);
    if (rr.type === RRType.SOA) {
      const soa = soaData(rr);
      if (soa === undefined) throw new Error('zone contains an invalid SOA record');
      if (name !== origin) throw new Error('zone contains a non-apex SOA record');
      // RFC 2136 4.2 and 7.11: serial zero is avoided for older implementations.
      if (soa.serial === 0) throw new Error('zone contains an SOA with serial zero');
      soaCount++;
    }
  }
  if (soaCount === 0) throw new Error('zone has no SOA');
  if (soaCount !== 1) throw new Error('zone contains more than one SOA record');
}
