// The server metrics of CoreDNS's plugin/metrics/vars, with its names, help
// texts, types, label names and buckets, and Report(): what one query adds.
//
// Per-query cost: the children for one (server, zone) are found with two Map
// lookups and then cached in a ZoneSeries; everything else is an array index or
// a small Map keyed by a number. No label strings are built per query.

import type { Request } from '../../core/request.ts';
import { RRType, rcodeToString } from '../../wire/constants.ts';
import type client from 'prom-client';
import { counter, gauge, metricSet, SIZE_BUCKETS, TIME_BUCKETS, type MetricsRegistry } from '../pkg/metrics.ts';
import { counterVec, histogramVec, type CounterVec, type HistogramVec, type CounterChild, type HistogramChild } from '../pkg/vec.ts';

/** The server metrics of one registry, and the children cached per (server, zone, view). */
export class ServerMetrics {
  readonly requestCount: CounterVec;
  readonly requestDuration: HistogramVec;
  readonly requestSize: HistogramVec;
  readonly requestDo: CounterVec;
  readonly responseSize: HistogramVec;
  readonly responseRcode: CounterVec;
  readonly httpsResponses: CounterVec;
  readonly panics: client.Counter;
  readonly pluginEnabled: client.Gauge<'server' | 'zone' | 'view' | 'name'>;
  readonly buildInfo: client.Gauge<'version' | 'revision' | 'goversion'>;
  private readonly series = new Map<string, Map<string, ZoneSeries>>();

  constructor(r: MetricsRegistry) {
    this.requestCount = counterVec(r, 'coredns_dns_requests_total',
      'Counter of DNS requests made per zone, protocol and family.',
      ['server', 'zone', 'view', 'proto', 'family', 'type']);
    this.requestDuration = histogramVec(r, 'coredns_dns_request_duration_seconds',
      'Histogram of the time (in seconds) each request took per zone.',
      ['server', 'zone', 'view'], TIME_BUCKETS);
    this.requestSize = histogramVec(r, 'coredns_dns_request_size_bytes',
      'Size of the EDNS0 UDP buffer in bytes (64K for TCP) per zone and protocol.',
      ['server', 'zone', 'view', 'proto'], SIZE_BUCKETS);
    this.requestDo = counterVec(r, 'coredns_dns_do_requests_total',
      'Counter of DNS requests with DO bit set per zone.',
      ['server', 'zone', 'view']);
    this.responseSize = histogramVec(r, 'coredns_dns_response_size_bytes',
      'Size of the returned response in bytes.',
      ['server', 'zone', 'view', 'proto'], SIZE_BUCKETS);
    this.responseRcode = counterVec(r, 'coredns_dns_responses_total',
      'Counter of response status codes.',
      ['server', 'zone', 'view', 'rcode', 'plugin']);
    this.httpsResponses = counterVec(r, 'coredns_dns_https_responses_total',
      'Counter of DoH responses per server and http status code.',
      ['server', 'status']);
    this.panics = counter(r, 'coredns_panics_total', 'A metrics that counts the number of panics.');
    this.pluginEnabled = gauge(r, 'coredns_plugin_enabled',
      'A metric that indicates whether a plugin is enabled on per server and zone basis.',
      ['server', 'zone', 'view', 'name']);
    this.buildInfo = gauge(r, 'coredns_build_info',
      "A metric with a constant '1' value labeled by version, revision, and goversion from which CoreDNS was built.",
      ['version', 'revision', 'goversion']);
  }

  /** The cached children for one server, zone and view label. */
  zoneSeries(server: string, zone: string, view = ''): ZoneSeries {
    let byZone = this.series.get(server);
    if (byZone === undefined) {
      byZone = new Map();
      this.series.set(server, byZone);
    }
    const key = view === '' ? zone : zone + '\n' + view;
    let s = byZone.get(key);
    if (s === undefined) {
      s = new ZoneSeries(this, server, zone, view);
      byZone.set(key, s);
    }
    return s;
  }

  /** A reply the server wrote itself before any chain (zone `dropped`). */
  reportDropped(req: Request, rcode: number, size: number): void {
    report(this.zoneSeries(req.server, DROPPED), req, rcode, '', size);
  }
}

