// node-cache's command line (kubernetes/dns cmd/node-cache/main.go): its own
// flags, parsed in one set with CoreDNS's, and the checks it makes before
// anything starts. Flag names, defaults, usage strings and error texts are
// node-cache's.

import { parseDuration } from '../plugin/pkg/duration.ts';
import { parseIP, ipv4Of, formatIPv4, formatIPv6Go } from '../wire/ip.ts';
import { goQuote } from '../corefile/address.ts';

/** A flag as src/cli/flags.ts describes one (kept structural: the library does not import the CLI). */
export interface NodeCacheFlagSpec {
  name: string;
  kind: 'string' | 'bool' | 'duration';
  usage: string;
  default: string;
}

export const NODECACHE_FLAGS: NodeCacheFlagSpec[] = [
  { name: 'localip', kind: 'string', default: '', usage: 'comma-separated string of ip addresses to bind dnscache to' },
  { name: 'setupinterface', kind: 'bool', default: 'true', usage: 'indicates whether network interface should be setup' },
  { name: 'interfacename', kind: 'string', default: 'nodelocaldns', usage: 'name of the interface to be created' },
  // A Go duration flag whose default is the bare number 60 (60ns) and whose value is multiplied by one second.
  { name: 'syncinterval', kind: 'duration', default: '60ns', usage: 'interval(in seconds) to check for iptables rules' },
  { name: 'metrics-listen-address', kind: 'string', default: '0.0.0.0:9353', usage: 'address to serve metrics on' },
  { name: 'setupiptables', kind: 'bool', default: 'true', usage: 'indicates whether iptables rules should be setup' },
  { name: 'basecorefile', kind: 'string', default: '/etc/coredns/Corefile.base', usage: 'Path to the template Corefile for node-cache' },
  { name: 'corefile', kind: 'string', default: '/etc/Corefile', usage: 'Path to the Corefile to be used by node-cache' },
  { name: 'kubednscm', kind: 'string', default: '', usage: 'Path where the kube-dns configmap will be mounted' },
  { name: 'upstreamsvc', kind: 'string', default: 'kube-dns', usage: 'Service name whose cluster IP is upstream for node-cache' },
  { name: 'health-port', kind: 'string', default: '8080', usage: 'port used by health plugin' },
  { name: 'skipteardown', kind: 'bool', default: 'false', usage: 'indicates whether iptables rules should be torn down on exit' },
  { name: 'reloadwithsignal', kind: 'bool', default: 'false', usage: 'use SIGUSR1 on self to reload CoreDNS' },
  // nodens's own: which firewall tool holds the rules (see README.md, "iptables or nftables").
  { name: 'firewall', kind: 'string', default: 'auto', usage: 'nodens: firewall backend: auto, iptables, iptables-legacy, iptables-nft or nft' },
];

export const FIREWALL_BACKENDS = ['auto', 'iptables', 'iptables-legacy', 'iptables-nft', 'nft'] as const;
export type FirewallChoice = typeof FIREWALL_BACKENDS[number];

export interface ConfigParams {
  /** -localip as given (comma-separated). */
  localIPStr: string;
  /** Each -localip address as Go's net.IP.String() prints it. */
  localIPs: string[];
  ipv6: boolean;
  /** -dns.port: port of the NOTRACK/ACCEPT rules and of stub-domain blocks. */
  localPort: string;
  metricsListenAddress: string;
  setupInterface: boolean;
  interfaceName: string;
  /** -syncinterval's nanosecond count read as seconds (node-cache multiplies the duration by time.Second), in ms. */
  intervalMs: number;
  pidfile: string;
  baseCoreFile: string;
  /** Always the value of -conf (node-cache overrides -corefile with it). */
  coreFile: string;
  kubednsCMPath: string;
  upstreamSvcName: string;
  healthPort: string;
  setupIptables: boolean;
  skipTeardown: boolean;
  reloadWithSignal: boolean;
  firewall: FirewallChoice;
}

/** The longest timer Node runs as asked (a longer one fires after 1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Go's strconv.Atoi acceptance: optional sign, decimal digits, within int64. */
function atoiOk(s: string): boolean {
  if (!/^[+-]?[0-9]+$/.test(s)) return false;
  const n = BigInt(s);
  return n >= -(1n << 63n) && n < (1n << 63n);
}

/** Go's net.IP.String() for an address parsed from text. */
export function goIPString(ip: Uint8Array): string {
  const v4 = ipv4Of(ip);
  return v4 !== undefined ? formatIPv4(v4, 0) : formatIPv6Go(ip, 0);
}

