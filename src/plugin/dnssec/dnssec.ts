// dnssec: on-line signing of the replies of the rest of the chain (CoreDNS plugin/dnssec): RRSIGs over
// every RRset in the handled zones when the query has DO set, NSEC "black lies" for denial of existence,
// and the zone's DNSKEY set at the apex.

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { DNSKEYData, Message, NSECData, ResourceRecord, RRSIGData } from '../../wire/types.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { replyTo } from '../../wire/message.ts';
import { asciiLower, splitLabels } from '../../wire/name.ts';
import { formatRecord } from '../../wire/text.ts';
import { RRClass, Rcode, RRType } from '../../wire/constants.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { ResponseType, typify } from '../pkg/response.ts';
import { zonesMatches } from '../pkg/zones.ts';
import type { CounterChild } from '../pkg/vec.ts';
import type { SigCache, Sigs } from './cache.ts';
import type { SigningKey } from './keys.ts';
import { dnssecMetrics, type DnssecMetrics } from './metrics.ts';
import { signRRset } from './sign.ts';

const HOUR = 3600;
const EIGHT_DAYS = 8 * 24 * HOUR;
const TWO_DAYS = 2 * 24 * HOUR;
const YEAR68 = 2 ** 31;

/** miekg RRSIG.ValidityPeriod: `utc` (Unix seconds) lies within inception..expiration (serial arithmetic). */
export function validityPeriod(d: RRSIGData, utc: number): boolean {
  const modi = Math.trunc((d.inception - utc) / YEAR68);
  const mode = Math.trunc((d.expiration - utc) / YEAR68);
  const ti = d.inception + modi * YEAR68;
  const te = d.expiration + mode * YEAR68;
  return ti <= utc && utc <= te;
}

/** A signature cached now is stale once it would not be valid two days from now (75% of its 8 days). */
export function staleSigs(sigs: Sigs, now: number): boolean {
  const is75 = now + TWO_DAYS;
  for (const s of sigs) if (!validityPeriod(s.data, is75)) return true;
  return false;
}

/** Inception three hours ago, expiration in eight days (CoreDNS incepExpir). */
export function incepExpir(now: number): [number, number] {
  return [(now - 3 * HOUR) >>> 0, (now + EIGHT_DAYS) >>> 0];
}

// The NSEC type bitmaps CoreDNS's black lies use.
const T = RRType;
const DELEGATION_BITMAP: readonly number[] = [T.A, T.NS, T.HINFO, T.TXT, T.AAAA, T.LOC, T.SRV, T.CERT, T.SSHFP, T.RRSIG, T.NSEC, T.TLSA, T.HIP, T.OPENPGPKEY, T.SPF];
const ZONE_BITMAP: readonly number[] = [T.A, T.HINFO, T.TXT, T.AAAA, T.LOC, T.SRV, T.CERT, T.SSHFP, T.RRSIG, T.NSEC, T.TLSA, T.HIP, T.OPENPGPKEY, T.SPF];
const APEX_BITMAP: readonly number[] = [T.A, T.NS, T.SOA, T.HINFO, T.MX, T.TXT, T.AAAA, T.LOC, T.SRV, T.CERT, T.SSHFP, T.RRSIG, T.NSEC, T.DNSKEY, T.TLSA, T.HIP, T.OPENPGPKEY, T.SPF];

/**
 * The bitmap for a denial: without the queried type for NODATA and NXDOMAIN (unless the query was for NSEC);
 * the whole bitmap otherwise.
 */
export function filterBitmap(qtype: number, bitmap: readonly number[], mt: number): number[] {
  if ((mt !== ResponseType.NoData && mt !== ResponseType.NameError) || qtype === RRType.NSEC) return bitmap.slice();
  const i = bitmap.indexOf(qtype);
  if (i < 0) return bitmap.slice();
  return bitmap.slice(0, i).concat(bitmap.slice(i + 1));
}

/** The RRsets of a section in order of first appearance, RRSIGs left out (CoreDNS rrSets). */
function rrSets(rrs: readonly ResourceRecord[]): ResourceRecord[][] {
  const sets: ResourceRecord[][] = [];
  for (const r of rrs) {
    if (r.type === RRType.RRSIG || r.type === RRType.OPT) continue;
    let found = false;
    for (const s of sets) {
      if (s[0]!.name === r.name && s[0]!.type === r.type) {
        s.push(r);
        found = true;
        break;
      }
    }
    if (!found) sets.push([r]);
  }
  return sets;
}