/** The server metrics of a registry (the process's without one). */
export const serverMetrics = metricSet((r) => new ServerMetrics(r));

/** Zone label of queries the server refused before any plugin chain. */
export const DROPPED = 'dropped';

// CoreDNS's monitorType: these types are labelled by name, all others `other`.
const MONITORED = [
  RRType.AAAA, RRType.A, RRType.CNAME, RRType.DNSKEY, RRType.DS, RRType.MX, RRType.NSEC3, RRType.NSEC,
  RRType.NS, RRType.PTR, RRType.RRSIG, RRType.SOA, RRType.SRV, RRType.TXT, RRType.HTTPS, RRType.SVCB,
  RRType.IXFR, RRType.AXFR, RRType.ANY,
];
const TYPE_LABEL = new Map<number, string>();
for (const [name, code] of Object.entries(RRType)) {
  if ((MONITORED as number[]).includes(code) && !TYPE_LABEL.has(code)) TYPE_LABEL.set(code, name);
}

/** CoreDNS's qTypeString: the type's name when monitored, else `other`. */
export function qTypeLabel(qtype: number): string {
  return TYPE_LABEL.get(qtype) ?? 'other';
}

const PROTO = ['udp', 'tcp'] as const;

/** Every child one (server, zone) can need, created on first use. */
class ZoneSeries {
  private readonly m: ServerMetrics;
  readonly server: string;
  readonly zone: string;
  readonly view: string;
  readonly duration: HistogramChild;
  private doChild: CounterChild | undefined;
  private readonly reqSize: (HistogramChild | undefined)[] = [undefined, undefined];
  private readonly respSize: (HistogramChild | undefined)[] = [undefined, undefined];
  /** index proto*2 + family-1 → qtype → child */
  private readonly requests: Map<number, CounterChild>[] = [new Map(), new Map(), new Map(), new Map()];
  /** rcode → plugin → child */
  private readonly responses = new Map<number, Map<string, CounterChild>>();

  constructor(m: ServerMetrics, server: string, zone: string, view: string) {
    this.m = m;
    this.server = server;
    this.zone = zone;
    this.view = view;
    this.duration = m.requestDuration.child(server, zone, view);
  }

  do(): CounterChild { return this.doChild ??= this.m.requestDo.child(this.server, this.zone, this.view); }

  requestSize(p: number): HistogramChild {
    return this.reqSize[p] ??= this.m.requestSize.child(this.server, this.zone, this.view, PROTO[p]!);
  }

  responseSize(p: number): HistogramChild {
    return this.respSize[p] ??= this.m.responseSize.child(this.server, this.zone, this.view, PROTO[p]!);
  }

  request(p: number, family: number, qtype: number): CounterChild {
    const m = this.requests[p * 2 + family - 1]!;
    let c = m.get(qtype);
    if (c === undefined) {
      c = this.m.requestCount.child(this.server, this.zone, this.view, PROTO[p]!, String(family), qTypeLabel(qtype));
      m.set(qtype, c);
    }
    return c;
  }

  response(rcode: number, plugin: string): CounterChild {
    let m = this.responses.get(rcode);
    if (m === undefined) {
      m = new Map();
      this.responses.set(rcode, m);
    }
    let c = m.get(plugin);
    if (c === undefined) {
      c = this.m.responseRcode.child(this.server, this.zone, this.view, rcodeToString(rcode), plugin);
      m.set(plugin, c);
    }
    return c;
  }
}

export type { ZoneSeries };

/**
 * CoreDNS's vars.Report: one query of `req` answered with `rcode` (a reply of
 * `size` bytes, written by `plugin`, '' when the server wrote it).
 */
export function report(s: ZoneSeries, req: Request, rcode: number, plugin: string, size: number): void {
  const p = req.proto === 'udp' ? 0 : 1;
  if (req.do) s.do().value++;
  s.request(p, req.family, req.qtype).value++;
  s.duration.observe(Number(process.hrtime.bigint() - req.start) / 1e9);
  s.responseSize(p).observe(size);
  // The size as received (CoreDNS's WithOriginalReqSize), even when a plugin (rewrite) edited the query in place.
  s.requestSize(p).observe(req.wire.length);
  s.response(rcode, plugin).value++;
}
