// Scale benchmark for the kubernetes plugin: nodens vs the reference CoreDNS against the same API server holding
// 10,000 services and 100,000 endpoints (one EndpointSlice of 10 ready endpoints per service).
//
//   node bench/k8s-scale.ts [--apiserver real|fake] [--services 10000] [--endpoints-per-service 10]
//                           [--duration 10] [--servers nodens,coredns] [--nodens PATH] [--out FILE] [--hold]
//                           [--rounds 2] [--load etcd|post]
//
// --apiserver real (the default): the real kube-apiserver + etcd of scripts/k8s-reference.sh
// (test/helpers/kube-apiserver.ts). --load etcd (the default) writes the objects straight into etcd under the
// API server's keys (/registry/...), 128 puts per transaction through etcd's JSON gateway, as JSON (which the API
// server's storage decoder reads besides protobuf, defaulting them on the way out); the API server's watch cache
// takes them from its etcd watch, and the load ends when a LIST counts them all. It skips the API server's
// validation and admission, which is what makes it take seconds instead of minutes: through the API
// (--load post: parallel POSTs over keep-alive connections) 20k objects took 5-6 minutes on the shared
// machine. Both are timed. Both DNS
// servers read it as CoreDNS does in a cluster: the streaming list from the API server's watch cache, then the
// watch (CoreDNS in protobuf, nodens in JSON). --apiserver fake: the in-repo test API server (test/k8s-api).
//
// --rounds N runs the servers N times, alternating (nodens, CoreDNS, nodens, CoreDNS...): on a shared machine one
// run says little, the medians and the spread say more. For each server, one after the other, the DNS server pinned to core 0 (`taskset -c 0`), dnsperf to core 1:
//   - time from process start to the `ready` plugin's 200, and to the first NOERROR answer for the last
//     service created (both servers hold their listeners until the initial sync, startup_timeout 300s);
//   - CPU seconds (utime+stime from /proc/<pid>/stat) spent until ready: the load-independent cost of the sync;
//   - peak RSS (VmHWM) and settled RSS (VmRSS 5 s after ready);
//   - dnsperf over A queries for every service (shuffled; one in ten headless, 10 answers): QPS and, load
//     independent, the server's CPU seconds per 100k answered queries;
//   - the time from creating a new service (POST sent) to its first NOERROR answer, median of 3.
// --nodens PATH runs another nodens build too (A/B: the same API server, the same state). --hold loads the API
// server, prints the kubeconfig's path and keeps it up until interrupted (for profiling by hand).

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { queryUdp } from '../test/conformance/lib/client.ts';
import { encodeQuery, parseQueryLine } from '../test/conformance/lib/query.ts';
import { freePort, referenceBinary } from '../test/conformance/lib/servers.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/helpers/kube-apiserver.ts';
import { kubeconfigFor, type ClusterState, type KObject } from '../test/k8s-api/server.ts';
import { COREDNS_VERSION } from '../src/version.ts';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NODE = process.execPath;

interface Opts { apiserver: 'real' | 'fake'; services: number; perService: number; duration: number; servers: string[]; nodens: string[]; out: string | undefined; hold: boolean; load: 'etcd' | 'post'; rounds: number }

function parseArgs(argv: string[]): Opts {
  const o: Opts = { apiserver: 'real', services: 10000, perService: 10, duration: 10, servers: ['nodens', 'coredns'], nodens: [], out: undefined, hold: false, load: 'etcd', rounds: 2 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--services') o.services = Number(argv[++i]);
    else if (a === '--endpoints-per-service') o.perService = Number(argv[++i]);
    else if (a === '--duration') o.duration = Number(argv[++i]);
    else if (a === '--out') o.out = argv[++i];
    else if (a === '--servers') o.servers = argv[++i].split(',');
    else if (a === '--nodens') o.nodens.push(argv[++i]);
    else if (a === '--hold') o.hold = true;
    else if (a === '--rounds') o.rounds = Number(argv[++i]);
    else if (a === '--load') {
      const v = argv[++i];
      if (v !== 'etcd' && v !== 'post') throw new Error('--load takes etcd or post');
      o.load = v;
    }
    else if (a === '--apiserver') {
      const v = argv[++i];
      if (v !== 'real' && v !== 'fake') throw new Error('--apiserver takes real or fake');
      o.apiserver = v;
    } else if (a === '--help' || a === '-h') {
      process.stdout.write('node bench/k8s-scale.ts [--apiserver real|fake] [--services N] [--endpoints-per-service N] [--duration S] [--servers nodens,coredns] [--nodens PATH]... [--out FILE] [--hold] [--load etcd|post] [--rounds N]\n');
      process.exit(0);
    } else throw new Error(`unknown flag ${a}`);
  }
  return o;
}

