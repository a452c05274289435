// Answers from one zone as CoreDNS's file plugin computes them (plugin/file/lookup.go): the walk from
// the apex down for zone cuts and DNAMEs, exact matches, CNAME chains inside the zone and out of it
// (through `upstream`, the server's own resolution), wildcards with the closest-encloser rules, empty
// non-terminals, negative answers with the SOA and, for DNSSEC OK queries, the zone's RRSIGs and NSECs.

import type { Message, NameData, ResourceRecord } from '../../../wire/types.ts';
import { Rcode, RRClass, RRType } from '../../../wire/constants.ts';
import { asciiLower, countLabels, isSubdomain, nameEqual, nextLabel } from '../../../wire/name.ts';
import { Result, addTyped, signaturesFor, type Elem, type Zone } from './zone.ts';

/** Sections and outcome of a lookup. */
export interface LookupAnswer {
  answer: ResourceRecord[];
  ns: ResourceRecord[];
  extra: ResourceRecord[];
  result: Result;
}

/**
 * The server's own resolution of a name (CoreDNS's upstream.Lookup; a Request is one): `lookup` rejects
 * on failure; `setValue` hands the CNAME hop count to the sub-query.
 */
export interface Upstream {
  lookup(name: string, type: number): Promise<Message | undefined>;
  setValue(key: string, value: string): void;
}

/** The request value counting CNAME/DNAME hops through the server (CoreDNS's dnsserver.LoopKey). */
export const LOOP_KEY = 'dnsserver/loop';

/** What a lookup needs to know of the query. */
export interface LookupQuery {
  /** Lower-cased query name. */
  qname: string;
  qtype: number;
  /** The DO bit. */
  dnssecOk: boolean;
  /** How many CNAME/DNAME hops led here through the server (CoreDNS's LoopKey). */
  loop: number;
  /** Resolves out-of-zone targets; undefined: they answer SERVFAIL. */
  upstream: Upstream | undefined;
}

const EMPTY: ResourceRecord[] = [];

function out(answer: ResourceRecord[], ns: ResourceRecord[], extra: ResourceRecord[], result: Result): LookupAnswer {
  return { answer, ns, extra, result };
}

function soa(z: Zone, dnssecOk: boolean): ResourceRecord[] {
  const r: ResourceRecord[] = [z.soa!];
  if (dnssecOk) for (const s of z.sigSoa) r.push(s);
  return r;
}

function apexNs(z: Zone, dnssecOk: boolean): ResourceRecord[] {
  if (!dnssecOk) return z.ns;
  return z.ns.concat(z.sigNs);
}

/** The last `z.originLabels + i` labels of `qname`; undefined when `qname` has fewer. */
function nameFromRight(z: Zone, qname: string, qLabels: number, i: number): string | undefined {
  if (i <= 0) return z.origin;
  const want = z.originLabels + i;
  if (want > qLabels) return undefined;
  let at = 0;
  for (let skip = qLabels - want; skip > 0; skip--) at = nextLabel(qname, at);
  return at === 0 ? qname : qname.slice(at);
}

/** `qname` with its first label replaced by `*`; undefined for the root. */
function asteriskLabel(qname: string): string | undefined {
  if (qname === '.') return undefined;
  const i = nextLabel(qname, 0);
  return '*.' + (i >= qname.length ? '' : qname.slice(i));
}

/** Records of `type` at `e`, with their RRSIGs when `dnssecOk`. */
function typeFromElem(e: Elem, type: number, dnssecOk: boolean): ResourceRecord[] {
  const r: ResourceRecord[] = [];
  addTyped(r, e, type, dnssecOk);
  return r;
}

/** True when an empty non-terminal lies between the wildcard's parent and `qname` (RFC 4592). */
function closerEntExists(z: Zone, qname: string, wildName: string): boolean {
  if (wildName.length < 2 || !wildName.startsWith('*.')) return false;
  const parent = wildName.slice(2);
  let name = qname;
  for (;;) {
    const i = nextLabel(name, 0);
    if (i >= name.length) return false;
    name = name.slice(i);
    if (name === parent || !isSubdomain(name, parent)) return false;
    if (z.hasDescendant(name)) return true;
  }
}