interface ServerMetrics { hits: CounterChild; misses: CounterChild; entries: { set(v: number): void } }

export class Dnssec implements Handler {
  readonly name = 'dnssec';
  next: Handler | undefined;
  readonly zones: readonly string[];
  readonly keys: readonly SigningKey[];
  /** Both KSKs and ZSKs given: KSKs sign the DNSKEY set, ZSKs everything else. */
  readonly splitkeys: boolean;
  readonly cache: SigCache;
  private readonly metrics = new Map<string, ServerMetrics>();
  /** Clock in Unix seconds; replaceable by tests. */
  now: () => number = () => Math.floor(Date.now() / 1000);

  private readonly dm: DnssecMetrics;

  constructor(zones: readonly string[], keys: readonly SigningKey[], splitkeys: boolean, cache: SigCache, metrics: DnssecMetrics = dnssecMetrics()) {
    this.dm = metrics;
    this.zones = zones;
    this.keys = keys;
    this.splitkeys = splitkeys;
    this.cache = cache;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const qname = req.name;
    const zone = zonesMatches(this.zones, qname);
    if (zone === '') return nextOrFailure(this.name, this.next, req, w);
    // DNSKEY queries for one of the zones are answered here, signed when DO is set.
    if (req.qtype === RRType.DNSKEY) {
      for (const z of this.zones) {
        if (qname === z) {
          const resp = this.dnskeyReply(req, z);
          resp.aa = true;
          w.writeMsg(resp);
          return Rcode.NOERROR;
        }
      }
    }
    if (req.do) return nextOrFailure(this.name, this.next, req, new DnssecWriter(this, w, req.server));
    return nextOrFailure(this.name, this.next, req, w);
  }

  serverMetrics(server: string): ServerMetrics {
    let m = this.metrics.get(server);
    if (m === undefined) {
      const dm = this.dm;
      m = { hits: dm.cacheHits.child(server), misses: dm.cacheMisses.child(server), entries: dm.cacheSize.labels(server, 'signature') };
      this.metrics.set(server, m);
    }
    return m;
  }

  /** The zone's DNSKEY set (owner: the zone), with its signatures when the query has DO. */
  dnskeyReply(req: Request, zone: string): Message {
    const m = replyTo(req.msg);
    const keys: ResourceRecord[] = this.keys.map((k) => ({ ...k.dnskey, name: zone, data: { ...k.dnskey.data } as DNSKEYData }));
    m.answer = keys;
    if (!req.do) return m;
    const [incep, expir] = incepExpir(this.now());
    const sigs = this.sign(keys, zone, HOUR, incep, expir, req.server);
    for (const s of sigs) m.answer.push(s);
    return m;
  }

  /** Signatures over one RRset, from the cache when a fresh one is there. */
  sign(rrs: ResourceRecord[], signer: string, ttl: number, incep: number, expir: number, server: string): ResourceRecord[] {
    let key = '';
    for (const r of rrs) key += formatRecord(r); // CoreDNS hashes the concatenated rr.String()s
    const m = this.serverMetrics(server);
    const cached = this.cache.get(key);
    if (cached !== undefined && !staleSigs(cached, this.now())) {
      m.hits.inc();
      return copySigs(cached);
    }
    m.misses.inc();
    const dnskeySet = rrs.length > 0 && rrs[0]!.type === RRType.DNSKEY;
    const sigs: Sigs = [];
    for (const k of this.keys) {
      if (this.splitkeys) {
        if (dnskeySet ? !k.ksk : !k.zsk) continue;
      }
      try {
        sigs.push(signRRset(k, rrs, signer, ttl, incep, expir));
      } catch {
        // CoreDNS: a failed signature leaves the RRset unsigned (no partial set, nothing cached)
        return [];
      }
    }
    if (sigs.length > 0) this.cache.add(key, sigs);
    return copySigs(sigs);
  }

