// dynupdate end to end with real clients: BIND's nsupdate sends RFC 2136 updates to bin/nodens (TSIG-signed
// over UDP and TCP, unsigned, with prerequisites that fail), dig reads the zone back (queries and AXFR), a UDP
// socket stands as the secondary that receives the NOTIFY after each change, and the database keeps the
// changes across a Corefile reload (SIGUSR1) and a restart. A missing nsupdate or dig fails the test (CI
// installs bind9-dnsutils and dnsutils).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { dig, status } from '../helpers/dig.ts';
import { freePort, startProcess } from '../helpers/server.ts';
import { decodeMessage } from '../../src/wire/decode.ts';
import { encodeMessage } from '../../src/wire/encode.ts';
import { replyTo } from '../../src/wire/message.ts';
import { Opcode } from '../../src/wire/constants.ts';

const SECRET = 'i9M+00yrECfVZG2qCjr4mPpaGim/Bq+IWMiNrLjUO4Y=';
const KEY = `hmac-sha256:update-key.example.org.:${SECRET}`;
const SEED = `$ORIGIN example.org.
@    60 IN SOA ns.example.org. hostmaster.example.org. 1 3600 600 86400 60
@    60 IN NS ns.example.org.
ns   60 IN A 192.0.2.53
`;

/** nsupdate with `script` on stdin; its output (stdout and stderr) and exit code. */
function nsupdate(args: string[], script: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    const p = execFile('nsupdate', args, { timeout: 15000 }, (err, stdout, stderr) => {
      if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') {
        reject(new Error('nsupdate is not installed: apt-get install -y bind9-dnsutils'));
        return;
      }
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr });
    });
    p.stdin!.end(script);
  });
}

function script(port: number, ...lines: string[]): string {
  return [`server 127.0.0.1 ${port}`, 'zone example.org.', ...lines, 'send', ''].join('\n');
}

async function answers(port: number, name: string, type: string): Promise<string[]> {
  return (await dig(port, '+short', name, type)).trim().split('\n').filter((l) => l !== '').sort();
}