const NAMESPACES = 100;

function ip(n: number, base: string): string {
  return `${base}.${(n >> 8) & 255}.${n & 255}`;
}

function ip4(n: number, first: number): string {
  return `${first}.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
}

const isHeadless = (i: number) => i % 10 === 9;

/**
 * Every 10th service is headless; each service has one EndpointSlice with `per` ready endpoints. ClusterIPs are
 * in the real API server's 10.96.0.0/16 range, from 10.96.0.16 (10.96.0.1 is default/kubernetes).
 */
export function generate(services: number, per: number): ClusterState {
  const state: ClusterState = { namespaces: [], services: [], endpointslices: [] };
  for (let n = 0; n < NAMESPACES; n++) state.namespaces!.push({ metadata: { name: `ns${n}` } });
  let ep = 0;
  for (let i = 0; i < services; i++) {
    const ns = `ns${i % NAMESPACES}`;
    const name = `svc${i}`;
    const cip = isHeadless(i) ? 'None' : ip(i + 16, '10.96');
    state.services!.push({ metadata: { name, namespace: ns }, spec: { type: 'ClusterIP', clusterIP: cip, clusterIPs: [cip], ports: [{ name: 'http', protocol: 'TCP', port: 80 }] } } as KObject);
    const endpoints = [];
    for (let e = 0; e < per; e++) endpoints.push({ addresses: [ip4(++ep, 172)], conditions: { ready: true, serving: true, terminating: false }, nodeName: `node${e}` });
    state.endpointslices!.push({
      metadata: { name: `${name}-abcde`, namespace: ns, labels: { 'kubernetes.io/service-name': name, 'endpointslice.kubernetes.io/managed-by': 'nodens-bench' } },
      addressType: 'IPv4', endpoints, ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
    } as KObject);
  }
  return state;
}

const fqdn = (i: number) => `svc${i}.ns${i % NAMESPACES}.svc.cluster.local.`;

/** An A query for every service, shuffled (fixed seed). */
function queryFile(services: number): string {
  const idx = Array.from({ length: services }, (_, i) => i);
  let seed = 42;
  const rnd = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x7fffffff; };
  for (let i = idx.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [idx[i], idx[j]] = [idx[j], idx[i]];
  }
  return idx.map((i) => `${fqdn(i)} A`).join('\n') + '\n';
}

function procStatus(pid: number, field: string): number {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** utime+stime of a process in seconds. */
function cpuSeconds(pid: number): number {
  const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // USER_HZ is 100 on Linux
}

interface Perf { qps: number; completed: number; lost: number; cpuPer100k: number; rcodes: string }

function dnsperf(pid: number, port: number, file: string, seconds: number): Perf {
  const args = ['-c', '1', 'dnsperf', '-s', '127.0.0.1', '-p', String(port), '-d', file, '-l', String(seconds), '-c', '4', '-q', '100', '-t', '2'];
  const c0 = cpuSeconds(pid);
  const r = spawnSync('taskset', args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const c1 = cpuSeconds(pid);
  if (r.status !== 0) throw new Error(`dnsperf failed: ${r.stderr}`);
  const out = r.stdout;
  const num = (re: RegExp) => Number(re.exec(out)?.[1] ?? NaN);
  const completed = num(/Queries completed:\s+(\d+)/);
  return {
    qps: num(/Queries per second:\s+([\d.]+)/), completed, lost: num(/Queries lost:\s+(\d+)/),
    cpuPer100k: ((c1 - c0) / completed) * 100_000, rcodes: (/Response codes:\s+(.*)/.exec(out)?.[1] ?? '').trim(),
  };
}

/** Resolves true once `name A` is answered NOERROR with at least one record (polling every `pollMs`). */
async function answered(port: number, line: string, deadline: number, pollMs: number, alive: () => boolean): Promise<boolean> {
  const q = parseQueryLine(line);
  for (let id = 1; performance.now() < deadline; id++) {
    if (!alive()) return false;
    const r = await queryUdp('127.0.0.1', port, encodeQuery(q, id & 0xffff), 200);
    if (r.bytes && (r.bytes[3] & 0xf) === 0 && r.bytes.readUInt16BE(6) > 0) return true;
    await new Promise((res) => setTimeout(res, pollMs));
  }
  return false;
}

function httpStatus(port: number, p: string): Promise<number> {
  return fetch(`http://127.0.0.1:${port}${p}`).then((r) => r.status, () => 0);
}

