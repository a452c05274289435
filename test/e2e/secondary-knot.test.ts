// secondary end to end against a real primary: Knot DNS (knotd) serves a zone on a loopback port;
// nodens and the reference CoreDNS 1.15.0 both run `secondary` from it. Both transfer the zone at
// startup and must answer the same; then the zone changes on the primary (new serial, knotc
// zone-reload), knot NOTIFYs both secondaries, both transfer again and must answer the new data alike.
// knotd missing is a loud failure (CI installs the `knot` package).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, nodensBinary, referenceBinary, spawnArgv, startServer, type Running } from '../conformance/lib/servers.ts';
import { dig } from '../helpers/dig.ts';

const KNOTD = '/usr/sbin/knotd';
const KNOTC = '/usr/sbin/knotc';

function zoneText(serial: number, extra: string): string {
  return `$ORIGIN example.org.
$TTL 300
@ IN SOA ns1.example.org. hostmaster.example.org. ${serial} 3600 600 86400 300
@ IN NS ns1
ns1 IN A 192.0.2.53
www IN A 192.0.2.1
www IN AAAA 2001:db8::1
alias IN CNAME www
*.wild IN TXT "wildcard"
sub IN NS ns.sub
ns.sub IN A 192.0.2.99
mail IN MX 10 mx.example.net.
${extra}`;
}

async function waitFor(r: Running, pattern: RegExp, count: number, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const n = r.output().split('\n').filter((l) => pattern.test(l)).length;
    if (n >= count) return;
    if (r.exited() !== undefined || Date.now() > deadline) {
      throw new Error(`${r.name}: saw ${pattern} ${n} times, wanted ${count}; output:\n${r.output()}`);
    }
    await new Promise((res) => setTimeout(res, 100));
  }
}

const QUERIES: string[][] = [
  ['www.example.org', 'A'], ['www.example.org', 'AAAA'], ['example.org', 'SOA'], ['example.org', 'NS'],
  ['alias.example.org', 'A'], ['x.wild.example.org', 'TXT'], ['nope.example.org', 'A'], ['host.sub.example.org', 'A'],
  ['mail.example.org', 'MX'], ['new.example.org', 'A'], ['example.org', 'AXFR'],
];

/** dig's reply without what differs on every run (id, timing, server line). */
async function answer(port: number, name: string, type: string): Promise<string> {
  const out = await dig(port, name, type, '+norec', '+nocookie', '+nostats', ...(type === 'AXFR' ? ['+tcp'] : []));
  return out.split('\n').filter((l) => !l.startsWith('; <<>> DiG') && !l.startsWith(';; global options'))
    .join('\n').replace(/id: \d+/, 'id: X');
}

async function compare(a: Running, b: Running): Promise<Map<string, string>> {
  const got = new Map<string, string>();
  for (const [name, type] of QUERIES) {
    const x = await answer(a.port, name!, type!);
    const y = await answer(b.port, name!, type!);
    assert.equal(x, y, `${name} ${type}`);
    got.set(`${name} ${type}`, x);
  }
  return got;
}

test('secondary: transfer from knot at startup and again on NOTIFY, answers equal to CoreDNS 1.15.0', { timeout: 90_000 }, async () => {
  try {
    execFileSync(KNOTD, ['--version']);
  } catch {
    throw new Error(`${KNOTD} is not installed: apt-get install -y knot`);
  }
  const subject = nodensBinary();
  assert.ok(subject !== undefined, 'bin/nodens is missing');
  const reference = referenceBinary();
  const dir = mkdtempSync(join(tmpdir(), 'nodens-secondary-'));
  const [knotPort, nodensPort, corednsPort] = [await freePort(), await freePort(), await freePort()];
  writeFileSync(join(dir, 'example.org.zone'), zoneText(2024010101, ''));
  const conf = join(dir, 'knot.conf');
  writeFileSync(conf, `server:
    rundir: "${dir}"
    listen: 127.0.0.1@${knotPort}
database:
    storage: "${dir}"
control:
    listen: "${dir}/knot.sock"
log:
  - target: stderr
    any: info
remote:
  - id: nodens
    address: 127.0.0.1@${nodensPort}
  - id: coredns
    address: 127.0.0.1@${corednsPort}
acl:
  - id: xfr
    address: 127.0.0.0/8
    action: transfer
template:
  - id: default
    storage: "${dir}"
    file: "%s.zone"
    zonefile-sync: -1
    journal-content: none
zone:
  - domain: example.org
    notify: [nodens, coredns]
    acl: xfr
`);
  const knot = spawnArgv('knotd', [KNOTD, '-c', conf], dir, knotPort);
  const corefile = join(dir, 'Corefile');
  writeFileSync(corefile, `example.org {\n    bind 127.0.0.1\n    secondary {\n        transfer from 127.0.0.1:${knotPort}\n    }\n}\n`);
  let a: Running | undefined;
  let b: Running | undefined;
  try {
    await waitFor(knot, /loaded, serial/, 1, 10_000);
    a = await startServer({ name: 'nodens', command: subject, conf: corefile, cwd: dir, port: nodensPort });
    b = await startServer({ name: 'coredns', command: reference, conf: corefile, cwd: dir, port: corednsPort });
    const transferred = /\[INFO\] plugin\/file: Transferred: example\.org\. from 127\.0\.0\.1:\d+/;
    await waitFor(a, transferred, 1);
    await waitFor(b, transferred, 1);
    const before = await compare(a, b);
    assert.match(before.get('www.example.org A')!, /192\.0\.2\.1/);
    assert.match(before.get('new.example.org A')!, /NXDOMAIN/);

    writeFileSync(join(dir, 'example.org.zone'), zoneText(2024010102, 'new IN A 192.0.2.77\n'));
    execFileSync(KNOTC, ['-c', conf, 'zone-reload', 'example.org']);
    const notified = /\[INFO\] plugin\/file: Notify from 127\.0\.0\.1 for example\.org\.: checking transfer/;
    await waitFor(a, notified, 1);
    await waitFor(b, notified, 1);
    await waitFor(a, transferred, 2);
    await waitFor(b, transferred, 2);
    const after = await compare(a, b);
    assert.match(after.get('new.example.org A')!, /192\.0\.2\.77/);
    assert.match(after.get('example.org SOA')!, /2024010102/);
  } finally {
    await a?.stop();
    await b?.stop();
    await knot.stop();
  }
});

