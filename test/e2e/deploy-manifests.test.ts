// The manifests under deploy/ against a real kube-apiserver (scripts/k8s-reference.sh): every one passes
// `kubectl apply --dry-run=server`, and with RBAC on, the coredns service account may list and watch exactly
// what nodens's kubernetes plugin lists and watches (read from the API server's audit log while nodens runs
// with that account's token and answers), and nothing else.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { REPO, startServer, waitReady } from '../conformance/lib/servers.ts';
import { compareQueries } from '../k8s-api/compare.ts';
import { parseQueriesFile } from '../conformance/lib/query.ts';
import { startKubeApiServer, type KubeApiServer } from '../helpers/kube-apiserver.ts';

const DEPLOY = path.join(REPO, 'deploy');
const manifests = readdirSync(DEPLOY).filter((f) => /\.ya?ml$/.test(f)).sort();
const tmp = mkdtempSync(path.join(tmpdir(), 'nodens-deploy-'));
const servers: KubeApiServer[] = [];
after(async () => { for (const s of servers) await s.stop(); });

/** `kind/name` of every object in a multi-document manifest (top-level metadata.name only). */
function objectsOf(text: string): string[] {
  const out: string[] = [];
  for (const doc of text.split(/^---$/m)) {
    const kind = /^kind: (\S+)/m.exec(doc)?.[1];
    const name = /^metadata:\n(?: {2}.*\n)*? {2}name: (\S+)/m.exec(doc)?.[1];
    if (kind !== undefined && name !== undefined) out.push(`${kind.toLowerCase()}/${name}`);
  }
  return out;
}

test('deploy/ holds the two drop-in manifests', () => {
  assert.deepEqual(manifests, ['coredns.yaml', 'nodelocaldns.yaml']);
});

