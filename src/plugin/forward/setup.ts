// forward's Corefile syntax (CoreDNS plugin/forward/setup.go), messages kept.

import { forwardMetrics } from './metrics.ts';
import { proxyMetrics } from '../pkg/proxy/metrics.ts';
import type { MetricsRegistry } from '../pkg/metrics.ts';
import { existsSync, readFileSync, statSync } from 'node:fs';
import net from 'node:net';
import dns from 'node:dns';
import type { Dispenser } from '../../corefile/dispenser.ts';
import { blockTappers } from '../pkg/dnstap.ts';
import type { PluginDefinition, PluginLogger, SetupContext } from '../plugin.ts';
import { normalizeHostExact, splitTransport, normalizeName } from '../../corefile/address.ts';
import { isDomainName } from '../../wire/name.ts';
import { stringToRcode } from '../../wire/constants.ts';
import { parseDuration, formatDuration, DurationError } from '../pkg/duration.ts';
import type { TlsOptions } from '../pkg/proxy/conn.ts';
import type { ProxyOptions, UpstreamKind } from '../pkg/proxy/proxy.ts';
import { avoidSourcePort } from '../pkg/proxy/native-udp.ts';
import { Forward, specsFromFile, type ForwardOptions, type ToEntry, type UpstreamSpec } from './forward.ts';
import { RandomPolicy, RoundRobinPolicy, SequentialPolicy } from './policy.ts';
import { stripZone } from '../pkg/resolvconf.ts';

const MAX_TO = 15;

function goErr(e: unknown): string {
  return e instanceof DurationError ? e.message : e instanceof Error ? e.message : String(e);
}

function dur(d: Dispenser): bigint {
  if (!d.nextArg()) throw d.argErr();
  try {
    return parseDuration(d.val());
  } catch (e) {
    throw new Error(goErr(e));
  }
}

function ms(ns: bigint): number {
  return Number(ns / 1000000n);
}

/** Go strconv.ParseUint(s, 10, 32) */
function parseUint32(s: string): number {
  if (!/^[0-9]+$/.test(s)) throw new Error(`strconv.ParseUint: parsing ${JSON.stringify(s)}: invalid syntax`);
  const n = Number(s);
  if (n > 0xffffffff) throw new Error(`strconv.ParseUint: parsing ${JSON.stringify(s)}: value out of range`);
  return n;
}