/** A way to create services while a server runs (for the change-latency measurement). */
type CreateService = (ns: string, name: string, clusterIP: string) => Promise<void>;

interface Result {
  name: string; readyMs: number; answerMs: number; syncCpu: number; peakMB: number; settledMB: number;
  perf: Perf; changeMs: number[];
}

let changeSeq = 0;

async function runServer(name: string, argv: string[], dir: string, o: Opts, qfile: string, create: CreateService): Promise<Result> {
  const port = await freePort();
  const readyPort = await freePort();
  const conf = path.join(dir, `Corefile-${port}`);
  writeFileSync(conf, `cluster.local {
    ready 127.0.0.1:${readyPort}
    kubernetes {
        kubeconfig kubeconfig
        startup_timeout 300s
    }
}
`);
  const t0 = performance.now();
  const proc: ChildProcess = spawn('taskset', ['-c', '0', ...argv, '-conf', conf, '-dns.port', String(port), '-quiet'], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => { err += d.toString(); if (err.length > 100_000) err = err.slice(-50_000); });
  const alive = () => proc.exitCode === null && proc.signalCode === null;
  const pid = proc.pid!;
  try {
    let readyMs = NaN;
    let answerMs = NaN;
    let syncCpu = NaN;
    const last = o.services - 1 - (isHeadless(o.services - 1) ? 1 : 0);
    const deadline = t0 + 300_000;
    const readyP = (async () => {
      while (performance.now() < deadline && alive()) {
        if (await httpStatus(readyPort, '/ready') === 200) {
          readyMs = performance.now() - t0;
          syncCpu = cpuSeconds(pid);
          return;
        }
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    const answerP = answered(port, `${fqdn(last)} A`, deadline, 20, alive).then((ok) => { if (ok) answerMs = performance.now() - t0; });
    await Promise.all([readyP, answerP]);
    if (!alive()) throw new Error(`${name} exited: ${err}`);
    if (Number.isNaN(readyMs) || Number.isNaN(answerMs)) throw new Error(`${name}: not ready within 300 s: ${err}`);
    await new Promise((res) => setTimeout(res, 5000));
    const settledMB = procStatus(pid, 'VmRSS');
    dnsperf(pid, port, qfile, 2); // warm-up
    const perf = dnsperf(pid, port, qfile, o.duration);
    const changeMs: number[] = [];
    for (let k = 0; k < 3; k++) {
      const n = ++changeSeq;
      const svc = `new${n}`;
      const tc = performance.now();
      await create('ns0', svc, ip(60000 + n, '10.96'));
      if (!await answered(port, `${svc}.ns0.svc.cluster.local. A`, tc + 30_000, 2, alive)) throw new Error(`${name}: ${svc} never answered`);
      changeMs.push(performance.now() - tc);
    }
    const peakMB = procStatus(pid, 'VmHWM');
    return { name, readyMs, answerMs, syncCpu, peakMB, settledMB, perf, changeMs };
  } finally {
    proc.kill('SIGTERM');
    if (alive()) await new Promise((res) => proc.once('exit', res));
  }
}

/** POST each object (JSON) to the real API server, `parallel` at a time over keep-alive connections. */
async function postAll(api: KubeApiServer, items: { path: string; body: unknown }[], parallel: number): Promise<void> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: parallel, ca: readFileSync(api.caFile) });
  let next = 0;
  const one = (it: { path: string; body: unknown }) => new Promise<void>((resolve, reject) => {
    const data = JSON.stringify(it.body);
    const req = https.request(`${api.url}${it.path}`, {
      method: 'POST', agent, timeout: 60_000,
      headers: { Authorization: `Bearer ${api.token}`, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { text += d; });
      res.on('end', () => {
        if (res.statusCode === 201) resolve();
        else reject(new Error(`POST ${it.path}: ${res.statusCode} ${text.slice(0, 500)}`));
      });
    });
    req.on('timeout', () => { req.destroy(new Error(`POST ${it.path}: timed out`)); });
    req.on('error', reject);
    req.end(data);
  });
  const worker = async () => {
    while (next < items.length) await one(items[next++]);
  };
  try {
    await Promise.all(Array.from({ length: parallel }, worker));
  } finally {
    agent.destroy();
  }
}

