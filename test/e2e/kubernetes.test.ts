// The kubernetes plugin against the test API server, through real sockets:
// data changes (endpoints turning ready/unready, a service deleted), the API
// server killed and restarted mid-watch, a watch window missed and healed by
// the periodic relist, 410 on an expired watch, the unsynced start, NS glue
// from the server's own address, metrics.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { wire } from '../../src/index.ts';
import { registry } from '../../src/plugin/pkg/metrics.ts';
import type { Kubernetes } from '../../src/plugin/kubernetes/kubernetes.ts';
import { interfaceIPs } from '../../src/plugin/kubernetes/setup.ts';
import { startInProcess, logLines } from '../helpers/server.ts';
import { exchange } from '../helpers/client.ts';
import { K8sApiServer, kubeconfigFor, type ClusterState, type KObject } from '../k8s-api/server.ts';

const FIXTURE = JSON.parse(readFileSync(fileURLToPath(new URL('../k8s-api/fixtures/cluster.json', import.meta.url)), 'utf8')) as ClusterState;

// The periodic relist that heals missed events: every second in these tests.
process.env.NODENS_KUBERNETES_RESYNC = '1s';

const T = wire.RRType;

async function ask(port: number, name: string, type: number): Promise<{ rcode: number; answers: string[]; authority: string[]; extra: string[] }> {
  const q = wire.newQuery(name, type);
  const reply = wire.decodeMessage(await exchange(port, wire.encodeMessage(q)));
  const text = (rrs: wire.ResourceRecord[]) => rrs.map((r) => wire.formatRecord(r)).sort();
  return { rcode: reply.rcode, answers: text(reply.answer), authority: text(reply.authority), extra: text(reply.additional) };
}

async function waitFor(what: string, fn: () => Promise<boolean>, ms = 10000): Promise<void> {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`timed out waiting for ${what}`);
}

function clone<T>(o: T): T { return structuredClone(o); }

function slice(ns: string, name: string, svc: string, eps: { ip: string; ready?: boolean; hostname?: string }[]): KObject {
  return {
    kind: 'EndpointSlice', metadata: { name, namespace: ns, labels: { 'kubernetes.io/service-name': svc } }, addressType: 'IPv4',
    endpoints: eps.map((e) => ({ addresses: [e.ip], conditions: { ready: e.ready ?? true }, ...(e.hostname ? { hostname: e.hostname } : {}) })),
    ports: [{ name: 'http', protocol: 'TCP', port: 80 }],
  };
}

let dir: string;
before(() => { dir = mkdtempSync(path.join(tmpdir(), 'nodens-k8s-e2e-')); });
after(() => { delete process.env.NODENS_KUBERNETES_RESYNC; });

async function setup(state: ClusterState, extra = '', apiPort = 0, apiOpts = {}) {
  const api = new K8sApiServer(state, { bookmarkMs: 200, ...apiOpts });
  await api.start(apiPort);
  const kc = path.join(dir, `kc-${api.port}`);
  writeFileSync(kc, kubeconfigFor(`http://127.0.0.1:${api.port}`));
  const server = await startInProcess(`
.:0 {
    kubernetes cluster.local in-addr.arpa {
        kubeconfig ${kc}
        pods verified
        ${extra}
    }
}`);
  const k = server.runtime.instance.blockConfigs()[0].handlers.find((h) => h.name === 'kubernetes') as Kubernetes;
  return { api, server, k, port: server.port };
}

