// Scale benchmark for the kubernetes plugin: nodens vs the reference CoreDNS against the same
// test API server holding 10,000 services and 100,000 endpoints.
//
//   node bench/k8s-scale.ts [--services 10000] [--endpoints-per-service 10] [--duration 15] [--out FILE]
//
// For each server (run one after the other, the DNS server pinned to core 0, the API server and dnsperf
// to core 1): time from process start to the first correct answer for the last service of the state
// (both servers hold their listeners until the initial sync is done, startup_timeout 300s), RSS after
// sync (/proc/<pid>/status VmRSS), then dnsperf QPS / average latency / p99 (from -v) on a mixed query
// file (80% ClusterIP A, 10% headless A with 10 answers, 10% named-port SRV).

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { queryUdp } from '../test/conformance/lib/client.ts';
import { encodeQuery, parseQueryLine } from '../test/conformance/lib/query.ts';
import { freePort, referenceBinary } from '../test/conformance/lib/servers.ts';
import { kubeconfigFor, type ClusterState, type KObject } from '../test/k8s-api/server.ts';
import { COREDNS_VERSION } from '../src/version.ts';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NODE = process.execPath;

interface Opts { services: number; perService: number; duration: number; out: string | undefined }

function parseArgs(argv: string[]): Opts {
  const o: Opts = { services: 10000, perService: 10, duration: 15, out: undefined };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--services') o.services = Number(argv[++i]);
    else if (a === '--endpoints-per-service') o.perService = Number(argv[++i]);
    else if (a === '--duration') o.duration = Number(argv[++i]);
    else if (a === '--out') o.out = argv[++i];
    else throw new Error(`unknown flag ${a}`);
  }
  return o;
}

const NAMESPACES = 100;

