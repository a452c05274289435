// transfer end to end, with real peers as the oracle:
// - dig and kdig pull the same file zone (big enough for several messages) from nodens and from the
//   reference CoreDNS: the same records in the same order, the same number of messages and bytes
//   (so the same envelope boundaries), for AXFR, IXFR with a current and an older serial, and for
//   TSIG-signed transfers, whose every message dig and kdig verify;
// - knotd (Debian's knot) as a secondary pulls the zone from nodens, gets a NOTIFY when the zone file
//   changes (file `reload 1s`) and serves the new serial.
// A missing dig, kdig or knotd fails the test (CI installs dnsutils, knot-dnsutils and knot).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dig, kdig } from '../helpers/dig.ts';
import { BIN } from '../helpers/server.ts';
import { freePort, referenceBinary, spawnArgv, startServer, waitReady, type Running } from '../conformance/lib/servers.ts';

const SECRET = 'NoTCJU+DMqFWywaPyxSijrDEA/eC3nK0xi3AMEZuPVk=';
const KEY = `hmac-sha256:xfr.key.:${SECRET}`;
const SERIAL = 2024010101;

/** A zone of about 160 KB: four AXFR messages. */
function zoneText(serial: number, extra = ''): string {
  const lines = [
    '$ORIGIN example.org.', '$TTL 3600',
    // refresh of a day: knot re-pulls only because of the NOTIFY
    `@ IN SOA ns1.example.org. admin.example.org. ${serial} 86400 3600 1209600 3600`,
    '@ IN NS ns1', '@ IN NS ns2', 'ns1 IN A 192.0.2.1', 'ns2 IN A 192.0.2.2', '@ IN MX 10 mail', 'mail IN A 192.0.2.25',
    'sub IN NS ns.sub', 'ns.sub IN A 192.0.2.53', 'www IN CNAME host1', extra,
  ];
  for (let i = 1; i <= 1200; i++) {
    lines.push(`host${i} IN A 10.${(i >> 8) & 255}.${i & 255}.1`, `host${i} IN TXT "${'t'.repeat(90)} ${i}"`);
  }
  return lines.join('\n') + '\n';
}

const dir = mkdtempSync(join(tmpdir(), 'nodens-transfer-'));
let knotPort = 0;
let nodens: Running;
let coredns: Running;

/**
 * A zone whose closing SOA alone does not fit the first 63000 octets: CoreDNS then ends the transfer
 * with that SOA in a message without AA and logs the transfer as a noop IXFR; so does nodens.
 */
function spillZone(): string {
  const lines = ['$ORIGIN spill.test.', '@ 3600 IN SOA ns a 1 7200 3600 1209600 3600', '@ 3600 IN NS ns', 'ns 3600 IN A 192.0.2.1'];
  for (let i = 0; i < 225; i++) lines.push(`t${String(i).padStart(4, '0')} 3600 IN TXT "${'x'.repeat(250)}"`);
  lines.push(`zzzzz 3600 IN TXT "${'y'.repeat(40)}"`);
  return lines.join('\n') + '\n';
}

function corefile(to: string): string {
  return `spill.test {
  tsig {
    secret xfr.key. ${SECRET}
  }
  file db.spill.test
  transfer {
    to *
  }
}
example.org {
  tsig {
    secret xfr.key. ${SECRET}
  }
  file db.example.org {
    reload 1s
  }
  transfer {
    to ${to}
  }
}
`;
}

before(async () => {
  knotPort = await freePort();
  writeFileSync(join(dir, 'db.example.org'), zoneText(SERIAL));
  mkdirSync(join(dir, 'ref'));
  writeFileSync(join(dir, 'ref', 'db.example.org'), zoneText(SERIAL));
  writeFileSync(join(dir, 'db.spill.test'), spillZone());
  writeFileSync(join(dir, 'ref', 'db.spill.test'), spillZone());
  writeFileSync(join(dir, 'Corefile'), corefile(`* 127.0.0.1:${knotPort}`));
  writeFileSync(join(dir, 'ref', 'Corefile'), corefile('*'));
  nodens = await startServer({ name: 'nodens', command: BIN, conf: join(dir, 'Corefile'), cwd: dir, quiet: false });
  coredns = await startServer({ name: 'coredns', command: referenceBinary(), conf: join(dir, 'ref', 'Corefile'), cwd: join(dir, 'ref'), quiet: false });
  await waitReady(nodens, 'example.org. SOA');
  await waitReady(coredns, 'example.org. SOA');
});