test('headless endpoints turning ready and unready', async () => {
  const { api, server, port } = await setup(clone(FIXTURE));
  try {
    assert.deepEqual((await ask(port, 'web.prod.svc.cluster.local.', T.A)).answers.map((a) => a.split('\t').pop()), ['10.244.1.7', '10.244.2.9']);
    api.upsert(slice('prod', 'web-7xk2p', 'web', [{ ip: '10.244.1.7', hostname: 'web-0' }, { ip: '10.244.2.9', ready: false }, { ip: '10.244.3.3' }]));
    await waitFor('10.244.3.3 ready', async () => (await ask(port, 'web.prod.svc.cluster.local.', T.A)).answers.some((a) => a.endsWith('10.244.3.3')));
    const r = await ask(port, 'web.prod.svc.cluster.local.', T.A);
    assert.equal(r.answers.length, 2);
    assert.ok(!r.answers.some((a) => a.endsWith('10.244.2.9')));
    // PTR for the unready address is gone, for the ready one present.
    assert.equal((await ask(port, '9.2.244.10.in-addr.arpa.', T.PTR)).rcode, 3);
    assert.equal((await ask(port, '3.3.244.10.in-addr.arpa.', T.PTR)).answers.length, 1);
    // All unready: the headless name is NXDOMAIN (spec), the serial moved.
    const serial0 = (await ask(port, 'cluster.local.', T.SOA)).answers[0];
    api.upsert(slice('prod', 'web-7xk2p', 'web', [{ ip: '10.244.1.7', ready: false }, { ip: '10.244.3.3', ready: false }]));
    await waitFor('web NXDOMAIN', async () => (await ask(port, 'web.prod.svc.cluster.local.', T.A)).rcode === 3);
    assert.equal((await ask(port, 'web-0.web.prod.svc.cluster.local.', T.A)).rcode, 3);
    const serial1 = (await ask(port, 'cluster.local.', T.SOA)).answers[0];
    assert.ok(serial1 >= serial0);
  } finally {
    await server.stop();
    await api.stop();
  }
});

test('a service deleted and created again', async () => {
  const { api, server, port } = await setup(clone(FIXTURE));
  try {
    assert.equal((await ask(port, 'svc1.testns.svc.cluster.local.', T.A)).rcode, 0);
    const svc1 = api.snapshot().services!.find((s) => s.metadata.name === 'svc1' && s.metadata.namespace === 'testns')!;
    api.delete('Service', 'testns', 'svc1');
    await waitFor('svc1 NXDOMAIN', async () => (await ask(port, 'svc1.testns.svc.cluster.local.', T.A)).rcode === 3);
    assert.equal((await ask(port, '1.0.0.10.in-addr.arpa.', T.PTR)).rcode, 3);
    const nx = await ask(port, 'svc1.testns.svc.cluster.local.', T.A);
    assert.match(nx.authority[0], /SOA\tns\.dns\.cluster\.local\. hostmaster\.cluster\.local\. \d+ 7200 1800 86400 5$/);
    api.upsert({ ...svc1, spec: { ...(svc1.spec as object), clusterIP: '10.0.0.77', clusterIPs: ['10.0.0.77'] } });
    await waitFor('svc1 back', async () => (await ask(port, 'svc1.testns.svc.cluster.local.', T.A)).answers.some((a) => a.endsWith('10.0.0.77')));
    // A namespace deleted takes its services with it (namespace exists ⇔ Namespace watch).
    api.delete('Namespace', undefined, 'other');
    await waitFor('other NXDOMAIN', async () => (await ask(port, 'svc1.other.svc.cluster.local.', T.A)).rcode === 3);
  } finally {
    await server.stop();
    await api.stop();
  }
});

test('API server killed mid-watch: stale data keeps serving, the restart (new history) relists and converges', async () => {
  const { api, server, port, k } = await setup(clone(FIXTURE));
  const apiPort = api.port;
  let api2: K8sApiServer | undefined;
  try {
    await waitFor('watches open', async () => k.c.reflectorStates().every((s) => s.watching));
    await api.stop(); // every connection destroyed, port closed
    await new Promise((r) => setTimeout(r, 300));
    // Last known state, authoritative, no SERVFAIL.
    const stale = await ask(port, 'api.prod.svc.cluster.local.', T.A);
    assert.equal(stale.rcode, 0);
    assert.deepEqual(stale.answers.map((a) => a.split('\t').pop()), ['10.96.5.5']);
    assert.equal((await ask(port, 'nope.prod.svc.cluster.local.', T.A)).rcode, 3);
    assert.equal(k.ready(), true);
    // The new server has other data and a resourceVersion history that does not contain the client's.
    const next = clone(FIXTURE);
    next.services = next.services!.filter((s) => s.metadata.name !== 'api');
    next.services.push({ metadata: { name: 'fresh', namespace: 'prod' }, spec: { clusterIP: '10.96.7.7', clusterIPs: ['10.96.7.7'], ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } });
    api2 = new K8sApiServer(next, { bookmarkMs: 200, startRv: 50000 });
    await api2.start(apiPort);
    await waitFor('fresh appears', async () => (await ask(port, 'fresh.prod.svc.cluster.local.', T.A)).rcode === 0, 40000);
    await waitFor('api gone', async () => (await ask(port, 'api.prod.svc.cluster.local.', T.A)).rcode === 3, 40000);
    await waitFor('every reflector relisted', async () => k.c.reflectorStates().every((s) => s.relists >= 2 && s.watching), 40000);
  } finally {
    await server.stop();
    await api2?.stop();
  }
});