/** The referral a zone cut at `e` gives, undefined when `e` is no cut (or a DS query at the cut). */
function delegationFromElem(z: Zone, e: Elem, qname: string, qtype: number, dnssecOk: boolean): { ns: ResourceRecord[]; extra: ResourceRecord[] } | undefined {
  const nsrrs = e.type(RRType.NS);
  if (nsrrs === undefined || (qtype === RRType.DS && e.name === qname)) return undefined;
  const extra = z.glue(nsrrs, dnssecOk);
  const ns = dnssecOk ? nsrrs.concat(typeFromElem(e, RRType.DS, true)) : nsrrs;
  return { ns, extra };
}

/** The first zone cut between the apex and `qname`. */
function findDelegation(z: Zone, qname: string, qtype: number, dnssecOk: boolean, exact: Elem | undefined): { ns: ResourceRecord[]; extra: ResourceRecord[] } | undefined {
  const labels = countLabels(qname);
  for (let i = 1; ; i++) {
    const name = nameFromRight(z, qname, labels, i);
    if (name === undefined) return undefined;
    if (name === qname) return exact === undefined ? undefined : delegationFromElem(z, exact, qname, qtype, dnssecOk);
    const e = z.search(name);
    if (e === undefined) continue;
    const d = delegationFromElem(z, e, qname, qtype, dnssecOk);
    if (d !== undefined) return d;
  }
}

/** A and AAAA (and RRSIGs) of the in-zone targets of MX, SRV, SVCB and HTTPS answers. */
function additionalProcessing(z: Zone, answer: readonly ResourceRecord[], dnssecOk: boolean): ResourceRecord[] {
  let extra: ResourceRecord[] | undefined;
  let seen: Set<string> | undefined;
  for (const rr of answer) {
    let name: string;
    switch (rr.type) {
      case RRType.SRV: case RRType.SVCB: case RRType.HTTPS: name = (rr.data as { target: string }).target; break;
      case RRType.MX: name = (rr.data as { exchange: string }).exchange; break;
      default: continue;
    }
    if (name === '' || !isSubdomain(name, z.origin)) continue;
    const target = asciiLower(name);
    if (seen?.has(target) === true) continue;
    (seen ??= new Set()).add(target);
    const e = z.search(target);
    if (e === undefined) continue;
    extra ??= [];
    addTyped(extra, e, RRType.A, dnssecOk);
    addTyped(extra, e, RRType.AAAA, dnssecOk);
  }
  return extra ?? EMPTY;
}

/** The DNAME substitution of `qname` (RFC 6672), undefined when `qname` is not below `owner`. */
function substituteDname(qname: string, owner: string, target: string): string | undefined {
  if (!isSubdomain(qname, owner) || qname === owner) return undefined;
  const keep = countLabels(qname) - countLabels(owner);
  let at = 0;
  for (let k = 0; k < keep; k++) at = nextLabel(qname, at);
  const prefix = qname.slice(0, at);
  return target === '.' ? (prefix === '' ? '.' : prefix) : prefix + target;
}

/**
 * Looks `q` up in `z`. Synchronous unless a CNAME leads to a name this zone cannot answer (then the
 * server's own resolution is asked).
 */