  /** The NSEC black lie for a denial (or an unsigned delegation), preceded by its signatures. */
  nsec(res: Message, zone: string, mt: number, ttl: number, incep: number, expir: number, server: string): ResourceRecord[] {
    const q = res.question[0];
    const qname = q?.name ?? '.';
    const qtype = q?.type ?? 0;
    const data: NSECData = { nextName: qname === '.' ? '\\000.' : '\\000.' + qname, types: [] };
    if (asciiLower(qname) === zone) {
      data.types = filterBitmap(qtype, APEX_BITMAP, mt);
    } else if (mt === ResponseType.Delegation || qtype === RRType.DS) {
      data.types = DELEGATION_BITMAP.slice();
      if (mt === ResponseType.Delegation) {
        const labels = splitLabels(qname);
        labels[0] += '\\000';
        data.nextName = labels.join('.') + '.';
      }
    } else {
      data.types = filterBitmap(qtype, ZONE_BITMAP, mt);
    }
    const nsec: ResourceRecord = { name: qname, type: RRType.NSEC, class: RRClass.IN, ttl, data };
    const out = this.sign([nsec], zone, ttl, incep, expir, server);
    out.push(nsec);
    return out;
  }

  /** Signs `res` (CoreDNS Dnssec.Sign), returning the message to send. */
  signReply(res: Message, zone: string, server: string): Message {
    const now = this.now();
    const [incep, expir] = incepExpir(now);
    const mt = typify(res, now);
    if (mt === ResponseType.Delegation) {
      if (res.authority.length === 0) return res;
      const ttl = res.authority[0]!.ttl;
      const ds = res.authority.filter((r) => r.type === RRType.DS);
      const add = ds.length === 0 ? this.nsec(res, zone, mt, ttl, incep, expir, server) : this.sign(ds, zone, ttl, incep, expir, server);
      return { ...res, authority: res.authority.concat(add) };
    }
    if (mt === ResponseType.NameError || mt === ResponseType.NoData) {
      if (res.authority.length !== 1 || res.authority[0]!.type !== RRType.SOA) return res;
      const ttl = res.authority[0]!.ttl;
      let ns = res.authority.concat(this.sign(res.authority, zone, ttl, incep, expir, server));
      ns = ns.concat(this.nsec(res, zone, mt, ttl, incep, expir, server));
      const out: Message = { ...res, authority: ns };
      if (ns.length > 1) {
        out.rcode = Rcode.NOERROR;
        if (res.question[0]?.type === RRType.NSEC) {
          out.answer = ns.slice(ns.length - 2);
          out.authority = [];
        }
      }
      return out;
    }
    return {
      ...res,
      answer: this.signSection(res.answer, incep, expir, server),
      authority: this.signSection(res.authority, incep, expir, server),
      additional: this.signSection(res.additional, incep, expir, server),
    };
  }

  /** The section with the signatures of each of its RRsets in one of the zones appended. */
  private signSection(rrs: ResourceRecord[], incep: number, expir: number, server: string): ResourceRecord[] {
    if (rrs.length === 0) return rrs;
    let out: ResourceRecord[] | undefined;
    for (const set of rrSets(rrs)) {
      const signer = zonesMatches(this.zones, asciiLower(set[0]!.name));
      if (signer === '') continue;
      const sigs = this.sign(set, signer, set[0]!.ttl, incep, expir, server);
      if (sigs.length === 0) continue;
      out ??= rrs.slice();
      for (const s of sigs) out.push(s);
    }
    return out ?? rrs;
  }
}

function copySigs(sigs: Sigs): ResourceRecord[] {
  const out: ResourceRecord[] = [];
  for (const s of sigs) out.push({ ...s });
  return out;
}

/** Signs the reply of the rest of the chain on its way to the client (CoreDNS's dnssec ResponseWriter). */
export class DnssecWriter implements ResponseWriter {
  private readonly d: Dnssec;
  private readonly inner: ResponseWriter;
  private readonly server: string;

  constructor(d: Dnssec, inner: ResponseWriter, server: string) {
    this.d = d;
    this.inner = inner;
    this.server = server;
  }

  writeMsg(res: Message): void {
    const qname = res.question.length > 0 ? asciiLower(res.question[0]!.name) : '.';
    const zone = zonesMatches(this.d.zones, qname);
    if (zone === '') {
      this.inner.writeMsg(res);
      return;
    }
    const out = this.d.signReply(res, zone, this.server);
    this.d.serverMetrics(this.server).entries.set(this.d.cache.len);
    this.inner.writeMsg(out);
  }

  /** A reply already in wire form is decoded and signed as CoreDNS signs every reply written to it. */
  writeWire(b: Uint8Array): void {
    let m: Message;
    try {
      m = decodeMessage(b);
    } catch {
      this.inner.writeWire(b);
      return;
    }
    this.writeMsg(m);
  }
}
