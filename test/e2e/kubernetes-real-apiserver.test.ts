// The kubernetes plugin against a real kube-apiserver (k8s.io/kubernetes v1.34 with etcd, built by
// scripts/k8s-reference.sh): the reference CoreDNS and nodens run one Corefile against the same cluster,
// made with kubectl, and must give the same answers, before and after the cluster changes. Then what they
// ask the API server (its audit log), an in-cluster service-account token ending in a newline, and what
// they log while the API server is unreachable or refuses them.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseQueriesFile } from '../conformance/lib/query.ts';
import { REPO, referenceBinary, startServer, waitReady, freePort, type Running } from '../conformance/lib/servers.ts';
import { compareQueries, startDnsPair } from '../k8s-api/compare.ts';
import { startKubeApiServer, type KubeApiServer, type AuditEvent } from '../helpers/kube-apiserver.ts';

const CLUSTER = fileURLToPath(new URL('../k8s-api/fixtures/real-cluster.yaml', import.meta.url));
const tmp = mkdtempSync(path.join(tmpdir(), 'nodens-real-k8s-'));
const servers: KubeApiServer[] = [];
after(async () => { for (const s of servers) await s.stop(); });

async function apiServer(opts: Parameters<typeof startKubeApiServer>[0] = {}): Promise<KubeApiServer> {
  const s = await startKubeApiServer(opts);
  servers.push(s);
  return s;
}

async function patchStatus(api: KubeApiServer, kind: string, ns: string, name: string, status: unknown): Promise<void> {
  await api.kubectl(['patch', kind, name, '-n', ns, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status })]);
}

/** The fixture cluster, plus what a kubelet and a cloud controller would have written into status. */
async function loadCluster(api: KubeApiServer): Promise<void> {
  await api.kubectl(['apply', '-f', CLUSTER]);
  await patchStatus(api, 'pod', 'testns', 'pod1', { phase: 'Running', podIP: '10.244.0.5', podIPs: [{ ip: '10.244.0.5' }] });
  await patchStatus(api, 'pod', 'prod', 'client', { phase: 'Running', podIP: '10.244.1.50', podIPs: [{ ip: '10.244.1.50' }] });
  await patchStatus(api, 'service', 'prod', 'lb', { loadBalancer: { ingress: [{ ip: '203.0.113.9' }] } });
}

const COREFILE = `cluster.local in-addr.arpa ip6.arpa example.org {
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig {$NODENS_K8S_KUBECONFIG}
        pods verified
        fallthrough in-addr.arpa ip6.arpa
    }
    k8s_external example.org
}
`;

const PLAIN_COREFILE = 'cluster.local {\n    kubernetes {\n        kubeconfig {$NODENS_K8S_KUBECONFIG}\n    }\n}\n';

const QUERIES = parseQueriesFile(`
api.prod.svc.cluster.local. A
api.prod.svc.cluster.local. AAAA
api.prod.svc.cluster.local. SRV
_http._tcp.api.prod.svc.cluster.local. SRV
_dns._udp.api.prod.svc.cluster.local. SRV
_metrics._tcp.api.prod.svc.cluster.local. SRV
nope.prod.svc.cluster.local. A
api.nope.svc.cluster.local. A
web.prod.svc.cluster.local. A
web.prod.svc.cluster.local. SRV
_http._tcp.web.prod.svc.cluster.local. SRV
web-0.web.prod.svc.cluster.local. A
web-2.web.prod.svc.cluster.local. A
10-244-2-9.web.prod.svc.cluster.local. A
svc1.testns.svc.cluster.local. A
svc1.testns.svc.cluster.local. TXT
ep1a.svc1.testns.svc.cluster.local. A
svc1.other.svc.cluster.local. A
dual.testns.svc.cluster.local. A
ext.testns.svc.cluster.local. A
ext.testns.svc.cluster.local. CNAME
ext-out.testns.svc.cluster.local. CNAME
lb.prod.svc.cluster.local. A
lb.prod.svc.cluster.local. SRV
kubernetes.default.svc.cluster.local. A
10-244-0-5.testns.pod.cluster.local. A
10-244-1-50.prod.pod.cluster.local. A
10-244-9-9.testns.pod.cluster.local. A
added.testns.svc.cluster.local. A
prod.svc.cluster.local. A
svc.cluster.local. A
cluster.local. SOA
cluster.local. NS
dns-version.cluster.local. TXT
5.5.96.10.in-addr.arpa. PTR
100.0.96.10.in-addr.arpa. PTR
7.1.244.10.in-addr.arpa. PTR
20.1.244.10.in-addr.arpa. PTR
9.9.9.10.in-addr.arpa. PTR
lb.prod.example.org. A
_https._tcp.lb.prod.example.org. SRV
api.prod.example.org. A
example.org. SOA
10.2.0.192.in-addr.arpa. PTR
`);

