// doctor's reading of a node's files, with fixture roots: systemd-resolved's main file and drop-ins in
// systemd's precedence, kubelet's KubeletConfiguration (YAML), and the kubelet remedy only where kubelet is
// involved.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { diagnose, resolvedFiles, DOCTOR_SCHEMA_VERSION } from './doctor.ts';

function fixture(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'nodens-doctor-'));
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, p)), { recursive: true });
    writeFileSync(join(root, p), text);
  }
  return root;
}

const locals = new Set(['127.0.0.1', '::1', '10.1.2.3']);

test('resolvedFiles: first main file of etc/run/usr/local/lib/usr/lib; drop-ins by name across directories, higher directory wins, /dev/null and empty files mask', () => {
  const root = fixture({
    'usr/lib/systemd/resolved.conf': '[Resolve]\n',
    'run/systemd/resolved.conf': '[Resolve]\n',
    'usr/lib/systemd/resolved.conf.d/10-vendor.conf': '[Resolve]\nDNS=192.0.2.1\n',
    'etc/systemd/resolved.conf.d/10-vendor.conf': '[Resolve]\nDNS=192.0.2.2\n',
    'usr/lib/systemd/resolved.conf.d/20-masked.conf': '[Resolve]\nDNS=192.0.2.3\n',
    'run/systemd/resolved.conf.d/05-first.conf': '[Resolve]\n',
    'usr/local/lib/systemd/resolved.conf.d/30-emptied.conf': '[Resolve]\nDNS=192.0.2.4\n',
    'etc/systemd/resolved.conf.d/30-emptied.conf': '',
    'etc/systemd/resolved.conf.d/notes.txt': 'not a drop-in',
  });
  symlinkSync('/dev/null', join(root, 'etc/systemd/resolved.conf.d/20-masked.conf'));
  assert.deepEqual(resolvedFiles(root), [
    join(root, 'run/systemd/resolved.conf'),
    join(root, 'run/systemd/resolved.conf.d/05-first.conf'),
    join(root, 'etc/systemd/resolved.conf.d/10-vendor.conf'),
  ]);
  assert.deepEqual(resolvedFiles(fixture({})), []);
});

test('resolved drop-ins apply in order: an empty DNS= resets the list; the stub loop names the drop-in line', async () => {
  const root = fixture({
    'etc/systemd/resolved.conf': '[Resolve]\nDNS=10.9.9.9\n',
    'etc/systemd/resolved.conf.d/50-node-dns.conf': '# node-local\n[Resolve]\nDNS=\nDNS=10.1.2.3\n',
    'usr/lib/systemd/resolved.conf.d/90-other.conf': '[Other]\nDNS=10.8.8.8\n',
    'stub-resolv.conf': 'nameserver 127.0.0.53\n',
  });
  const conf = join(root, 'Corefile');
  writeFileSync(conf, `.:53 {\n    bind 10.1.2.3\n    forward . ${join(root, 'stub-resolv.conf')}\n}\n`);
  const r = await diagnose({ conf, root, locals });
  assert.equal(r.schemaVersion, DOCTOR_SCHEMA_VERSION);
  assert.deepEqual(r.resolvedFiles, [
    join(root, 'etc/systemd/resolved.conf'), join(root, 'etc/systemd/resolved.conf.d/50-node-dns.conf'),
    join(root, 'usr/lib/systemd/resolved.conf.d/90-other.conf'),
  ]);
  assert.equal(r.loops, 1);
  assert.match(r.findings[0]!.message, new RegExp(`systemd-resolved's stub, whose DNS= 10\\.1\\.2\\.3:53 \\(${join(root, 'etc/systemd/resolved.conf.d/50-node-dns.conf').replaceAll('.', '\\.')}:4\\)`));
  // Not kubelet's doing here: no kubelet config under the root, and the file is not kubelet's.
  assert.doesNotMatch(r.findings[0]!.remedy, /kubelet/);
  assert.match(r.findings[0]!.remedy, /DNSStubListener=no/);
});

test('kubelet config (YAML) under the root: resolvConf found with its line, kubelet remedy given', async () => {
  const root = fixture({
    'var/lib/kubelet/config.yaml': [
      'apiVersion: kubelet.config.k8s.io/v1beta1',
      'kind: KubeletConfiguration',
      '# the stub file',
      'clusterDNS:',
      '  - 10.96.0.10',
      'resolvConf: "/run/systemd/resolve/stub-resolv.conf"   # systemd-resolved',
      '',
    ].join('\n'),
    'run/systemd/resolve/stub-resolv.conf': 'nameserver 127.0.0.53\noptions edns0\n',
  });
  const conf = join(root, 'Corefile');
  writeFileSync(conf, '.:53 {\n    loop\n    forward . /etc/resolv.conf\n}\n');
  const r = await diagnose({ conf, root, locals });
  assert.equal(r.kubeletConfig, join(root, 'var/lib/kubelet/config.yaml'));
  assert.equal(r.kubeletResolvConf, '/run/systemd/resolve/stub-resolv.conf');
  const k = r.findings.find((f) => f.message.startsWith("kubelet's resolvConf"));
  assert.ok(k !== undefined, JSON.stringify(r.findings));
  assert.equal(k.severity, 'loop');
  assert.match(k.message, new RegExp(`\\(${join(root, 'var/lib/kubelet/config.yaml').replaceAll('.', '\\.')}:6\\) is /run/systemd/resolve/stub-resolv\\.conf, which lists 127\\.0\\.0\\.53 at line 1`));
  assert.match(k.remedy, /kubelet's resolvConf/);
});

test('kubelet config without resolvConf: kubelet\'s default /etc/resolv.conf; a config that is not YAML is an error', async () => {
  const root = fixture({
    'var/lib/kubelet/config.yaml': 'kind: KubeletConfiguration\n',
    'etc/resolv.conf': 'nameserver 10.1.2.3\n',
  });
  const conf = join(root, 'Corefile');
  writeFileSync(conf, '.:53 {\n    bind 10.1.2.3\n    forward . 192.0.2.53\n}\n');
  const r = await diagnose({ conf, root, locals });
  assert.equal(r.kubeletResolvConf, '/etc/resolv.conf');
  const k = r.findings.find((f) => f.message.startsWith("kubelet's resolvConf"));
  assert.ok(k !== undefined, JSON.stringify(r.findings));
  assert.match(k.message, /unset: the default\) is \/etc\/resolv\.conf, which lists 10\.1\.2\.3 at line 1: that is a node-local cache address this Corefile binds/);

  const bad = fixture({ 'var/lib/kubelet/config.yaml': 'resolvConf: [unclosed\n' });
  await assert.rejects(diagnose({ conf, root: bad, locals }), /unexpected end of the stream|flow collection/);
});
