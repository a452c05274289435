// kubernetes: answers cluster DNS (the Kubernetes DNS-Based Service Discovery
// spec, schema 1.1.0) from an in-memory view of the API server, with CoreDNS's
// record shapes and Rcode.NXDOMAIN/NODATA rules (plugin/kubernetes + plugin/backend_lookup.go).

import type { Handler, HandlerResult, Readiness, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Message, ResourceRecord } from '../../wire/types.ts';
import { replyTo } from '../../wire/message.ts';
import { asciiLower, fqdn, isSubdomain, reverseToAddress } from '../../wire/name.ts';
import { parseIPv4, parseIPv6 } from '../../wire/ip.ts';
import { nextOrFailure } from '../pkg/next.ts';
import type { Fall } from '../pkg/fall.ts';
import { zonesMatches } from '../pkg/zones.ts';
import type { AutoPather } from '../pkg/autopath.ts';
import type { MetadataProvider } from '../pkg/metadata.ts';
import type { Transferer } from '../pkg/transfer.ts';
import type { ExternalLookup, Externaler, ExternalZone } from '../pkg/external.ts';
import type { Controller, EndpointAddress, Service as KService } from './controller.ts';
import { INVALID, parseRequest, type RecordRequest } from './parse.ts';
import { Rcode, RRClass, RRType } from '../../wire/constants.ts';
import { transfer } from './xfr.ts';
import { external, externalAddress, externalReverse, externalServices } from './external.ts';


/** CoreDNS's msg.Service, reduced to what the kubernetes backend fills in. */
interface Entry {
  /** IP address, or a name (ExternalName → CNAME) */
  host: string;
  port: number;
  ttl: number;
  /** owner-side domain of the entry (SRV/NS target), e.g. `svc.ns.svc.cluster.local.` */
  domain: string;
  /** TXT text (dns-version) */
  text?: string;
}

/** Errors of the backend: a name error (Rcode.NXDOMAIN candidate) or none. */
const OK = 0;
const NAME_ERROR = 1;

interface Result { entries: Entry[]; err: number }

const EMPTY: Entry[] = [];
const NODATA_RESULT: Result = { entries: EMPTY, err: OK };
const NAME_ERROR_RESULT: Result = { entries: EMPTY, err: NAME_ERROR };

/** 4 for IPv4 text, 6 for IPv6 text, 0 for a name (Go's net.ParseIP semantics, mostly). */
export function ipFamily(host: string): 0 | 4 | 6 {
  if (parseIPv4(host) >= 0) return 4;
  if (host.includes(':') && parseIPv6(host) !== undefined) return 6;
  return 0;
}

/** CoreDNS's endpointHostname. */
export function endpointHostname(a: EndpointAddress, endpointNameMode: boolean): string {
  if (a.hostname !== '') return a.hostname;
  if (endpointNameMode && a.targetRefName !== '' && a.targetRefName.length < 64) return a.targetRefName;
  if (a.ip.includes('.')) return a.ip.replaceAll('.', '-');
  if (a.ip.includes(':')) {
    const h = a.ip.replaceAll(':', '-');
    return h.endsWith('-') ? h + '0' : h;
  }
  return '';
}

/** Upstream lookups (ExternalName targets outside the zone), resolved before a re-run. */
export type UpstreamLookup = (req: Request, name: string, qtype: number) => Promise<Message | undefined>;

export interface KubernetesOptions {
  zones: string[];
  primaryZoneIndex: number;
  ttl: number;
  podMode: 'disabled' | 'insecure' | 'verified';
  endpointNameMode: boolean;
  /** `namespaces` option ([] = all) */
  namespaces: string[];
  fall: Fall;
  ignoreEmptyService: boolean;
  multiclusterZones: string[];
  zonal: boolean;
  /** the server's own non-loopback addresses (for NS / ns.dns) */
  localIPs: () => string[];
  upstream: UpstreamLookup | undefined;
  /** The search list of the host's /etc/resolv.conf at setup, normalised: appended to a pod's search path (autopath). */
  autoPathSearch: readonly string[];
}

/**
 * What the record builders work in: the matched zone (query spelling) and pending upstream
 * answers. Zone transfers (xfr.ts) build records in a scope without a query.
 */
