// Load benchmark: nodens vs CoreDNS (pinned reference) vs unbound (native reference), same query files, dnsperf;
// in the hosts and cache-hit scenarios also the "ceiling", a Node UDP server that parses nothing (bench/ceiling.ts).
//
//   npm run bench                 full run (~20 s per server and scenario), writes docs/benchmarks.md
//   npm run bench -- --smoke      a few seconds per run (CI); prints the table, writes nothing
//   options: --duration S  --servers nodens,coredns,unbound,ceiling  --scenarios hosts,cache-hit,...  --write FILE  --no-write
//            --nodens PATH (another build's bin/nodens, for A/B runs)
//   A full run with both nodens and CoreDNS ends with bench/k8s-scale.ts (the kubernetes plugin at 10,000 services
//   and 100,000 endpoints against the real kube-apiserver, two rounds), whose table goes into the same page:
//   every ratio of issue #14 from one run. Not in --smoke runs, nor with --nodens or a --scenarios list without
//   `k8s-scale`.
//
// The server under test runs on core 0 (`taskset -c 0`), dnsperf and the shared upstream (an unbound answering
// every name of a few redirect zones) on core 1. p99 comes from dnsperf -v, which prints each query's latency.
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, readdirSync, rmSync, writeFileSync, existsSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO, freePort, nodensBinary, referenceBinary, spawnArgv, waitReady, type Running } from '../test/conformance/lib/servers.ts';
import { unboundConf } from './unbound.ts';

type ServerName = 'nodens' | 'coredns' | 'unbound' | 'ceiling';
const ALL_SERVERS: ServerName[] = ['nodens', 'coredns', 'unbound', 'ceiling'];
/** The project's Node 24 (as bin/nodens runs it), else this process's node. */
const NODE24 = existsSync(path.join(REPO, 'node_modules/node/bin/node')) ? path.join(REPO, 'node_modules/node/bin/node') : process.execPath;

interface Opts {
  smoke: boolean;
  duration: number;
  servers: ServerName[];
  scenarios: string[] | undefined;
  write: string | undefined;
  nodens: string | undefined;
}

function parseArgs(argv: string[]): Opts {
  const o: Opts = { smoke: false, duration: 20, servers: ALL_SERVERS, scenarios: undefined, write: path.join(REPO, 'docs/benchmarks.md'), nodens: undefined };
  let durationSet = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--smoke') o.smoke = true;
    else if (a === '--duration') { o.duration = Number(argv[++i]); durationSet = true; }
    else if (a === '--servers') o.servers = argv[++i].split(',') as ServerName[];
    else if (a === '--scenarios') o.scenarios = argv[++i].split(',');
    else if (a === '--write') o.write = path.resolve(argv[++i]);
    else if (a === '--no-write') o.write = undefined;
    else if (a === '--nodens') o.nodens = path.resolve(argv[++i]);
    else throw new Error(`unknown flag ${a}`);
  }
  if (o.smoke) {
    if (!durationSet) o.duration = 3;
    if (!argv.includes('--write')) o.write = undefined;
  }
  return o;
}

// ---------------------------------------------------------------------------------------------------------------
// scenarios

interface Ctx {
  upstreamPort: number;
  smoke: boolean;
}

interface Scenario {
  name: string;
  description: string;
  /** hook only: a reason why it cannot run yet */
  unavailable?: string;
  corefile(c: Ctx): string;
  /** nodens's Corefile when it differs (a nodens-only option); CoreDNS gets `corefile`. */
  nodensCorefile?(c: Ctx): string;
  unboundServer(c: Ctx): string;
  /** query file lines (dnsperf format) */
  queries(c: Ctx): string[];
  probe: string;
  /** the ceiling server runs it too (it answers any name the same: only scenarios of one small reply per query) */
  ceiling?: boolean;
  /** run through the file once only (unique names) */
  once?: boolean;
  /** a pass before the measured run, to fill caches */
  warm?: boolean;
  /** needs the test Kubernetes API server (test/k8s-api); NODENS_K8S_KUBECONFIG then points at it */
  fixture?: 'k8s';
  /**
   * dnsperf asks over DNS over TLS (`-m dot`) or DNS over HTTPS (`-m doh`, HTTP/2) to the port the Corefile names
   * as {$NODENS_BENCH_SECURE_PORT}, with a test certificate in {$NODENS_BENCH_CERT} and {$NODENS_BENCH_KEY}.
   */
  mode?: 'dot' | 'doh';
  /**
   * 2: the servers get both cores (`taskset -c 0,1`): nodens `-workers 2`, CoreDNS GOMAXPROCS=2, unbound two
   * threads, the ceiling two processes; dnsperf is not pinned and shares both cores with the server.
   */
  cores?: 2;
}

const K8S_STATE = path.join(REPO, 'test/k8s-api/fixtures/cluster.json');

function k8sServices(): string[] {
  const st = JSON.parse(readFileSync(K8S_STATE, 'utf8')) as { services?: { metadata: { name: string; namespace: string } }[] };
  return (st.services ?? []).map((x) => `${x.metadata.name}.${x.metadata.namespace}.svc.cluster.local`);
}

async function startK8sFixture(dir: string): Promise<{ env: Record<string, string>; stop(): Promise<void> }> {
  const mod = await import('../test/k8s-api/server.ts');
  const api = new mod.K8sApiServer(mod.readState(K8S_STATE));
  await api.start(0);
  const kc = path.join(dir, 'kubeconfig');
  writeFileSync(kc, mod.kubeconfigFor(`http://127.0.0.1:${api.port}`));
  return { env: { NODENS_K8S_KUBECONFIG: kc }, stop: () => api.stop() };
}

const HOSTS_N = 300;