test('nsupdate and dig against bin/nodens: signed updates, refusals, failed prerequisites, NOTIFY, AXFR, persistence', { timeout: 90000 }, async (t) => {
  // The secondary: answers each NOTIFY and remembers it.
  const notifies: string[] = [];
  const secondary = dgram.createSocket('udp4');
  secondary.on('message', (b, rinfo) => {
    const m = decodeMessage(b);
    if (m.opcode !== Opcode.NOTIFY) return;
    notifies.push(m.question[0]?.name ?? '');
    const r = replyTo(m);
    r.aa = true;
    secondary.send(encodeMessage(r), rinfo.port, rinfo.address);
  });
  const notifyPort = await freePort();
  await new Promise<void>((r) => { secondary.bind(notifyPort, '127.0.0.1', r); });
  t.after(() => { secondary.close(); });

  const corefile = (extra: string) => `example.org:{PORT} {
  tsig {
    secret update-key.example.org. ${SECRET}
    require_opcode UPDATE
  }
  transfer {
    to * 127.0.0.1:${notifyPort}
  }
  dynupdate {
    file example.org.zone
    database example.org.db
    allow update-key.example.org. host.example.org. A AAAA
    allow update-key.example.org. _acme-challenge.example.org. TXT
  }
  ${extra}
}
`;
  let p = await startProcess(corefile(''), { files: { 'example.org.zone': SEED } });
  const dir = dirname(p.proc.spawnargs[p.proc.spawnargs.indexOf('-conf') + 1]!);
  try {
    const port = p.port;
    // A signed update over UDP with a prerequisite that holds.
    let r = await nsupdate(['-y', KEY], script(port, 'prereq nxrrset host.example.org. A', 'update add host.example.org. 60 A 192.0.2.10'));
    assert.equal(r.code, 0, r.out);
    assert.deepEqual(await answers(port, 'host.example.org', 'A'), ['192.0.2.10']);
    // Over TCP (-v), two records in one update.
    r = await nsupdate(['-v', '-y', KEY], script(port, 'update add host.example.org. 60 AAAA 2001:db8::10', 'update add host.example.org. 60 AAAA 2001:db8::11'));
    assert.equal(r.code, 0, r.out);
    assert.deepEqual(await answers(port, 'host.example.org', 'AAAA'), ['2001:db8::10', '2001:db8::11']);
    // The same prerequisite again fails: the RRset exists.
    r = await nsupdate(['-y', KEY], script(port, 'prereq nxrrset host.example.org. A', 'update add host.example.org. 60 A 192.0.2.11'));
    assert.match(r.out, /update failed: YXRRSET/);
    r = await nsupdate(['-y', KEY], script(port, 'prereq yxdomain nothere.example.org.', 'update add host.example.org. 60 A 192.0.2.11'));
    assert.match(r.out, /update failed: NXDOMAIN/);
    // Unsigned: tsig's require_opcode UPDATE refuses it; signed but for a name no rule allows: REFUSED too.
    r = await nsupdate([], script(port, 'update add host.example.org. 60 A 192.0.2.12'));
    assert.match(r.out, /update failed: REFUSED/);
    r = await nsupdate(['-y', KEY], script(port, 'update add www.example.org. 60 A 192.0.2.12'));
    assert.match(r.out, /update failed: REFUSED/);
    // Outside the zone: the permissions are checked before the zone (no rule names it): REFUSED.
    r = await nsupdate(['-y', KEY], script(port, 'update add host.example.net. 60 A 192.0.2.12'));
    assert.match(r.out, /update failed: REFUSED/);
    // A wrong secret: tsig answers NOTAUTH, nothing changes.
    r = await nsupdate(['-y', `hmac-sha256:update-key.example.org.:${Buffer.from('wrong secret of 32 bytes .......').toString('base64')}`],
      script(port, 'update add host.example.org. 60 A 192.0.2.13'));
    assert.notEqual(r.code, 0, r.out);
    assert.deepEqual(await answers(port, 'host.example.org', 'A'), ['192.0.2.10']);
    // An ACME challenge added and removed.
    r = await nsupdate(['-y', KEY], script(port, 'update add _acme-challenge.example.org. 60 TXT "token-1"'));
    assert.equal(r.code, 0, r.out);
    assert.deepEqual(await answers(port, '_acme-challenge.example.org', 'TXT'), ['"token-1"']);
    r = await nsupdate(['-y', KEY], script(port, 'update delete _acme-challenge.example.org. TXT'));
    assert.equal(r.code, 0, r.out);
    assert.equal(status(await dig(port, '_acme-challenge.example.org', 'TXT')), 'NXDOMAIN');
    // Four changes: serial 1 + 4; the AXFR has the new records.
    assert.deepEqual(await answers(port, 'example.org', 'SOA'), ['ns.example.org. hostmaster.example.org. 5 3600 600 86400 60']);
    const axfr = await dig(port, 'example.org', 'AXFR');
    assert.match(axfr, /host\.example\.org\.\s+60\s+IN\s+A\s+192\.0\.2\.10/);
    assert.match(axfr, /host\.example\.org\.\s+60\s+IN\s+AAAA\s+2001:db8::11/);
    // Each change notified the secondary (bursts may coalesce, never to nothing).
    const deadline = Date.now() + 10000;
    while (notifies.length === 0 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    assert.ok(notifies.length >= 1 && notifies.every((n) => n === 'example.org.'), notifies.join(','));
    // The seed is never written; the database holds the zone.
    assert.equal(readFileSync(join(dir, 'example.org.zone'), 'utf8'), SEED);

    // A reload (SIGUSR1 with a changed Corefile) keeps the data: the new instance opens the same database.
    writeFileSync(join(dir, 'Corefile'), corefile('log').replaceAll('{PORT}', String(port)));
    p.proc.kill('SIGUSR1');
    await p.waitFor(/Reloading complete/);
    assert.deepEqual(await answers(port, 'host.example.org', 'A'), ['192.0.2.10']);
    r = await nsupdate(['-y', KEY], script(port, 'update delete host.example.org. A 192.0.2.10', 'update add host.example.org. 60 A 192.0.2.20'));
    assert.equal(r.code, 0, r.out);
  } finally {
    await p.stop();
  }
  // A restart: the database, not the seed, is the zone (the Corefile now names the first run's files).
  const conf = corefile('').replace('file example.org.zone', `file ${join(dir, 'example.org.zone')}`)
    .replace('database example.org.db', `database ${join(dir, 'example.org.db')}`);
  p = await startProcess(conf);
  try {
    assert.deepEqual(await answers(p.port, 'host.example.org', 'A'), ['192.0.2.20']);
    assert.deepEqual(await answers(p.port, 'example.org', 'SOA'), ['ns.example.org. hostmaster.example.org. 6 3600 600 86400 60']);
  } finally {
    await p.stop();
  }
});

test('-workers N refuses dynupdate: each worker would hold its own zone', { timeout: 30000 }, async () => {
  const p = await startProcess(`example.org:{PORT} {
  dynupdate {
    file example.org.zone
    allow update-key.example.org. * A
  }
}
`, { files: { 'example.org.zone': SEED }, args: ['-workers', '2'], wait: false });
  try {
    assert.equal(await p.exited, 1);
    assert.ok(p.stdout.concat(p.stderr).includes(
      'plugin/dynupdate: dynupdate cannot run under -workers: each worker would hold its own copy of the zone'),
    p.stdout.concat(p.stderr).join('\n'));
  } finally {
    await p.stop();
  }
});