test('secondary catalog: knot generates an RFC 9432 catalog; members appear on both servers alike', { timeout: 90_000 }, async () => {
  const subject = nodensBinary();
  assert.ok(subject !== undefined, 'bin/nodens is missing');
  const reference = referenceBinary();
  const dir = mkdtempSync(join(tmpdir(), 'nodens-catalog-'));
  const [knotPort, nodensPort, corednsPort] = [await freePort(), await freePort(), await freePort()];
  writeFileSync(join(dir, 'example.org.zone'), zoneText(7, ''));
  writeFileSync(join(dir, 'example.net.zone'), zoneText(9, '').replaceAll('example.org.', 'example.net.'));
  const conf = join(dir, 'knot.conf');
  const knotConf = (members: string[]): string => `server:
    rundir: "${dir}"
    listen: 127.0.0.1@${knotPort}
database:
    storage: "${dir}"
control:
    listen: "${dir}/knot.sock"
log:
  - target: stderr
    any: info
remote:
  - id: nodens
    address: 127.0.0.1@${nodensPort}
  - id: coredns
    address: 127.0.0.1@${corednsPort}
acl:
  - id: xfr
    address: 127.0.0.0/8
    action: transfer
template:
  - id: default
    storage: "${dir}"
    file: "%s.zone"
    zonefile-sync: -1
zone:
  - domain: catalog.example
    catalog-role: generate
    notify: [nodens, coredns]
    acl: xfr
${members.map((m) => `  - domain: ${m}\n    catalog-role: member\n    catalog-zone: catalog.example\n    acl: xfr\n`).join('')}`;
  writeFileSync(conf, knotConf(['example.org']));
  const knot = spawnArgv('knotd', [KNOTD, '-c', conf], dir, knotPort);
  const corefile = join(dir, 'Corefile');
  writeFileSync(corefile, `. {\n    bind 127.0.0.1\n    secondary catalog.example {\n        transfer from 127.0.0.1:${knotPort}\n        catalog example.org example.net\n    }\n}\n`);
  let a: Running | undefined;
  let b: Running | undefined;
  const sameAnswers = async (names: string[]): Promise<Map<string, string>> => {
    const got = new Map<string, string>();
    for (const n of names) {
      const x = await answer(a!.port, n, 'A');
      assert.equal(x, await answer(b!.port, n, 'A'), n);
      got.set(n, x);
    }
    return got;
  };
  try {
    await waitFor(knot, /\[catalog\.example\.\] .*loaded, serial/, 1, 10_000);
    a = await startServer({ name: 'nodens', command: subject, conf: corefile, cwd: dir, port: nodensPort });
    b = await startServer({ name: 'coredns', command: reference, conf: corefile, cwd: dir, port: corednsPort });
    const added = (z: string): RegExp => new RegExp(`\\[INFO\\] plugin/secondary: Added catalog member zone ${z.replaceAll('.', '\\.')} from catalog catalog\\.example\\.`);
    const transferred = (z: string): RegExp => new RegExp(`\\[INFO\\] plugin/file: Transferred: ${z.replaceAll('.', '\\.')} from`);
    for (const r of [a, b]) {
      await waitFor(r, added('example.org.'), 1);
      await waitFor(r, transferred('example.org.'), 1);
    }
    let got = await sameAnswers(['www.example.org', 'www.example.net', 'nope.example.org']);
    assert.match(got.get('www.example.org')!, /192\.0\.2\.1/);
    assert.match(got.get('www.example.net')!, /REFUSED/);

    writeFileSync(conf, knotConf(['example.org', 'example.net']));
    execFileSync(KNOTC, ['-c', conf, 'reload']);
    for (const r of [a, b]) {
      await waitFor(r, added('example.net.'), 1);
      await waitFor(r, transferred('example.net.'), 1);
    }
    got = await sameAnswers(['www.example.org', 'www.example.net']);
    assert.match(got.get('www.example.net')!, /192\.0\.2\.1/);
  } finally {
    await a?.stop();
    await b?.stop();
    await knot.stop();
  }
});
