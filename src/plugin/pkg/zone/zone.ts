// The zone store shared by file (and later auto, secondary, transfer): one zone's records by owner
// name in DNSSEC canonical order (RFC 4034 6.1), the apex (SOA, NS and their signatures) kept apart as
// CoreDNS's file plugin keeps it, insert/delete, search, the canonical neighbours of a name (NSEC denial,
// empty non-terminals) and iteration for zone transfers.

import type { NameData, RRSIGData, ResourceRecord, SOAData } from '../../../wire/types.ts';
import { RRType } from '../../../wire/constants.ts';
import { asciiLower, countLabels, fqdn, isSubdomain, nextLabel } from '../../../wire/name.ts';

/** The records of one owner name, by type (insertion order kept). */
export class Elem {
  /** Owner name: lower-case, fully qualified, escapes as the wire decoder writes them. */
  readonly name: string;
  /** Canonical sort key (see canonicalKey): plain string order is DNSSEC canonical order. */
  readonly key: string;
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

/**
 * A name's canonical sort key: its labels from the right, each byte (escapes decoded, ASCII
 * lower-cased) as the character `byte + 1`, labels separated by `\0`. Comparing keys as strings is
 * comparing names in DNSSEC canonical order (RFC 4034 6.1): a shorter label, and a name with fewer
 * labels, sort first.
 */
export function canonicalKey(name: string): string {
  const n = fqdn(name);
  if (n === '.') return '';
  let key = '';
  let end = n.length - 1;
  // labels right to left: find each label's start
  while (end > 0) {
    let begin = end;
    while (begin > 0) {
      const c = n.charCodeAt(begin - 1);
      if (c === 46) {
        let j = begin - 2;
        while (j >= 0 && n.charCodeAt(j) === 92) j--;
        if (((begin - 2 - j) & 1) === 0) break; // an unescaped dot
      }
      begin--;
    }
    if (key !== '') key += '\0';
    for (let i = begin; i < end; i++) {
      let c = n.charCodeAt(i);
      if (c === 92 && i + 1 < end) {
        const d1 = n.charCodeAt(i + 1) - 48;
        const d2 = n.charCodeAt(i + 2) - 48;
        const d3 = n.charCodeAt(i + 3) - 48;
        if (i + 3 < end && d1 >= 0 && d1 <= 9 && d2 >= 0 && d2 <= 9 && d3 >= 0 && d3 <= 9) {
          c = (d1 * 100 + d2 * 10 + d3) & 255;
          i += 3;
        } else {
          c = n.charCodeAt(++i);
        }
      }
      if (c >= 65 && c <= 90) c |= 0x20;
      key += String.fromCharCode(c + 1);
    }
    end = begin - 1;
  }
  return key;
}

/** <0, 0, >0 as the name of key `a` sorts before, with, after that of key `b` in canonical order. */
export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
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
  /** Every Elem, in canonical order unless `unsorted` (names added since the last ordered use). */
  private sorted: Elem[] = [];
  private unsorted = false;
  /** Names with a `*` label ever added: without any, wildcard searches are skipped. */
  private wildcards = 0;

  constructor(origin: string) {
    this.origin = asciiLower(fqdn(origin));
    this.originLabels = countLabels(this.origin);
  }

  /** False when no name of the zone has a `*` label (so no wildcard, nor anything below one, exists). */
  get mayHaveWildcards(): boolean {
    return this.wildcards > 0;
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
      if (key.startsWith('*.') || key.includes('.*.')) this.wildcards++;
      // a name after the last keeps the order; anything else is sorted once, when order is next needed
      const last = this.sorted[this.sorted.length - 1];
      if (last !== undefined && last.key > e.key) this.unsorted = true;
      this.sorted.push(e);
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
    const at = this.sorted.indexOf(e);
    if (at >= 0) this.sorted.splice(at, 1);
  }

  /** The names in canonical order (sorting what was added out of order). */
  private ordered(): Elem[] {
    if (this.unsorted) {
      this.sorted.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      this.unsorted = false;
    }
    return this.sorted;
  }

  /** The records of `name` (lower-case, as a query name is), undefined when the name holds none. */
  search(name: string): Elem | undefined {
    const e = this.byName.get(name);
    if (e !== undefined || !hasUpper(name)) return e;
    return this.byName.get(asciiLower(name));
  }

  /** Index in `sorted` of the first Elem not sorting before `key`. */
  private lowerBound(sorted: readonly Elem[], key: string): number {
    let lo = 0;
    let hi = sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (sorted[mid]!.key < key) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The greatest name equal to or before `name` in canonical order. */
  prev(name: string): Elem | undefined {
    const e = this.search(name);
    if (e !== undefined) return e;
    const sorted = this.ordered();
    const at = this.lowerBound(sorted, canonicalKey(name));
    return at > 0 ? sorted[at - 1] : undefined;
  }

  /** The smallest name equal to or after `name` in canonical order. */
  next(name: string): Elem | undefined {
    const e = this.search(name);
    if (e !== undefined) return e;
    const sorted = this.ordered();
    return sorted[this.lowerBound(sorted, canonicalKey(name))];
  }

  /**
   * True when `name` holds no records but some name strictly below it does (CoreDNS's hasDescendant:
   * a name that exists itself answers false, whatever lies below it).
   */
  hasDescendant(name: string): boolean {
    const sorted = this.ordered();
    const x = sorted[this.lowerBound(sorted, canonicalKey(name))];
    return x !== undefined && x.name !== asciiLower(name) && isSubdomain(x.name, name);
  }

  /** The apex records in zone-file order: SOA, RRSIG(SOA), NS, RRSIG(NS); undefined without a SOA. */
  apexRecords(): ResourceRecord[] | undefined {
    if (this.soa === undefined) return undefined;
    return [this.soa, ...this.sigSoa, ...this.ns, ...this.sigNs];
  }

  /** Every name's records in canonical order (the apex records excluded). */
  *elems(): IterableIterator<Elem> {
    yield* this.ordered();
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