interface Setup { kubeconfig: string; create: CreateService; stop: () => Promise<void>; note: string }

/** Writes the objects into etcd as the API server stores them (JSON accepted), `ops` puts per transaction. */
async function etcdLoad(api: KubeApiServer, items: { key: string; body: unknown }[], ops = 128): Promise<void> {
  const b64 = (x: string) => Buffer.from(x).toString('base64');
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const batch = items.slice(next, next + ops);
      next += ops;
      const body = JSON.stringify({ success: batch.map((it) => ({ requestPut: { key: b64(it.key), value: b64(JSON.stringify(it.body)) } })) });
      const r = await fetch(`${api.etcdUrl}/v3/kv/txn`, { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
      if (r.status !== 200) throw new Error(`etcd txn: ${r.status} ${await r.text()}`);
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
}

/** How many objects a LIST of `p` finds (one item asked for; remainingItemCount tells the rest). */
async function countOf(api: KubeApiServer, p: string): Promise<number> {
  const r = await new Promise<string>((resolve, reject) => {
    https.get(`${api.url}${p}?limit=1`, { headers: { Authorization: `Bearer ${api.token}` }, ca: readFileSync(api.caFile) }, (res) => {
      let t = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { t += d; });
      res.on('end', () => { resolve(t); });
    }).on('error', reject);
  });
  const l = JSON.parse(r) as { items?: unknown[]; metadata?: { remainingItemCount?: number } };
  return (l.items?.length ?? 0) + (l.metadata?.remainingItemCount ?? 0);
}

async function realApiServer(state: ClusterState, how: 'etcd' | 'post'): Promise<Setup> {
  const t0 = performance.now();
  const api = await startKubeApiServer({ readyTimeoutMs: 120_000, extraArgs: ['--endpoint-reconciler-type', 'none'] });
  const started = performance.now();
  try {
    const ns = (o: KObject) => o.metadata.namespace ?? '';
    await postAll(api, state.namespaces!.map((n) => ({ path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', ...n } })), 16);
    if (how === 'etcd') {
      const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      // The metadata a POST by this client would have left: uid, creation time and the managedFields entry (it is
      // a good part of each object's size on the wire: ~40% of a service's JSON here, ~17% of a slice's).
      const managed = (apiVersion: string, fieldsV1: unknown) => [{ manager: 'unknown', operation: 'Update', apiVersion, time: now, fieldsType: 'FieldsV1', fieldsV1 }];
      const svcFields = managed('v1', { 'f:spec': { 'f:clusterIP': {}, 'f:clusterIPs': {}, 'f:internalTrafficPolicy': {}, 'f:ports': { '.': {}, 'k:{"port":80,"protocol":"TCP"}': { '.': {}, 'f:name': {}, 'f:port': {}, 'f:protocol': {}, 'f:targetPort': {} } }, 'f:sessionAffinity': {}, 'f:type': {} } });
      const sliceFields = managed('discovery.k8s.io/v1', { 'f:addressType': {}, 'f:endpoints': {}, 'f:metadata': { 'f:labels': { '.': {}, 'f:endpointslice.kubernetes.io/managed-by': {}, 'f:kubernetes.io/service-name': {} } }, 'f:ports': {} });
      const meta = (o: KObject, i: number, managedFields: unknown) => ({ ...o.metadata, uid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, creationTimestamp: now, managedFields });
      await etcdLoad(api, [
        ...state.services!.map((s, i) => ({ key: `/registry/services/specs/${ns(s)}/${s.metadata.name}`, body: { apiVersion: 'v1', kind: 'Service', ...s, metadata: meta(s, i, svcFields) } })),
        ...state.endpointslices!.map((s, i) => ({ key: `/registry/endpointslices/${ns(s)}/${s.metadata.name}`, body: { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', ...s, metadata: meta(s, 100000 + i, sliceFields) } })),
      ]);
      // The watch cache has them all once a LIST from it counts them (default/kubernetes is the extra service).
      const until = performance.now() + 120_000;
      for (;;) {
        const [svcs, slices] = [await countOf(api, '/api/v1/services'), await countOf(api, '/apis/discovery.k8s.io/v1/endpointslices')];
        if (svcs >= state.services!.length + 1 && slices >= state.endpointslices!.length) break;
        if (performance.now() > until) throw new Error(`the API server sees ${svcs} services and ${slices} EndpointSlices after the etcd load`);
        await new Promise((res) => setTimeout(res, 200));
      }
    } else {
      await postAll(api, [
      ...state.services!.map((s) => ({ path: `/api/v1/namespaces/${ns(s)}/services`, body: { apiVersion: 'v1', kind: 'Service', ...s } })),
      ...state.endpointslices!.map((s) => ({ path: `/apis/discovery.k8s.io/v1/namespaces/${ns(s)}/endpointslices`, body: { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', ...s } })),
      ], 32);
    }
  } catch (e) {
    await api.stop();
    throw e;
  }
  const loaded = performance.now();
  const n = state.services!.length + state.endpointslices!.length + state.namespaces!.length;
  const note = `real kube-apiserver (scripts/k8s-reference.sh, etcd --unsafe-no-fsync), started in ${((started - t0) / 1000).toFixed(1)} s, `
    + `loaded with ${n} objects ${how === 'etcd' ? 'written into etcd (128 puts per transaction, 4 at a time; namespaces POSTed) until a LIST counted them all' : 'by parallel POSTs (32 at a time, keep-alive)'} in ${((loaded - started) / 1000).toFixed(1)} s (${(n / ((loaded - started) / 1000)).toFixed(0)} objects/s)`;
  process.stderr.write(`${note}\n`);
  const create: CreateService = async (namespace, name, clusterIP) => {
    await postAll(api, [{ path: `/api/v1/namespaces/${namespace}/services`, body: { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace }, spec: { clusterIP, ports: [{ name: 'http', protocol: 'TCP', port: 80 }] } } }], 1);
  };
  return { kubeconfig: api.kubeconfig, create, stop: () => api.stop(), note };
}

async function fakeApiServer(state: ClusterState, dir: string): Promise<Setup> {
  writeFileSync(path.join(dir, 'state.json'), JSON.stringify(state));
  const apiPort = await freePort();
  const api = spawn('taskset', ['-c', '1', NODE, path.join(REPO, 'test/k8s-api/server.ts'), '--state', path.join(dir, 'state.json'), '--port', String(apiPort), '--bookmark-ms', '60000'], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve) => { api.stdout!.once('data', () => { resolve(); }); });
  const kc = path.join(dir, 'kubeconfig-fake');
  writeFileSync(kc, kubeconfigFor(`http://127.0.0.1:${apiPort}`));
  const create: CreateService = async (namespace, name, clusterIP) => {
    const r = await fetch(`http://127.0.0.1:${apiPort}/api/v1/namespaces/${namespace}/services`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ metadata: { name, namespace }, spec: { type: 'ClusterIP', clusterIP, clusterIPs: [clusterIP], ports: [{ name: 'http', protocol: 'TCP', port: 80 }] } }),
    });
    if (r.status >= 300) throw new Error(`fake API server: POST service: ${r.status} ${await r.text()}`);
  };
  return {
    kubeconfig: kc, create, note: 'the in-repo test API server (test/k8s-api/server.ts, JSON only, pinned to core 1)',
    stop: async () => { api.kill('SIGTERM'); await new Promise((res) => api.once('exit', res)); },
  };
}

const fmt = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const median = (a: number[]) => {
  const s = [...a].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
};

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const dir = mkdtempSync(path.join(tmpdir(), 'nodens-k8s-scale-'));
  const state = generate(o.services, o.perService);
  const qfile = path.join(dir, 'queries.txt');
  writeFileSync(qfile, queryFile(o.services));
  const setup = o.apiserver === 'real' ? await realApiServer(state, o.load) : await fakeApiServer(state, dir);
  writeFileSync(path.join(dir, 'kubeconfig'), readFileSync(setup.kubeconfig));
  if (o.hold) {
    // For profiling by hand: the loaded API server stays up until this process is interrupted.
    process.stdout.write(`kubeconfig: ${path.join(dir, 'kubeconfig')} (Ctrl-C ends the API server)\n`);
    await new Promise<void>((resolve) => { process.once('SIGINT', resolve); process.once('SIGTERM', resolve); });
    await setup.stop();
    return;
  }
  const results: Result[] = [];
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  try {
    const servers: [string, string[]][] = o.servers.map((s): [string, string[]] => {
      if (s === 'nodens') return ['nodens', [path.join(REPO, 'bin/nodens')]];
      if (s === 'coredns') return [`CoreDNS ${COREDNS_VERSION}`, [referenceBinary()]];
      throw new Error(`unknown server ${s}`);
    });
    for (const p of o.nodens) servers.push([`nodens (${p})`, [p]]);
    for (let round = 0; round < o.rounds; round++) {
      for (const [name, argv] of servers) {
        results.push(await runServer(name, argv, dir, o, qfile, setup.create));
        process.stderr.write(`${JSON.stringify(results.at(-1))}\n`);
      }
    }
  } finally {
    await setup.stop();
  }
  const loadAfter = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const lines = [
    `### kubernetes plugin at scale: ${o.services} services, ${o.services * o.perService} endpoints, ${o.apiserver} API server (${new Date().toISOString().slice(0, 10)})`,
    '',
    '| server | start → ready 200 | start → last service answered | CPU until ready | peak RSS | settled RSS | A QPS | CPU s / 100k q | new service answered after | rcodes |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...results.map((r, i) => `| ${r.name} (run ${Math.floor(i / (results.length / o.rounds)) + 1}) | ${fmt(r.readyMs)} | ${fmt(r.answerMs)} | ${r.syncCpu.toFixed(2)} s | ${r.peakMB.toFixed(0)} MB | ${r.settledMB.toFixed(0)} MB | ${r.perf.qps.toFixed(0)} | ${r.perf.cpuPer100k.toFixed(2)} | ${median(r.changeMs).toFixed(0)} ms (${r.changeMs.map((x) => x.toFixed(0)).join(', ')}) | ${r.perf.rcodes} |`),
    '',
    `Setup: ${setup.note}; ${NAMESPACES} namespaces, ${o.services} services (every 10th headless) and one EndpointSlice of ${o.perService}`,
    `ready endpoints per service. Each DNS server alone on core 0 (\`taskset -c 0\`), one after the other against the same API server (${o.rounds} round${o.rounds === 1 ? '' : 's'}, alternating),`,
    'with `ready` and `kubernetes { kubeconfig; startup_timeout 300s }` (both hold their listeners until the initial sync). CPU until',
    'ready = utime+stime of the server at the `ready` 200 (start-up included). Peak RSS = VmHWM at the end; settled = VmRSS 5 s after',
    `ready. dnsperf (core 1): 4 clients, 100 outstanding, ${o.duration} s after a 2 s warm-up, A queries for every service in shuffled order`,
    '(one in ten headless: 10 answers); CPU s / 100k q = the server\'s utime+stime over the run per 100k completed queries (QPS is noise on',
    'this shared 2-core machine, CPU per query is not). New service = POST of a ClusterIP service, then polling every 2 ms until it is',
    `answered (median of 3). Machine load average (1, 5, 15 min) before: ${load}; after: ${loadAfter}.`,
  ];
  const names = [...new Set(results.map((r) => r.name))];
  const med = (name: string, f: (r: Result) => number) => median(results.filter((r) => r.name === name).map(f));
  const summary = (name: string) => `${name}: ready ${fmt(med(name, (r) => r.readyMs))}, CPU until ready ${med(name, (r) => r.syncCpu).toFixed(2)} s, `
    + `peak RSS ${med(name, (r) => r.peakMB).toFixed(0)} MB, settled ${med(name, (r) => r.settledMB).toFixed(0)} MB, ${med(name, (r) => r.perf.cpuPer100k).toFixed(2)} CPU s / 100k q`;
  lines.push('', `Medians over ${o.rounds} run${o.rounds === 1 ? '' : 's'}: ${names.map(summary).join('; ')}.`);
  if (names.length >= 2) {
    const [a, b] = names;
    const ratio = (f: (r: Result) => number) => (med(a, f) / med(b, f)).toFixed(2);
    lines.push(`${a} / ${b} (medians): ready ${ratio((r) => r.readyMs)}×, CPU until ready ${ratio((r) => r.syncCpu)}×, peak RSS ${ratio((r) => r.peakMB)}×, `
      + `settled RSS ${ratio((r) => r.settledMB)}×, CPU per query ${ratio((r) => r.perf.cpuPer100k)}×.`);
  }
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