const scenarios: Scenario[] = [
  {
    name: 'hosts',
    description: `local answers: hosts plugin with ${HOSTS_N} names (unbound: local-data), A queries for all of them`,
    corefile: () => 'bench.test {\n    hosts hosts.txt\n}\n',
    unboundServer: () => Array.from({ length: HOSTS_N }, (_, i) => `    local-data: "h${i}.bench.test. 3600 IN A 10.0.${i >> 8}.${i & 255}"`)
      .join('\n').replace(/^/, '    local-zone: "bench.test." static\n'),
    queries: () => Array.from({ length: HOSTS_N }, (_, i) => `h${i}.bench.test A`),
    probe: 'h0.bench.test. A',
    ceiling: true,
  },
  {
    name: 'cache-hit',
    description: 'cache + forward to a local upstream; 50 names queried over and over, so (after a warm-up pass) all hit',
    corefile: (c) => `. {\n    cache 3600\n    forward . 127.0.0.1:${c.upstreamPort}\n}\n`,
    unboundServer: forwarder,
    queries: () => Array.from({ length: 50 }, (_, i) => `n${i}.hit.test A`),
    probe: 'probe.hit.test. A',
    warm: true,
    ceiling: true,
  },
  {
    name: 'cache-miss',
    description: 'cache + forward to a local upstream; every query a new name (one pass through a file of unique names)',
    corefile: (c) => `. {\n    cache 3600\n    forward . 127.0.0.1:${c.upstreamPort}\n}\n`,
    unboundServer: forwarder,
    queries: (c) => Array.from({ length: c.smoke ? 200_000 : 2_000_000 }, (_, i) => `u${i}.miss.test A`),
    probe: 'probe.miss.test. A',
    once: true,
  },
  {
    name: 'cache-miss-pooled',
    description: 'as cache-miss, with nodens\'s forward reusing UDP sockets as CoreDNS does (`reuse_udp_sockets`) instead of a fresh source port per upstream query',
    corefile: (c) => `. {\n    cache 3600\n    forward . 127.0.0.1:${c.upstreamPort}\n}\n`,
    nodensCorefile: (c) => `. {\n    cache 3600\n    forward . 127.0.0.1:${c.upstreamPort} {\n        reuse_udp_sockets\n    }\n}\n`,
    unboundServer: forwarder,
    queries: (c) => Array.from({ length: c.smoke ? 200_000 : 2_000_000 }, (_, i) => `p${i}.miss.test A`),
    probe: 'probe.miss.test. A',
    once: true,
  },
  {
    name: 'dot',
    description: `DNS over TLS: the hosts scenario's ${HOSTS_N} names through a \`tls://\` server (dnsperf -m dot, 4 connections, queries pipelined); unbound: not configured`,
    mode: 'dot',
    corefile: () => 'bench.test {\n    hosts hosts.txt\n}\ntls://bench.test:{$NODENS_BENCH_SECURE_PORT} {\n    tls {$NODENS_BENCH_CERT} {$NODENS_BENCH_KEY}\n    hosts hosts.txt\n}\n',
    unboundServer: () => '',
    queries: () => Array.from({ length: HOSTS_N }, (_, i) => `h${i}.bench.test A`),
    probe: 'h0.bench.test. A',
  },
  {
    name: 'doh',
    description: `DNS over HTTPS: the hosts scenario's ${HOSTS_N} names through an \`https://\` server (dnsperf -m doh, HTTP/2 GET, 16 connections with one query in flight each: dnsperf's DoH client takes one reply per TLS record read and stalls when a server packs two into one); unbound: not configured`,
    mode: 'doh',
    corefile: () => 'bench.test {\n    hosts hosts.txt\n}\nhttps://bench.test:{$NODENS_BENCH_SECURE_PORT} {\n    tls {$NODENS_BENCH_CERT} {$NODENS_BENCH_KEY}\n    hosts hosts.txt\n}\n',
    unboundServer: () => '',
    queries: () => Array.from({ length: HOSTS_N }, (_, i) => `h${i}.bench.test A`),
    probe: 'h0.bench.test. A',
  },
  {
    name: 'kubernetes',
    description: 'kubernetes plugin against the test API server of test/k8s-api (fixtures/cluster.json); A queries for every service (unbound: not applicable)',
    fixture: 'k8s',
    corefile: () => 'cluster.local {\n    kubernetes {\n        kubeconfig {$NODENS_K8S_KUBECONFIG}\n    }\n}\n',
    unboundServer: () => '',
    queries: () => k8sServices().map((n) => `${n} A`),
    probe: 'kubernetes.default.svc.cluster.local. A',
  },
];

// The hosts and cache-hit scenarios again with every server on both cores.
for (const base of ['hosts', 'cache-hit']) {
  const s = scenarios.find((x) => x.name === base)!;
  scenarios.push({
    ...s, name: `${base}-2cores`, cores: 2,
    description: `as ${base}, with every server on both cores (nodens \`-workers 2\`, CoreDNS GOMAXPROCS=2, unbound 2 threads, the ceiling 2 processes) and dnsperf unpinned beside it`,
  });
}

function forwarder(c: Ctx): string {
  // unbound answers the special-use name test. itself (RFC 6761) unless told not to
  return `    local-zone: "test." nodefault\n    do-not-query-localhost: no\n    msg-cache-size: 256m\n    rrset-cache-size: 512m\n    qname-minimisation: no\n` +
    `forward-zone:\n    name: "."\n    forward-addr: 127.0.0.1@${c.upstreamPort}\n`;
}

function hostsFile(): string {
  return Array.from({ length: HOSTS_N }, (_, i) => `10.0.${i >> 8}.${i & 255} h${i}.bench.test`).join('\n') + '\n';
}


const UPSTREAM_ZONES = ['hit.test', 'miss.test', 'fill.test'];

function upstreamBody(): string {
  return UPSTREAM_ZONES.map((z) => `    local-zone: "${z}." redirect\n    local-data: "${z}. 3600 IN A 10.9.9.9"`).join('\n');
}

// ---------------------------------------------------------------------------------------------------------------
// process measurements

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(d));
      children.set(ppid, list);
    } catch { /* gone */ }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) out.push(...(children.get(out[i]) ?? []));
  return out;
}