test('every manifest under deploy/ passes kubectl apply --dry-run=server', { timeout: 180_000 }, async () => {
  const api = await startKubeApiServer();
  servers.push(api);
  for (const f of manifests) {
    const file = path.join(DEPLOY, f);
    const objects = objectsOf(readFileSync(file, 'utf8'));
    assert.ok(objects.length >= 5, `${f}: ${objects.join(', ')}`);
    const r = await api.kubectl(['apply', '--dry-run=server', '-f', file], { allowFail: true });
    assert.equal(r.code, 0, `${f}: ${r.stderr}${r.stdout}`);
    assert.equal(r.stderr, '', f);
    for (const o of objects) {
      const [kind, name] = o.split('/');
      assert.match(r.stdout, new RegExp(`^${kind}[.a-z0-9]*/${name.replace(/[.:]/g, '\\$&')} created \\(server dry run\\)$`, 'm'), `${f}: ${o} in\n${r.stdout}`);
    }
  }
  // A placeholder left unfilled would have been accepted as text by the dry run: check there is none
  // (the two node-cache fills in at run time excepted).
  for (const f of manifests) {
    const text = readFileSync(path.join(DEPLOY, f), 'utf8').split('\n').filter((l) => !/^\s*#/.test(l)).join('\n');
    const left = [...text.matchAll(/__PILLAR__[A-Z_]+__/g)].map((m) => m[0]).filter((p) => p !== '__PILLAR__CLUSTER__DNS__' && p !== '__PILLAR__UPSTREAM__SERVERS__');
    assert.deepEqual(left, [], f);
    assert.doesNotMatch(text, /LIMIT_MEMORY|REQUEST_MEMORY|RESOURCES_COMMENT/, f);
  }
});

const SA = 'system:serviceaccount:kube-system:coredns';

/** `kubectl auth can-i VERB RESOURCE --as SA` → true for yes. */
async function can(api: KubeApiServer, verb: string, resource: string, as = SA): Promise<boolean> {
  const r = await api.kubectl(['auth', 'can-i', verb, resource, '--all-namespaces', `--as=${as}`], { allowFail: true });
  return r.stdout.trim() === 'yes';
}

test('RBAC: the coredns service account may list and watch exactly what the plugin reads, and nodens syncs with its token', { timeout: 240_000 }, async () => {
  // With the WatchList feature off, nodens's streaming list is refused and it LISTs, then watches:
  // both verbs it can use show up in the audit log.
  const api = await startKubeApiServer({ rbac: true, audit: true, extraArgs: ['--feature-gates=WatchList=false'] });
  servers.push(api);
  await api.kubectl(['apply', '-f', path.join(DEPLOY, 'coredns.yaml')]);
  // A little cluster to answer from.
  await api.kubectl(['create', 'namespace', 'prod']);
  await api.kubectl(['create', 'service', 'clusterip', 'api', '-n', 'prod', '--tcp=80:8080', '--clusterip=10.96.5.5']);

  const token = (await api.kubectl(['create', 'token', 'coredns', '-n', 'kube-system'])).stdout.trim();
  const kc = api.kubeconfigFor(token, 'coredns');
  const dir = mkdtempSync(path.join(tmp, 'rbac-'));
  const conf = path.join(dir, 'Corefile');
  // Everything the plugin can be asked to read without multicluster: endpoints and verified pods.
  writeFileSync(conf, `cluster.local in-addr.arpa {\n    kubernetes {\n        kubeconfig ${kc}\n        pods verified\n    }\n}\n`);
  const nodens = await startServer({ name: 'nodens', command: path.join(REPO, 'bin/nodens'), conf, cwd: dir });
  try {
    await waitReady(nodens, 'dns-version.cluster.local. TXT', 60_000);
    const q = parseQueriesFile('api.prod.svc.cluster.local. A');
    const self = { ref: nodens, sub: nodens };
    let r = await compareQueries(self, q);
    const t0 = Date.now();
    while (!(r.reference.get(q[0].line) ?? []).join('\n').includes('10.96.5.5') && Date.now() - t0 < 15_000) {
      await new Promise((res) => setTimeout(res, 250));
      r = await compareQueries(self, q);
    }
    assert.match((r.reference.get(q[0].line) ?? []).join('\n'), /\tA\t10\.96\.5\.5/, nodens.output());
    assert.doesNotMatch(nodens.output(), /forbidden|Failed to watch/);

    // What nodens asked for, by resource and verb (from the audit log), all allowed.
    const asked = new Set<string>();
    for (const e of api.auditEvents()) {
      if (e.user.username !== SA || e.stage !== 'ResponseComplete' && e.stage !== 'ResponseStarted') continue;
      const m = /^\/(?:api\/v1|apis\/([^/]+)\/v1)\/([a-z]+)(?:\?|$)/.exec(e.requestURI);
      assert.ok(m !== null, e.requestURI);
      asked.add(`${e.verb} ${m[2]}${m[1] === undefined ? '' : `.${m[1]}`}`);
      const code = e.responseStatus?.code ?? 0;
      // Allowed, every one; the streaming list is refused as invalid (not forbidden) with WatchList off.
      assert.ok(code < 400 || (code === 422 && e.requestURI.includes('sendInitialEvents=true')), `${e.requestURI}: ${code}`);
    }
    const expected = ['list', 'watch'].flatMap((v) => ['services', 'pods', 'namespaces', 'endpointslices.discovery.k8s.io'].map((res) => `${v} ${res}`)).sort();
    assert.deepEqual([...asked].sort(), expected);

    // The role allows exactly that: each asked verb/resource yes, anything else no.
    for (const a of expected) {
      const [verb, res] = a.split(' ');
      assert.equal(await can(api, verb, res), true, a);
    }
    const denied = [
      'get services', 'create services', 'delete pods', 'update endpointslices.discovery.k8s.io', 'patch namespaces',
      'list secrets', 'get secrets', 'list configmaps', 'list endpoints', 'watch endpoints', 'list nodes',
      'list serviceimports.multicluster.x-k8s.io', 'create pods/exec', 'list deployments.apps',
    ];
    for (const d of denied) {
      const [verb, res] = d.split(' ');
      assert.equal(await can(api, verb, res), false, d);
    }
    // node-cache never talks to the API server: its service account gets nothing.
    await api.kubectl(['apply', '-f', path.join(DEPLOY, 'nodelocaldns.yaml')]);
    for (const a of expected) {
      const [verb, res] = a.split(' ');
      assert.equal(await can(api, verb, res, 'system:serviceaccount:kube-system:node-local-dns'), false, `node-local-dns: ${a}`);
    }
  } finally {
    await nodens.stop();
  }
});
