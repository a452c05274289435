// trace's Corefile syntax (CoreDNS 1.15.0 plugin/trace/setup.go).

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { parseDuration } from '../pkg/duration.ts';
import { parseIP, formatIPv4, formatIPv6Go, ipv4Of } from '../../wire/ip.ts';
import { Trace, TraceState } from './trace.ts';
import { HttpReporter, DEFAULT_BATCH_INTERVAL_MS, DEFAULT_BATCH_SIZE, DEFAULT_MAX_BACKLOG } from './reporter.ts';
import { ZipkinTracer, type ZipkinEndpoint } from './span.ts';

/** What `trace [ENDPOINT-TYPE] [ENDPOINT] { ... }` configures. */
export interface TraceOptions {
  /** `zipkin`, the only type nodens has (CoreDNS's `datadog` is refused with file:line: no Datadog tracer). */
  endpointType: string;
  /** For zipkin the collector's URL: `http://ENDPOINT/api/v2/spans` unless ENDPOINT is a URL already. */
  endpoint: string;
  /** `every AMOUNT`: trace one query of each AMOUNT (0: none); Go's uint64. */
  every: bigint;
  /** `service NAME` (default `coredns`). */
  serviceName: string;
  /** `client_server [BOOL]`: zipkin-go's shared spans for a query that carries its client's span. */
  clientServer: boolean;
  /** `datadog_analytics_rate RATE`, 0..1 (Datadog only). */
  datadogAnalyticsRate: number;
  /** `zipkin_max_backlog_size N` (0: zipkin-go's default, 1000). */
  zipkinMaxBacklogSize: number;
  /** `zipkin_max_batch_size N` (0: zipkin-go's default, 100). */
  zipkinMaxBatchSize: number;
  /** `zipkin_max_batch_interval D`, nanoseconds (0: zipkin-go's default, 1 s). */
  zipkinMaxBatchInterval: bigint;
  /** `host:port` of the block's first `bind` address (the spans' local endpoint), '' without bind. */
  serviceEndpoint: string;
}

const SUPPORTED_PROVIDERS = new Map([['zipkin', 'localhost:9411'], ['datadog', 'localhost:8126']]);
const MAX_UINT64 = (1n << 64n) - 1n;
const MAX_INT64 = (1n << 63n) - 1n;

/** Go's strconv.ParseUint(s, 10, 64). */
function parseUint64(s: string): bigint {
  if (!/^[0-9]+$/.test(s)) throw new Error(`strconv.ParseUint: parsing ${JSON.stringify(s)}: invalid syntax`);
  const v = BigInt(s);
  if (v > MAX_UINT64) throw new Error(`strconv.ParseUint: parsing ${JSON.stringify(s)}: value out of range`);
  return v;
}

/** Go's strconv.Atoi on a 64-bit platform. */
function atoi(s: string): number {
  if (!/^[+-]?[0-9]+$/.test(s)) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: invalid syntax`);
  const v = BigInt(s);
  if (v > MAX_INT64 || v < -MAX_INT64 - 1n) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: value out of range`);
  return Number(v);
}

/** Go's strconv.ParseBool. */
function parseBool(s: string): boolean {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(s)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(s)) return false;
  throw new Error(`strconv.ParseBool: parsing ${JSON.stringify(s)}: invalid syntax`);
}

/** Go's strconv.ParseFloat(s, 64) for decimal text, with inf/infinity/nan. */
function parseFloat64(s: string): number {
  const bad = (): Error => new Error(`strconv.ParseFloat: parsing ${JSON.stringify(s)}: invalid syntax`);
  const lower = s.toLowerCase();
  const body = lower.startsWith('+') || lower.startsWith('-') ? lower.slice(1) : lower;
  if (body === 'inf' || body === 'infinity') return lower.startsWith('-') ? -Infinity : Infinity;
  if (lower === 'nan') return NaN;
  if (!/^[+-]?([0-9](_?[0-9])*)?(\.([0-9](_?[0-9])*)?)?(e[+-]?[0-9]+)?$/.test(lower) || !/[0-9]/.test(body.split('e')[0]!)) throw bad();
  if (lower.includes('_')) throw bad(); // underscores are only allowed with a base prefix
  const v = Number(lower);
  if (!Number.isFinite(v)) throw new Error(`strconv.ParseFloat: parsing ${JSON.stringify(s)}: value out of range`);
  return v;
}

/** Go's fmt `%f`. */
function formatF(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return v.toFixed(6);
}

function normalizeEndpoint(epType: string, ep: string): [string, string] {
  const def = SUPPORTED_PROVIDERS.get(epType);
  if (def === undefined) throw new Error(`tracing endpoint type '${epType}' is not supported`);
  if (ep === '') ep = def;
  if (epType === 'zipkin') {
    const lower = ep.toLowerCase();
    if (!lower.startsWith('http://') && !lower.startsWith('https://')) ep = 'http://' + ep + '/api/v2/spans';
  }
  return [epType, ep];
}

/** Go's net.JoinHostPort. */
function joinHostPort(host: string, port: string): string {
  return host.includes(':') ? '[' + host + ']:' + port : host + ':' + port;
}

