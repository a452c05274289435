// grpc's Corefile syntax (CoreDNS plugin/grpc/setup.go), messages kept: `grpc FROM TO... { except NAMES...;
// tls [CERT KEY] [CA]; tls_servername NAME; policy random|round_robin|sequential; fallthrough [ZONES...] }`,
// once per block, at most 15 upstreams.

import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { normalizeHostExact, splitTransport } from '../../corefile/address.ts';
import { readResolvConf, stripZone } from '../pkg/resolvconf.ts';
import { Fall } from '../pkg/fall.ts';
import { Grpc, GrpcProxy, RandomPolicy, RoundRobinPolicy, SequentialPolicy, type ClientTls, type GrpcOptions } from './grpc.ts';
import { grpcMetrics } from './metrics.ts';

const MAX_TO = 15;

export interface GrpcSetup {
  opts: GrpcOptions;
  /** The upstreams as HostPortOrFile gives them (`host:port`, `unix://PATH`, `grpc://host:port`...). */
  to: string[];
  tls: ClientTls | undefined;
}

function readFor(what: string, p: string): Buffer {
  try {
    return readFileSync(p);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file or directory' : code === 'EACCES' ? 'permission denied' : (e as Error).message;
    throw new Error(`${what}: open ${p}: ${why}`);
  }
}

/** Go's net.JoinHostPort. */
function joinHostPort(host: string, port: string): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Go's net.SplitHostPort, enough for addresses: undefined when there is no port part. */
function splitHostPort(s: string): { host: string; port: string } | undefined {
  if (s.startsWith('[')) {
    const m = /^\[([^\]]*)\]:([^:]*)$/.exec(s);
    return m === null ? undefined : { host: m[1]!, port: m[2]! };
  }
  const i = s.lastIndexOf(':');
  if (i < 0 || s.indexOf(':') !== i) return undefined;
  return { host: s.slice(0, i), port: s.slice(i + 1) };
}

const DEFAULT_PORT: Record<string, string> = { dns: '53', tls: '853', quic: '853', grpc: '443', https: '443' };

/** A resolv.conf's nameservers as miekg's ClientConfigFromFile reads them, at port 53. */
function tryFile(p: string): string[] {
  let lines;
  try {
    lines = readResolvConf(p);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new Error(`failed to open file ${JSON.stringify(p)}: "open ${p}: no such file or directory"`);
    throw new Error(`read ${p}: ${code === 'EISDIR' ? 'is a directory' : (e as Error).message}`);
  }
  return lines.map((l) => joinHostPort(stripZone(l.address), '53'));
}

/** CoreDNS's parse.HostPortOrFile. */
export function hostPortOrFile(args: string[]): string[] {
  const servers: string[] = [];
  for (const h of args) {
    const { transport, addr: host } = splitTransport(h);
    if (host.length === 0) throw new Error(`invalid address: ${JSON.stringify(h)}`);
    if (transport === 'unix') {
      servers.push('unix://' + host);
      continue;
    }
    const hp = splitHostPort(host);
    if (hp === undefined) {
      const bare = host.replace(/^\[+|\]+$/g, '');
      if (net.isIP(stripZone(bare)) === 0) {
        try {
          servers.push(...tryFile(bare));
        } catch (e) {
          throw new Error(`not an IP address or file ${JSON.stringify(bare)}: ${(e as Error).message}`);
        }
        continue;
      }
      const port = DEFAULT_PORT[transport] ?? '53';
      servers.push((transport === 'dns' ? '' : transport + '://') + joinHostPort(bare, port));
      continue;
    }
    if (net.isIP(stripZone(hp.host)) === 0) {
      try {
        servers.push(...tryFile(host));
      } catch (e) {
        throw new Error(`not an IP address or file ${JSON.stringify(host)}: ${(e as Error).message}`);
      }
      continue;
    }
    servers.push(h);
  }
  if (servers.length === 0) throw new Error('no nameservers found');
  return servers;
}

/** pkg/tls NewTLSConfigFromArgs for a client: none (system CAs), CA, CERT KEY, or CERT KEY CA. */
function tlsFromArgs(args: string[]): ClientTls {
  const t: ClientTls = {};
  if (args.length === 1) t.ca = readFor('unable to read root CA certificate', args[0]!);
  if (args.length >= 2) {
    t.cert = readFor('could not load TLS cert', args[0]!);
    t.key = readFor('could not load TLS cert', args[1]!);
  }
  if (args.length === 3) t.ca = readFor('unable to read root CA certificate', args[2]!);
  return t;
}

/** Reads the block's `grpc` directive: one line only (a second is `this plugin can only be used once per Server Block`). */
export function parse(c: SetupContext): GrpcSetup {
  const d = c.dispenser;
  let out: GrpcSetup | undefined;
  while (d.next()) {
    if (out !== undefined) throw new Error('this plugin can only be used once per Server Block');
    const opts: GrpcOptions = { from: '', ignored: [], policy: new RandomPolicy(), fall: new Fall() };
    if (!d.nextArg()) throw d.argErr();
    const from = d.val();
    const normalized = normalizeHostExact(from);
    if (normalized.length === 0) throw new Error(`unable to normalize '${from}'`);
    opts.from = normalized[0]!;
    const toArgs = d.remainingArgs();
    if (toArgs.length === 0) throw d.argErr();
    const to = hostPortOrFile(toArgs);
    let tls: ClientTls | undefined;
    let serverName = '';
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'except': {
          const ignore = d.remainingArgs();
          if (ignore.length === 0) throw d.argErr();
          for (const n of ignore) opts.ignored.push(...normalizeHostExact(n));
          break;
        }
        case 'tls': {
          const args = d.remainingArgs();
          if (args.length > 3) throw d.argErr();
          const root = c.config.root;
          tls = tlsFromArgs(args.map((a) => (!path.isAbsolute(a) && root !== '' ? path.join(root, a) : a)));
          break;
        }
        case 'tls_servername':
          if (!d.nextArg()) throw d.argErr();
          serverName = d.val();
          break;
        case 'policy': {
          if (!d.nextArg()) throw d.argErr();
          const x = d.val();
          if (x === 'random') opts.policy = new RandomPolicy();
          else if (x === 'round_robin') opts.policy = new RoundRobinPolicy();
          else if (x === 'sequential') opts.policy = new SequentialPolicy();
          else throw d.errf(`unknown policy '${x}'`);
          break;
        }
        case 'fallthrough':
          opts.fall.setZonesFromArgs(d.remainingArgs());
          break;
        default:
          if (d.val() !== '}') throw d.errf(`unknown property '${d.val()}'`);
      }
    }
    if (serverName !== '') {
      tls ??= {};
      tls.servername = serverName;
    }
    out = { opts, to, tls };
  }
  return out!;
}

export const plugin: PluginDefinition = {
  name: 'grpc',
  setup(c) {
    const o = parse(c);
    if (o.to.length > MAX_TO) throw new Error(`more than ${MAX_TO} TOs configured: ${o.to.length}`);
    const metrics = grpcMetrics(c.instance.metrics);
    const g = new Grpc(o.opts, o.to.map((a) => new GrpcProxy(a, o.tls, metrics)));
    c.addPlugin((next) => {
      g.next = next;
      return g;
    });
    c.onShutdown(() => { g.close(); });
  },
};