export interface Scope {
  zone: string;
  zoneLower: string;
  multicluster: boolean;
  upstream: Map<string, Message | null> | undefined;
  needs: [string, number][] | undefined;
}

/** Per-query context. */
interface Ctx extends Scope {
  req: Request;
}

export class Kubernetes implements Handler, Readiness, AutoPather, Transferer, Externaler, MetadataProvider {
  readonly name = 'kubernetes';
  readonly next: Handler | undefined;
  readonly o: KubernetesOptions;
  readonly c: Controller;
  private readonly nsFilter: Set<string> | undefined;

  constructor(next: Handler | undefined, o: KubernetesOptions, c: Controller) {
    this.next = next;
    this.o = o;
    this.c = c;
    this.nsFilter = o.namespaces.length > 0 ? new Set(o.namespaces) : undefined;
  }

  ready(): boolean {
    return this.c.hasSynced();
  }

  /**
   * AutoPather: the search path of the pod that sent the query (CoreDNS's
   * Kubernetes.AutoPath) — `<ns>.svc.<zone>`, `svc.<zone>`, `<zone>`, then the
   * host's search list and the empty sentinel. Only with `pods verified`, for
   * names in the plugin's zones, from a client address that is a known pod.
   */
  autoPath(req: Request): string[] | undefined {
    const zone = zonesMatches(this.o.zones, req.name);
    if (zone === '' || this.o.podMode !== 'verified') return undefined;
    const pod = this.c.podsByIP(req.remoteAddress)[0];
    if (pod === undefined) return undefined;
    const search = zone === '.'
      ? [`${pod.namespace}.svc.`, 'svc.', '.']
      : [`${pod.namespace}.svc.${zone}`, `svc.${zone}`, zone];
    search.push(...this.o.autoPathSearch, '');
    return search;
  }

  /**
   * MetadataProvider (CoreDNS's kubernetes/metadata.go): with `pods verified`, the namespace, name and
   * labels of the pod that sent the query; for a name in the plugin's zones, the parts of the name
   * (`kubernetes/port-name`, `protocol`, `endpoint`, `service`, `namespace`, `kind`, `cluster` in a
   * multicluster zone, `zone` with zonal names), or `kubernetes/parse-error` for a name the grammar rejects.
   */
  metadata(req: Request): void {
    if (this.o.podMode === 'verified') {
      const pod = this.c.podsByIP(req.remoteAddress)[0];
      if (pod !== undefined) {
        req.setMetadata('kubernetes/client-namespace', pod.namespace);
        req.setMetadata('kubernetes/client-pod-name', pod.name);
        for (const k in pod.labels) req.setMetadata('kubernetes/client-label/' + k, pod.labels[k]!);
      }
    }
    const zone = zonesMatches(this.o.zones, req.name);
    if (zone === '') return;
    // CoreDNS tests state.Zone, which is still empty when metadata is collected: only a `.` multicluster zone contains it.
    const multicluster = this.o.multiclusterZones.includes('.');
    const r = parseRequest(req.name, zone, multicluster, this.o.zonal);
    if (r === INVALID) {
      req.setMetadata('kubernetes/parse-error', 'invalid query name');
      return;
    }
    req.setMetadata('kubernetes/port-name', r.port);
    req.setMetadata('kubernetes/protocol', r.protocol);
    req.setMetadata('kubernetes/endpoint', r.endpoint);
    if (multicluster) req.setMetadata('kubernetes/cluster', r.cluster);
    if (this.o.zonal) req.setMetadata('kubernetes/zone', r.zone);
    req.setMetadata('kubernetes/service', r.service);
    req.setMetadata('kubernetes/namespace', r.namespace);
    req.setMetadata('kubernetes/kind', r.podOrSvc);
  }

  /**
   * Transferer: one of the plugin's zones (or a name below one) as CoreDNS's kubernetes/xfr.go
   * generates it (xfr.ts).
   */
  transfer(zone: string, serial: number): AsyncIterable<ResourceRecord[]> {
    return transfer(this, zone, serial);
  }

  // Externaler (external.ts): the data of the k8s_external plugin's zone.

  external(name: string, zone: string, headless: boolean): ExternalLookup {
    return external(this, name, zone, headless);
  }