/** utime+stime of the process and its descendants, in seconds */
function cpuSeconds(pid: number): number {
  let ticks = 0;
  for (const p of descendants(pid)) {
    try {
      const st = readFileSync(`/proc/${p}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch { /* gone */ }
  }
  return ticks / CLK_TCK;
}

/** utime+stime of each thread of the tree's processes, in seconds, with the thread's name (comm) */
function perThreadCpu(pid: number): Map<string, { name: string; cpu: number }> {
  const out = new Map<string, { name: string; cpu: number }>();
  for (const p of descendants(pid)) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      continue; // gone
    }
    for (const t of tasks) {
      try {
        const st = readFileSync(`/proc/${p}/task/${t}/stat`, 'utf8');
        const name = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')'));
        const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
        out.set(`${p}/${t}`, { name, cpu: (Number(f[11]) + Number(f[12])) / CLK_TCK });
      } catch { /* gone */ }
    }
  }
  return out;
}

/**
 * Each thread's share of the tree's CPU between two samples, largest first, by thread name: threads of 5 % or more
 * one by one, the rest (GC helpers, Go's other threads, idle supervisors) summed.
 */
function cpuSplit(a: Map<string, { name: string; cpu: number }>, b: Map<string, { name: string; cpu: number }>): string {
  const d = [...b].map(([k, t]) => ({ name: t.name, cpu: t.cpu - (a.get(k)?.cpu ?? 0) })).filter((x) => x.cpu > 0).sort((x, y) => y.cpu - x.cpu);
  const sum = d.reduce((x, y) => x + y.cpu, 0);
  if (sum <= 0) return '–';
  const big = d.filter((x) => x.cpu / sum >= 0.05);
  const rest = sum - big.reduce((x, y) => x + y.cpu, 0);
  const parts = big.map((x) => `${x.name} ${Math.round((100 * x.cpu) / sum)}%`);
  if (rest > 0) parts.push(`rest ${Math.round((100 * rest) / sum)}%`);
  return parts.join(' / ');
}

/** a /proc/<pid>/status field in MiB, summed over the process and its descendants */
function statusMiB(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  let kb = 0;
  for (const p of descendants(pid)) {
    try {
      const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${p}/status`, 'utf8'));
      if (m) kb += Number(m[1]);
    } catch { /* gone */ }
  }
  return kb / 1024;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------------------------
// dnsperf

interface PerfResult {
  sent: number;
  completed: number;
  lost: number;
  qps: number;
  avgMs: number;
  p99Ms: number;
  noerrorPct: number;
  rcodes: string;
  command: string;
}

/** dnsperf's -v output read in 1 MiB pieces: the latency of each response (`> ...` lines, seconds), and the other lines. */
function readDnsperf(file: string): { summary: string; latencies: Float64Array } {
  const fd = openSync(file, 'r');
  const buf = Buffer.allocUnsafe(1 << 20);
  let lat = new Float64Array(1 << 16);
  let n = 0;
  const other: string[] = [];
  const line = (text: string, from: number, to: number): void => {
    if (text.charCodeAt(from) !== 62 /* > */) {
      other.push(text.slice(from, to));
      return;
    }
    const v = Number(text.slice(text.lastIndexOf(' ', to) + 1, to));
    if (Number.isNaN(v)) return;
    if (n === lat.length) {
      const grown = new Float64Array(n * 2);
      grown.set(lat);
      lat = grown;
    }
    lat[n++] = v;
  };
  let carry = '';
  try {
    for (let got = readSync(fd, buf, 0, buf.length, null); got > 0; got = readSync(fd, buf, 0, buf.length, null)) {
      const text = carry + buf.toString('latin1', 0, got);
      let from = 0;
      for (let end = text.indexOf('\n'); end >= 0; end = text.indexOf('\n', from)) {
        line(text, from, end);
        from = end + 1;
      }
      carry = text.slice(from);
    }
  } finally {
    closeSync(fd);
  }
  if (carry !== '') line(carry, 0, carry.length);
  return { summary: other.join('\n') + '\n', latencies: lat.subarray(0, n) };
}