after(async () => {
  await nodens.stop();
  await coredns.stop();
});

/**
 * The records (dig/kdig answer lines) of a dig/kdig AXFR/IXFR output, in order, except that the records
 * of one owner name are sorted: CoreDNS walks a name's types in Go map order, which changes from run to run.
 */
function records(out: string): string[] {
  const lines = out.split('\n').filter((l) => l !== '' && !l.startsWith(';'));
  const res: string[] = [];
  let run: string[] = [];
  let owner = '';
  for (const l of [...lines, '\u0000']) {
    const o = l.split(/\s/)[0]!;
    if (o !== owner && run.length > 0) { res.push(...run.sort()); run = []; }
    owner = o;
    run.push(l);
  }
  return res;
}

test('dig AXFR: the same records, messages and bytes as CoreDNS', async () => {
  const a = await dig(nodens.port, 'example.org', 'AXFR');
  const b = await dig(coredns.port, 'example.org', 'AXFR');
  assert.equal(records(a).length, 2 * 1200 + 11);
  assert.deepEqual(records(a), records(b));
  const size = (s: string) => /;; XFR size: .*/.exec(s)?.[0];
  assert.match(size(a) ?? '', /XFR size: 2411 records \(messages 4, bytes \d+\)/);
  assert.equal(size(a), size(b));
});

test('kdig AXFR and IXFR: as CoreDNS (IXFR: the SOA alone when current, else the whole zone)', async () => {
  for (const args of [['AXFR'], [`IXFR=${SERIAL}`], [`IXFR=${SERIAL - 1}`], ['+noedns', 'AXFR']]) {
    const a = await kdig(nodens.port, 'example.org', ...args);
    const b = await kdig(coredns.port, 'example.org', ...args);
    assert.deepEqual(records(a), records(b), args.join(' '));
    const recv = (s: string) => /;; Received \d+ B \(\d+ messages?, \d+ records?\)/.exec(s)?.[0];
    assert.ok(recv(a) !== undefined, a.slice(0, 400));
    assert.equal(recv(a), recv(b), args.join(' '));
    if (args[0] === `IXFR=${SERIAL}`) assert.equal(records(a).length, 1);
    else assert.equal(records(a).length, 2411);
  }
});