  externalReverse(address: string, zone: string): string[] {
    return externalReverse(this, address, zone);
  }

  externalAddress(headless: boolean): string[] {
    return externalAddress(this, headless);
  }

  externalServices(zone: string, headless: boolean): ExternalZone {
    return externalServices(this, zone, headless);
  }

  externalSerial(zone: string): number {
    void zone; // one serial for every external zone, as in CoreDNS
    return this.c.modifiedExternal >>> 0;
  }

  get primaryZone(): string {
    return this.o.zones[this.o.primaryZoneIndex];
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const name = req.name;
    const zl = zonesMatches(this.o.zones, name);
    if (zl === '') return nextOrFailure(this.name, this.next, req, w);
    const qtype = req.qtype;
    if (qtype === RRType.AXFR || qtype === RRType.IXFR) return Rcode.REFUSED;
    const qname = req.qname;
    const ctx: Ctx = {
      req, zoneLower: zl, zone: zl === '.' ? '.' : qname.slice(qname.length - zl.length),
      multicluster: this.o.multiclusterZones.length > 0 && this.o.multiclusterZones.includes(zl),
      upstream: undefined, needs: undefined,
    };
    const r = this.answer(ctx, w);
    if (r !== -1) return r;
    // ExternalName targets outside the zone: look them up through the server, then answer again.
    return this.answerAfterLookups(ctx, w);
  }

  private async answerAfterLookups(ctx: Ctx, w: ResponseWriter): Promise<number> {
    const needs = ctx.needs ?? [];
    ctx.upstream = new Map();
    await Promise.all(needs.map(async ([n, t]) => {
      let m: Message | undefined;
      try {
        m = await this.o.upstream!(ctx.req, n, t);
      } catch {
        m = undefined;
      }
      ctx.upstream!.set(`${asciiLower(n)}|${t}`, m ?? null);
    }));
    ctx.needs = undefined;
    const r = await this.answer(ctx, w);
    return r === -1 ? Rcode.SERVFAIL : r;
  }

  /** Builds and writes the reply; -1 when upstream lookups must happen first. */
  private answer(ctx: Ctx, w: ResponseWriter): HandlerResult {
    const req = ctx.req;
    const qname = req.qname;
    const name = req.name;
    const qtype = req.qtype;
    let records: ResourceRecord[] = [];
    let extra: ResourceRecord[] = [];
    let err = OK;
    let tc = false;
    switch (qtype) {
      case RRType.A:
      case RRType.AAAA: {
        const r = this.addresses(ctx, qname, name, qtype, []);
        records = r.records; err = r.err; tc = r.tc;
        break;
      }
      case RRType.TXT: {
        const r = this.txt(ctx, qname, name, []);
        records = r.records; err = r.err; tc = r.tc;
        break;
      }
      case RRType.CNAME: {
        const r = this.cnameOnly(ctx, qname, name);
        records = r.records; err = r.err;
        break;
      }
      case RRType.PTR: {
        const r = this.ptr(ctx, qname, name);
        records = r.records; err = r.err;
        break;
      }
      case RRType.MX: {
        // The kubernetes backend never marks entries as mail: only the error matters.
        err = this.services(ctx, name, qtype).err;
        break;
      }
      case RRType.SRV: {
        const r = this.srv(ctx, qname, name);
        records = r.records; extra = r.extra; err = r.err;
        break;
      }
      case RRType.SOA:
        if (name === ctx.zoneLower) records = [this.soa(ctx)];
        break;
      case RRType.NS:
        if (name === ctx.zoneLower) {
          const r = this.ns(ctx);
          records = r.records; extra = r.extra;
          break;
        }
        err = this.addresses(ctx, qname, name, RRType.A, []).err;
        break;
      default:
        // A fake A lookup tells Rcode.NXDOMAIN from NODATA.
        err = this.addresses(ctx, qname, name, RRType.A, []).err;
    }
    if (ctx.needs !== undefined && ctx.upstream === undefined) return -1;

    if (err === NAME_ERROR) {
      if (this.o.fall.through(name)) return nextOrFailure(this.name, this.next, req, w);
      return this.backendError(ctx, w, this.c.hasSynced() ? Rcode.NXDOMAIN : Rcode.SERVFAIL);
    }
    if (records.length === 0) return this.backendError(ctx, w, Rcode.NOERROR);
    const m = replyTo(req.msg);
    m.aa = true;
    m.tc = tc;
    m.answer = dedup(records);
    m.additional = dedup(extra);
    w.writeMsg(m);
    return Rcode.NOERROR;
  }

