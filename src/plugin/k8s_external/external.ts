// The k8s_external handler (CoreDNS plugin/k8s_external: external.go, apex.go,
// msg_to_dns.go): an authoritative zone of the services' external addresses, with
// the data from an Externaler (the kubernetes plugin). The apex answers SOA and NS,
// `<apex>.<zone>` holds the nameserver `ns1.<apex>.<zone>`, every other name is
// `[<endpoint>. | _<port>._<proto>.]<service>.<namespace>.<zone>` (A, AAAA, SRV;
// PTR for reverse zones), NXDOMAIN/NODATA with the zone's SOA otherwise.

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Externaler, ExternalEndpoint } from '../pkg/external.ts';
import type { Fall } from '../pkg/fall.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { checkZone, transfer } from './transfer.ts';
import { trimZone, zonesMatches } from '../pkg/zones.ts';
import { Rcode, RRClass, RRType } from '../../wire/constants.ts';
import { replyTo } from '../../wire/message.ts';
import { countLabels, fqdn, isSubdomain, nextLabel, reverseToAddress } from '../../wire/name.ts';
import { formatIPv4, formatIPv6Go, isIPv4Mapped, parseIPv4, parseIPv6 } from '../../wire/ip.ts';
import type { Message, ResourceRecord, SOAData } from '../../wire/types.ts';

/** What the handler is configured with (see `K8sExternalOptions` in setup.ts). */
export interface ExternalConfig {
  zones: string[];
  /** The apex label as written (`dns`); compared case-insensitively, printed as written. */
  apex: string;
  ttl: number;
  headless: boolean;
  fall: Fall;
}

const HOSTMASTER = 'hostmaster';

/** miekg dnsutil.Join: the labels joined, the root written once. */
export function join(...labels: string[]): string {
  let out = '';
  for (const l of labels) {
    if (l === '' || l === '.') continue;
    out += l.endsWith('.') ? l : l + '.';
  }
  return out === '' ? '.' : out;
}

/**
 * The kind of an endpoint's address as msg.Service.HostType reads it (Go's net.ParseIP): an IPv4
 * address (IPv4-mapped IPv6 included) is A, another IP is AAAA, anything else a host name (CNAME).
 */
export function addressType(host: string): number {
  if (parseIPv4(host) >= 0) return RRType.A;
  if (!host.includes(':')) return RRType.CNAME;
  const b = parseIPv6(host);
  if (b === undefined) return RRType.CNAME;
  return isIPv4Mapped(b, 0) ? RRType.A : RRType.AAAA;
}

/** The address of an A or AAAA endpoint as Go prints it (dotted IPv4 text is already in that form). */
export function goAddress(host: string): string {
  if (parseIPv4(host) >= 0) return host;
  const b = parseIPv6(host)!;
  return isIPv4Mapped(b, 0) ? formatIPv4(b, 12) : formatIPv6Go(b, 0);
}

/** Some endpoint (with a port, for SRV) is a host name. */
function hasHostname(endpoints: readonly ExternalEndpoint[], withPort: boolean): boolean {
  for (let i = 0; i < endpoints.length; i++) {
    const e = endpoints[i]!;
    if ((!withPort || e.port !== -1) && addressType(e.address) === RRType.CNAME) return true;
  }
  return false;
}

type Answer = { answer: ResourceRecord[]; extra: ResourceRecord[]; tc: boolean };

export class External implements Handler {
  readonly name = 'k8s_external';
  next: Handler | undefined;
  /** The provider, found among the block's handlers at startup. */
  x: Externaler | undefined;
  private readonly o: ExternalConfig;
  /** `<apex>.<zone>` for each zone, lower-cased ('' for the root zone). */
  private readonly subApex: string[];