/** Go strconv.Atoi */
function atoi(s: string): number {
  if (!/^[+-]?[0-9]+$/.test(s)) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: invalid syntax`);
  return Number(s);
}

function rcodesFrom(args: string[]): number[] {
  const out: number[] = [];
  for (const a of args) {
    const rc = stringToRcode(a.toUpperCase());
    if (rc === undefined || /^RCODE/i.test(a)) throw new Error(`${a} is not a valid rcode`);
    out.push(rc);
  }
  return out;
}

function readFileFor(what: string, p: string): Buffer {
  try {
    return readFileSync(p);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file or directory' : code === 'EACCES' ? 'permission denied' : goErr(e);
    throw new Error(`${what}: open ${p}: ${why}`);
  }
}

/** One TO argument as written, with where it was written. */
export interface RawTo {
  text: string;
  line: number;
  file: string;
}

/** One `forward FROM TO... { ... }` line as parsed (TO addresses are resolved later, by setup). */
export interface Stanza {
  /** FROM, normalised. */
  from: string;
  /** The TO arguments as written: addresses, resolv.conf-style files or host names. */
  to: RawTo[];
  /** The handler's options, defaults filled in (opts.from is FROM too). */
  opts: ForwardOptions;
  /** `tls [CERT KEY] [CA]`: the file names as given (read by setup). */
  tlsArgs: string[] | undefined;
  /** `tls_servername NAME`. */
  tlsServerName: string | undefined;
  /** `resolver ADDR...`: the servers host-name TOs are resolved with (IP or IP:port). */
  resolvers: string[];
  /** Never set (always false): the health check follows force_tcp, in buildForward. */
  hcForceTcp: boolean;
}

/** What the `forward` lines of a block configure: one forwarder each, chained in order. */
export interface ForwardSetupOptions {
  stanzas: Stanza[];
}

function defaults(): ForwardOptions {
  const proxy: ProxyOptions = {
    expireMs: 10000, maxAgeMs: 0, maxIdleConns: 0, source: undefined, tls: undefined, reuseUdp: false,
    readTimeoutMs: 2000, dohMethod: 'POST', caseRandomization: true,
    health: { intervalMs: 500, recursionDesired: true, domain: '.', forceTcp: false, periodicMs: 0 },
  };
  return {
    from: '.', ignored: [], maxFails: 2, maxConnectAttempts: undefined, policy: new RandomPolicy(),
    forceTcp: false, preferUdp: false, maxConcurrent: 0, nextRcodes: [], nextOnNodata: false,
    failfast: false, failoverRcodes: [], coalesce: true, resolvConfReloadMs: 2000, proxy,
  };
}

function parseStanza(d: Dispenser, log: PluginLogger): Stanza {
  const opts = defaults();
  if (!d.nextArg()) throw d.argErr();
  const origFrom = d.val();
  const zones = normalizeHostExact(origFrom);
  if (zones.length === 0) throw new Error(`unable to normalize '${origFrom}'`);
  opts.from = zones[0]!;
  if (zones.length > 1) log.warning(`Unsupported CIDR notation: '${origFrom}' expands to multiple zones. Using only '${opts.from}'.`);
  const to: RawTo[] = [];
  const line = d.line(), file = d.file();
  for (const a of d.remainingArgs()) to.push({ text: a, line, file });
  if (to.length === 0) throw d.argErr();
  const st: Stanza = { from: opts.from, to, opts, tlsArgs: undefined, tlsServerName: undefined, resolvers: [], hcForceTcp: false };
  while (d.nextBlock()) parseBlock(d, st);
  return st;
}

function parseBlock(d: Dispenser, st: Stanza): void {
  const o = st.opts;
  const p = o.proxy;
  const prop = d.val();
  switch (prop) {
    case 'except': {
      const ignore = d.remainingArgs();
      if (ignore.length === 0) throw d.argErr();
      for (const i of ignore) o.ignored.push(...normalizeHostExact(i));
      return;
    }
    case 'max_fails':
      if (!d.nextArg()) throw d.argErr();
      o.maxFails = parseUint32(d.val());
      return;
    case 'max_connect_attempts':
      if (!d.nextArg()) throw d.argErr();
      o.maxConnectAttempts = parseUint32(d.val());
      return;
    case 'health_check': {
      const v = dur(d);
      if (v < 0n) throw new Error(`health_check can't be negative: ${v}`);
      p.health.intervalMs = ms(v);
      p.health.domain = '.';
      while (d.nextArg()) {
        const hc = d.val();
        switch (hc) {
          case 'no_rec':
            p.health.recursionDesired = false;
            break;
          case 'domain': {
            if (!d.nextArg()) throw d.argErr();
            const dom = d.val();
            if (!isDomainName(dom)) throw new Error(`health_check: invalid domain name ${dom}`);
            p.health.domain = normalizeName(dom);
            break;
          }
          case 'periodic': {
            // nodens: `periodic [INTERVAL]` probes each upstream every INTERVAL (default: 10s).
            let every = 10000;
            if (d.nextArg()) {
              try {
                every = ms(parseDuration(d.val()));
              } catch {
                throw new Error(`health_check: invalid periodic interval ${d.val()}`);
              }
            }
            if (every <= 0) throw new Error('health_check: periodic interval must be positive');
            p.health.periodicMs = every;
            break;
          }
          default:
            throw new Error(`health_check: unknown option ${hc}`);
        }
      }
      return;
    }
    case 'force_tcp':
      if (d.nextArg()) throw d.argErr();
      o.forceTcp = true;
      return;
    case 'prefer_udp':
      if (d.nextArg()) throw d.argErr();
      o.preferUdp = true;
      return;
    case 'tls': {
      const args = d.remainingArgs();
      if (args.length > 3) throw d.argErr();
      st.tlsArgs = args;
      return;
    }
    case 'tls_servername':
      if (!d.nextArg()) throw d.argErr();
      st.tlsServerName = d.val();
      return;
    case 'reuse_udp_sockets':
      // nodens: pool UDP sockets as CoreDNS does, instead of a fresh source port per query.
      if (d.nextArg()) throw d.argErr();
      p.reuseUdp = true;
      return;
    case 'expire': {
      const v = dur(d);
      if (v < 0n) throw new Error(`expire can't be negative: ${formatDuration(v)}`);
      p.expireMs = ms(v);
      return;
    }
    case 'max_age': {
      const v = dur(d);
      if (v < 0n) throw new Error(`max_age can't be negative: ${formatDuration(v)}`);
      p.maxAgeMs = ms(v);
      return;
    }
    case 'max_idle_conns': {
      if (!d.nextArg()) throw d.argErr();
      const n = atoi(d.val());
      if (n < 0) throw new Error(`max_idle_conns can't be negative: ${n}`);
      p.maxIdleConns = n;
      return;
    }
    case 'read_timeout': {
      const v = dur(d);
      if (v <= 0n) throw new Error(`read_timeout must be positive: ${formatDuration(v)}`);
      p.readTimeoutMs = Math.max(1, ms(v));
      return;
    }
    case 'doh_method': {
      if (!d.nextArg()) throw d.argErr();
      const m = d.val();
      if (m !== 'GET' && m !== 'POST') throw new Error('doh_method must be either POST or GET');
      p.dohMethod = m;
      return;
    }
    case 'policy': {
      if (!d.nextArg()) throw d.argErr();
      const x = d.val();
      switch (x) {
        case 'random': o.policy = new RandomPolicy(); break;
        case 'round_robin': o.policy = new RoundRobinPolicy(); break;
        case 'sequential': o.policy = new SequentialPolicy(); break;
        default: throw d.errf(`unknown policy '${x}'`);
      }
      return;
    }
    case 'max_concurrent': {
      if (!d.nextArg()) throw d.argErr();
      const n = atoi(d.val());
      if (n < 0) throw new Error(`max_concurrent can't be negative: ${n}`);
      o.maxConcurrent = n;
      return;
    }
    case 'next': {
      const args = d.remainingArgs();
      if (args.length === 0) throw d.argErr();
      o.nextRcodes.push(...rcodesFrom(args));
      return;
    }
    case 'next_on_nodata':
      if (d.nextArg()) throw d.argErr();
      o.nextOnNodata = true;
      return;
    case 'failfast_all_unhealthy_upstreams':
      if (d.remainingArgs().length !== 0) throw d.argErr();
      o.failfast = true;
      return;
    case 'failover': {
      const args = d.remainingArgs();
      if (args.length === 0) throw d.argErr();
      const rcs = rcodesFrom(args);
      if (rcs.includes(0)) throw new Error('NoError cannot be used in failover');
      o.failoverRcodes.push(...rcs);
      return;
    }
    case 'source_address': {
      if (!d.nextArg()) throw d.argErr();
      const ip = d.val();
      if (net.isIP(ip) === 0) throw new Error(`invalid IP address: ${ip}`);
      p.source = ip;
      return;
    }
    case 'resolver': {
      const args = d.remainingArgs();
      if (args.length === 0) throw d.argErr();
      for (const r of args) {
        const hp = splitAddr(r);
        if (hp === undefined || net.isIP(hp.host) === 0) throw new Error(`resolver must be an IP address or IP:port: ${JSON.stringify(r)}`);
        st.resolvers.push(hp.port === undefined ? hp.host : (hp.host.includes(':') ? `[${hp.host}]:${hp.port}` : `${hp.host}:${hp.port}`));
      }
      return;
    }
    // nodens additions
    case 'coalesce': {
      const args = d.remainingArgs();
      if (args.length !== 1 || (args[0] !== 'on' && args[0] !== 'off')) throw d.argErr();
      o.coalesce = args[0] === 'on';
      return;
    }
    case 'case_randomization': {
      const args = d.remainingArgs();
      if (args.length !== 1 || (args[0] !== 'on' && args[0] !== 'off')) throw d.argErr();
      p.caseRandomization = args[0] === 'on';
      return;
    }
    case 'resolvconf_reload': {
      const v = dur(d);
      if (v < 0n) throw new Error(`resolvconf_reload can't be negative: ${formatDuration(v)}`);
      o.resolvConfReloadMs = ms(v);
      return;
    }
    default:
      throw d.errf(`unknown property '${prop}'`);
  }
}