/** Compares until both agree and `done` holds for the reference's answers (the watch takes a moment). */
async function converge(p: { ref: Running; sub: Running }, done: (ref: Map<string, string[]>) => boolean, ms = 15_000) {
  const t0 = Date.now();
  let r = await compareQueries(p, QUERIES);
  while ((r.failed.length > 0 || !done(r.reference)) && Date.now() - t0 < ms) {
    await new Promise((res) => setTimeout(res, 250));
    r = await compareQueries(p, QUERIES);
  }
  return r;
}

const answer = (ref: Map<string, string[]>, q: string) => (ref.get(q) ?? []).join('\n');

test('CoreDNS and nodens answer alike from a real kube-apiserver, before and after changes', { timeout: 240_000 }, async () => {
  const api = await apiServer();
  await loadCluster(api);
  const pair = await startDnsPair(COREFILE, api.kubeconfig, { probe: 'dns-version.cluster.local. TXT', dir: mkdtempSync(path.join(tmp, 'pair-')) });
  try {
    const before = await converge(pair, (ref) => answer(ref, '10-244-1-50.prod.pod.cluster.local. A').includes('10.244.1.50'));
    assert.deepEqual(before.failed.map((f) => `${f.query}\n${f.diff}`), []);
    assert.equal(before.passed, QUERIES.length);
    // The reference really answered from the cluster (not a pair of identical failures).
    const ref = before.reference;
    assert.match(answer(ref, 'api.prod.svc.cluster.local. A'), /\tA\t10\.96\.5\.5/);
    assert.match(answer(ref, 'web.prod.svc.cluster.local. A'), /10\.244\.2\.9/);
    assert.doesNotMatch(answer(ref, 'web.prod.svc.cluster.local. A'), /10\.244\.3\.3/);
    assert.match(answer(ref, 'kubernetes.default.svc.cluster.local. A'), /10\.96\.0\.1\b/);
    assert.match(answer(ref, 'lb.prod.example.org. A'), /192\.0\.2\.10/);
    assert.match(answer(ref, 'ext.testns.svc.cluster.local. A'), /CNAME/);
    assert.match(answer(ref, 'added.testns.svc.cluster.local. A'), /NXDOMAIN/);

    // Changes through the watch: a service deleted and another created, an endpoint turning ready,
    // a pod deleted, a new pod, a load balancer address.
    await api.kubectl(['delete', 'service', 'svc1', '-n', 'testns']);
    await api.kubectl(['create', 'service', 'clusterip', 'added', '-n', 'testns', '--tcp=80:8080', '--clusterip=10.96.0.88']);
    await api.kubectl(['patch', 'endpointslice', 'web-7xk2p', '-n', 'prod', '--type=json', '-p',
      JSON.stringify([{ op: 'replace', path: '/endpoints/2/conditions/ready', value: true }])]);
    await api.kubectl(['delete', 'pod', 'pod1', '-n', 'testns', '--wait=false']);
    await api.kubectl(['run', 'pod8', '-n', 'testns', '--image=registry.invalid/none', '--restart=Never']);
    await patchStatus(api, 'pod', 'testns', 'pod8', { phase: 'Running', podIP: '10.244.9.9', podIPs: [{ ip: '10.244.9.9' }] });
    await patchStatus(api, 'service', 'prod', 'lb', { loadBalancer: { ingress: [{ ip: '203.0.113.9' }, { ip: '203.0.113.10' }] } });
    const afterChange = await converge(pair, (r) => answer(r, '10-244-9-9.testns.pod.cluster.local. A').includes('10.244.9.9')
      && answer(r, 'lb.prod.example.org. A').includes('203.0.113.10') && answer(r, 'svc1.testns.svc.cluster.local. A').includes('NXDOMAIN'));
    assert.deepEqual(afterChange.failed.map((f) => `${f.query}\n${f.diff}`), []);
    const r2 = afterChange.reference;
    assert.match(answer(r2, 'added.testns.svc.cluster.local. A'), /10\.96\.0\.88/);
    assert.match(answer(r2, 'svc1.testns.svc.cluster.local. A'), /NXDOMAIN/);
    assert.match(answer(r2, 'web.prod.svc.cluster.local. A'), /10\.244\.3\.3/);
    assert.match(answer(r2, '10-244-0-5.testns.pod.cluster.local. A'), /NXDOMAIN/);
  } finally {
    await pair.stop();
  }
});