  private backendError(ctx: Ctx, w: ResponseWriter, rcode: number): number {
    const m = replyTo(ctx.req.msg);
    m.rcode = rcode;
    m.aa = true;
    m.authority = [this.soa(ctx)];
    w.writeMsg(m);
    return Rcode.NOERROR;
  }

  soa(ctx: Scope): ResourceRecord {
    const ttl = this.o.ttl;
    const zone = ctx.zone;
    const join = (p: string) => (zone === '.' ? p + '.' : `${p}.${zone}`);
    const serial = (ctx.multicluster ? this.c.modifiedMulticluster : this.c.modified) >>> 0;
    return {
      name: zone, type: RRType.SOA, class: RRClass.IN, ttl: Math.min(ttl, 300),
      data: { mname: join('ns.dns'), rname: join('hostmaster'), serial, refresh: 7200, retry: 1800, expire: 86400, minimum: ttl },
    };
  }

  // ---------- backend (CoreDNS Services / Records / Reverse) ----------

  private trimZone(name: string, ctx: Scope): string {
    if (ctx.zoneLower === '.') return name === '.' ? '' : name.slice(0, -1);
    return name.length > ctx.zoneLower.length ? name.slice(0, name.length - ctx.zoneLower.length - 1) : '';
  }

  private services(ctx: Scope, name: string, qtype: number): Result {
    if (qtype === RRType.TXT) {
      const t = this.trimZone(name, ctx);
      if (t === 'dns-version') {
        return { entries: [{ host: '', port: 0, ttl: 28800, domain: name, text: '1.1.0' }], err: OK };
      }
      // Other names only tell Rcode.NXDOMAIN from NODATA: no TXT data, no CNAME chasing.
      const r = this.records(ctx, name);
      if (r.err === OK && r.entries.length === 0) return NAME_ERROR_RESULT;
      return r.err === OK ? NODATA_RESULT : r;
    }
    if (qtype === RRType.NS) return { entries: this.nsEntries(ctx), err: OK };
    if (name === 'ns.dns.' + (ctx.zoneLower === '.' ? '' : ctx.zoneLower)) {
      const out: Entry[] = [];
      for (const e of this.nsEntries(ctx)) {
        const fam = ipFamily(e.host);
        if ((fam === 4 && qtype === RRType.A) || (fam === 6 && qtype === RRType.AAAA)) out.push({ ...e, domain: name });
      }
      return { entries: out, err: OK };
    }
    const r = this.records(ctx, name);
    if (qtype !== RRType.SRV || r.entries.length === 0) return r;
    return { entries: r.entries.filter((e) => ipFamily(e.host) !== 0), err: r.err };
  }

  namespaceExposed(ns: string): boolean {
    if (this.nsFilter !== undefined && !this.nsFilter.has(ns)) return false;
    return this.c.namespaces.has(ns);
  }

  private records(ctx: Scope, name: string): Result {
    const r = parseRequest(name, ctx.zoneLower, ctx.multicluster, this.o.zonal);
    if (r === INVALID) return NAME_ERROR_RESULT;
    if (r.podOrSvc === '') return NODATA_RESULT;
    if (name.endsWith('.in-addr.arpa.') || name.endsWith('.ip6.arpa.')) return NAME_ERROR_RESULT;
    if (!this.namespaceExposed(r.namespace)) return NAME_ERROR_RESULT;
    if (r.podOrSvc === 'pod') return this.findPods(r, ctx);
    if (ctx.multicluster) return this.findMultiClusterServices(r, ctx);
    return this.findServices(r, ctx);
  }

  private zoneSuffix(ctx: Scope): string {
    return ctx.zone === '.' ? '' : ctx.zone;
  }

