// The zone store shared by file (and later auto, secondary, transfer): one zone's records by owner
// name in DNSSEC canonical order (RFC 4034 6.1), the apex (SOA, NS and their signatures) kept apart as
// CoreDNS's file plugin keeps it, insert/delete, search, the canonical neighbours of a name (NSEC denial,
// empty non-terminals) and iteration for zone transfers.

import type { NameData, RRSIGData, ResourceRecord, SOAData } from '../../wire/types.ts';
import { RRType } from '../../wire/constants.ts';
import { asciiLower, countLabels, fqdn, isSubdomain, nextLabel } from '../../wire/name.ts';

/** The records of one owner name, by type (insertion order kept). */
export class Elem {
  /** Owner name: lower-case, fully qualified, escapes as the wire decoder writes them. */
  readonly name: string;
  /** Canonical sort key: the labels right to left, each as lower-cased bytes. */
  readonly key: Uint8Array[];
  readonly types = new Map<number, ResourceRecord[]>();

  constructor(name: string) {
    this.name = name;
    this.key = canonicalKey(name);
  }

  /** The records of `type`, undefined when there are none. */
  type(type: number): ResourceRecord[] | undefined {
    return this.types.get(type);
  }

  /** Every record of the name. */
  all(): ResourceRecord[] {
    const out: ResourceRecord[] = [];
    for (const rrs of this.types.values()) for (const rr of rrs) out.push(rr);
    return out;
  }

  /** The records of `type` as copies owned by `qname` (wildcard synthesis). */
  typeForWildcard(type: number, qname: string): ResourceRecord[] | undefined {
    const rrs = this.types.get(type);
    if (rrs === undefined) return undefined;
    const out: ResourceRecord[] = new Array<ResourceRecord>(rrs.length);
    for (let i = 0; i < rrs.length; i++) out[i] = { ...rrs[i]!, name: qname };
    return out;
  }
}

/** The RRSIGs of `sigs` that cover `type` (CoreDNS's rrutil.SubTypeSignature). */
export function signaturesFor(sigs: readonly ResourceRecord[] | undefined, type: number): ResourceRecord[] {
  const out: ResourceRecord[] = [];
  if (sigs === undefined) return out;
  for (const s of sigs) if ((s.data as RRSIGData).typeCovered === type) out.push(s);
  return out;
}

/** The bytes of one presentation label (`\DDD` and `\X` decoded), ASCII lower-cased. */
function labelBytes(s: string, from: number, to: number): Uint8Array {
  const out: number[] = [];
  for (let i = from; i < to; i++) {
    let c = s.charCodeAt(i);
    if (c === 92 && i + 1 < to) {
      const d = s.slice(i + 1, i + 4);
      if (/^\d{3}$/.test(d)) {
        c = Number(d) & 255;
        i += 3;
      } else {
        c = s.charCodeAt(++i);
      }
    }
    if (c >= 65 && c <= 90) c |= 0x20;
    if (c > 255) {
      for (const b of Buffer.from(String.fromCharCode(c), 'utf8')) out.push(b);
    } else out.push(c);
  }
  return Uint8Array.from(out);
}

/** A name's canonical sort key: its labels from the right, as lower-cased bytes. */
export function canonicalKey(name: string): Uint8Array[] {
  const n = fqdn(name);
  const labels: Uint8Array[] = [];
  if (n === '.') return labels;
  for (let begin = 0; begin < n.length;) {
    const end = nextLabel(n, begin);
    labels.push(labelBytes(n, begin, end - 1));
    begin = end;
  }
  return labels.reverse();
}

/** <0, 0, >0 as `a` sorts before, with, after `b` in canonical order. */
export function compareKeys(a: readonly Uint8Array[], b: readonly Uint8Array[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i]!;
    const y = b[i]!;
    const m = Math.min(x.length, y.length);
    for (let j = 0; j < m; j++) if (x[j] !== y[j]) return x[j]! - y[j]!;
    if (x.length !== y.length) return x.length - y.length;
  }
  return a.length - b.length;
}

const SPECIAL = new Set([0x2e, 0x20, 0x27, 0x40, 0x3b, 0x28, 0x29, 0x22, 0x5c]);