/** Each list/watch request of one user for the plugin's resources: path and its query. */
function requestsOf(events: AuditEvent[], user: string): { path: string; query: Record<string, string>; code: number }[] {
  const out: { path: string; query: Record<string, string>; code: number }[] = [];
  for (const e of events) {
    if (e.user.username !== user || (e.verb !== 'list' && e.verb !== 'watch')) continue;
    if (e.stage !== 'ResponseComplete' && !(e.verb === 'watch' && e.stage === 'ResponseStarted')) continue;
    const u = new URL(e.requestURI, 'https://x');
    const query: Record<string, string> = {};
    // The watch timeouts are random (5 to 10 minutes): their presence is compared, not their value.
    for (const [k, v] of u.searchParams) query[k] = k === 'timeoutSeconds' || k === 'timeout' ? '<random>' : v;
    out.push({ path: u.pathname, query, code: e.responseStatus?.code ?? 0 });
  }
  return out;
}

/** The first request for each resource, then the ones up to the first successful sync (as path → queries). */
function initialSync(reqs: { path: string; query: Record<string, string>; code: number }[]): Record<string, string[]> {
  const m: Record<string, string[]> = {};
  for (const r of reqs) {
    const list = (m[r.path] ??= []);
    const text = new URLSearchParams(Object.entries(r.query).sort()).toString();
    if (list.length < 2 && !list.includes(text)) list.push(text);
  }
  return m;
}

async function syncPairWithUsers(api: KubeApiServer, tokens: Record<string, string>) {
  const dir = mkdtempSync(path.join(tmp, 'audit-'));
  const conf = path.join(dir, 'Corefile');
  writeFileSync(conf, COREFILE);
  const ref = await startServer({ name: 'coredns', command: referenceBinary(), conf, cwd: dir, env: { NODENS_K8S_KUBECONFIG: api.kubeconfigFor(tokens['coredns-ref'], 'coredns-ref') } });
  const sub = await startServer({ name: 'nodens', command: path.join(REPO, 'bin/nodens'), conf, cwd: dir, env: { NODENS_K8S_KUBECONFIG: api.kubeconfigFor(tokens.nodens, 'nodens') } });
  return { ref, sub, stop: async () => { await Promise.all([ref.stop(), sub.stop()]); } };
}

