// Measures the memory (RSS) of bin/nodens running the Corefiles of deploy/coredns.yaml and
// deploy/nodelocaldns.yaml, idle and under a short bounded dnsperf load, for the manifests' requests and
// limits. Everything on loopback: a real kube-apiserver (scripts/k8s-reference.sh) holding 300 services with
// their EndpointSlices, and the reference CoreDNS with `whoami` as the upstream the Corefiles forward to.
//
//   node scripts/measure-deploy-memory.ts
//
// Prints one line per Corefile: RSS idle after sync, peak RSS (VmHWM) under load, RSS after the load.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { REPO, freePort, referenceBinary, startServer, waitReady, type Running } from '../test/conformance/lib/servers.ts';
import { startKubeApiServer } from '../test/helpers/kube-apiserver.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'nodens-deploy-memory-'));
const SERVICES = 300;
const LOAD_SECONDS = 15;
const LOAD_QPS = 3000;

/** The `Corefile: |` block of a manifest's ConfigMap, unindented. */
function corefileOf(manifest: string): string {
  const text = readFileSync(path.join(REPO, 'deploy', manifest), 'utf8');
  const m = /^ {2}Corefile: \|\n((?: {4}.*\n|\n)+)/m.exec(text);
  if (m === null) throw new Error(`no Corefile in ${manifest}`);
  return m[1].split('\n').map((l) => l.slice(4)).join('\n');
}

function status(pid: number): { rss: number; hwm: number } {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)?.[1] ?? 'NaN');
  return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function measure(name: string, corefile: string, port: number, queries: string[]): Promise<string> {
  const conf = path.join(dir, `Corefile.${name}`);
  writeFileSync(conf, corefile);
  const s: Running = await startServer({ name, command: path.join(REPO, 'bin/nodens'), conf, cwd: dir, port });
  try {
    await waitReady(s, queries[0], 60_000);
    await sleep(10_000);
    const idle = status(s.proc.pid!);
    const qfile = path.join(dir, `queries.${name}`);
    writeFileSync(qfile, queries.join('\n') + '\n');
    const perf = execFileSync('dnsperf', ['-s', '127.0.0.1', '-p', String(port), '-d', qfile, '-l', String(LOAD_SECONDS), '-Q', String(LOAD_QPS), '-c', '20', '-q', '200'], { encoding: 'utf8' });
    const loaded = status(s.proc.pid!);
    await sleep(5000);
    const after = status(s.proc.pid!);
    const sent = /Queries sent:\s+(\d+)/.exec(perf)?.[1];
    const done = /Queries completed:\s+(\d+)/.exec(perf)?.[1];
    return `${name}: idle ${idle.rss.toFixed(0)} MiB, peak ${loaded.hwm.toFixed(0)} MiB under ${LOAD_QPS} qps for ${LOAD_SECONDS} s (${done}/${sent} answered), ${after.rss.toFixed(0)} MiB after`;
  } finally {
    await s.stop();
  }
}

const api = await startKubeApiServer();
try {
  // 300 services in 10 namespaces, each with a 3-address EndpointSlice.
  const docs: string[] = [];
  for (let n = 0; n < 10; n++) docs.push(`apiVersion: v1\nkind: Namespace\nmetadata: {name: ns${n}}`);
  for (let i = 0; i < SERVICES; i++) {
    const ns = `ns${i % 10}`;
    docs.push(`apiVersion: v1\nkind: Service\nmetadata: {name: svc${i}, namespace: ${ns}}\nspec:\n  clusterIP: 10.96.${10 + Math.floor(i / 250)}.${1 + (i % 250)}\n  ports: [{name: http, port: 80, protocol: TCP}]`);
    docs.push(`apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: svc${i}-x, namespace: ${ns}, labels: {kubernetes.io/service-name: svc${i}}}\naddressType: IPv4\nendpoints:\n${[0, 1, 2].map((k) => `- addresses: [10.${100 + k}.${Math.floor(i / 250)}.${1 + (i % 250)}]\n  conditions: {ready: true}`).join('\n')}\nports: [{name: http, port: 80, protocol: TCP}]`);
  }
  await api.kubectl(['apply', '-f', '-'], { input: docs.join('\n---\n') });

  const upPort = await freePort();
  const upConf = path.join(dir, 'Corefile.upstream');
  writeFileSync(upConf, `.:${upPort} {\n    whoami\n}\n`);
  const upstream = await startServer({ name: 'upstream', command: referenceBinary(), conf: upConf, cwd: dir, port: upPort });
  try {
    await waitReady(upstream);
    const [p1, p2, p3, p4] = [await freePort(), await freePort(), await freePort(), await freePort()];
    // deploy/coredns.yaml's Corefile with loopback ports and the upstream here instead of /etc/resolv.conf.
    const cluster = corefileOf('coredns.yaml')
      .replace('.:53 {', `.:${p1} {`)
      .replace('health {', `health 127.0.0.1:${p2} {`)
      .replace(/^ {4}ready$/m, `    ready 127.0.0.1:${p3}`)
      .replace('kubernetes cluster.local in-addr.arpa ip6.arpa {', `kubernetes cluster.local in-addr.arpa ip6.arpa {\n      kubeconfig ${api.kubeconfig}`)
      .replace('prometheus :9153', `prometheus 127.0.0.1:${p4}`)
      .replace('forward . /etc/resolv.conf', `forward . 127.0.0.1:${upPort}`);
    const clusterQueries: string[] = [];
    for (let i = 0; i < SERVICES; i++) {
      clusterQueries.push(`svc${i}.ns${i % 10}.svc.cluster.local A`, `_http._tcp.svc${i}.ns${i % 10}.svc.cluster.local SRV`, `${1 + (i % 250)}.${10 + Math.floor(i / 250)}.96.10.in-addr.arpa PTR`, `nope${i}.ns${i % 10}.svc.cluster.local A`);
    }
    // Forwarded names, all different: they fill the cache.
    for (let i = 0; i < 20_000; i++) clusterQueries.push(`host${i}.example.com A`);
    const lines = [await measure('coredns.yaml', cluster, p1, ['svc0.ns0.svc.cluster.local A', ...clusterQueries])];

    // deploy/nodelocaldns.yaml's Corefile.base as node-cache renders it, on loopback: the link-local and
    // kube-dns addresses become 127.0.0.1, both upstreams the upstream here (node-cache's own supervisor,
    // the interface and iptables part, is not in this process).
    const [q1, q2, q3] = [await freePort(), await freePort(), await freePort()];
    const nodeCache = corefileOf('nodelocaldns.yaml')
      .replaceAll(':53 {', `:${q1} {`)
      .replaceAll('bind 169.254.20.10 10.96.0.10', 'bind 127.0.0.1')
      .replaceAll('__PILLAR__CLUSTER__DNS__', `127.0.0.1:${upPort}`)
      .replaceAll('__PILLAR__UPSTREAM__SERVERS__', `127.0.0.1:${upPort}`)
      .replaceAll('prometheus :9253', `prometheus 127.0.0.1:${q2}`)
      .replace('health 169.254.20.10:8080', `health 127.0.0.1:${q3}`);
    const cacheQueries: string[] = [];
    for (let i = 0; i < 10_000; i++) cacheQueries.push(`svc${i}.ns${i % 10}.svc.cluster.local A`, `host${i}.example.com A`);
    lines.push(await measure('nodelocaldns.yaml', nodeCache, q1, cacheQueries));
    for (const l of lines) console.log(l);
  } finally {
    await upstream.stop();
  }
} finally {
  await api.stop();
}