/**
 * The presentation form the wire decoder gives `name` (CoreDNS's canonicalEscape): `\DDD` for what is
 * not printable, `\X` for the specials, the character itself otherwise. Names without `\` are returned as is.
 */
export function canonicalEscape(name: string): string {
  if (!name.includes('\\')) return name;
  const n = fqdn(name);
  if (n === '.') return n;
  let out = '';
  for (let begin = 0; begin < n.length;) {
    const end = nextLabel(n, begin);
    const raw = n.slice(begin, end - 1);
    // keep the case of the label: decode without folding
    for (let i = 0; i < raw.length; i++) {
      let c = raw.charCodeAt(i);
      if (c === 92 && i + 1 < raw.length) {
        const d = raw.slice(i + 1, i + 4);
        if (/^\d{3}$/.test(d)) {
          c = Number(d) & 255;
          i += 3;
        } else c = raw.charCodeAt(++i);
      }
      if (c < 0x20 || (c > 0x7e && c <= 255)) out += '\\' + String(c).padStart(3, '0');
      else if (SPECIAL.has(c)) out += '\\' + String.fromCharCode(c);
      else out += String.fromCharCode(c);
    }
    out += '.';
    begin = end;
  }
  return out;
}

/** The outcome of a lookup, as CoreDNS's file.Result. */
export const Result = {
  Success: 0,
  NameError: 1,
  Delegation: 2,
  NoData: 3,
  ServerFailure: 4,
} as const;
export type Result = (typeof Result)[keyof typeof Result];

/**
 * One zone. Records are inserted as CoreDNS's file plugin inserts them: owner names (except of SRV
 * records) and the targets of NS, SOA, CNAME, MX, SVCB and HTTPS lower-cased; the apex SOA, NS and
 * their RRSIGs go to the apex; NSEC3 is refused.
 */
export class Zone {
  /** Lower-case FQDN. */
  readonly origin: string;
  readonly originLabels: number;
  soa: ResourceRecord<SOAData> | undefined;
  ns: ResourceRecord[] = [];
  sigSoa: ResourceRecord[] = [];
  sigNs: ResourceRecord[] = [];
  /** Set by a secondary whose zone expired: the zone answers SERVFAIL. */
  expired = false;
  private readonly byName = new Map<string, Elem>();
  /** Every Elem in canonical order. */
  private readonly sorted: Elem[] = [];

  constructor(origin: string) {
    this.origin = asciiLower(fqdn(origin));
    this.originLabels = countLabels(this.origin);
  }

  /** Number of owner names outside the apex records. */
  get size(): number {
    return this.sorted.length;
  }

  /** The SOA serial, -1 without a SOA. */
  get serial(): number {
    return this.soa === undefined ? -1 : this.soa.data.serial;
  }

  /** Adds `rr` (its owner name and some targets are lower-cased in place). Throws for NSEC3 records. */
  insert(rr: ResourceRecord): void {
    if (rr.type !== RRType.SRV) rr.name = asciiLower(canonicalEscape(rr.name));
    switch (rr.type) {
      case RRType.NS: {
        const d = rr.data as NameData;
        d.target = asciiLower(d.target);
        if (rr.name === this.origin) {
          this.ns.push(rr);
          return;
        }
        break;
      }
      case RRType.SOA: {
        const d = rr.data as SOAData;
        d.mname = asciiLower(d.mname);
        d.rname = asciiLower(d.rname);
        this.soa = rr as ResourceRecord<SOAData>;
        return;
      }
      case RRType.NSEC3: case RRType.NSEC3PARAM:
        throw new Error(`NSEC3 zone is not supported, dropping RR: ${rr.name} for zone: ${this.origin}`);
      case RRType.RRSIG: {
        const covered = (rr.data as RRSIGData).typeCovered;
        if (covered === RRType.SOA) {
          this.sigSoa.push(rr);
          return;
        }
        if (covered === RRType.NS && rr.name === this.origin) {
          this.sigNs.push(rr);
          return;
        }
        break;
      }
      case RRType.CNAME: {
        const d = rr.data as NameData;
        d.target = asciiLower(d.target);
        break;
      }
      case RRType.MX: {
        const d = rr.data as { exchange: string };
        d.exchange = asciiLower(d.exchange);
        break;
      }
      case RRType.SVCB: case RRType.HTTPS: {
        const d = rr.data as { target: string };
        d.target = asciiLower(d.target);
        break;
      }
    }
    this.insertTree(rr);
  }