test('a missed watch window is healed by the periodic relist', async () => {
  const { api, server, port, k } = await setup(clone(FIXTURE));
  try {
    await waitFor('watches open', async () => k.c.reflectorStates().every((s) => s.watching));
    api.dropNextEvents(2);
    api.upsert({ kind: 'Service', metadata: { name: 'missed', namespace: 'prod' }, spec: { clusterIP: '10.96.8.8', clusterIPs: ['10.96.8.8'], ports: [{ port: 80, protocol: 'TCP' }] } });
    api.delete('Service', 'prod', 'api');
    // Not seen through the watch ...
    assert.equal((await ask(port, 'missed.prod.svc.cluster.local.', T.A)).rcode, 3);
    // ... until the relist replaces the cache (resync every second here).
    await waitFor('missed appears', async () => (await ask(port, 'missed.prod.svc.cluster.local.', T.A)).rcode === 0, 5000);
    await waitFor('api deleted', async () => (await ask(port, 'api.prod.svc.cluster.local.', T.A)).rcode === 3, 5000);
  } finally {
    await server.stop();
    await api.stop();
  }
});

test('410 Gone on re-watch: relist; bookmarks advance the resume version', async () => {
  process.env.NODENS_KUBERNETES_RESYNC = '0';
  const { api, server, port, k } = await setup(clone(FIXTURE));
  process.env.NODENS_KUBERNETES_RESYNC = '1s';
  try {
    await waitFor('watches open', async () => k.c.reflectorStates().every((s) => s.watching));
    api.upsert({ kind: 'Namespace', metadata: { name: 'bump' } });
    await new Promise((r) => setTimeout(r, 500)); // a bookmark or two
    const svcState = k.c.reflectorStates().find((s) => s.name === 'services')!;
    assert.equal(svcState.lastRv, String(api.resourceVersion), 'bookmark carried the current resourceVersion');
    const lists = svcState.relists;
    // Close every watch and forget the history: the re-watch gets ERROR 410 and must relist.
    api.closeWatches();
    api.upsert({ kind: 'Service', metadata: { name: 'after410', namespace: 'prod' }, spec: { clusterIP: '10.96.9.9', clusterIPs: ['10.96.9.9'], ports: [{ port: 80, protocol: 'TCP' }] } });
    api.compact(); // the history no longer holds what came after the client's version
    await waitFor('after410', async () => (await ask(port, 'after410.prod.svc.cluster.local.', T.A)).rcode === 0, 10000);
    const watchesFromBookmark = api.requests.filter((r) => r.url.startsWith('/api/v1/services?') && r.url.includes('watch=true') && r.url.includes(`resourceVersion=${svcState.lastRv}`));
    assert.ok(watchesFromBookmark.length >= 1, JSON.stringify(api.requests.slice(-12)));
    assert.ok(k.c.reflectorStates().find((s) => s.name === 'services')!.relists > lists);
  } finally {
    await server.stop();
    await api.stop();
  }
});

