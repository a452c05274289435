// The kubeconfig tokenFile as client-go reads it (the end-to-end side, against a real kube-apiserver, is in
// test/e2e/kubernetes-tokenfile.test.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadKubeConfig, tokenFileOf, TokenFileSource, TOKEN_FILE_REREAD_MS } from './client.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'nodens-tokenfile-'));

test('a token file is read trimmed, kept for 50 s, then read again', () => {
  const f = path.join(dir, 'tok-a');
  writeFileSync(f, 'first\n');
  let now = 1_000_000;
  const s = new TokenFileSource(f, 'fallback', () => now);
  assert.equal(s.token(), 'first');
  writeFileSync(f, 'second\n');
  now += TOKEN_FILE_REREAD_MS - 1;
  assert.equal(s.token(), 'first');
  now += 1;
  assert.equal(s.token(), 'second');
});

test('a re-read that fails or finds an empty file keeps the last good token; none ever read: the fallback', () => {
  const f = path.join(dir, 'tok-b');
  let now = 5_000_000;
  const s = new TokenFileSource(f, 'from-kubeconfig', () => now);
  assert.equal(s.token(), 'from-kubeconfig');
  writeFileSync(f, 'good');
  now += TOKEN_FILE_REREAD_MS;
  assert.equal(s.token(), 'good');
  writeFileSync(f, ' \n');
  now += TOKEN_FILE_REREAD_MS;
  assert.equal(s.token(), 'good');
  rmSync(f);
  now += TOKEN_FILE_REREAD_MS;
  assert.equal(s.token(), 'good');
});

function kubeconfig(user: string): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: u
  user: ${user}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`;
}

test('loadKubeConfig: tokenFile relative to the kubeconfig, missing file, no tokenFile', async () => {
  const kdir = mkdtempSync(path.join(dir, 'kc-'));
  const kc = path.join(kdir, 'config');
  writeFileSync(path.join(kdir, 'sa-token'), 'abc\n');
  writeFileSync(kc, kubeconfig('{tokenFile: sa-token}'));
  const src = tokenFileOf(await loadKubeConfig({ kubeconfig: { path: kc } }));
  assert.equal(src?.path, path.join(kdir, 'sa-token'));
  assert.equal(src.token(), 'abc');

  writeFileSync(kc, kubeconfig('{tokenFile: /nonexistent/token}'));
  await assert.rejects(loadKubeConfig({ kubeconfig: { path: kc } }), { message: 'open /nonexistent/token: no such file or directory' });

  // With a token beside it, client-go does not read the file at load: an absent file is no error then.
  writeFileSync(kc, kubeconfig('{token: t0, tokenFile: /nonexistent/token}'));
  const withToken = tokenFileOf(await loadKubeConfig({ kubeconfig: { path: kc } }));
  assert.equal(withToken?.token(), 't0');

  writeFileSync(kc, kubeconfig('{token: t1}'));
  assert.equal(tokenFileOf(await loadKubeConfig({ kubeconfig: { path: kc } })), undefined);
});