export function lookup(z: Zone, q: LookupQuery): LookupAnswer | Promise<LookupAnswer> {
  const { qname, qtype, dnssecOk: d } = q;
  if (z.soa === undefined) return out(EMPTY, EMPTY, EMPTY, Result.ServerFailure);

  if (qname === z.origin) {
    if (qtype === RRType.SOA) return out(soa(z, d), apexNs(z, d), EMPTY, Result.Success);
    if (qtype === RRType.NS) {
      const nsrrs = apexNs(z, d);
      return out(nsrrs, EMPTY, z.glue(nsrrs, d), Result.Success);
    }
  }

  if (q.loop > 8) return out(EMPTY, EMPTY, EMPTY, Result.ServerFailure);

  const qLabels = countLabels(qname);
  let found = false;
  let elem: Elem | undefined;
  let wildElem: Elem | undefined;
  let wildName = '';
  for (let i = 0; ; i++) {
    const parts = nameFromRight(z, qname, qLabels, i);
    if (parts === undefined) break;
    elem = z.search(parts);
    found = elem !== undefined;
    if (elem === undefined) {
      const wildcard = z.mayHaveWildcards ? asteriskLabel(parts) : undefined;
      if (wildcard !== undefined) {
        const wild = z.search(wildcard);
        if (wild !== undefined) {
          wildElem = wild;
          wildName = wild.name;
        } else if (z.hasDescendant(wildcard)) {
          wildElem = undefined;
          wildName = wildcard;
        }
      }
      continue;
    }

    const dnames = elem.type(RRType.DNAME);
    if (dnames !== undefined) {
      const dname = dnames[0]!;
      const target = substituteDname(qname, dname.name, (dname.data as NameData).target);
      if (target !== undefined) {
        if (nameEqual(qname, target)) return out(EMPTY, EMPTY, EMPTY, Result.ServerFailure);
        const cname: ResourceRecord = { name: qname, type: RRType.CNAME, class: RRClass.IN, ttl: dname.ttl, data: { target } };
        const head = dnames.slice();
        if (d) for (const s of signaturesFor(elem.type(RRType.RRSIG), RRType.DNAME)) head.push(s);
        if (qtype === RRType.CNAME) return out(head.concat(cname), apexNs(z, d), EMPTY, Result.Success);
        const r = externalLookup(z, { ...q, loop: q.loop + 1 }, elem, [cname]);
        const prepend = (a: LookupAnswer): LookupAnswer => ({ ...a, answer: head.concat(a.answer) });
        return r instanceof Promise ? r.then(prepend) : prepend(r);
      }
    }

    const del = delegationFromElem(z, elem, qname, qtype, d);
    if (del !== undefined) return out(EMPTY, del.ns, del.extra, Result.Delegation);
  }

  if (found && elem !== undefined) {
    const cnames = elem.type(RRType.CNAME);
    if (cnames !== undefined && cnames.length > 0 && qtype !== RRType.CNAME) {
      return externalLookup(z, { ...q, loop: q.loop + 1 }, elem, cnames.slice());
    }
    const rrs = elem.type(qtype);
    if (rrs === undefined || rrs.length === 0) {
      const ret = soa(z, d);
      if (d) addTyped(ret, elem, RRType.NSEC, true);
      return out(EMPTY, ret, EMPTY, Result.NoData);
    }
    const extra = additionalProcessing(z, rrs, d);
    let answer = rrs;
    if (d) {
      const sigs = signaturesFor(elem.type(RRType.RRSIG), qtype);
      if (sigs.length > 0) answer = rrs.concat(sigs);
    }
    return out(answer, apexNs(z, d), extra, Result.Success);
  }

  if (wildName !== '' && !closerEntExists(z, qname, wildName)) {
    if (wildElem === undefined) return out(EMPTY, soa(z, d), EMPTY, Result.NoData);
    const wcnames = wildElem.typeForWildcard(RRType.CNAME, qname);
    if (wcnames !== undefined && wcnames.length > 0 && qtype !== RRType.CNAME) {
      return externalLookup(z, { ...q, loop: q.loop + 1 }, wildElem, wcnames);
    }
    const rrs = wildElem.typeForWildcard(qtype, qname);
    if (rrs === undefined || rrs.length === 0) {
      const ret = soa(z, d);
      if (d) addTyped(ret, wildElem, RRType.NSEC, true);
      return out(EMPTY, ret, EMPTY, Result.NoData);
    }
    const extra = additionalProcessing(z, rrs, d);
    let auth = apexNs(z, d);
    if (d) {
      const deny = z.prev(qname);
      if (deny !== undefined) auth = auth.concat(typeFromElem(deny, RRType.NSEC, true));
      const sigs = wildElem.typeForWildcard(RRType.RRSIG, qname);
      if (sigs !== undefined) for (const s of signaturesFor(sigs, qtype)) rrs.push(s);
    }
    return out(rrs, auth, extra, Result.Success);
  }

  // Not found: NXDOMAIN, or NOERROR for an empty non-terminal.
  const rcode = z.hasDescendant(qname) ? Result.Success : Result.NameError;
  const ret = soa(z, d);
  if (d) {
    const deny = z.prev(qname);
    if (deny !== undefined) {
      addTyped(ret, deny, RRType.NSEC, true);
      if (rcode === Result.NameError) {
        const ce = closestEncloser(z, qname);
        if (ce !== undefined) {
          const ss = z.prev('*.' + ce.name);
          if (ss !== undefined && ss.name !== deny.name) addTyped(ret, ss, RRType.NSEC, true);
        }
      }
    }
  }
  return out(EMPTY, ret, EMPTY, rcode);
}