for (const watchList of [true, false]) {
  test(`the initial sync asks the API server what CoreDNS's client-go asks (WatchList ${watchList ? 'on' : 'off: LIST at resourceVersion 0'})`, { timeout: 180_000 }, async () => {
    const tokens = { 'coredns-ref': 'ref-token-0123456789', nodens: 'nodens-token-0123456789' };
    const api = await apiServer({ audit: true, tokens, extraArgs: watchList ? [] : ['--feature-gates=WatchList=false'] });
    await loadCluster(api);
    const p = await syncPairWithUsers(api, tokens);
    try {
      await Promise.all([waitReady(p.ref, 'dns-version.cluster.local. TXT', 60_000), waitReady(p.sub, 'dns-version.cluster.local. TXT', 60_000)]);
      const r = await converge(p, (ref) => answer(ref, 'api.prod.svc.cluster.local. A').includes('10.96.5.5'));
      assert.deepEqual(r.failed.map((f) => `${f.query}\n${f.diff}`), []);
      const events = api.auditEvents();
      const ref = initialSync(requestsOf(events, 'coredns-ref'));
      const sub = initialSync(requestsOf(events, 'nodens'));
      assert.deepEqual(Object.keys(ref).sort(), ['/api/v1/namespaces', '/api/v1/pods', '/api/v1/services', '/apis/discovery.k8s.io/v1/endpointslices']);
      assert.deepEqual(sub, ref);
      const services = ref['/api/v1/services'].join(' | ');
      if (watchList) {
        assert.match(services, /sendInitialEvents=true/);
      } else {
        // The refused streaming list, then the LIST the watch cache serves (resourceVersion=0).
        assert.match(services, /resourceVersion=0/);
      }
      // No quorum LIST: nodens never listed without a resourceVersion.
      const quorum = requestsOf(events, 'nodens').filter((q) => q.query.watch === undefined && (q.query.resourceVersion ?? '') === '');
      assert.deepEqual(quorum, []);
    } finally {
      await p.stop();
    }
  });
}

test('an in-cluster service-account token file ending in a newline works (as client-go trims it)', { timeout: 180_000 }, async () => {
  const api = await apiServer();
  await loadCluster(api);
  await api.kubectl(['create', 'serviceaccount', 'coredns', '-n', 'kube-system']);
  const token = (await api.kubectl(['create', 'token', 'coredns', '-n', 'kube-system'])).stdout.trim();
  assert.ok(token.length > 100);
  // The files a kubelet mounts, with the newline an editor or `echo` leaves at the end of the token.
  const sa = path.join(tmp, 'sa');
  mkdirSync(sa, { recursive: true });
  writeFileSync(path.join(sa, 'token'), `${token}\n`);
  copyFileSync(api.caFile, path.join(sa, 'ca.crt'));
  writeFileSync(path.join(sa, 'namespace'), 'kube-system');
  const dir = mkdtempSync(path.join(tmp, 'incluster-'));
  const conf = path.join(dir, 'Corefile');
  writeFileSync(conf, 'cluster.local {\n    kubernetes\n}\n');
  // The fixed in-cluster path exists only inside a private mount namespace: a tmpfs over /run holds it.
  const mountSa = ['unshare', '--mount', '--propagation', 'private', 'sh', '-c',
    `mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount && cp ${sa}/* /run/secrets/kubernetes.io/serviceaccount/ && exec "$@"`, 'sh'];
  const port = new URL(api.url).port;
  const env = { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: port };
  const [ref, sub] = await Promise.all([
    startServer({ name: 'coredns', command: referenceBinary(), conf, cwd: dir, env, prefix: mountSa }),
    startServer({ name: 'nodens', command: path.join(REPO, 'bin/nodens'), conf, cwd: dir, env, prefix: mountSa }),
  ]);
  const p = { ref, sub };
  try {
    await Promise.all([waitReady(ref, 'dns-version.cluster.local. TXT', 60_000), waitReady(sub, 'dns-version.cluster.local. TXT', 60_000)]);
    const q = parseQueriesFile('api.prod.svc.cluster.local. A\nsvc1.testns.svc.cluster.local. A\nnope.prod.svc.cluster.local. A');
    const t0 = Date.now();
    let r = await compareQueries(p, q);
    while ((r.failed.length > 0 || !answer(r.reference, 'api.prod.svc.cluster.local. A').includes('10.96.5.5')) && Date.now() - t0 < 15_000) {
      await new Promise((res) => setTimeout(res, 250));
      r = await compareQueries(p, q);
    }
    assert.match(answer(r.reference, 'api.prod.svc.cluster.local. A'), /10\.96\.5\.5/, ref.output());
    assert.deepEqual(r.failed.map((f) => `${f.query}\n${f.diff}`), [], sub.output());
    assert.doesNotMatch(sub.output(), /Failed to watch|Invalid character/);
  } finally {
    await Promise.all([ref.stop(), sub.stop()]);
  }
});