  private findPods(r: RecordRequest, ctx: Scope): Result {
    if (this.o.podMode === 'disabled') return NAME_ERROR_RESULT;
    const podname = r.service;
    if (podname === '') return NODATA_RESULT;
    const dashes = podname.split('-').length - 1;
    const ip = dashes === 3 && !podname.includes('--') ? podname.replaceAll('-', '.') : podname.replaceAll('-', ':');
    const domain = `${podname}.${r.namespace}.pod.${this.zoneSuffix(ctx)}`;
    if (this.o.podMode === 'insecure') {
      if (ipFamily(ip) === 0) return NAME_ERROR_RESULT;
      return { entries: [{ host: ip, port: 0, ttl: this.o.ttl, domain }], err: OK };
    }
    const out: Entry[] = [];
    for (const p of this.c.podsByIP(ip)) {
      if (p.podIPs.includes(ip) && p.namespace === r.namespace) out.push({ host: ip, port: 0, ttl: this.o.ttl, domain });
    }
    return out.length === 0 ? NAME_ERROR_RESULT : { entries: out, err: OK };
  }

  private findServices(r: RecordRequest, ctx: Scope): Result {
    if (r.service === '') return NODATA_RESULT;
    const svc = this.c.service(r.namespace, r.service);
    if (svc === undefined) return NAME_ERROR_RESULT;
    const ttl = this.o.ttl;
    const zs = this.zoneSuffix(ctx);
    const base = `${svc.name}.${svc.namespace}.svc.${zs}`;
    const slices = this.c.slicesOf(svc.key);
    if (this.o.ignoreEmptyService && svc.type !== 'ExternalName' && !svc.headless) {
      let n = 0;
      for (const s of slices) n += s.addresses.length;
      if (n === 0) return NAME_ERROR_RESULT;
    }
    if (svc.type === 'ExternalName') {
      if (r.endpoint !== '' || r.port !== '' || r.protocol !== '' || r.zone !== '') return NAME_ERROR_RESULT;
      if (ipFamily(svc.externalName) !== 0) return NAME_ERROR_RESULT;
      return { entries: [{ host: svc.externalName, port: 0, ttl, domain: base }], err: OK };
    }
    if (r.zone !== '') {
      if (!svc.headless) return NAME_ERROR_RESULT;
      return this.zonalEntries(r, svc, slices, base);
    }
    let err = NAME_ERROR;
    const out: Entry[] = [];
    if (svc.headless || r.endpoint !== '') {
      for (const s of slices) {
        for (const a of s.addresses) {
          const host = endpointHostname(a, this.o.endpointNameMode);
          if (r.endpoint !== '' && r.endpoint !== asciiLower(host)) continue;
          for (const p of s.ports) {
            if (!matchPortAndProtocol(r.port, p.name, r.protocol, p.protocol)) continue;
            out.push({ host: a.ip, port: p.port, ttl, domain: `${host}.${base}` });
            err = OK;
          }
        }
      }
      return { entries: out, err };
    }
    for (const p of svc.ports) {
      if (!matchPortAndProtocol(r.port, p.name, r.protocol, p.protocol)) continue;
      err = OK;
      for (const ip of svc.clusterIPs) out.push({ host: ip, port: p.port, ttl, domain: base });
    }
    return { entries: out, err };
  }

  private zonalEntries(r: RecordRequest, svc: KService, slices: readonly import('./controller.ts').Slice[], base: string): Result {
    const ttl = this.o.ttl;
    const collect = (zoneFilter: string | undefined): Entry[] => {
      const out: Entry[] = [];
      for (const s of slices) {
        for (const a of s.addresses) {
          if (zoneFilter !== undefined && asciiLower(a.zone) !== zoneFilter) continue;
          const host = endpointHostname(a, this.o.endpointNameMode);
          for (const p of s.ports) out.push({ host: a.ip, port: p.port, ttl, domain: `${host}.${base}` });
        }
      }
      return out;
    };
    let out = collect(r.zone);
    if (out.length === 0 && r.zoneMode === 'prefer') out = collect(undefined);
    void svc;
    return { entries: out, err: OK };
  }