/** The longest existing name that `qname` is equal to or below (the apex name as last resort). */
function closestEncloser(z: Zone, qname: string): Elem | undefined {
  let name = qname;
  for (;;) {
    const i = nextLabel(name, 0);
    if (i >= name.length) break;
    const e = z.search(name);
    if (e !== undefined) return e;
    name = name.slice(i);
  }
  return z.search(z.origin);
}

function authority(z: Zone, dnssecOk: boolean, result: Result): ResourceRecord[] {
  return result === Result.NameError || result === Result.NoData ? soa(z, dnssecOk) : apexNs(z, dnssecOk);
}

/** Follows the CNAME `rrs` (owned by `e`) through the zone, and out of it through the upstream. */
function externalLookup(z: Zone, q: LookupQuery, e: Elem, rrs: ResourceRecord[]): LookupAnswer | Promise<LookupAnswer> {
  const { qtype, dnssecOk: d } = q;
  if (d) for (const s of signaturesFor(e.type(RRType.RRSIG), RRType.CNAME)) rrs.push(s);
  let target = (rrs[0]!.data as NameData).target;
  let elem = z.search(target);
  for (let i = 0; ; i++) {
    const del = findDelegation(z, target, qtype, d, elem);
    if (del !== undefined) return out(rrs, del.ns, del.extra, Result.Delegation);
    if (elem === undefined || qtype === RRType.NS || (qtype === RRType.SOA && target === z.origin)) {
      return doLookup(z, q, target, rrs);
    }
    if (i > 0 && i > 8) return out(rrs, apexNs(z, d), additionalProcessing(z, rrs, d), Result.Success);
    const cname = elem.type(RRType.CNAME);
    if (cname === undefined || cname.length === 0) break;
    const c0 = cname[0]!;
    if (nameEqual(c0.name, (c0.data as NameData).target)) return out(EMPTY, EMPTY, EMPTY, Result.ServerFailure);
    for (const c of cname) rrs.push(c);
    if (d) for (const s of signaturesFor(elem.type(RRType.RRSIG), RRType.CNAME)) rrs.push(s);
    target = (c0.data as NameData).target;
    elem = z.search(target);
  }
  addTyped(rrs, elem, qtype, d);
  return out(rrs, apexNs(z, d), additionalProcessing(z, rrs, d), Result.Success);
}

async function doLookup(z: Zone, q: LookupQuery, target: string, rrs: ResourceRecord[]): Promise<LookupAnswer> {
  const d = q.dnssecOk;
  let result: Result = Result.ServerFailure;
  if (q.upstream !== undefined) {
    try {
      q.upstream.setValue(LOOP_KEY, String(q.loop));
      const m = await q.upstream.lookup(target, q.qtype);
      if (m === undefined) result = Result.Success;
      else {
        for (const r of m.answer) rrs.push(r);
        if (m.rcode === Rcode.NXDOMAIN) result = Result.NameError;
        else if (m.rcode === Rcode.SERVFAIL) result = Result.ServerFailure;
        else if (m.rcode === Rcode.NOERROR && m.answer.length === 0) result = Result.NoData;
        else result = Result.Success;
      }
    } catch {
      result = Result.ServerFailure;
    }
  }
  return out(rrs, authority(z, d, result), additionalProcessing(z, rrs, d), result);
}