function dnsperf(port: number, file: string, seconds: number, passes: number, outFile: string, mode?: 'dot' | 'doh', cpus = '1'): PerfResult {
  const args = ['-c', cpus, 'dnsperf', '-s', '127.0.0.1', '-p', String(port), '-d', file, '-l', String(seconds),
    '-n', String(passes), '-c', '4', '-q', '100', '-t', '2', '-v'];
  if (mode !== undefined) args.push('-m', mode);
  if (mode === 'doh') {
    // dnsperf's DoH client takes one reply per TLS record it reads: when a server packs two replies into one
    // record, the second waits in dnsperf's buffer until more bytes come (nodens sends one reply per connection
    // and event-loop turn for that reason; Go's server can still pack them under load). One query in flight per
    // connection, 16 connections, keeps both servers clear of it.
    args.splice(args.indexOf('-c', 4), 2, '-c', '16');
    args.splice(args.indexOf('-q'), 2, '-q', '16');
    args.push('-O', `doh-uri=https://127.0.0.1:${port}/dns-query`);
  }
  const command = `taskset ${args.join(' ')}`;
  // dnsperf's -v output (a line per response: up to a few hundred MB a run) goes to a file that is read back in
  // pieces and deleted at once. Held in this process, it grew the bench to over a GB of RSS, and every later fork
  // (each server's start, each dnsperf) copied that many page tables: starts late in a run took 20-40 ms longer,
  // for every server. Deleted before the kernel's dirty expiry (30 s), it is never written to disk either.
  const raw = `${outFile}.raw`;
  const fd = openSync(raw, 'w');
  let r;
  try {
    r = spawnSync('taskset', args, { encoding: 'utf8', stdio: ['ignore', fd, 'pipe'] });
  } finally {
    closeSync(fd);
  }
  const { summary: out, latencies } = readDnsperf(raw);
  rmSync(raw);
  writeFileSync(outFile, out);
  if (r.status !== 0) throw new Error(`dnsperf failed (${r.status}): ${r.stderr}\n${out.slice(-2000)}`);
  const num = (re: RegExp) => {
    const m = re.exec(out);
    return m ? Number(m[1]) : NaN;
  };
  const f64 = latencies.sort();
  const p99 = f64.length ? f64[Math.min(f64.length - 1, Math.ceil(f64.length * 0.99) - 1)]! * 1000 : NaN;
  const completed = num(/Queries completed:\s+(\d+)/);
  const rcodes = (/Response codes:\s+(.*)/.exec(out)?.[1] ?? '').trim();
  const noerr = /NOERROR (\d+)/.exec(rcodes);
  return {
    sent: num(/Queries sent:\s+(\d+)/),
    completed,
    lost: num(/Queries lost:\s+(\d+)/),
    qps: num(/Queries per second:\s+([\d.]+)/),
    avgMs: num(/Average Latency \(s\):\s+([\d.]+)/) * 1000,
    p99Ms: p99,
    noerrorPct: noerr && completed ? (100 * Number(noerr[1])) / completed : 0,
    rcodes,
    command,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// running one server in one scenario

interface Row {
  scenario: string;
  server: ServerName;
  status: string; // 'ok' or why not
  perf?: PerfResult;
  startupMs?: number;
  /** each start: ms to the first answer, and the server's CPU time and major page faults by then */
  starts?: string;
  idleMiB?: number;
  peakMiB?: number;
  cpuPer100k?: number;
  /** 2-core scenarios: each process's share of the server's CPU over the run (that every worker served) */
  split?: string;
  serverCommand?: string;
}

interface Started {
  proc: Running;
  command: string;
  startupMs: number;
  /** major page faults of the process at its first answer (pages read from disk, not from the page cache) */
  majorFaults: number;
  /** CPU time of all its threads at its first answer */
  cpuMs: number;
  /** time its threads were runnable but waiting for a CPU, by its first answer */
  waitMs: number;
  starts?: string;
}

/** How many times each server is started for its start-up time (the median); the last start serves the load. */
const STARTS = 3;

async function startFor(server: ServerName, dir: string, corefile: string, unboundBody: string, probe: string, bins: Bins, env?: Record<string, string>, cores = 1): Promise<Started> {
  // One start is one sample of a figure that a busy moment of the machine can double: the median of three, each
  // after a full collection of this process's heap (it has just parsed dnsperf's output) and a moment of quiet.
  const times: number[] = [];
  const each: string[] = [];
  let st: Started | undefined;
  for (let i = 0; i < STARTS; i++) {
    if (st !== undefined) await st.proc.stop();
    await settle();
    st = await startOnce(server, dir, corefile, unboundBody, probe, bins, env, cores);
    times.push(st.startupMs);
    each.push(`${st.startupMs.toFixed(0)} ms (CPU ${st.cpuMs.toFixed(0)}, run queue ${st.waitMs.toFixed(0)}, ${st.majorFaults} mf)`);
  }
  times.sort((a, b) => a - b);
  return { ...st!, startupMs: times[(times.length - 1) >> 1]!, starts: each.join(', ') };
}

/** The process's major faults so far (/proc/<pid>/stat field 12); taskset exec()s the server, same pid. */
function majorFaults(pid: number): number {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[9]);
  } catch {
    return NaN;
  }
}

/**
 * Of all the process's threads so far, ms: the time on a CPU (`field` 0 of each thread's schedstat, in ns), or the
 * time runnable but waiting for one (field 1).
 */
function schedMs(pid: number, field: 0 | 1): number {
  try {
    let ns = 0;
    for (const t of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[field]);
    return ns / 1e6;
  } catch {
    return NaN;
  }
}

/**
 * A full collection now (`npm run bench` runs node with --expose-gc), the files written so far flushed to disk
 * (query files of millions of names: their writeback would otherwise come due during a later start), then a
 * moment for the machine to be idle.
 */
async function settle(): Promise<void> {
  (globalThis as { gc?: () => void }).gc?.();
  spawnSync('sync');
  await sleep(200);
}

async function startOnce(server: ServerName, dir: string, corefile: string, unboundBody: string, probe: string, bins: Bins, env?: Record<string, string>, cores = 1): Promise<Started> {
  const port = await freePort();
  const cpus = cores === 2 ? '0,1' : '0';
  let argv: string[];
  if (server === 'unbound') {
    writeFileSync(path.join(dir, 'unbound.conf'), unboundConf(dir, port, unboundBody, cores));
    argv = ['taskset', '-c', cpus, 'unbound', '-d', '-c', path.join(dir, 'unbound.conf')];
  } else if (server === 'ceiling') {
    argv = ['taskset', '-c', cpus, NODE24, path.join(REPO, 'bench/ceiling.ts'), '-dns.port', String(port)];
    if (cores === 2) argv.push('-workers', '2');
  } else {
    writeFileSync(path.join(dir, 'Corefile'), corefile);
    const bin = server === 'nodens' ? bins.nodens! : bins.coredns;
    argv = ['taskset', '-c', cpus, bin, '-conf', path.join(dir, 'Corefile'), '-dns.port', String(port), '-quiet'];
    if (cores === 2 && server === 'nodens') argv.push('-workers', '2');
    if (cores === 2 && server === 'coredns') env = { ...env, GOMAXPROCS: '2' };
  }
  const t0 = performance.now();
  const proc = spawnArgv(server, argv, dir, port, env);
  try {
    const startupMs = await waitReady(proc, probe, 30000, 2, t0);
    const pid = proc.proc.pid!;
    return { proc, command: argv.join(' '), startupMs, majorFaults: majorFaults(pid), cpuMs: schedMs(pid, 0), waitMs: schedMs(pid, 1) };
  } catch (e) {
    await proc.stop();
    throw e;
  }
}

function notImplemented(output: string): boolean {
  return /unknown directive|not implemented|no such plugin|unknown plugin|not (a )?known|unsupported/i.test(output);
}

