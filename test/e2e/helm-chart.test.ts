// deploy/helm/nodens: `helm template` (helm v3 built from Go modules by scripts/helm-reference.sh) with the default
// values and with deploy/helm/nodens/ci/coredns-overrides-values.yaml renders; every rendered manifest passes
// `kubectl apply --dry-run=server` against a real kube-apiserver; the rendered Corefile (and zone files) start
// nodens, which answers from that API server through an in-cluster service account.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { encodeQuery, parseQueriesFile } from '../conformance/lib/query.ts';
import { REPO, startServer, waitReady } from '../conformance/lib/servers.ts';
import { queryUdp } from '../conformance/lib/client.ts';
import { parseReply } from '../conformance/lib/render.ts';
import { startKubeApiServer, type KubeApiServer } from '../helpers/kube-apiserver.ts';

const CHART = path.join(REPO, 'deploy/helm/nodens');
const HELM = path.join(execFileSync(path.join(REPO, 'scripts/helm-reference.sh'), { encoding: 'utf8' }).trim(), 'helm');
const tmp = mkdtempSync(path.join(tmpdir(), 'nodens-helm-'));
let api: KubeApiServer | undefined;
after(async () => { await api?.stop(); });

function render(valuesFile?: string): string {
  return execFileSync(HELM, ['template', 'nodens', CHART, '--namespace', 'kube-system', ...(valuesFile === undefined ? [] : ['-f', valuesFile])], { encoding: 'utf8' });
}

interface Doc { kind: string; metadata: { name: string }; data?: Record<string, string>; spec?: Record<string, unknown> }

async function docsOf(a: KubeApiServer, text: string): Promise<Doc[]> {
  // kubectl turns the rendered YAML into JSON (no YAML parser in the test).
  const out = await a.kubectl(['create', '--dry-run=client', '-o', 'json', '-f', '-'], { input: text });
  // One JSON object per manifest, each starting at the beginning of a line.
  return out.stdout.split(/\n(?=\{)/).map((t) => JSON.parse(t) as Doc);
}

async function check(label: string, valuesFile: string | undefined, expectKinds: string[]): Promise<void> {
  api ??= await startKubeApiServer();
  const a = api;
  const text = render(valuesFile);
  const docs = await docsOf(a, text);
  assert.deepEqual(docs.map((d) => d.kind).sort(), [...expectKinds].sort(), `${label}: rendered kinds`);
  // Server-side dry-run of every manifest: schema, defaults, admission (priority classes, PDB, RBAC).
  const dry = await a.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: text });
  for (const d of docs) assert.match(dry.stdout, new RegExp(`${d.metadata.name}.*(created|configured) \\(server dry run\\)`), `${label}: ${d.kind} ${d.metadata.name}\n${dry.stdout}`);

  // The rendered Corefile starts nodens. Its ports are the pod's; on this shared machine the DNS port is the
  // harness's and health/ready/metrics go to free loopback ports (the rewrite touches nothing else).
  const cm = docs.find((d) => d.kind === 'ConfigMap');
  assert.ok(cm?.data?.Corefile !== undefined);
  const dir = mkdtempSync(path.join(tmp, `${label}-`));
  const etc = path.join(dir, 'etc-coredns');
  mkdirSync(etc);
  const corefile = cm.data.Corefile.replace(/:53 \{/g, ' {').replace(/\bhealth \{/, 'health 127.0.0.1:0 {')
    .replace(/^(\s+)ready$/m, '$1ready 127.0.0.1:0').replace(/prometheus 0\.0\.0\.0:9153/, 'prometheus 127.0.0.1:0')
    .replaceAll('/etc/coredns/', `${etc}/`);
  for (const [k, v] of Object.entries(cm.data)) if (k !== 'Corefile') writeFileSync(path.join(etc, k), v);
  writeFileSync(path.join(etc, 'Corefile'), corefile);
  // The in-cluster service account the Deployment's pod would have (its token, CA, namespace).
  await a.kubectl(['create', 'serviceaccount', `sa-${label}`, '-n', 'kube-system']);
  const token = (await a.kubectl(['create', 'token', `sa-${label}`, '-n', 'kube-system'])).stdout.trim();
  const sa = path.join(dir, 'sa');
  mkdirSync(sa);
  writeFileSync(path.join(sa, 'token'), token);
  writeFileSync(path.join(sa, 'namespace'), 'kube-system');
  execFileSync('cp', [a.caFile, path.join(sa, 'ca.crt')]);
  const mountSa = ['unshare', '--mount', '--propagation', 'private', 'sh', '-c',
    `mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount && cp ${sa}/* /run/secrets/kubernetes.io/serviceaccount/ && exec "$@"`, 'sh'];
  const s = await startServer({ name: 'nodens', command: path.join(REPO, 'bin/nodens'), conf: path.join(etc, 'Corefile'), cwd: dir, prefix: mountSa,
    env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: new URL(a.url).port } });
  try {
    await waitReady(s, 'kubernetes.default.svc.cluster.local. A', 60_000);
    const ask = async (line: string) => {
      const q = parseQueriesFile(line)[0];
      const r = parseReply(await queryUdp('127.0.0.1', s.port, encodeQuery(q, 7), 2000), 7, undefined);
      return JSON.stringify(r);
    };
    const t0 = Date.now();
    let ans = await ask('kubernetes.default.svc.cluster.local. A');
    while (!ans.includes('10.96.0.1') && Date.now() - t0 < 20_000) {
      await new Promise((res) => setTimeout(res, 250));
      ans = await ask('kubernetes.default.svc.cluster.local. A');
    }
    assert.match(ans, /10\.96\.0\.1/, s.output());
    if (label === 'overrides') assert.match(await ask('www.corp.example. A'), /192\.0\.2\.80/, s.output());
  } finally {
    await s.stop();
  }
}

test('helm template with the default values: renders, passes server-side dry-run, its Corefile runs in nodens', { timeout: 240_000 }, async () => {
  await check('defaults', undefined, ['ConfigMap', 'ClusterRole', 'ClusterRoleBinding', 'Service', 'Deployment']);
});

test('helm template with the coredns chart\'s common overrides: renders, passes server-side dry-run, runs', { timeout: 240_000 }, async () => {
  await check('overrides', path.join(CHART, 'ci/coredns-overrides-values.yaml'),
    ['ConfigMap', 'ClusterRole', 'ClusterRoleBinding', 'Service', 'Service', 'Deployment', 'ServiceAccount', 'PodDisruptionBudget']);
  const docs = await docsOf(api!, render(path.join(CHART, 'ci/coredns-overrides-values.yaml')));
  const svc = docs.find((d) => d.kind === 'Service' && d.metadata.name === 'kube-dns');
  assert.equal(svc?.spec?.clusterIP, '10.96.0.10');
  const dep = docs.find((d) => d.kind === 'Deployment') as unknown as { spec: { replicas: number; template: { spec: { serviceAccountName: string; priorityClassName: string } } } };
  assert.equal(dep.spec.replicas, 2);
  assert.equal(dep.spec.template.spec.serviceAccountName, 'coredns');
  assert.equal(dep.spec.template.spec.priorityClassName, 'system-cluster-critical');
});

test('autoscaler.enabled is refused with a message (this chart has no cluster-proportional-autoscaler)', () => {
  assert.throws(() => execFileSync(HELM, ['template', 'nodens', CHART, '--set', 'autoscaler.enabled=true'], { encoding: 'utf8', stdio: 'pipe' }), /no cluster-proportional-autoscaler/);
});
