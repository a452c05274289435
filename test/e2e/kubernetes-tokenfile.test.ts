// A kubeconfig user with `tokenFile:` against a real kube-apiserver (static token file, anonymous requests
// refused): CoreDNS (client-go) and nodens read the token from the file, relative to the kubeconfig, with its
// trailing newline trimmed, and read the file again a minute later (client-go's cached file token source: a
// rotated token is picked up within 50 to 60 s; a 401 does not make either read it sooner).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseQueriesFile } from '../conformance/lib/query.ts';
import { REPO, referenceBinary, startServer, waitReady, type Running } from '../conformance/lib/servers.ts';
import { compareQueries } from '../k8s-api/compare.ts';
import { startKubeApiServer, type AuditEvent, type KubeApiServer } from '../helpers/kube-apiserver.ts';

const CLUSTER = fileURLToPath(new URL('../k8s-api/fixtures/real-cluster.yaml', import.meta.url));
const tmp = mkdtempSync(path.join(tmpdir(), 'nodens-tokenfile-e2e-'));
const TOKENS = { 'coredns-ref': 'ref-token-0123456789abcdef', nodens: 'nodens-token-0123456789abcdef' };
const COREFILE = 'cluster.local {\n    kubernetes {\n        kubeconfig {$NODENS_K8S_KUBECONFIG}\n    }\n}\n';
const QUERIES = parseQueriesFile('api.prod.svc.cluster.local. A\nweb.prod.svc.cluster.local. A\nnope.prod.svc.cluster.local. A\n');

let api: KubeApiServer | undefined;
after(async () => { await api?.stop(); });

async function cluster(): Promise<KubeApiServer> {
  if (api !== undefined) return api;
  api = await startKubeApiServer({ tokens: TOKENS, audit: true, extraArgs: ['--anonymous-auth=false'] });
  await api.kubectl(['apply', '-f', CLUSTER]);
  return api;
}

/** A folder with a kubeconfig whose user has `tokenFile: token` (and `token:` when given) and the token file. */
function side(a: KubeApiServer, name: string, fileToken: string, inlineToken?: string): { kubeconfig: string; tokenFile: string } {
  const dir = mkdtempSync(path.join(tmp, `${name}-`));
  const tokenFile = path.join(dir, 'token');
  writeFileSync(tokenFile, `${fileToken}\n`);
  const kubeconfig = path.join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, `apiVersion: v1
kind: Config
clusters:
- name: real
  cluster: {server: "${a.url}", certificate-authority: "${a.caFile}"}
users:
- name: ${name}
  user:
    tokenFile: token${inlineToken === undefined ? '' : `\n    token: ${inlineToken}`}
contexts:
- name: x
  context: {cluster: real, user: ${name}}
current-context: x
`);
  return { kubeconfig, tokenFile };
}

async function startSides(ref: string, sub: string): Promise<{ ref: Running; sub: Running; stop: () => Promise<void> }> {
  const dir = mkdtempSync(path.join(tmp, 'dns-'));
  const conf = path.join(dir, 'Corefile');
  writeFileSync(conf, COREFILE);
  const [r, s] = await Promise.all([
    startServer({ name: 'coredns', command: referenceBinary(), conf, cwd: dir, env: { NODENS_K8S_KUBECONFIG: ref } }),
    startServer({ name: 'nodens', command: path.join(REPO, 'bin/nodens'), conf, cwd: dir, env: { NODENS_K8S_KUBECONFIG: sub } }),
  ]);
  return { ref: r, sub: s, stop: async () => { await Promise.all([r.stop(), s.stop()]); } };
}

const answer = (m: Map<string, string[]>, q: string) => (m.get(q) ?? []).join('\n');

/** Compares until both answer alike and api.prod comes from the cluster (bounded). */
async function synced(p: { ref: Running; sub: Running }, ms: number) {
  const t0 = Date.now();
  let r = await compareQueries(p, QUERIES);
  while ((r.failed.length > 0 || !answer(r.reference, 'api.prod.svc.cluster.local. A').includes('10.96.5.5')) && Date.now() - t0 < ms) {
    await new Promise((res) => setTimeout(res, 250));
    r = await compareQueries(p, QUERIES);
  }
  return r;
}