/** The plugin's log lines (`[LEVEL] plugin/kubernetes: ...`). */
function pluginLines(out: string): string[] {
  return out.split('\n').filter((l) => l.includes('plugin/kubernetes:'));
}

test('logs while the API server is unreachable, and after it went away: as CoreDNS, no line per retry', { timeout: 180_000 }, async () => {
  // Down from the start: a port nothing listens on.
  const closed = await freePort();
  const kc = path.join(tmp, 'kubeconfig-closed');
  writeFileSync(kc, `apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "https://127.0.0.1:${closed}", insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: abc}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n`);
  const down = await startDnsPair(PLAIN_COREFILE, kc, { dir: mkdtempSync(path.join(tmp, 'down-')) });
  try {
    // The startup wait (5 s) and well past it: several retries of every reflector.
    await new Promise((r) => setTimeout(r, 9000));
    const ref = pluginLines(down.ref.output());
    const sub = pluginLines(down.sub.output());
    assert.deepEqual([...new Set(sub)].sort(), [...new Set(ref)].sort(), `CoreDNS:\n${down.ref.output()}\nnodens:\n${down.sub.output()}`);
    assert.ok(ref.some((l) => l.includes('waiting for Kubernetes API before starting server')));
    assert.ok(!sub.some((l) => /Failed|WARNING\] plugin\/kubernetes: (?!starting server)/.test(l)), sub.join('\n'));
  } finally {
    await down.stop();
  }

  // Synced, then the API server goes away for good: both keep serving and print nothing more.
  const api = await apiServer();
  await loadCluster(api);
  const pair = await startDnsPair(COREFILE, api.kubeconfig, { probe: 'dns-version.cluster.local. TXT', dir: mkdtempSync(path.join(tmp, 'gone-')) });
  try {
    await converge(pair, (ref) => answer(ref, 'api.prod.svc.cluster.local. A').includes('10.96.5.5'));
    const [refBefore, subBefore] = [pluginLines(pair.ref.output()).length, pluginLines(pair.sub.output()).length];
    await api.kill();
    await new Promise((r) => setTimeout(r, 8000));
    const refNew = pluginLines(pair.ref.output()).slice(refBefore);
    const subNew = pluginLines(pair.sub.output()).slice(subBefore);
    assert.deepEqual(subNew, refNew, `CoreDNS:\n${pair.ref.output()}\nnodens:\n${pair.sub.output()}`);
    const stale = await compareQueries(pair, parseQueriesFile('api.prod.svc.cluster.local. A\nnope.prod.svc.cluster.local. A'));
    assert.deepEqual(stale.failed.map((f) => f.diff), []);
    assert.match(answer(stale.reference, 'api.prod.svc.cluster.local. A'), /10\.96\.5\.5/);
  } finally {
    await pair.stop();
  }
});

test('a token the API server refuses: the same `Failed to watch` errors as CoreDNS', { timeout: 180_000 }, async () => {
  const api = await apiServer();
  const kc = api.kubeconfigFor('not-a-valid-token', 'nobody');
  const p = await startDnsPair(PLAIN_COREFILE, kc, { dir: mkdtempSync(path.join(tmp, 'unauth-')) });
  try {
    await new Promise((r) => setTimeout(r, 7000));
    const ref = new Set(pluginLines(p.ref.output()).filter((l) => l.includes('Failed to watch')));
    const sub = new Set(pluginLines(p.sub.output()).filter((l) => l.includes('Failed to watch')));
    assert.ok(ref.size >= 3, p.ref.output());
    assert.deepEqual([...sub].sort(), [...ref].sort(), `CoreDNS:\n${p.ref.output()}\nnodens:\n${p.sub.output()}`);
  } finally {
    await p.stop();
  }
});
