// LiteKubeConfig against @kubernetes/client-node's own KubeConfig: the same kubeconfig files must give the same
// current cluster and user and the same TLS options and headers on a request, and the users LiteKubeConfig cannot
// serve (exec plugins, the azure/gcp/oidc providers, a proxy) must be sent to the full class.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { LiteKubeConfig } from './kubeconfig.ts';
import { loadKubeConfig } from './client.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'nodens-kubeconfig-'));
writeFileSync(path.join(dir, 'ca.crt'), 'CA PEM\n');
writeFileSync(path.join(dir, 'client.crt'), 'CERT PEM\n');
writeFileSync(path.join(dir, 'client.key'), 'KEY PEM\n');
writeFileSync(path.join(dir, 'sa-token'), 'sa-token-value');
const b64 = (s: string) => Buffer.from(s).toString('base64');

function write(name: string, cluster: string, user: string, extra = ''): string {
  const f = path.join(dir, name);
  writeFileSync(f, `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: ${cluster}
- name: other
  cluster: {server: "https://10.0.0.9:6443"}
users:
- name: u
  user: ${user}
- name: v
  user: {token: other-token}
contexts:
- name: x
  context: {cluster: c, user: u}
- name: y
  context: {cluster: other, user: v}
current-context: x
${extra}`);
  return f;
}

const CASES: [string, string, string][] = [
  ['token and relative CA file', '{server: "https://127.0.0.1:6443", certificate-authority: ca.crt}', '{token: abc}'],
  ['client certificate files and TLS server name', '{server: "https://127.0.0.1:6443", certificate-authority: ca.crt, tls-server-name: api.internal}', '{client-certificate: client.crt, client-key: client.key}'],
  ['inline data', `{server: "https://[::1]:6443", certificate-authority-data: ${b64('CA DATA')}}`, `{client-certificate-data: ${b64('CERT DATA')}, client-key-data: ${b64('KEY DATA')}}`],
  ['insecure, basic auth, impersonation', '{server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}', '{username: admin, password: secret, as: someone}'],
  ['a token-file auth provider', '{server: "https://127.0.0.1:6443"}', `{auth-provider: {name: tokenFile, config: {tokenFile: ${path.join(dir, 'sa-token')}}}}`],
  ['no credentials', '{server: "https://127.0.0.1:6443"}', '{}'],
];

async function optionsOf(kc: { applyToHTTPSOptions(o: https.RequestOptions): Promise<void> }): Promise<Record<string, unknown>> {
  const opts: https.RequestOptions = { headers: { Accept: 'application/json' } };
  await kc.applyToHTTPSOptions(opts);
  const { agent: _agent, ...rest } = opts; // client-node makes an agent per request; the plugin brings its own
  return rest as Record<string, unknown>;
}

for (const [name, cluster, user] of CASES) {
  test(`LiteKubeConfig = client-node's KubeConfig: ${name}`, async () => {
    const f = write(`${name.replace(/\W+/g, '-')}.yaml`, cluster, user);
    const full = new KubeConfig();
    full.loadFromFile(f);
    const lite = new LiteKubeConfig();
    lite.loadFromFile(f);
    assert.equal(lite.needsFullClient(), false);
    assert.deepEqual(lite.getCurrentCluster(), full.getCurrentCluster());
    assert.deepEqual(lite.getCurrentUser(), full.getCurrentUser());
    assert.deepEqual(await optionsOf(lite), await optionsOf(full));
    // another context, as `kubeconfig PATH CONTEXT` picks it
    full.setCurrentContext('y');
    lite.setCurrentContext('y');
    assert.deepEqual(lite.getContextObject('y'), full.getContextObject('y'));
    assert.deepEqual(await optionsOf(lite), await optionsOf(full));
  });
}

test('exec plugins, the azure/gcp/oidc providers and proxies need the full client-node KubeConfig', async () => {
  const exec = write('exec.yaml', '{server: "https://127.0.0.1:6443"}', '{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true}}');
  const oidc = write('oidc.yaml', '{server: "https://127.0.0.1:6443"}', '{auth-provider: {name: oidc, config: {client-id: x}}}');
  const proxy = write('proxy.yaml', '{server: "https://127.0.0.1:6443", proxy-url: "http://127.0.0.1:3128"}', '{token: abc}');
  const plain = write('plain.yaml', '{server: "https://127.0.0.1:6443"}', '{token: abc}');
  for (const f of [exec, oidc, proxy]) {
    const lite = new LiteKubeConfig();
    lite.loadFromFile(f);
    assert.equal(lite.needsFullClient(), true, f);
    assert.ok((await loadKubeConfig({ kubeconfig: { path: f } })) instanceof KubeConfig, f);
  }
  assert.ok((await loadKubeConfig({ kubeconfig: { path: plain } })) instanceof LiteKubeConfig);
});

test('an invalid kubeconfig fails the same way in both', () => {
  const f = write('bad.yaml', '{certificate-authority: ca.crt}', '{token: abc}');
  const full = new KubeConfig();
  const lite = new LiteKubeConfig();
  let fullError = '';
  try { full.loadFromFile(f); } catch (e) { fullError = (e as Error).message; }
  assert.notEqual(fullError, '');
  assert.throws(() => { lite.loadFromFile(f); }, { message: fullError });
});