/** One user's requests in the audit log (a watch is in the log from its ResponseStarted stage on). */
function requestsBy(a: KubeApiServer, user: string): { code: number; at: number }[] {
  const seen = new Set<string>();
  const out: { code: number; at: number }[] = [];
  for (const e of a.auditEvents() as (AuditEvent & { auditID: string; requestReceivedTimestamp: string })[]) {
    if (e.user.username !== user || seen.has(e.auditID)) continue;
    seen.add(e.auditID);
    out.push({ code: e.responseStatus?.code ?? 0, at: Date.parse(e.requestReceivedTimestamp) });
  }
  return out;
}

test('a tokenFile-only kubeconfig user: the token is read from the file (relative path, newline trimmed)', { timeout: 180_000 }, async () => {
  const a = await cluster();
  const ref = side(a, 'ref1', TOKENS['coredns-ref']);
  const sub = side(a, 'sub1', TOKENS.nodens);
  const p = await startSides(ref.kubeconfig, sub.kubeconfig);
  try {
    await Promise.all([waitReady(p.ref, undefined, 60_000), waitReady(p.sub, undefined, 60_000)]);
    const r = await synced(p, 20_000);
    assert.match(answer(r.reference, 'api.prod.svc.cluster.local. A'), /10\.96\.5\.5/, p.ref.output());
    assert.deepEqual(r.failed.map((f) => `${f.query}\n${f.diff}`), []);
    // The API server saw nodens as the file's user, every request accepted.
    const mine = requestsBy(a, 'nodens');
    assert.ok(mine.length >= 3, `nodens made ${mine.length} authenticated requests`);
    assert.deepEqual(mine.filter((e) => e.code >= 400), []);
  } finally {
    await p.stop();
  }
});

test('the token file is read again within a minute: a refused token replaced in the file, both sync (a kubeconfig token loses to the file)', { timeout: 240_000 }, async () => {
  const a = await cluster();
  // The inline token is valid (the other side's user) but the file, once readable, wins: as client-go.
  const ref = side(a, 'ref2', 'not-yet-valid-ref', TOKENS.nodens);
  const sub = side(a, 'sub2', 'not-yet-valid-sub', TOKENS['coredns-ref']);
  const authenticated = () => requestsBy(a, 'coredns-ref').length + requestsBy(a, 'nodens').length;
  const before = authenticated();
  const p = await startSides(ref.kubeconfig, sub.kubeconfig);
  const started = Date.now();
  try {
    // Refused (401 on every list): neither sends the valid kubeconfig token while the file has one.
    await new Promise((res) => setTimeout(res, 3000));
    assert.equal(authenticated(), before, `a side sent the kubeconfig's token instead of the file's:\nCoreDNS:\n${p.ref.output()}\nnodens:\n${p.sub.output()}`);
    // The token "rotates": the file now holds a valid one, which the next retry reads after its 401.
    writeFileSync(ref.tokenFile, `${TOKENS['coredns-ref']}\n`);
    writeFileSync(sub.tokenFile, `${TOKENS.nodens}\n`);
    await Promise.all([waitReady(p.ref, undefined, 60_000), waitReady(p.sub, undefined, 60_000)]);
    const r = await synced(p, 100_000);
    assert.match(answer(r.reference, 'api.prod.svc.cluster.local. A'), /10\.96\.5\.5/, p.ref.output());
    assert.deepEqual(r.failed.map((f) => `${f.query}\n${f.diff}`), [], p.sub.output());
    // Not before the cached token's 50 s were up.
    const first = requestsBy(a, 'nodens').find((e) => e.at > started);
    assert.ok(first !== undefined);
    assert.ok(first.at - started >= 45_000, `nodens read the new token after ${first.at - started} ms`);
    console.log(`nodens sent the rotated token ${((first.at - started) / 1000).toFixed(1)} s after start`);
  } finally {
    await p.stop();
  }
});