test('unsynced start: SERVFAIL (with SOA) for would-be NXDOMAIN, not ready; synced later', async () => {
  const api = new K8sApiServer(clone(FIXTURE), { bookmarkMs: 200 });
  await api.start(0);
  api.pause(true); // the API server accepts connections but answers nothing
  const kc = path.join(dir, 'kc-paused');
  writeFileSync(kc, kubeconfigFor(`http://127.0.0.1:${api.port}`));
  const t0 = Date.now();
  const server = await startInProcess(`
cluster.local:0 {
    kubernetes {
        kubeconfig ${kc}
        startup_timeout 1s
    }
}`);
  const k = server.runtime.instance.blockConfigs()[0].handlers.find((h) => h.name === 'kubernetes') as Kubernetes;
  try {
    assert.ok(Date.now() - t0 >= 900, 'waited for the startup timeout');
    assert.ok(logLines.some((l) => l.includes('[WARNING] plugin/kubernetes: starting server with unsynced Kubernetes API')));
    assert.equal(k.ready(), false);
    const r = await ask(server.port, 'api.prod.svc.cluster.local.', T.A);
    assert.equal(r.rcode, 2);
    assert.match(r.authority[0], /SOA/);
    assert.equal((await ask(server.port, 'dns-version.cluster.local.', T.TXT)).answers.length, 1);
    assert.equal((await ask(server.port, 'cluster.local.', T.SOA)).rcode, 0);
    api.pause(false);
    await waitFor('synced', async () => k.ready());
    assert.equal((await ask(server.port, 'api.prod.svc.cluster.local.', T.A)).rcode, 0);
    assert.equal((await ask(server.port, 'nope.prod.svc.cluster.local.', T.A)).rcode, 3);
  } finally {
    await server.stop();
    await api.stop();
  }
});

test('NS at the apex names the service whose endpoint is this server, with ClusterIP glue', async () => {
  const ips = interfaceIPs().filter((ip) => !ip.includes(':'));
  if (ips.length === 0) return; // no non-loopback IPv4 address on this host
  const state = clone(FIXTURE);
  state.endpointslices = state.endpointslices!.filter((s) => s.metadata.name !== 'kube-dns-x1');
  state.endpointslices.push(slice('kube-system', 'kube-dns-x1', 'kube-dns', [{ ip: ips[0] }]));
  const { api, server, port } = await setup(state);
  try {
    const r = await ask(port, 'cluster.local.', T.NS);
    assert.deepEqual(r.answers, ['cluster.local.\t5\tIN\tNS\tkube-dns.kube-system.svc.cluster.local.']);
    assert.deepEqual(r.extra, ['kube-dns.kube-system.svc.cluster.local.\t5\tIN\tA\t10.96.0.10']);
    assert.deepEqual((await ask(port, 'ns.dns.cluster.local.', T.A)).answers, ['ns.dns.cluster.local.\t5\tIN\tA\t10.96.0.10']);
  } finally {
    await server.stop();
    await api.stop();
  }
});

test('metrics: CoreDNS names for the API client', async () => {
  const text = await registry.metrics();
  assert.match(text, /coredns_kubernetes_rest_client_requests_total\{code="200",method="GET",host="127\.0\.0\.1:\d+"\} \d+/);
  assert.match(text, /coredns_kubernetes_rest_client_request_duration_seconds_bucket\{le="0\.005",verb="GET",host=/);
  assert.match(text, /# TYPE coredns_kubernetes_dns_programming_duration_seconds histogram/);
});

test('setup errors use CoreDNS texts', async () => {
  const cases: [string, RegExp][] = [
    ['pods foo', /wrong value for pods: foo, {2}must be one of: disabled, verified, insecure/],
    ['ttl 4000', /ttl must be in range \[0, 3600\]: 4000/],
    ['ignore foo', /unable to parse ignore value: 'foo'/],
    ['labels a=b c=d', /unable to parse label selector value: 'a=b c=d'/],
    ['foo', /unknown property 'foo'/],
    ['kubeconfig /nonexistent/kc', /stat \/nonexistent\/kc: no such file or directory/],
    ['namespaces a\nnamespace_labels x=y', /namespaces and namespace_labels cannot both be set/],
    ['multicluster other.local', /is not authoritative for the multicluster zone other\.local\./],
  ];
  for (const [body, re] of cases) {
    await assert.rejects(startInProcess(`cluster.local:0 {\n kubernetes {\n${body}\n}\n}`), re);
  }
  await assert.rejects(startInProcess('cluster.local:0 {\n kubernetes\n}'), /unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined/);
});