/** `IP`, `IP:PORT`, `[IPv6]:PORT`, `IPv6` → host and optional port; undefined when not of that shape. */
function splitAddr(s: string): { host: string; port: string | undefined } | undefined {
  if (s.startsWith('[')) {
    const end = s.indexOf(']');
    if (end < 0) return undefined;
    const host = s.slice(1, end);
    const rest = s.slice(end + 1);
    if (rest === '') return { host, port: undefined };
    if (!rest.startsWith(':') || !/^[0-9]+$/.test(rest.slice(1))) return undefined;
    return { host, port: rest.slice(1) };
  }
  const colons = s.split(':').length - 1;
  if (colons === 1) {
    const i = s.indexOf(':');
    const port = s.slice(i + 1);
    if (!/^[0-9]+$/.test(port)) return undefined;
    return { host: s.slice(0, i), port };
  }
  return { host: s, port: undefined };
}

const DEFAULT_PORT: Record<string, number> = { dns: 53, tls: 853, https: 443 };

async function resolveHost(host: string, resolvers: string[]): Promise<string[]> {
  if (resolvers.length === 0) {
    const r = await dns.promises.lookup(host, { all: true });
    return r.map((a) => a.address);
  }
  let lastErr: unknown;
  for (const srv of resolvers) {
    const r = new dns.promises.Resolver({ timeout: 2000, tries: 1 });
    r.setServers([srv]);
    const out: string[] = [];
    try { out.push(...await r.resolve4(host)); } catch (e) { lastErr = e; }
    try { out.push(...await r.resolve6(host)); } catch (e) { lastErr = e; }
    if (out.length > 0) return out;
  }
  throw lastErr ?? new Error('no addresses');
}

