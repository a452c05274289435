// The prometheus plugin's place in the chain: after the rest of the chain has
// run, record the query and its reply (CoreDNS plugin/metrics/handler.go).
//
// The `plugin` label of coredns_dns_responses_total is what CoreDNS (1.14.7, 1.15.0)
// really reports, checked against its binary: CoreDNS wraps the writer handed
// to each next plugin and the metrics recorder learns the name only from the
// wrapper directly around it, so the label is the name of the plugin that
// follows *prometheus* in the chain whenever a reply was written below it
// (with `prometheus; errors; log; whoami` it is `errors`), and empty when the
// chain wrote nothing and the server answered with the returned rcode.

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import { PluginError, isClientErrorRcode } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Message } from '../../wire/types.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { messageLength } from '../../wire/msglen.ts';
import { isSubdomain } from '../../wire/name.ts';
import { report, serverMetrics, type ServerMetrics, type ZoneSeries } from './vars.ts';

/** Records the rcode and the size of what the chain writes, and passes it on. */
class MetricsWriter implements ResponseWriter {
  readonly inner: ResponseWriter;
  rcode = 0;
  len = 0;
  written = false;

  constructor(inner: ResponseWriter) { this.inner = inner; }

  writeMsg(reply: Message): void {
    // Length first: the writer further out may add an OPT record to the same object.
    this.len += messageLength(reply);
    this.rcode = reply.rcode;
    this.written = true;
    this.inner.writeMsg(reply);
  }

  writeWire(reply: Uint8Array): void {
    this.len += reply.length;
    this.rcode = reply.length > 3 ? reply[3]! & 0x0f : 0;
    this.written = true;
    this.inner.writeWire(reply);
  }
}

export class Metrics implements Handler {
  readonly name = 'prometheus';
  private readonly next: Handler | undefined;
  /** The block's zones, longest first. */
  private readonly zones: readonly string[];
  /** Per server label: zone label → series (most blocks have one server and one zone). */
  private readonly cache = new Map<string, Map<string, ZoneSeries>>();

  /** The block's view (CoreDNS's ViewKey for the queries this block serves), the `view` label. */
  private readonly view: string;

  private readonly metrics: ServerMetrics;

  constructor(next: Handler | undefined, zones: readonly string[], view = '', metrics: ServerMetrics = serverMetrics()) {
    this.metrics = metrics;
    this.next = next;
    this.view = view;
    this.zones = [...new Set(zones)].sort((a, b) => b.length - a.length);
  }

  /** CoreDNS: plugin.Zones(zones).Matches(qname), or `.` when none matches. */
  zoneOf(name: string): string {
    const zones = this.zones;
    for (let i = 0; i < zones.length; i++) {
      const z = zones[i]!;
      if (z === '.' || isSubdomain(name, z)) return z;
    }
    return '.';
  }

  private series(server: string, zone: string): ZoneSeries {
    let byZone = this.cache.get(server);
    if (byZone === undefined) {
      byZone = new Map();
      this.cache.set(server, byZone);
    }
    let s = byZone.get(zone);
    if (s === undefined) {
      s = this.metrics.zoneSeries(server, zone, this.view);
      byZone.set(zone, s);
    }
    return s;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const s = this.series(req.server, this.zoneOf(req.name));
    const rw = new MetricsWriter(w);
    let r: HandlerResult;
    try {
      r = nextOrFailure(this.name, this.next, req, rw);
    } catch (e) {
      this.failed(s, req, rw, e);
      throw e;
    }
    if (typeof r === 'number') {
      this.done(s, req, rw, r);
      return r;
    }
    return r.then(
      (status) => {
        this.done(s, req, rw, status);
        return status;
      },
      (e: unknown) => {
        this.failed(s, req, rw, e);
        throw e;
      },
    );
  }

  /** A plugin error still carries the rcode (CoreDNS: `return rcode, err`); a crash is counted by the server. */
  private failed(s: ZoneSeries, req: Request, rw: MetricsWriter, e: unknown): void {
    if (e instanceof PluginError) this.done(s, req, rw, e.rcode);
  }

  private done(s: ZoneSeries, req: Request, rw: MetricsWriter, status: number): void {
    // Nothing written: the server answers with the returned rcode.
    const rcode = isClientErrorRcode(status) ? status : rw.rcode;
    const plugin = rw.written && this.next !== undefined ? this.next.name : '';
    report(s, req, rcode, plugin, rw.len);
  }
}