test('TSIG-signed AXFR: every message verified by dig and kdig, as CoreDNS signs', async () => {
  for (const port of [nodens.port, coredns.port]) {
    const d = await dig(port, '-y', KEY, 'example.org', 'AXFR');
    assert.doesNotMatch(d, /Couldn't verify|tsig verify failure|expected a TSIG|TSIG error/);
    assert.match(d, /XFR size: 2411 records \(messages 4,/);
    const k = await kdig(port, '-y', KEY, 'example.org', 'AXFR');
    assert.doesNotMatch(k, /failed|WARNING/);
    assert.match(k, /;; Received \d+ B \(4 messages, 2411 records\)/);
  }
  // a wrong secret: NOTAUTH with BADSIG, unsigned, as CoreDNS (dig and kdig print the same for both)
  const bad = `hmac-sha256:xfr.key.:${Buffer.from('another secret').toString('base64')}`;
  const norm = (s: string) => s.split('\n').filter((l) => !/^;; (Time|From|Query time|SERVER|WHEN|MSG SIZE)|^; <<>>|^;; Received|^$/.test(l)).join('\n').replace(/ 0 300 0 \d+ BADSIG/g, ' 0 300 0 <id> BADSIG');
  const a = await dig(nodens.port, '-y', bad, 'example.org', 'AXFR');
  const b = await dig(coredns.port, '-y', bad, 'example.org', 'AXFR');
  assert.equal(norm(a), norm(b));
  const ka = await kdig(nodens.port, '-y', bad, 'example.org', 'AXFR');
  const kb = await kdig(coredns.port, '-y', bad, 'example.org', 'AXFR');
  assert.equal(norm(ka), norm(kb));
});

test('a closing SOA that spills over alone: the same two messages and the same noop log line as CoreDNS', async () => {
  const a = await kdig(nodens.port, 'spill.test', 'AXFR');
  const b = await kdig(coredns.port, 'spill.test', 'AXFR');
  assert.deepEqual(records(a), records(b));
  assert.match(a, /;; Received 63108 B \(2 messages, 230 records\)/);
  assert.equal(/;; Received .*/.exec(a)?.[0], /;; Received .*/.exec(b)?.[0]);
  const noop = '[INFO] plugin/transfer: Outgoing noop, incremental transfer for up to date zone "spill.test." to 127.0.0.1 for 1 SOA serial';
  assert.ok(nodens.output().includes(noop));
  assert.ok(coredns.output().includes(noop));
  // signed: the lone SOA is signed over the timers only, as what follows the first message (miekg's Out)
  for (const port of [nodens.port, coredns.port]) {
    const k = await kdig(port, '-y', KEY, 'spill.test', 'AXFR');
    assert.doesNotMatch(k, /failed|WARNING/);
    assert.match(k, /;; Received \d+ B \(2 messages, 230 records\)/);
    const d = await dig(port, '-y', KEY, 'spill.test', 'AXFR');
    assert.doesNotMatch(d, /Couldn't verify|tsig verify failure|expected a TSIG|TSIG error/);
    assert.match(d, /XFR size: 230 records \(messages 2,/);
  }
});

function knotd(conf: string): Running {
  return spawnArgv('knotd', ['knotd', '-c', conf], dir, knotPort);
}

async function soaSerial(port: number): Promise<string> {
  const out = await dig(port, 'example.org', 'SOA', '+short');
  return out.trim().split(/\s+/)[2] ?? '';
}

async function until(what: string, fn: () => Promise<boolean>, ms: number, log: () => string): Promise<void> {
  const t0 = Date.now();
  while (!(await fn())) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}:\n${log()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('knotd as a secondary: AXFR from nodens, NOTIFY on a zone change, the new serial served', { timeout: 60_000 }, async () => {
  await new Promise<void>((resolve, reject) => {
    execFile('knotd', ['--version'], (err) => {
      if (err) reject(new Error(`knotd is not installed (apt-get install -y knot): ${err.message}`)); else resolve();
    });
  });
  const kdir = join(dir, 'knot');
  mkdirSync(kdir);
  const conf = join(kdir, 'knot.conf');
  writeFileSync(conf, `server:
    rundir: "${kdir}"
    listen: 127.0.0.1@${knotPort}
database:
    storage: "${kdir}"
log:
  - target: stderr
    any: info
remote:
  - id: primary
    address: 127.0.0.1@${nodens.port}
acl:
  - id: from_primary
    address: 127.0.0.1
    action: notify
template:
  - id: default
    storage: "${kdir}"
    zonefile-load: none
    journal-content: none
zone:
  - domain: example.org
    master: primary
    acl: from_primary
`);
  const knot = knotd(conf);
  try {
    await until('knot to load the zone', async () => (await soaSerial(knotPort)) === String(SERIAL), 20_000, () => knot.output() + nodens.output());
    assert.match(nodens.output(), /\[INFO\] plugin\/transfer: Outgoing transfer of 2411 records of zone "example\.org\." to 127\.0\.0\.1 for 2024010101 SOA serial/);
    const www = await dig(knotPort, 'host7.example.org', 'TXT', '+short');
    assert.match(www, /t{90} 7/);
    // the zone changes: nodens reloads it (reload 1s) and NOTIFYs knot, which pulls the new serial
    writeFileSync(join(dir, 'db.example.org'), zoneText(SERIAL + 1, 'new IN A 192.0.2.99'));
    await until('knot to serve the new serial', async () => (await soaSerial(knotPort)) === String(SERIAL + 1), 20_000, () => knot.output() + nodens.output());
    assert.match(nodens.output(), /Successfully reloaded zone "example\.org\." in "db\.example\.org" with 2024010102 SOA serial/);
    assert.match(knot.output(), /\[example\.org\.\] notify, incoming, remote 127\.0\.0\.1@\d+/);
    assert.match(knot.output(), /IXFR, incoming, remote 127\.0\.0\.1@\d+, receiving AXFR-style IXFR/);
    assert.equal((await dig(knotPort, 'new.example.org', 'A', '+short')).trim(), '192.0.2.99');
    // knot asked with IXFR for its serial: nodens answered with the whole zone
    assert.match(nodens.output(), /Outgoing transfer of 2412 records of zone "example\.org\." to 127\.0\.0\.1 for 2024010102 SOA serial/);
    assert.doesNotMatch(nodens.output(), /Failed sending notifies/);
  } finally {
    await knot.stop();
  }
});