/**
 * parseAndValidateFlags after flag.Parse: `values` holds every flag of the combined set (node-cache's and
 * CoreDNS's) as text. Throws Error with node-cache's message on a bad value.
 */
export function paramsFromFlags(values: Map<string, string>): ConfigParams {
  const v = (n: string): string => values.get(n) ?? '';
  const localIPStr = v('localip');
  const parsed: Uint8Array[] = [];
  for (const s of localIPStr.split(',')) {
    const ip = parseIP(s);
    if (ip === undefined) throw new Error(`invalid localip specified - ${goQuote(s)}`);
    parsed.push(ip);
  }
  // utilnet.IsIPv6: not representable as IPv4 (an IPv4-mapped address counts as IPv4).
  const isV6 = (ip: Uint8Array): boolean => ipv4Of(ip) === undefined;
  const ipv6 = isV6(parsed[0]!);
  for (const ip of parsed) {
    if (isV6(ip) !== ipv6) throw new Error(`unexpected IP Family for localIP - ${goQuote(goIPString(ip))}, want IPv6=${ipv6}`);
  }
  const localPort = v('dns.port');
  if (!atoiOk(localPort)) throw new Error(`invalid port specified - ${goQuote(localPort)}`);
  const healthPort = v('health-port');
  if (!atoiOk(healthPort)) throw new Error(`invalid healthcheck port specified - ${goQuote(healthPort)}`);
  // Go: time.NewTicker(Interval * time.Second) — the flag's nanoseconds become seconds.
  const seconds = parseDuration(v('syncinterval'));
  // Go's ticker panics on a non-positive interval (in a goroutine, killing the process later); say so at once.
  if (seconds <= 0n) throw new Error(`invalid syncinterval specified - ${goQuote(v('syncinterval'))}: the interval must be positive`);
  const intervalMs = seconds * 1000n > BigInt(MAX_TIMER_MS) ? MAX_TIMER_MS : Number(seconds) * 1000;
  const firewall = v('firewall') as FirewallChoice;
  if (!FIREWALL_BACKENDS.includes(firewall)) throw new Error(`invalid firewall specified - ${goQuote(firewall)}, want one of ${FIREWALL_BACKENDS.join(', ')}`);
  return {
    localIPStr,
    localIPs: parsed.map(goIPString),
    ipv6,
    localPort,
    metricsListenAddress: v('metrics-listen-address'),
    setupInterface: v('setupinterface') === 'true',
    interfaceName: v('interfacename'),
    intervalMs,
    pidfile: v('pidfile'),
    baseCoreFile: v('basecorefile'),
    // node-cache looks up CoreDNS's -conf (always defined) and uses it as the output, whatever -corefile says.
    coreFile: v('conf'),
    kubednsCMPath: v('kubednscm'),
    upstreamSvcName: v('upstreamsvc'),
    healthPort,
    setupIptables: v('setupiptables') === 'true',
    skipTeardown: v('skipteardown') === 'true',
    reloadWithSignal: v('reloadwithsignal') === 'true',
    firewall,
  };
}

/** `kube-dns-upstream` → `$KUBE_DNS_UPSTREAM_SERVICE_HOST` (node-cache's toSvcEnv, `$` included). */
export function toSvcEnv(svcName: string): string {
  return '$' + svcName.replaceAll('-', '_').toUpperCase() + '_SERVICE_HOST';
}

/** Go's os.Expand over `s` with `env` (enough of it for toSvcEnv's output: `$NAME`, `${NAME}`, special one-character names). */
export function expandEnv(s: string, env: Record<string, string | undefined>): string {
  let out = '';
  let i = 0;
  while (i < s.length) {
    const j = s.indexOf('$', i);
    if (j < 0 || j + 1 >= s.length) { out += s.slice(i); break; }
    out += s.slice(i, j);
    const rest = s.slice(j + 1);
    let name: string;
    let used: number;
    if (rest[0] === '{') {
      const close = rest.indexOf('}');
      if (close < 0) { out += ''; i = s.length; break; } // Go: bad syntax eats the rest
      name = rest.slice(1, close);
      used = close + 1;
    } else if (/^[*#$@!?\-0-9]/.test(rest)) {
      name = rest[0]!;
      used = 1;
    } else {
      const m = /^[A-Za-z0-9_]*/.exec(rest)![0];
      if (m === '') { out += '$'; i = j + 1; continue; }
      name = m;
      used = m.length;
    }
    out += env[name] ?? '';
    i = j + 1 + used;
  }
  return out;
}