  constructor(o: ExternalConfig) {
    this.o = o;
    const apex = o.apex.toLowerCase();
    // CoreDNS tests `<apex>.` + zone: for the root zone that is `dns..`, below which no name lies.
    this.subApex = o.zones.map((z) => (z === '.' ? '' : apex + '.' + z));
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const qname = req.name;
    const zone = zonesMatches(this.o.zones, qname);
    if (zone === '') return nextOrFailure(this.name, this.next, req, w);
    const x = this.x!;
    const zones = this.o.zones;
    for (let i = 0; i < zones.length; i++) {
      if (qname === zones[i]) return this.serveApex(req, w, zone, x);
      const sub = this.subApex[i]!;
      if (sub !== '' && isSubdomain(qname, sub)) return this.serveSubApex(req, w, zone, x);
    }

    const qtype = req.qtype;
    let endpoints: ExternalEndpoint[] = [];
    let ptrs: string[] | undefined;
    let rcode: number;
    const address = qtype === RRType.PTR ? reverseToAddress(qname) : undefined;
    if (address !== undefined) {
      ptrs = x.externalReverse(address, zones[0]!);
      rcode = ptrs.length === 0 ? Rcode.NXDOMAIN : Rcode.NOERROR;
    } else {
      const r = x.external(qname, zone, this.o.headless);
      rcode = r.rcode;
      // CoreDNS's External hands a PTR query of a name that is no reverse name only its rcode.
      if (qtype !== RRType.PTR) endpoints = r.endpoints;
    }

    const m = replyTo(req.msg);
    m.aa = true;
    if ((ptrs === undefined && endpoints.length === 0) || (ptrs !== undefined && ptrs.length === 0)) {
      if (rcode === Rcode.NXDOMAIN && this.o.fall.through(qname)) return nextOrFailure(this.name, this.next, req, w);
      m.rcode = rcode;
      m.authority.push(this.soa(zone, x));
      w.writeMsg(m);
      return Rcode.NOERROR;
    }

    const owner = req.qname;
    if (ptrs !== undefined) {
      const seen = new Set<string>();
      for (const p of ptrs) {
        if (seen.has(p)) continue;
        seen.add(p);
        m.answer.push({ name: owner, type: RRType.PTR, class: RRClass.IN, ttl: this.o.ttl, data: { target: fqdn(p) } });
      }
      return this.finish(m, w, zone, x);
    }
    switch (qtype) {
      case RRType.A:
      case RRType.AAAA: {
        if (hasHostname(endpoints, false)) {
          return this.address(req, endpoints, qtype).then((a) => {
            m.answer = a.answer;
            m.tc = a.tc;
            return this.finish(m, w, zone, x);
          });
        }
        m.answer = this.addressSync(owner, endpoints, qtype);
        return this.finish(m, w, zone, x);
      }
      case RRType.SRV: {
        if (hasHostname(endpoints, true)) {
          return this.srv(req, endpoints).then((a) => {
            m.answer = a.answer;
            m.additional = a.extra;
            return this.finish(m, w, zone, x);
          });
        }
        const a = this.srvSync(owner, endpoints);
        m.answer = a.answer;
        m.additional = a.extra;
        return this.finish(m, w, zone, x);
      }
      default:
        m.authority.push(this.soa(zone, x));
        w.writeMsg(m);
        return Rcode.NOERROR;
    }
  }

  /** With no answer records the reply is NODATA with the SOA. */
  private finish(m: Message, w: ResponseWriter, zone: string, x: Externaler): number {
    if (m.answer.length === 0) m.authority.push(this.soa(zone, x));
    w.writeMsg(m);
    return Rcode.NOERROR;
  }

  /** A/AAAA records of the IP endpoints of the asked family (msg_to_dns.go a/aaaa without host names). */
  private addressSync(owner: string, endpoints: ExternalEndpoint[], qtype: number): ResourceRecord[] {
    const out: ResourceRecord[] = [];
    let seen: Set<string> | undefined;
    for (const e of endpoints) {
      const t = addressType(e.address);
      if (t !== qtype) continue;
      seen ??= new Set();
      if (seen.has(e.address)) continue;
      seen.add(e.address);
      out.push({ name: owner, type: qtype, class: RRClass.IN, ttl: this.o.ttl, data: { address: goAddress(e.address) } });
    }
    return out;
  }

  /** A/AAAA with host names: a CNAME to each (once per endpoint, as CoreDNS) and the upstream answer for it. */
  private async address(req: Request, endpoints: ExternalEndpoint[], qtype: number): Promise<Answer> {
    const owner = req.qname;
    const answer: ResourceRecord[] = [];
    let tc = false;
    const seen = new Set<string>();
    for (const e of endpoints) {
      const t = addressType(e.address);
      if (t === RRType.CNAME) {
        const target = fqdn(e.address);
        answer.push({ name: owner, type: RRType.CNAME, class: RRClass.IN, ttl: e.ttl, data: { target } });
        const resp = await lookup(req, target, qtype);
        if (resp !== undefined) {
          answer.push(...resp.answer);
          if (resp.tc) tc = true;
        }
        continue;
      }
      if (t !== qtype || seen.has(e.address)) continue;
      seen.add(e.address);
      answer.push({ name: owner, type: qtype, class: RRClass.IN, ttl: this.o.ttl, data: { address: goAddress(e.address) } });
    }
    return { answer, extra: [], tc };
  }

  /** SRV weight as msg_to_dns.go computes it: all endpoints share priority 0 and weight 0. */
  private static weight(n: number): number {
    return Math.max(1, Math.floor((100 / (100 * n)) * 100) & 0xffff);
  }

  /** SRV for IP endpoints: target is the endpoint's name, its address the glue. */
  private srvSync(owner: string, endpoints: ExternalEndpoint[]): Answer {
    const answer: ResourceRecord[] = [];
    const extra: ResourceRecord[] = [];
    const weight = External.weight(endpoints.length);
    const dup = new Set<string>();
    for (const e of endpoints) {
      if (e.port === -1) continue;
      const t = addressType(e.address);
      this.srvOne(owner, e, t, weight, dup, answer, extra);
    }
    return { answer, extra, tc: false };
  }