  private insertTree(rr: ResourceRecord): void {
    const key = asciiLower(rr.name);
    let e = this.byName.get(key);
    if (e === undefined) {
      e = new Elem(key);
      this.byName.set(key, e);
      const at = this.lowerBound(e.key);
      this.sorted.splice(at, 0, e);
    }
    const rrs = e.types.get(rr.type);
    if (rrs === undefined) e.types.set(rr.type, [rr]);
    else rrs.push(rr);
  }

  /** Removes every record of `rr`'s type at `rr`'s owner (CoreDNS's tree Delete); the name goes when empty. */
  delete(rr: ResourceRecord): void {
    const key = asciiLower(canonicalEscape(rr.name));
    const e = this.byName.get(key);
    if (e === undefined) return;
    e.types.delete(rr.type);
    if (e.types.size > 0) return;
    this.byName.delete(key);
    const at = this.lowerBound(e.key);
    if (this.sorted[at] === e) this.sorted.splice(at, 1);
  }

  /** The records of `name` (lower-case, as a query name is), undefined when the name holds none. */
  search(name: string): Elem | undefined {
    const e = this.byName.get(name);
    if (e !== undefined || !hasUpper(name)) return e;
    return this.byName.get(asciiLower(name));
  }

  /** Index of the first Elem not sorting before `key`. */
  private lowerBound(key: readonly Uint8Array[]): number {
    let lo = 0;
    let hi = this.sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareKeys(this.sorted[mid]!.key, key) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The greatest name equal to or before `name` in canonical order. */
  prev(name: string): Elem | undefined {
    const e = this.search(name);
    if (e !== undefined) return e;
    const at = this.lowerBound(canonicalKey(name));
    return at > 0 ? this.sorted[at - 1] : undefined;
  }

  /** The smallest name equal to or after `name` in canonical order. */
  next(name: string): Elem | undefined {
    const e = this.search(name);
    if (e !== undefined) return e;
    return this.sorted[this.lowerBound(canonicalKey(name))];
  }

  /**
   * True when `name` holds no records but some name strictly below it does (CoreDNS's hasDescendant:
   * a name that exists itself answers false, whatever lies below it).
   */
  hasDescendant(name: string): boolean {
    const x = this.sorted[this.lowerBound(canonicalKey(name))];
    return x !== undefined && x.name !== asciiLower(name) && isSubdomain(x.name, name);
  }

  /** The apex records in zone-file order: SOA, RRSIG(SOA), NS, RRSIG(NS); undefined without a SOA. */
  apexRecords(): ResourceRecord[] | undefined {
    if (this.soa === undefined) return undefined;
    return [this.soa, ...this.sigSoa, ...this.ns, ...this.sigNs];
  }

  /** Every name's records in canonical order (the apex records excluded). */
  *elems(): IterableIterator<Elem> {
    yield* this.sorted;
  }

  /** The A and AAAA records (and their RRSIGs with `dnssecOk`) of the in-bailiwick targets of `nsrrs`. */
  glue(nsrrs: readonly ResourceRecord[], dnssecOk: boolean): ResourceRecord[] {
    const out: ResourceRecord[] = [];
    for (const rr of nsrrs) {
      if (rr.type !== RRType.NS) continue;
      const target = (rr.data as NameData).target;
      if (!isSubdomain(target, rr.name)) continue;
      const e = this.search(target);
      if (e === undefined) continue;
      addTyped(out, e, RRType.A, dnssecOk);
      addTyped(out, e, RRType.AAAA, dnssecOk);
    }
    return out;
  }
}

function hasUpper(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 65 && c <= 90) return true;
  }
  return false;
}

/** Appends `e`'s records of `type` and, with `dnssecOk`, their RRSIGs. */
export function addTyped(out: ResourceRecord[], e: Elem, type: number, dnssecOk: boolean): void {
  const rrs = e.types.get(type);
  if (rrs !== undefined) for (const r of rrs) out.push(r);
  if (dnssecOk) {
    const sigs = e.types.get(RRType.RRSIG);
    if (sigs !== undefined) for (const s of sigs) if ((s.data as RRSIGData).typeCovered === type) out.push(s);
  }
}