function ip(n: number, base: number): string {
  return `${base}.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
}

/** Every 10th service is headless; each service has one EndpointSlice with `per` ready endpoints. */
export function generate(services: number, per: number): ClusterState {
  const state: ClusterState = { namespaces: [], services: [], endpointslices: [] };
  for (let n = 0; n < NAMESPACES; n++) state.namespaces!.push({ metadata: { name: `ns${n}` } });
  let ep = 0;
  for (let i = 0; i < services; i++) {
    const ns = `ns${i % NAMESPACES}`;
    const name = `svc${i}`;
    const headless = i % 10 === 9;
    const cip = headless ? 'None' : ip(i + 1, 10);
    state.services!.push({ metadata: { name, namespace: ns }, spec: { type: 'ClusterIP', clusterIP: cip, clusterIPs: [cip], ports: [{ name: 'http', protocol: 'TCP', port: 80 }] } } as KObject);
    const endpoints = [];
    for (let e = 0; e < per; e++) endpoints.push({ addresses: [ip(++ep, 172)], conditions: { ready: true, serving: true, terminating: false }, nodeName: `node${e}` });
    state.endpointslices!.push({
      metadata: { name: `${name}-abcde`, namespace: ns, labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4', endpoints, ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
    } as KObject);
  }
  return state;
}

function queryFile(services: number, n = 20000): string {
  const lines: string[] = [];
  let seed = 42;
  const rnd = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x7fffffff; };
  for (let k = 0; k < n; k++) {
    const r = rnd();
    let i = Math.floor(rnd() * services);
    if (r < 0.8) {
      if (i % 10 === 9) i--;
      lines.push(`svc${i}.ns${i % NAMESPACES}.svc.cluster.local. A`);
    } else if (r < 0.9) {
      i = i - (i % 10) + 9;
      if (i >= services) i -= 10;
      lines.push(`svc${i}.ns${i % NAMESPACES}.svc.cluster.local. A`);
    } else {
      lines.push(`_http._tcp.svc${i}.ns${i % NAMESPACES}.svc.cluster.local. SRV`);
    }
  }
  return lines.join('\n') + '\n';
}

function rssMB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

interface Perf { qps: number; avgMs: number; p99Ms: number; lost: number; completed: number; rcodes: string }

function dnsperf(port: number, file: string, seconds: number): Perf {
  const args = ['-c', '1', 'dnsperf', '-s', '127.0.0.1', '-p', String(port), '-d', file, '-l', String(seconds), '-c', '4', '-q', '100', '-t', '2', '-v'];
  const r = spawnSync('taskset', args, { encoding: 'utf8', maxBuffer: 1024 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`dnsperf failed: ${r.stderr}`);
  const out = r.stdout;
  const num = (re: RegExp) => Number(re.exec(out)?.[1] ?? NaN);
  const lat: number[] = [];
  for (const line of out.split('\n')) {
    if (line.charCodeAt(0) !== 62) continue;
    const v = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (!Number.isNaN(v)) lat.push(v);
  }
  const f = Float64Array.from(lat).sort();
  return {
    qps: num(/Queries per second:\s+([\d.]+)/), avgMs: num(/Average Latency \(s\):\s+([\d.]+)/) * 1000,
    p99Ms: f.length ? f[Math.min(f.length - 1, Math.ceil(f.length * 0.99) - 1)] * 1000 : NaN,
    lost: num(/Queries lost:\s+(\d+)/), completed: num(/Queries completed:\s+(\d+)/),
    rcodes: (/Response codes:\s+(.*)/.exec(out)?.[1] ?? '').trim(),
  };
}

interface Result { name: string; syncMs: number; rssMB: number; perf: Perf }

async function runServer(name: string, argv: string[], dir: string, probe: string, duration: number, qfile: string): Promise<Result> {
  const port = await freePort();
  const t0 = performance.now();
  const proc: ChildProcess = spawn('taskset', ['-c', '0', ...argv, '-conf', path.join(dir, 'Corefile'), '-dns.port', String(port), '-quiet'], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => { err += d.toString(); });
  const q = parseQueryLine(probe);
  let syncMs = NaN;
  for (let id = 1; performance.now() - t0 < 300_000; id++) {
    if (proc.exitCode !== null) throw new Error(`${name} exited: ${err}`);
    const r = await queryUdp('127.0.0.1', port, encodeQuery(q, id), 200);
    if (r.bytes && (r.bytes[3] & 0xf) === 0 && r.bytes.readUInt16BE(6) > 0) {
      syncMs = performance.now() - t0;
      break;
    }
    await new Promise((res) => setTimeout(res, 50));
  }
  await new Promise((res) => setTimeout(res, 2000));
  const rss = rssMB(proc.pid!);
  dnsperf(port, qfile, 3); // warm-up
  const perf = dnsperf(port, qfile, duration);
  proc.kill('SIGTERM');
  await new Promise((res) => proc.once('exit', res));
  return { name, syncMs, rssMB: rss, perf };
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const dir = mkdtempSync(path.join(tmpdir(), 'nodens-k8s-scale-'));
  const state = generate(o.services, o.perService);
  writeFileSync(path.join(dir, 'state.json'), JSON.stringify(state));
  const qfile = path.join(dir, 'queries.txt');
  writeFileSync(qfile, queryFile(o.services));
  const apiPort = await freePort();
  const api = spawn('taskset', ['-c', '1', NODE, path.join(REPO, 'test/k8s-api/server.ts'), '--state', path.join(dir, 'state.json'), '--port', String(apiPort), '--bookmark-ms', '60000'], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve) => { api.stdout!.once('data', () => { resolve(); }); });
  writeFileSync(path.join(dir, 'kubeconfig'), kubeconfigFor(`http://127.0.0.1:${apiPort}`));
  writeFileSync(path.join(dir, 'Corefile'), `cluster.local {
    kubernetes {
        kubeconfig kubeconfig
        startup_timeout 300s
    }
}
`);
  const last = o.services - 2;
  const probe = `svc${last}.ns${last % NAMESPACES}.svc.cluster.local. A`;
  const results: Result[] = [];
  try {
    results.push(await runServer('nodens', [path.join(REPO, 'bin/nodens')], dir, probe, o.duration, qfile));
    results.push(await runServer(`CoreDNS ${COREDNS_VERSION}`, [referenceBinary()], dir, probe, o.duration, qfile));
  } finally {
    api.kill('SIGTERM');
  }
  const lines = [
    `### kubernetes plugin at scale: ${o.services} services, ${o.services * o.perService} endpoints (${new Date().toISOString().slice(0, 10)})`,
    '',
    '| server | time to first sync | RSS after sync | QPS | avg latency | p99 | lost | rcodes |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
    ...results.map((r) => `| ${r.name} | ${(r.syncMs / 1000).toFixed(2)} s | ${r.rssMB.toFixed(0)} MB | ${r.perf.qps.toFixed(0)} | ${r.perf.avgMs.toFixed(2)} ms | ${r.perf.p99Ms.toFixed(2)} ms | ${r.perf.lost} | ${r.perf.rcodes} |`),
    '',
    `Setup: one test API server process (test/k8s-api/server.ts, JSON, pinned to core 1 with dnsperf) serving ${NAMESPACES} namespaces,`,
    `${o.services} services (every 10th headless) and one EndpointSlice of ${o.perService} ready endpoints per service; each DNS server`,
    'alone on core 0 (`taskset -c 0`), `kubernetes { kubeconfig; startup_timeout 300s }`. Time to first sync = process start to the',
    'first NOERROR answer for the last service (both servers open their listeners only after the initial sync). nodens LISTs with',
    'limit=500 pages then WATCHes; CoreDNS uses the streaming list (sendInitialEvents). dnsperf: 4 clients, 100 outstanding,',
    `${o.duration} s after a 3 s warm-up; query mix 80% ClusterIP A, 10% headless A (${o.perService} answers), 10% SRV; p99 from dnsperf -v.`,
  ];
  const text = lines.join('\n') + '\n';
  process.stdout.write(text);
  if (o.out) {
    writeFileSync(o.out, '# Benchmarks: the kubernetes plugin at scale\n\nGenerated by `npm run bench:k8s-scale` (bench/k8s-scale.ts). '
      + 'Do not edit by hand; re-run instead. Single run on the machine described in [benchmarks.md](benchmarks.md).\n\n' + text);
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((e: unknown) => { console.error(e); process.exitCode = 1; });
}