  private findMultiClusterServices(r: RecordRequest, ctx: Scope): Result {
    if (r.service === '') return NODATA_RESULT;
    const si = this.c.imports.get(`${r.namespace}/${r.service}`);
    if (si === undefined) return NAME_ERROR_RESULT;
    const ttl = this.o.ttl;
    const base = `${si.name}.${si.namespace}.svc.${this.zoneSuffix(ctx)}`;
    let err = NAME_ERROR;
    const out: Entry[] = [];
    if (si.type === 'Headless' || r.endpoint !== '') {
      if (r.endpoint !== '' && r.cluster === '') return NAME_ERROR_RESULT;
      for (const s of this.c.mcsSlicesBySvc.get(si.key) ?? []) {
        if (r.cluster !== '' && r.cluster !== asciiLower(s.cluster)) continue;
        for (const a of s.addresses) {
          const host = endpointHostname(a, this.o.endpointNameMode);
          if (r.endpoint !== '' && r.endpoint !== asciiLower(host)) continue;
          for (const p of s.ports) {
            if (!matchPortAndProtocol(r.port, p.name, r.protocol, p.protocol)) continue;
            out.push({ host: a.ip, port: p.port, ttl, domain: `${host}.${s.cluster}.${base}` });
            err = OK;
          }
        }
      }
      return { entries: out, err };
    }
    for (const p of si.ports) {
      if (!matchPortAndProtocol(r.port, p.name, r.protocol, p.protocol)) continue;
      err = OK;
      for (const ip of si.ips) out.push({ host: ip, port: p.port, ttl, domain: base });
    }
    return { entries: out, err };
  }

  /** CoreDNS Reverse + serviceRecordForIP. */
  reverse(ctx: Scope, name: string): Result {
    const ip = reverseToAddress(name);
    if (ip === undefined) {
      const r = this.records(ctx, name);
      return { entries: EMPTY, err: r.err };
    }
    const ttl = this.o.ttl;
    const pz = this.primaryZone;
    for (const s of this.c.servicesByIP(ip)) {
      if (this.nsFilter !== undefined && !this.namespaceExposed(s.namespace)) continue;
      return { entries: [{ host: `${s.name}.${s.namespace}.svc.${pz}`, port: 0, ttl, domain: '' }], err: OK };
    }
    const out: Entry[] = [];
    for (const s of this.c.slicesByIP(ip)) {
      if (this.nsFilter !== undefined && !this.namespaceExposed(s.namespace)) continue;
      const svcName = s.svcKey.slice(s.svcKey.indexOf('/') + 1);
      for (const a of s.addresses) {
        if (a.ip !== ip) continue;
        out.push({ host: `${endpointHostname(a, this.o.endpointNameMode)}.${svcName}.${s.namespace}.svc.${pz}`, port: 0, ttl, domain: '' });
      }
    }
    return out.length === 0 ? NAME_ERROR_RESULT : { entries: out, err: OK };
  }

  /** CoreDNS nsAddrs: the services whose endpoints are this server's addresses, or ns.dns.<zone>. */
  private nsEntries(ctx: Scope): Entry[] {
    const zs = this.zoneSuffix(ctx);
    const out: Entry[] = [];
    const local = this.o.localIPs();
    for (const lip of local) {
      for (const s of this.c.slicesByIP(lip)) {
        const svc = this.c.services.get(s.svcKey);
        if (svc === undefined) continue;
        if (svc.headless) {
          for (const a of s.addresses) {
            if (a.ip !== lip) continue;
            out.push({ host: a.ip, port: 0, ttl: this.o.ttl, domain: `${endpointHostname(a, this.o.endpointNameMode)}.${svc.name}.${svc.namespace}.svc.${zs}` });
          }
        } else {
          for (const ip of svc.clusterIPs) out.push({ host: ip, port: 0, ttl: this.o.ttl, domain: `${svc.name}.${svc.namespace}.svc.${zs}` });
        }
      }
    }
    if (out.length === 0) {
      for (const ip of local) out.push({ host: ip, port: 0, ttl: this.o.ttl, domain: `ns.dns.${zs}` });
    }
    return out;
  }

  // ---------- record builders (backend_lookup.go) ----------