/** Turn the TO arguments into entries: addresses, resolv.conf files, hostnames (resolved now). */
async function toEntries(st: Stanza): Promise<ToEntry[]> {
  const out: ToEntry[] = [];
  for (const t of st.to) {
    const origin = { file: t.file, line: t.line, source: 'corefile' as const };
    const { transport, addr } = splitTransport(t.text);
    if (addr.length === 0) throw new Error(`invalid address: ${JSON.stringify(t.text)}`);
    if (transport !== 'dns' && transport !== 'tls' && transport !== 'https') {
      const port = transport === 'grpc' ? 443 : transport === 'quic' ? 853 : 0;
      const shown = port > 0 && splitAddr(addr)?.port === undefined ? `${transport}://${addr}:${port}` : t.text;
      throw new Error(`'${transport}' is not supported as a destination protocol in forward: ${shown}`);
    }
    const kind = transport as UpstreamKind;
    let hostPart = addr;
    if (kind === 'https') {
      const slash = hostPart.indexOf('/');
      if (slash >= 0) throw new Error(`paths are not allowed in HTTPS upstream addresses (the /dns-query path is used by default): ${t.text}`);
    }
    let serverName: string | undefined;
    if (kind === 'tls') {
      // tls://IP%NAME:PORT
      const m = /^(\[[^\]]+\]|[^%:]+|[0-9a-fA-F:.]+?)%([^:\]]+)(:[0-9]+)?$/.exec(hostPart);
      if (m !== null && net.isIP(m[1]!.replace(/^\[|\]$/g, '')) !== 0) {
        serverName = m[2];
        hostPart = m[1]! + (m[3] ?? '');
      }
    }
    const hp = splitAddr(hostPart);
    const ipHost = hp !== undefined ? stripZone(hp.host) : '';
    if (hp !== undefined && net.isIP(ipHost) !== 0) {
      const port = hp.port !== undefined ? Number(hp.port) : DEFAULT_PORT[kind]!;
      out.push({ type: 'addr', spec: { kind, host: ipHost, port, serverName, origin } });
      continue;
    }
    // Not an address: a resolv.conf-style file?
    if (kind === 'dns' && existsSync(addr) && !statSync(addr).isDirectory()) {
      const specs = specsFromFile(addr);
      for (const s of specs) {
        if (net.isIP(s.host) === 0) throw new Error(`not an IP address or file: ${JSON.stringify(s.host)}`);
      }
      const stat = statSync(addr, { bigint: true });
      out.push({ type: 'file', path: addr, origin, specs, stamp: `${stat.ino}:${stat.size}:${stat.mtimeNs}` });
      continue;
    }
    // A hostname, resolved once at setup.
    const name = hp?.host ?? addr;
    if (hp === undefined || !/^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?$/.test(name)) {
      throw new Error(`not an IP address or file: ${JSON.stringify(addr)}`);
    }
    let ips: string[];
    try {
      ips = await resolveHost(name.replace(/\.$/, ''), st.resolvers);
    } catch (e) {
      throw new Error(`failed to resolve ${JSON.stringify(name)}: ${goErr(e)}`);
    }
    const port = hp.port !== undefined ? Number(hp.port) : DEFAULT_PORT[kind]!;
    for (const ip of ips) {
      out.push({ type: 'addr', spec: { kind, host: ip, port, serverName: kind === 'tls' ? (serverName ?? name.replace(/\.$/, '')) : serverName, origin } });
    }
  }
  return out;
}