  private srvOne(owner: string, e: ExternalEndpoint, t: number, weight: number, dup: Set<string>,
    answer: ResourceRecord[], extra: ResourceRecord[]): boolean {
    const target = t === RRType.CNAME ? fqdn(e.address) : e.target;
    const port = e.port & 0xffff;
    const srvKey = target + '\u0000' + port;
    if (!dup.has(srvKey)) {
      dup.add(srvKey);
      answer.push({ name: owner, type: RRType.SRV, class: RRClass.IN, ttl: e.ttl, data: { priority: 0, weight, port, target } });
    }
    const addrKey = target + '\u0001' + (t === RRType.CNAME ? target : e.address);
    if (dup.has(addrKey)) return false;
    dup.add(addrKey);
    if (t !== RRType.CNAME) {
      extra.push({ name: target, type: t, class: RRClass.IN, ttl: this.o.ttl, data: { address: goAddress(e.address) } });
      return false;
    }
    return true; // the host name's addresses are to be looked up
  }

  /** SRV with host names among the endpoints: their A and AAAA answers go in the additional section. */
  private async srv(req: Request, endpoints: ExternalEndpoint[]): Promise<Answer> {
    const owner = req.qname;
    const answer: ResourceRecord[] = [];
    const extra: ResourceRecord[] = [];
    const weight = External.weight(endpoints.length);
    const dup = new Set<string>();
    for (const e of endpoints) {
      if (e.port === -1) continue;
      const t = addressType(e.address);
      if (!this.srvOne(owner, e, t, weight, dup, answer, extra)) continue;
      const target = fqdn(e.address);
      const a = await lookup(req, target, RRType.A);
      if (a !== undefined) extra.push(...a.answer);
      const aaaa = await lookup(req, target, RRType.AAAA);
      if (aaaa !== undefined) extra.push(...aaaa.answer);
    }
    return { answer, extra, tc: false };
  }

  /** The zone apex: SOA, NS with the nameserver's addresses as glue, NODATA for anything else. */
  private serveApex(req: Request, w: ResponseWriter, zone: string, x: Externaler): number {
    const m = replyTo(req.msg);
    m.aa = true;
    switch (req.qtype) {
      case RRType.SOA:
        m.answer.push(this.soa(zone, x));
        break;
      case RRType.NS: {
        m.answer.push({ name: zone, type: RRType.NS, class: RRClass.IN, ttl: this.o.ttl, data: { target: join('ns1', this.o.apex, zone) } });
        // CoreDNS names the glue after the query name as the client wrote it.
        const glue = join('ns1', this.o.apex, req.qname);
        for (const ip of x.externalAddress(this.o.headless)) {
          const t = addressType(ip);
          if (t === RRType.CNAME) continue;
          m.additional.push({ name: glue, type: t, class: RRClass.IN, ttl: this.o.ttl, data: { address: goAddress(ip) } });
        }
        break;
      }
      default:
        m.authority.push(this.soa(zone, x));
    }
    w.writeMsg(m);
    return Rcode.NOERROR;
  }

  /** `<apex>.<zone>` (NODATA) and `ns1.<apex>.<zone>` (the nameserver's addresses); NXDOMAIN below. */
  private serveSubApex(req: Request, w: ResponseWriter, zone: string, x: Externaler): number {
    const m = replyTo(req.msg);
    m.aa = true;
    const base = trimZone(req.name, zone) ?? '';
    const labels = countLabels(base);
    if (labels === 1) {
      m.authority.push(this.soa(zone, x));
    } else if (labels === 2 && base.slice(0, nextLabel(base, 0)) === 'ns1.') {
      const qtype = req.qtype;
      for (const ip of x.externalAddress(this.o.headless)) {
        const t = addressType(ip);
        if (t === qtype && (qtype === RRType.A || qtype === RRType.AAAA)) {
          m.answer.push({ name: req.qname, type: t, class: RRClass.IN, ttl: this.o.ttl, data: { address: goAddress(ip) } });
        }
      }
      if (m.answer.length === 0) m.authority.push(this.soa(zone, x));
    } else {
      m.rcode = Rcode.NXDOMAIN;
      m.authority.push(this.soa(zone, x));
    }
    w.writeMsg(m);
    return Rcode.NOERROR;
  }

  /** Transferer.transfer: one of the zones, whole (transfer.ts); NotAuthoritativeError for another name. */
  transfer(zone: string, serial: number): AsyncIterable<ResourceRecord[]> {
    checkZone(this.o.zones, zone);
    const x = this.x!;
    return transfer(this.o, x, this.soa(zone, x), zone, serial);
  }

  soa(zone: string, x: Externaler): ResourceRecord<SOAData> {
    const ttl = this.o.ttl;
    return {
      name: zone, type: RRType.SOA, class: RRClass.IN, ttl,
      data: {
        mname: join('ns1', this.o.apex, zone), rname: join(HOSTMASTER, this.o.apex, zone),
        serial: x.externalSerial(zone) >>> 0, refresh: 7200, retry: 1800, expire: 86400, minimum: ttl,
      },
    };
  }
}

/** upstream.Lookup: a failed lookup contributes nothing, as CoreDNS ignores its error. */
async function lookup(req: Request, name: string, qtype: number): Promise<Message | undefined> {
  try {
    return await req.lookup(name, qtype);
  } catch {
    return undefined;
  }
}