  /** A / AAAA with CNAME chasing for ExternalName services. */
  addresses(ctx: Scope, qname: string, name: string, qtype: number, previous: ResourceRecord[]): { records: ResourceRecord[]; err: number; tc: boolean } {
    let s: Result;
    if (name === ctx.zoneLower) {
      // checkForApex: apex.dns.<zone> never exists here, so the apex itself (no data).
      s = this.services(ctx, name, qtype);
    } else {
      s = this.services(ctx, name, qtype);
    }
    if (s.err !== OK) return { records: [], err: s.err, tc: false };
    const records: ResourceRecord[] = [];
    let tc = false;
    const dup = new Set<string>();
    const want = qtype === RRType.A ? 4 : 6;
    for (const e of s.entries) {
      const fam = ipFamily(e.host);
      if (fam === 0) {
        const c = this.cname(ctx, qname, name, qtype, e, previous, (q, n, prev) => this.addresses(ctx, q, n, qtype, prev));
        if (c.tc) tc = true;
        for (const r of c.records) records.push(r);
        continue;
      }
      if (fam !== want || dup.has(e.host)) continue;
      dup.add(e.host);
      records.push({ name: qname, type: qtype, class: RRClass.IN, ttl: e.ttl, data: { address: e.host } });
    }
    return { records, err: OK, tc };
  }

  private txt(ctx: Scope, qname: string, name: string, previous: ResourceRecord[]): { records: ResourceRecord[]; err: number; tc: boolean } {
    const s = this.services(ctx, name, RRType.TXT);
    if (s.err !== OK) return { records: [], err: s.err, tc: false };
    const records: ResourceRecord[] = [];
    let tc = false;
    const dup = new Set<string>();
    for (const e of s.entries) {
      if (e.text !== undefined) {
        if (dup.has(e.text)) continue;
        dup.add(e.text);
        records.push({ name: qname, type: RRType.TXT, class: RRClass.IN, ttl: e.ttl, data: { strings: [new TextEncoder().encode(e.text)] } });
        continue;
      }
      if (ipFamily(e.host) !== 0) continue;
      const c = this.cname(ctx, qname, name, RRType.TXT, e, previous, (q, n, prev) => this.txt(ctx, q, n, prev));
      if (c.tc) tc = true;
      for (const r of c.records) records.push(r);
    }
    return { records, err: OK, tc };
  }

  /** The CNAME branch shared by A, AAAA and TXT. */
  private cname(
    ctx: Scope, qname: string, name: string, qtype: number, e: Entry, previous: ResourceRecord[],
    recurse: (qname: string, name: string, prev: ResourceRecord[]) => { records: ResourceRecord[]; err: number; tc: boolean },
  ): { records: ResourceRecord[]; tc: boolean } {
    const target = fqdn(e.host);
    const targetLower = asciiLower(target);
    if (name === targetLower || isSubdomain(targetLower, name)) return { records: [], tc: false };
    const rec: ResourceRecord = { name: qname, type: RRType.CNAME, class: RRClass.IN, ttl: e.ttl, data: { target } };
    if (previous.length > 7) return { records: [], tc: false };
    for (const p of previous) {
      if (p.type === RRType.CNAME && asciiLower(p.name) === asciiLower(qname) && asciiLower((p.data as { target: string }).target) === targetLower) {
        return { records: [], tc: false };
      }
    }
    if (isSubdomain(targetLower, ctx.zoneLower)) {
      const next = recurse(target, targetLower, [...previous, rec]);
      if (next.err === OK && next.records.length > 0) return { records: [rec, ...next.records], tc: next.tc };
      return { records: [], tc: next.tc };
    }
    if (this.o.upstream === undefined) return { records: [], tc: false };
    const key = `${targetLower}|${qtype}`;
    if (ctx.upstream === undefined) {
      (ctx.needs ??= []).push([target, qtype]);
      return { records: [], tc: false };
    }
    const m = ctx.upstream.get(key);
    if (m === undefined || m === null) return { records: [], tc: false };
    return { records: [rec, ...m.answer], tc: m.tc };
  }