/** Reads every `trace` line of the block (the last endpoint wins, block options add up). */
export function parse(c: SetupContext): TraceOptions {
  const d = c.dispenser;
  const o: TraceOptions = {
    endpointType: '', endpoint: '', every: 1n, serviceName: 'coredns', clientServer: false,
    datadogAnalyticsRate: 0, zipkinMaxBacklogSize: 0, zipkinMaxBatchSize: 0, zipkinMaxBatchInterval: 0n,
    serviceEndpoint: '',
  };
  const hosts = c.config.listenHosts;
  if (hosts.length > 0 && hosts[0] !== '') o.serviceEndpoint = joinHostPort(hosts[0]!, c.config.port);

  while (d.next()) {
    const args = d.remainingArgs();
    switch (args.length) {
      case 0: [o.endpointType, o.endpoint] = normalizeEndpoint('zipkin', ''); break;
      case 1: [o.endpointType, o.endpoint] = normalizeEndpoint('zipkin', args[0]!); break;
      case 2: [o.endpointType, o.endpoint] = normalizeEndpoint(args[0]!.toLowerCase(), args[1]!); break;
      default: throw d.argErr();
    }
    if (o.endpointType === 'datadog') {
      // CoreDNS sends Datadog traces with dd-trace-go to a Datadog agent; nodens has no such tracer.
      throw d.err("tracing endpoint type 'datadog' is not supported by nodens (no Datadog tracer); use zipkin");
    }
    while (d.nextBlock()) {
      const opt = d.val();
      switch (opt) {
        case 'every': {
          const a = d.remainingArgs();
          if (a.length !== 1) throw d.argErr();
          o.every = parseUint64(a[0]!);
          break;
        }
        case 'service': {
          const a = d.remainingArgs();
          if (a.length !== 1) throw d.argErr();
          o.serviceName = a[0]!;
          break;
        }
        case 'client_server': {
          const a = d.remainingArgs();
          if (a.length > 1) throw d.argErr();
          o.clientServer = a.length === 1 ? parseBool(a[0]!) : true;
          break;
        }
        case 'datadog_analytics_rate': {
          const a = d.remainingArgs();
          if (a.length > 1) throw d.argErr();
          o.datadogAnalyticsRate = a.length === 1 ? parseFloat64(a[0]!) : 0;
          const r = o.datadogAnalyticsRate;
          if (r > 1 || r < 0) throw new Error(`datadog analytics rate must be between 0 and 1, '${formatF(r)}' is not supported`);
          break;
        }
        case 'zipkin_max_backlog_size':
        case 'zipkin_max_batch_size': {
          const a = d.remainingArgs();
          if (a.length !== 1) throw d.argErr();
          const n = atoi(a[0]!);
          if (opt === 'zipkin_max_backlog_size') o.zipkinMaxBacklogSize = n;
          else o.zipkinMaxBatchSize = n;
          break;
        }
        case 'zipkin_max_batch_interval': {
          const a = d.remainingArgs();
          if (a.length !== 1) throw d.argErr();
          o.zipkinMaxBatchInterval = parseDuration(a[0]!);
          break;
        }
        default:
          throw d.errf(`unknown property '${opt}'`);
      }
    }
  }
  return o;
}

/**
 * The Zipkin local endpoint CoreDNS builds (zipkin.NewEndpoint(service, host:port)): the service name, and
 * with `bind` the first listen address and the port. Throws CoreDNS's start-up error for a port that is no
 * 16-bit number.
 */
export function localEndpoint(serviceName: string, hostPort: string): ZipkinEndpoint | undefined {
  const e: ZipkinEndpoint = { serviceName };
  if (hostPort === '' || hostPort === ':0') return serviceName === '' ? undefined : e;
  const i = hostPort.lastIndexOf(':');
  let host = hostPort.slice(0, i);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  const port = hostPort.slice(i + 1);
  if (!/^[0-9]+$/.test(port) || Number(port) > 65535) {
    throw new Error(`build Zipkin endpoint error: strconv.ParseUint: parsing ${JSON.stringify(port)}: ${/^[0-9]+$/.test(port) ? 'value out of range' : 'invalid syntax'}`);
  }
  e.port = Number(port);
  const ip = parseIP(host);
  if (ip !== undefined) {
    const v4 = ipv4Of(ip);
    if (v4 !== undefined) e.ipv4 = formatIPv4(v4, 0);
    else e.ipv6 = formatIPv6Go(ip, 0);
  }
  return e;
}

export const plugin: PluginDefinition = {
  name: 'trace',
  setup(c) {
    const o = parse(c);
    // zipkin-go's ticker runs every tenth of the interval; Go panics at start-up when that is not positive.
    const interval = o.zipkinMaxBatchInterval;
    if (interval !== 0n && interval / 10n <= 0n) {
      throw new Error(`zipkin_max_batch_interval ${String(interval)}ns is too short: a tenth of it must be at least 1ns`);
    }
    if (o.zipkinMaxBacklogSize < 0) {
      throw new Error(`zipkin_max_backlog_size must not be negative, got ${o.zipkinMaxBacklogSize}`);
    }
    const every = o.every > BigInt(Number.MAX_SAFE_INTEGER) ? Infinity : Number(o.every);
    const t = new TraceState(every);
    c.addPlugin((next) => new Trace(t, next));
    let reporter: HttpReporter | undefined;
    c.onStartup(() => {
      if (reporter !== undefined) return;
      const le = localEndpoint(o.serviceName, o.serviceEndpoint);
      reporter = new HttpReporter(o.endpoint, {
        batchSize: o.zipkinMaxBatchSize !== 0 ? o.zipkinMaxBatchSize : DEFAULT_BATCH_SIZE,
        maxBacklog: o.zipkinMaxBacklogSize !== 0 ? o.zipkinMaxBacklogSize : DEFAULT_MAX_BACKLOG,
        batchIntervalMs: interval !== 0n ? Number(interval) / 1e6 : DEFAULT_BATCH_INTERVAL_MS,
      }, c.log);
      reporter.start();
      t.tracer = new ZipkinTracer(reporter, le);
    });
    // CoreDNS leaves its reporter running; nodens sends what is queued once more and stops it, without
    // holding up the shutdown or reload while the collector answers.
    c.onShutdown(() => {
      t.tracer = undefined;
      if (reporter !== undefined) void reporter.close();
    });
  },
};