/** The working directory of `server` in scenario `s`, with the hosts file its Corefile may name. */
function serverDir(tmp: string, s: Scenario, server: ServerName): string {
  const dir = path.join(tmp, `${s.name}-${server}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'hosts.txt'), hostsFile());
  return dir;
}

/** A scenario's Corefile for `server`, and its environment: for DoT and DoH, a free secure port and the test certificate. */
async function serverInputs(s: Scenario, server: ServerName, ctx: Ctx, env?: Record<string, string>): Promise<{ corefile: string; env?: Record<string, string>; securePort?: number }> {
  let securePort: number | undefined;
  if (s.mode !== undefined) {
    const { testCerts } = await import('../test/helpers/certs.ts');
    const c = testCerts();
    securePort = await freePort();
    env = { ...env, NODENS_BENCH_SECURE_PORT: String(securePort), NODENS_BENCH_CERT: c.cert, NODENS_BENCH_KEY: c.key };
  }
  const corefile = server === 'nodens' && s.nodensCorefile !== undefined ? s.nodensCorefile(ctx) : s.corefile(ctx);
  return { corefile, env, securePort };
}

/** Rounds of starts before any load: each round starts every server once per scenario, alternated. */
const ROUNDS_BEFORE_LOAD = 5;

interface StartsBeforeLoad { scenario: string; server: ServerName; ms: number[]; cpuMs: number[] }

/**
 * Start-up measured before the load scenarios, nodens and CoreDNS alternated, five times each: a steadier figure than
 * the start-up column of the results (three starts, one server after the other, after its scenario's files and
 * warm-up). One-core scenarios without a fixture.
 */
async function startsBeforeLoad(o: Opts, ctx: Ctx, tmp: string, bins: Bins): Promise<StartsBeforeLoad[]> {
  const servers = o.servers.filter((v) => v === 'nodens' || v === 'coredns');
  const scen = scenarios.filter((s) => !s.unavailable && s.fixture === undefined && (s.cores ?? 1) === 1 && (!o.scenarios || o.scenarios.includes(s.name)));
  const out = scen.flatMap((s) => servers.map((server) => ({ scenario: s.name, server, ms: [] as number[], cpuMs: [] as number[] })));
  for (let round = 0; round < ROUNDS_BEFORE_LOAD; round++) {
    for (const r of out) {
      const s = scen.find((x) => x.name === r.scenario)!;
      const dir = serverDir(tmp, s, r.server);
      const inputs = await serverInputs(s, r.server, ctx);
      await settle();
      const st = await startOnce(r.server, dir, inputs.corefile, s.unboundServer(ctx), s.probe, bins, inputs.env);
      r.ms.push(st.startupMs);
      r.cpuMs.push(st.cpuMs);
      await st.proc.stop();
    }
  }
  return out;
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[(v.length - 1) >> 1]!;

function startsTable(starts: StartsBeforeLoad[]): string[] {
  const out = [
    '| scenario | server | start ms, median (all) | CPU ms by the first answer, median |',
    '| --- | --- | --- | ---: |',
  ];
  for (const r of starts) {
    out.push(`| ${r.scenario} | ${r.server} | ${median(r.ms).toFixed(0)} (${r.ms.map((v) => v.toFixed(0)).join(' ')}) | ${median(r.cpuMs).toFixed(0)} |`);
  }
  return out;
}

async function runOne(s: Scenario, server: ServerName, ctx: Ctx, o: Opts, tmp: string, bins: Bins): Promise<Row> {
  const row: Row = { scenario: s.name, server, status: 'ok' };
  if (s.unavailable) return { ...row, status: `n/a (${s.unavailable})` };
  if (server === 'nodens' && !bins.nodens) return { ...row, status: 'n/a (bin/nodens missing)' };
  const dir = serverDir(tmp, s, server);
  const qfile = path.join(tmp, `${s.name}.queries`);
  if (!existsSync(qfile)) writeFileSync(qfile, s.queries(ctx).join('\n') + '\n');
  if (s.fixture === 'k8s' && server === 'unbound') return { ...row, status: 'n/a (not applicable)' };
  if (s.mode !== undefined && server === 'unbound') return { ...row, status: 'n/a (not configured)' };
  if (server === 'ceiling' && !s.ceiling) return { ...row, status: 'n/a (hosts and cache-hit only)' };
  let st: Started;
  let fixture: { env: Record<string, string>; stop(): Promise<void> } | undefined;
  let securePort: number | undefined;
  try {
    if (s.fixture === 'k8s') fixture = await startK8sFixture(dir);
    const inputs = await serverInputs(s, server, ctx, fixture?.env);
    securePort = inputs.securePort;
    st = await startFor(server, dir, inputs.corefile, s.unboundServer(ctx), s.probe, bins, inputs.env, s.cores);
  } catch (e) {
    await fixture?.stop();
    const msg = (e as Error).message;
    if (server === 'nodens' && notImplemented(msg)) return { ...row, status: 'n/a (plugin not implemented)' };
    const first = msg.split('\n').filter((l) => l.trim()).slice(0, 4).join(' / ');
    return { ...row, status: `failed to start: ${first.slice(0, 300)}` };
  }
  row.serverCommand = st.command;
  row.startupMs = st.startupMs;
  row.starts = st.starts;
  try {
    await sleep(1000);
    const pid = st.proc.proc.pid!;
    row.idleMiB = statusMiB(pid, 'VmRSS');
    const perfPort = securePort ?? st.proc.port;
    const perfCpus = s.cores === 2 ? '0,1' : '1';
    // -workers: each worker has its own cache, and the kernel picks the worker per source port, so every
    // worker needs its own warm-up pass to be answering from its cache: several passes from fresh ports.
    if (s.warm) for (let i = 0; i < (s.cores ?? 1); i++) dnsperf(perfPort, qfile, 5, 1, path.join(dir, 'warm.out'), s.mode, perfCpus);
    const perThread0 = s.cores === 2 ? perThreadCpu(pid) : undefined;
    const c0 = cpuSeconds(pid);
    const lines = s.queries(ctx).length;
    const maxQueries = o.smoke ? 1_000_000 : 20_000_000;
    const passes = s.once ? 1 : Math.max(1, Math.ceil(maxQueries / lines));
    const perf = dnsperf(perfPort, qfile, o.duration, passes, path.join(dir, 'dnsperf.out'), s.mode, perfCpus);
    const c1 = cpuSeconds(pid);
    if (perThread0 !== undefined) row.split = cpuSplit(perThread0, perThreadCpu(pid));
    row.perf = perf;
    row.peakMiB = statusMiB(pid, 'VmHWM');
    row.cpuPer100k = perf.completed ? ((c1 - c0) / perf.completed) * 100_000 : NaN;
    if (st.proc.exited()) row.status = `exited during the run: ${st.proc.output().slice(-300)}`;
  } catch (e) {
    row.status = `error: ${(e as Error).message.split('\n')[0]}`;
  } finally {
    await st.proc.stop();
    await fixture?.stop();
  }
  return row;
}

/**
 * bench/k8s-scale.ts in a process of its own (it starts the real kube-apiserver and etcd): its markdown, or a line
 * saying why there is none.
 */
function kubernetesAtScale(): string {
  console.log('  kubernetes at scale (bench/k8s-scale.ts, real kube-apiserver) ...');
  const r = spawnSync(NODE24, [path.join(REPO, 'bench/k8s-scale.ts'), '--duration', '15', '--rounds', '2'],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 20 * 60_000 });
  if (r.status === 0 && r.stdout.startsWith('### ')) return r.stdout;
  return `### kubernetes plugin at scale\n\nbench/k8s-scale.ts failed (status ${r.status ?? r.signal}): ${(r.stdout ?? '').slice(-500)}\n`;
}

/** RSS after 100k distinct names went through cache + forward (one pass, no time pressure). */
async function cacheFill(server: ServerName, ctx: Ctx, tmp: string, bins: Bins, n: number): Promise<string> {
  if (server === 'nodens' && !bins.nodens) return 'n/a (bin/nodens missing)';
  const dir = path.join(tmp, `cache-fill-${server}`);
  mkdirSync(dir, { recursive: true });
  const qfile = path.join(tmp, 'cache-fill.queries');
  if (!existsSync(qfile)) writeFileSync(qfile, Array.from({ length: n }, (_, i) => `f${i}.fill.test A`).join('\n') + '\n');
  const corefile = `. {\n    cache 3600 {\n        success ${2 * n}\n        denial 1000\n    }\n    forward . 127.0.0.1:${ctx.upstreamPort}\n}\n`;
  let st: Started;
  try {
    st = await startFor(server, dir, corefile, forwarder(ctx), 'probe.fill.test. A', bins);
  } catch (e) {
    const msg = (e as Error).message;
    if (server === 'nodens' && notImplemented(msg)) return 'n/a (plugin not implemented)';
    return `failed to start: ${msg.split('\n')[0]}`;
  }
  try {
    const pid = st.proc.proc.pid!;
    const before = statusMiB(pid, 'VmRSS');
    const perf = dnsperf(st.proc.port, qfile, 120, 1, path.join(dir, 'dnsperf.out'));
    await sleep(500);
    const after = statusMiB(pid, 'VmRSS');
    return `${after.toFixed(1)} MiB (idle ${before.toFixed(1)} MiB; ${perf.completed} of ${n} answered, ${perf.noerrorPct.toFixed(1)}% NOERROR)`;
  } catch (e) {
    return `error: ${(e as Error).message.split('\n')[0]}`;
  } finally {
    await st.proc.stop();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// report

interface Bins { nodens: string | undefined; coredns: string }

function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch (e) {
    const r = e as { stdout?: string; stderr?: string };
    return `${r.stdout ?? ''}${r.stderr ?? ''}`.trim();
  }
}

function machine(bins: Bins): string[] {
  const cpu = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown';
  return [
    `- date: ${new Date().toISOString()}`,
    `- CPUs: ${sh('nproc', [])} × ${cpu}`,
    `- kernel: ${sh('uname', ['-srm'])}`,
    `- memory: ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB; load average when the run started: ${loadAtStart}`,
    `- Node: ${process.version} (nodens and the ceiling run on the project's Node 24: ${sh(NODE24, ['--version'])})`,
    `- Go: ${sh('go', ['version'])}`,
    `- nodens: ${bins.nodens ? `commit ${sh('git', ['-C', REPO, 'rev-parse', '--short', 'HEAD'])}${sh('git', ['-C', REPO, 'status', '--porcelain', '--', 'src', 'bin']) ? ' + uncommitted changes in src/ or bin/' : ''}` : 'not built'}`,
    `- CoreDNS: ${sh(bins.coredns, ['-version']).split('\n')[0]} (${bins.coredns.replace(REPO + '/', '')}, built by scripts/coredns-reference.sh)`,
    `- unbound: ${sh('unbound', ['-V']).split('\n')[0]}`,
    `- dnsperf: ${sh('dnsperf', ['-h']).split('\n').find((l) => l.startsWith('Version')) ?? '?'}`,
  ];
}

const loadAtStart = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

const fmt = (v: number | undefined, d = 1) => (v === undefined || Number.isNaN(v) ? '–' : v.toFixed(d));

function table(rows: Row[]): string[] {
  const out = [
    '| scenario | server | QPS | avg latency ms | p99 latency ms | lost | NOERROR % | peak RSS MiB | CPU s / 100k q | startup ms | idle RSS MiB |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) {
    if (!r.perf || r.status !== 'ok') {
      out.push(`| ${r.scenario} | ${r.server} | ${r.status} | | | | | | | | |`);
      continue;
    }
    const p = r.perf;
    out.push(`| ${r.scenario} | ${r.server} | ${fmt(p.qps, 0)} | ${fmt(p.avgMs, 3)} | ${fmt(p.p99Ms, 3)} | ${p.lost} | ${fmt(p.noerrorPct, 1)} | ${fmt(r.peakMiB)} | ${fmt(r.cpuPer100k, 2)} | ${fmt(r.startupMs, 0)} | ${fmt(r.idleMiB)} |`);
  }
  return out;
}

function ratios(rows: Row[]): string[] {
  const out = [
    '| scenario | QPS | p99 latency | peak RSS | CPU / query | QPS nodens / ceiling |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
  ];
  const scen = [...new Set(rows.map((r) => r.scenario))];
  for (const s of scen) {
    const n = rows.find((r) => r.scenario === s && r.server === 'nodens');
    const c = rows.find((r) => r.scenario === s && r.server === 'coredns');
    const ceil = rows.find((r) => r.scenario === s && r.server === 'ceiling');
    const q = (a: number | undefined, b: number | undefined) => (a && b ? `${(a / b).toFixed(2)}×` : '–');
    const vsCeiling = n?.perf && n.status === 'ok' && ceil?.perf && ceil.status === 'ok' ? q(n.perf.qps, ceil.perf.qps) : '–';
    if (!n?.perf || !c?.perf || n.status !== 'ok' || c.status !== 'ok') {
      out.push(`| ${s} | ${n && n.status !== 'ok' ? n.status : c && c.status !== 'ok' ? `CoreDNS: ${c.status}` : 'n/a'} | | | | ${vsCeiling} |`);
      continue;
    }
    out.push(`| ${s} | ${q(n.perf.qps, c.perf.qps)} | ${q(n.perf.p99Ms, c.perf.p99Ms)} | ${q(n.peakMiB, c.peakMiB)} | ${q(n.cpuPer100k, c.cpuPer100k)} | ${vsCeiling} |`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const o = parseArgs(process.argv.slice(2));
  for (const tool of ['dnsperf', 'unbound', 'taskset']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) {
      console.error(`bench: ${tool} is not installed (apt-get install -y dnsperf unbound util-linux)`);
      return 1;
    }
  }
  const bins: Bins = { nodens: o.servers.includes('nodens') ? o.nodens ?? nodensBinary() : undefined, coredns: referenceBinary() };
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'nodens-bench-'));
  const upstreamPort = await freePort();
  writeFileSync(path.join(tmp, 'upstream.conf'), unboundConf(tmp, upstreamPort, upstreamBody()));
  const upArgv = ['taskset', '-c', '1', 'unbound', '-d', '-c', path.join(tmp, 'upstream.conf')];
  const upstream = spawnArgv('upstream', upArgv, tmp, upstreamPort);
  const rows: Row[] = [];
  let fill: Partial<Record<ServerName, string>> = {};
  let starts: StartsBeforeLoad[] = [];
  const ctx: Ctx = { upstreamPort, smoke: o.smoke };
  let bad = false;
  try {
    await waitReady(upstream, 'x.hit.test. A', 15000);
    console.log(`bench: ${o.smoke ? 'smoke' : 'full'} run, ${o.duration} s per server and scenario; tmp ${tmp}`);
    console.log(`  start-up before load (${ROUNDS_BEFORE_LOAD} rounds) ...`);
    starts = await startsBeforeLoad(o, ctx, tmp, bins);
    for (const line of startsTable(starts).slice(2)) console.log(`  ${line}`);
    for (const s of scenarios) {
      if (o.scenarios && !o.scenarios.includes(s.name)) continue;
      for (const server of o.servers) {
        process.stdout.write(`  ${s.name} / ${server} ... `);
        const r = await runOne(s, server, ctx, o, tmp, bins);
        rows.push(r);
        console.log(r.status === 'ok' && r.perf
          ? `${r.perf.qps.toFixed(0)} qps, avg ${r.perf.avgMs.toFixed(3)} ms, p99 ${r.perf.p99Ms.toFixed(3)} ms, lost ${r.perf.lost}, ${r.perf.rcodes}` +
            `, CPU ${fmt(r.cpuPer100k, 2)} s/100k${r.split ? `, CPU by thread ${r.split}` : ''}, starts ${r.starts ?? '-'}`
          : r.status);
        if (server !== 'nodens' && r.status !== 'ok' && !r.status.startsWith('n/a')) bad = true;
      }
    }
    if (!o.scenarios || o.scenarios.includes('cache-fill')) {
      const n = o.smoke ? 20_000 : 100_000;
      for (const server of o.servers) {
        if (server === 'ceiling') continue;
        process.stdout.write(`  cache-fill ${n} / ${server} ... `);
        fill[server] = await cacheFill(server, ctx, tmp, bins, n);
        console.log(fill[server]);
      }
    }
  } finally {
    await upstream.stop();
  }
  const k8sScale = o.smoke || o.nodens !== undefined || (o.scenarios !== undefined && !o.scenarios.includes('k8s-scale'))
    || !o.servers.includes('nodens') || !o.servers.includes('coredns') ? undefined : kubernetesAtScale();

  const fillN = o.smoke ? '20k' : '100k';
  const doc = [
    '# Benchmarks',
    '',
    `Generated by \`npm run bench${o.smoke ? ' -- --smoke' : ''}\` (bench/run.ts). Do not edit by hand; re-run instead.`,
    '',
    '## Machine',
    '',
    ...machine(bins),
    '',
    '## Method',
    '',
    '- Each server runs alone, pinned to core 0 (`taskset -c 0`); dnsperf and the shared upstream (one unbound thread',
    '  answering every name under `hit.test`, `miss.test`, `fill.test` from `redirect` local zones) are pinned to core 1.',
    `- dnsperf: 4 clients, 100 outstanding queries, timeout 2 s, time limit ${o.duration} s per run (\`-l\`), and a count limit`,
    '  (`-n` passes through the query file; one pass for unique names). unbound runs with `num-threads: 1`.',
    '- QPS, average latency and lost queries are dnsperf\'s own figures. **p99** is computed from dnsperf `-v`, which prints',
    '  every response\'s latency (this dnsperf has no histogram option); `-v` costs dnsperf a little time per query.',
    '- peak RSS is `VmHWM` from /proc/<pid>/status at the end of the run; CPU is the utime+stime delta of',
    '  /proc/<pid>/stat over the measured run (warm-up excluded), per 100k completed queries. Both include child processes.',
    '- Single runs, not medians: on a shared 2-core machine other work shows up as noise (see the load average above).',
    '- startup is the time from spawning the process to its first answer (UDP probe every 2 ms), the median of three starts; idle RSS is `VmRSS` 1 s after the last.',
    `- **start-up before load**: before the first scenario, ${ROUNDS_BEFORE_LOAD} rounds in which nodens and CoreDNS are started, alternated, with`,
    '  each one-core scenario\'s Corefile (pinned and probed as above); the median, and the CPU time of all the server\'s threads by',
    '  its first answer (`/proc/<pid>/task/*/schedstat`). dnsperf\'s per-response output goes to a file read back in pieces: held',
    '  in the bench process it grew it past 1 GB, and each later fork (a server\'s start) copied those page tables.',
    '- **ceiling** (hosts and cache-hit only) is bench/ceiling.ts on the same Node 24, pinned like the servers: a UDP server that',
    '  parses nothing and returns each datagram with QR set and one fixed A record appended. It is how fast a Node server',
    '  can answer on this machine at all; "nodens / ceiling" is the share of that nodens reaches.',
    '- **-2cores** scenarios: every server gets both cores (`taskset -c 0,1`): nodens `-workers 2` (two threads of one',
    '  process on SO_REUSEPORT sockets, the main thread being worker 1), CoreDNS GOMAXPROCS=2, unbound `num-threads: 2`, the ceiling two',
    '  processes on SO_REUSEPORT sockets. The machine has only two cores, so dnsperf is not pinned and runs on the same two',
    '  cores: the server gets what the load generator leaves, and QPS is lower than two cores\' worth would give. The',
    '  ratios between servers stay comparable (the same dnsperf load each time); CPU / query is the cleaner figure.',
    '  Each worker or thread warms its own cache (one warm-up pass per core). "CPU by thread" lists each thread\'s share',
    '  of the server\'s CPU over the run (by thread name; threads under 5 % summed as "rest"): two similar shares of',
    '  nodens\'s MainThread and nodens-worker-2 mean both workers answered. dnsperf\'s 4 sockets are 4 flows that',
    '  SO_REUSEPORT hashes onto the 2 sockets of nodens (or of the ceiling) 2:2, 3:1 or 4:0 by chance.',
    '',
    '## Scenarios',
    '',
    ...scenarios.map((s) => `- **${s.name}**: ${s.description}`),
    '',
    'The kubernetes plugin at scale (10,000 services, 100,000 endpoints, the real kube-apiserver) ends a full run:',
    '`bench/k8s-scale.ts --duration 15 --rounds 2`, its table under Results. Run alone, `npm run bench:k8s-scale` writes',
    'it to [benchmarks-kubernetes.md](benchmarks-kubernetes.md).',
    '',
    '## Results',
    '',
    ...table(rows),
    '',
    ...(rows.some((r) => r.split) ? ['CPU by thread (2-core scenarios; the server\'s CPU over the run, largest first):', '',
      ...rows.filter((r) => r.split).map((r) => `- ${r.scenario} / ${r.server}: ${r.split}`), ''] : []),
    '### nodens / CoreDNS (and nodens / ceiling)',
    '',
    ...ratios(rows),
    '',
    ...(starts.length > 0 ? ['### Start-up before load', '', ...startsTable(starts), ''] : []),
    ...(k8sScale !== undefined ? [k8sScale.trimEnd(), ''] : []),
    `### RSS with ${fillN} cached entries`,
    '',
    `cache (capacity 2×${fillN}) + forward, after one pass of ${fillN} distinct names:`,
    '',
    '| server | RSS |',
    '| --- | --- |',
    ...Object.entries(fill).map(([k, v]) => `| ${k} | ${v} |`),
    '',
    '## Configurations',
    '',
    'Corefile of nodens and CoreDNS (`UP` = the upstream\'s port), and what unbound gets in its `server:` clause:',
    '',
    ...scenarios.filter((s) => !s.unavailable).flatMap((s) => [
      `**${s.name}**`,
      '',
      '```',
      s.corefile({ upstreamPort: 0, smoke: o.smoke }).replace(':0\n', ':UP\n').trimEnd(),
      '```',
      '',
      '```',
      s.fixture ? '(unbound: not applicable)' : (s.name.startsWith('hosts') ? s.unboundServer(ctx).split('\n').slice(0, 3).join('\n') + '\n    ...' : s.unboundServer({ upstreamPort: 0, smoke: o.smoke }).replace('@0\n', '@UP\n')).trimEnd(),
      '```',
      '',
    ]),
    '## Commands',
    '',
    '```',
    `# upstream`,
    upArgv.join(' ').replace(tmp, '$TMP'),
    ...rows.filter((r) => r.serverCommand).flatMap((r) => [
      `# ${r.scenario} / ${r.server}`,
      (r.serverCommand ?? '').replaceAll(tmp, '$TMP').replaceAll(`${REPO}/`, ''),
      (r.perf?.command ?? '').replaceAll(tmp, '$TMP'),
    ]),
    '```',
    '',
  ];
  const text = doc.join('\n');
  console.log(`\n${[...table(rows), '', ...ratios(rows)].join('\n')}`);
  if (o.write) {
    writeFileSync(o.write, text);
    console.log(`\nwrote ${o.write}`);
  }
  rmSync(tmp, { recursive: true, force: true });
  if (bad) console.log('\nbench: a reference server (CoreDNS or unbound) failed: the harness is broken');
  return bad ? 1 : 0;
}

main().then((c) => { process.exitCode = c; }, (e) => {
  console.error(e);
  process.exitCode = 1;
});