  srv(ctx: Scope, qname: string, name: string): { records: ResourceRecord[]; extra: ResourceRecord[]; err: number } {
    const s = this.services(ctx, name, RRType.SRV);
    if (s.err !== OK) return { records: [], extra: [], err: s.err };
    const records: ResourceRecord[] = [];
    const extra: ResourceRecord[] = [];
    // Every entry has priority 0 and the default weight 100.
    const total = 100 * s.entries.length;
    const dupSrv = new Set<string>();
    const dupAddr = new Set<string>();
    for (const e of s.entries) {
      if (e.port === -1) continue;
      let weight = Math.floor((100 / total) * 100);
      if (weight === 0) weight = 1;
      const fam = ipFamily(e.host);
      if (fam === 0) continue;
      const target = e.domain;
      const tl = asciiLower(target);
      const srvKey = `${tl}|${e.port}`;
      if (!dupSrv.has(srvKey)) {
        dupSrv.add(srvKey);
        records.push({ name: qname, type: RRType.SRV, class: RRClass.IN, ttl: e.ttl, data: { priority: 0, weight, port: e.port & 0xffff, target } });
      }
      const addrKey = `${tl}|${e.host}`;
      if (!dupAddr.has(addrKey)) {
        dupAddr.add(addrKey);
        extra.push({ name: target, type: fam === 4 ? RRType.A : RRType.AAAA, class: RRClass.IN, ttl: e.ttl, data: { address: e.host } });
      }
    }
    return { records, extra, err: OK };
  }

  /** The CNAME of an ExternalName service, not chased (a CNAME query). */
  cnameOnly(ctx: Scope, qname: string, name: string): { records: ResourceRecord[]; err: number } {
    const s = this.services(ctx, name, RRType.CNAME);
    if (s.err !== OK || s.entries.length === 0 || ipFamily(s.entries[0].host) !== 0) return { records: [], err: s.err };
    return { records: [{ name: qname, type: RRType.CNAME, class: RRClass.IN, ttl: s.entries[0].ttl, data: { target: fqdn(s.entries[0].host) } }], err: OK };
  }

  ptr(ctx: Scope, qname: string, name: string): { records: ResourceRecord[]; err: number } {
    const s = this.reverse(ctx, name);
    if (s.err !== OK) return { records: [], err: s.err };
    const records: ResourceRecord[] = [];
    const dup = new Set<string>();
    for (const e of s.entries) {
      if (ipFamily(e.host) !== 0 || dup.has(e.host)) continue;
      dup.add(e.host);
      records.push({ name: qname, type: RRType.PTR, class: RRClass.IN, ttl: e.ttl, data: { target: fqdn(e.host) } });
    }
    return { records, err: OK };
  }

  ns(ctx: Scope): { records: ResourceRecord[]; extra: ResourceRecord[] } {
    const records: ResourceRecord[] = [];
    const extra: ResourceRecord[] = [];
    const seen = new Set<string>();
    for (const e of this.nsEntries(ctx)) {
      const fam = ipFamily(e.host);
      if (fam === 0) continue;
      extra.push({ name: e.domain, type: fam === 4 ? RRType.A : RRType.AAAA, class: RRClass.IN, ttl: e.ttl, data: { address: e.host } });
      if (seen.has(e.domain)) continue;
      seen.add(e.domain);
      records.push({ name: ctx.zone, type: RRType.NS, class: RRClass.IN, ttl: e.ttl, data: { target: e.domain } });
    }
    return { records, extra };
  }
}

export function matchPortAndProtocol(aPort: string, bPort: string, aProto: string, bProto: string): boolean {
  return (aPort === '' || aPort === asciiLower(bPort)) && (aProto === '' || aProto === asciiLower(bProto));
}

/** dnsutil.Dedup: drop exact duplicates (name case-insensitive, same type/class/rdata). */
function dedup(rrs: ResourceRecord[]): ResourceRecord[] {
  if (rrs.length < 2) return rrs;
  // Only CNAME chains (ExternalName) can repeat a record: every other builder de-duplicates as it goes.
  let chained = false;
  for (let i = 0; i < rrs.length; i++) if (rrs[i].type === RRType.CNAME) { chained = true; break; }
  if (!chained) return rrs;
  const seen = new Set<string>();
  const out: ResourceRecord[] = [];
  for (const r of rrs) {
    const k = `${asciiLower(r.name)}|${r.type}|${JSON.stringify(r.data, (_k, v: unknown) => (v instanceof Uint8Array ? Array.from(v) : v))}`;
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(r);
  }
  return out;
}