function tlsFromArgs(args: string[] | undefined, serverName: string | undefined): TlsOptions {
  const t: TlsOptions = {};
  if (args !== undefined) {
    if (args.length === 1) t.ca = readFileFor('unable to read root CA certificate', args[0]!);
    if (args.length >= 2) {
      t.cert = readFileFor('could not load TLS cert', args[0]!);
      t.key = readFileFor('could not load TLS cert', args[1]!);
    }
    if (args.length === 3) t.ca = readFileFor('unable to read root CA certificate', args[2]!);
  }
  if (serverName !== undefined) t.servername = serverName;
  return t;
}

export async function buildForward(st: Stanza, log: PluginLogger, metrics?: MetricsRegistry): Promise<Forward> {
  if (st.to.length > MAX_TO) throw new Error(`more than ${MAX_TO} TOs configured: ${st.to.length}`);
  const entries = await toEntries(st);
  const specs: UpstreamSpec[] = entries.flatMap((e) => (e.type === 'addr' ? [e.spec] : e.specs));
  if (specs.length === 0) throw new Error('no valid upstream addresses found');
  const o = st.opts;
  o.proxy.health.forceTcp = o.forceTcp;
  if (entries.some((e) => (e.type === 'addr' ? e.spec.kind : 'dns') !== 'dns') || st.tlsArgs !== undefined || st.tlsServerName !== undefined) {
    o.proxy.tls = tlsFromArgs(st.tlsArgs, st.tlsServerName);
  }
  for (const s of specs) {
    if (s.kind === 'tls' && s.serverName !== undefined && st.tlsServerName !== undefined && s.serverName !== st.tlsServerName) {
      throw new Error(`both forward ('${st.tlsServerName}') and proxy level ('${s.serverName}') TLS servernames are set for upstream proxy '${s.host}:${s.port}'`);
    }
  }
  // Plain-DNS upstreams never use TLS even when `tls` is given (CoreDNS sets the TLS config per TLS upstream only).
  // The server's registry: its upstream metrics and forward's own.
  if (metrics !== undefined) o.proxy.metrics = proxyMetrics(metrics);
  return new Forward(o, entries, log, forwardMetrics(metrics));
}

/**
 * Reads every `forward` line of the block. Nothing is opened or resolved here:
 * setup reads TO files and TLS files and resolves host names (buildForward).
 */
export function parse(c: SetupContext): ForwardSetupOptions {
  const d = c.dispenser;
  const stanzas: Stanza[] = [];
  while (d.next()) stanzas.push(parseStanza(d, c.log));
  return { stanzas };
}

export const plugin: PluginDefinition = {
  name: 'forward',
  async setup(c) {
    const { stanzas } = parse(c);
    const fs: Forward[] = [];
    // The block's own DNS port is never a one-use socket's source port (native path; a reload must bind it).
    if (c.config.transport === 'dns') avoidSourcePort(Number(c.config.port));
    for (const st of stanzas) fs.push(await buildForward(st, c.log, c.instance.metrics));
    for (let i = 0; i < fs.length; i++) {
      const f = fs[i]!;
      if (i === fs.length - 1) {
        c.addPlugin((next) => { f.next = next; return f; });
      } else {
        const nf = fs[i + 1]!;
        c.addPlugin(() => { f.next = nf; return f; });
      }
      c.onStartup(() => { f.onStartup(); });
      // CoreDNS: the block's dnstap plugins also log what forward exchanges with its upstreams.
      c.onStartup(() => { f.tappers = blockTappers(c.config.handlers); });
      c.onShutdown(() => { f.onShutdown(); });
    }
  },
};
