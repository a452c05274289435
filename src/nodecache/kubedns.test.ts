// The kube-dns ConfigMap directory: scanning as a mounted ConfigMap looks on disk, versions, parsing and validation.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, symlinkSync, rmSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfigDir, configFromData, validateNodeLocalCache, ConfigDirSync, splitHostPort, emptyKubeDNSConfig } from './kubedns.ts';

/** A directory laid out as kubelet mounts a ConfigMap: `..data` → `..<ts>/`, and one link per key. */
function configMapDir(files: Record<string, string>): { dir: string; update(files: Record<string, string>): void } {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-kubedns-'));
  let n = 0;
  const update = (f: Record<string, string>): void => {
    const ts = `..2026_11_23_${++n}`;
    mkdirSync(join(dir, ts));
    for (const [k, v] of Object.entries(f)) writeFileSync(join(dir, ts, k), v);
    symlinkSync(ts, join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    for (const k of Object.keys(f)) { try { symlinkSync(join('..data', k), join(dir, k)); } catch { /* exists */ } }
  };
  update(files);
  return { dir, update };
}

test('a mounted ConfigMap: keys read through the links, hidden entries and directories skipped, version changes with content', () => {
  const cm = configMapDir({ stubDomains: '{"acme.local": ["1.2.3.4"]}', upstreamNameservers: '["8.8.8.8"]' });
  try {
    const a = loadConfigDir(cm.dir);
    assert.deepEqual([...a.data.keys()], ['stubDomains', 'upstreamNameservers']);
    assert.match(a.version, /^[0-9a-f]{64}$/);
    assert.equal(loadConfigDir(cm.dir).version, a.version);
    cm.update({ stubDomains: '{"acme.local": ["1.2.3.5"]}', upstreamNameservers: '["8.8.8.8"]' });
    assert.notEqual(loadConfigDir(cm.dir).version, a.version);
  } finally { rmSync(cm.dir, { recursive: true, force: true }); }
});

test('an empty directory has version ""; a missing one fails with lstat\'s message; a file is not a directory', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-kubedns-'));
  try {
    assert.deepEqual(loadConfigDir(dir), { version: '', data: new Map() });
    assert.throws(() => loadConfigDir(join(dir, 'nope')), { message: `lstat ${join(dir, 'nope')}: no such file or directory` });
    writeFileSync(join(dir, 'f'), 'x');
    assert.throws(() => loadConfigDir(join(dir, 'f')), { message: `config path "${join(dir, 'f')}" is not a directory` });
  } finally { rmSync(dir, { recursive: true, force: true }); }
});

test('parsing and validation (kube-dns rules, then forward\'s)', () => {
  const ok = configFromData(new Map([['stubDomains', '{"acme.local": ["1.2.3.4", "5.6.7.8:5353"], "b.example": ["[fd00::1]:53"]}'], ['upstreamNameservers', '["8.8.8.8", "1.1.1.1:53"]']]));
  assert.deepEqual([...ok.stubDomains.keys()], ['acme.local', 'b.example']);
  assert.deepEqual(ok.upstreamNameservers, ['8.8.8.8', '1.1.1.1:53']);
  validateNodeLocalCache(ok);
  assert.throws(() => configFromData(new Map([['stubDomains', '{not json']])), /^Error: Invalid configuration for stubDomains, ignoring update: /);
  assert.throws(() => configFromData(new Map([['stubDomains', '{"Acme.Local": ["1.2.3.4"]}']])), /invalid domain name: "Acme.Local"/);
  assert.throws(() => configFromData(new Map([['stubDomains', '{"acme.local": ["1.2.3.4:99999"]}']])), /invalid nameserver: "1.2.3.4:99999"/);
  assert.throws(() => configFromData(new Map([['upstreamNameservers', '["1.1.1.1","2.2.2.2","3.3.3.3","4.4.4.4"]']])), /upstreamNameserver cannot have more than three entries/);
  assert.throws(() => configFromData(new Map([['upstreamNameservers', '["dns.google"]']])), /missing port in address/);
  assert.throws(() => configFromData(new Map([['upstreamNameservers', '["1.1.1.1:0"]']])), /bad port number: "0"/);
  // A host name is valid kube-dns data for a stub domain, but forward cannot use it.
  const named = configFromData(new Map([['stubDomains', '{"acme.local": ["ns.acme.local"]}']]));
  assert.throws(() => validateNodeLocalCache(named), /^Error: invalid nameservers \[ns\.acme\.local\] for the stub domain acme\.local: not an IP address or file "ns\.acme\.local"$/);
  const grpc = { ...emptyKubeDNSConfig(), upstreamNameservers: ['grpc://1.2.3.4'] };
  assert.throws(() => validateNodeLocalCache(grpc), /unsupported transport grpc of nameserver grpc:\/\/1\.2\.3\.4/);
  validateNodeLocalCache({ ...emptyKubeDNSConfig(), upstreamNameservers: ['tls://1.2.3.4'] });
});

test('splitHostPort as Go\'s net.SplitHostPort', () => {
  assert.deepEqual(splitHostPort('1.2.3.4:53'), { host: '1.2.3.4', port: '53' });
  assert.deepEqual(splitHostPort('[fd00::1]:53'), { host: 'fd00::1', port: '53' });
  assert.equal(splitHostPort('fd00::1'), undefined);
  assert.equal(splitHostPort('1.2.3.4'), undefined);
  assert.deepEqual(splitHostPort(':9353'), { host: '', port: '9353' });
});

test('ConfigDirSync: reports a change once, skips invalid versions, picks up the fix', () => {
  const cm = configMapDir({ upstreamNameservers: '["8.8.8.8"]' });
  const errors: string[] = [];
  try {
    const s = new ConfigDirSync(cm.dir, (m) => { errors.push(m); });
    assert.deepEqual(s.once().upstreamNameservers, ['8.8.8.8']);
    assert.equal(s.poll(), undefined);
    cm.update({ upstreamNameservers: '["8.8.8.8", "x"]' });
    assert.equal(s.poll(), undefined);
    assert.match(errors[0]!, /Invalid configuration: /);
    assert.equal(s.poll(), undefined);
    assert.equal(errors.length, 1);
    cm.update({ upstreamNameservers: '["9.9.9.9"]' });
    assert.deepEqual(s.poll()?.upstreamNameservers, ['9.9.9.9']);
  } finally { rmSync(cm.dir, { recursive: true, force: true }); }
});
