// auto end to end, side by side with the reference CoreDNS 1.15.0: both servers watch the same
// directory with `reload 1s`; a zone file added, changed (new serial) and removed shows up on both
// alike, with the same log lines.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, nodensBinary, referenceBinary, startServer, type Running } from '../conformance/lib/servers.ts';
import { dig, status } from '../helpers/dig.ts';

const zone = (origin: string, serial: number, addr: string): string =>
  `$TTL 60\n@ SOA ns.${origin}. h.${origin}. ${serial} 7200 3600 1209600 60\n@ NS ns\nns A 192.0.2.53\nwww A ${addr}\n`;

async function waitFor(r: Running, pattern: RegExp, count = 1, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const n = r.output().split('\n').filter((l) => pattern.test(l)).length;
    if (n >= count) return;
    if (r.exited() !== undefined || Date.now() > deadline) throw new Error(`${r.name}: did not see ${pattern}; output:\n${r.output()}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

async function short(r: Running, name: string): Promise<string> {
  return (await dig(r.port, name, 'A', '+short')).trim();
}

test('auto: zones appear, reload and disappear with the files of the directory, as in CoreDNS', { timeout: 60_000 }, async () => {
  const subject = nodensBinary();
  assert.ok(subject !== undefined, 'bin/nodens is missing');
  const reference = referenceBinary();
  const dir = mkdtempSync(join(tmpdir(), 'nodens-auto-e2e-'));
  const zones = join(dir, 'zones');
  mkdirSync(zones);
  writeFileSync(join(zones, 'db.example.org'), zone('example.org', 1, '192.0.2.1'));
  const corefile = join(dir, 'Corefile');
  writeFileSync(corefile, `. {\n  bind 127.0.0.1\n  auto {\n    directory ${zones}\n    reload 1s\n  }\n}\n`);
  const servers: Running[] = [];
  try {
    servers.push(await startServer({ name: 'nodens', command: subject, conf: corefile, cwd: dir, port: await freePort() }));
    servers.push(await startServer({ name: 'coredns', command: reference, conf: corefile, cwd: dir, port: await freePort() }));
    for (const r of servers) {
      await waitFor(r, /\[INFO\] plugin\/auto: Inserting zone `example\.org\.' from: /);
      assert.equal(await short(r, 'www.example.org'), '192.0.2.1');
      assert.equal(status(await dig(r.port, 'www.example.net', 'A')), 'REFUSED');
    }

    writeFileSync(join(zones, 'db.example.net'), zone('example.net', 1, '192.0.2.2'));
    for (const r of servers) {
      await waitFor(r, /\[INFO\] plugin\/auto: Inserting zone `example\.net\.' from: /);
      assert.equal(await short(r, 'www.example.net'), '192.0.2.2');
    }

    // a new serial reloads the zone (the zone's own ticker, logged by plugin/file)
    writeFileSync(join(zones, 'db.example.org'), zone('example.org', 2, '192.0.2.3'));
    for (const r of servers) {
      await waitFor(r, /\[INFO\] plugin\/file: Successfully reloaded zone "example\.org\." in ".*db\.example\.org" with 2 SOA serial/);
      assert.equal(await short(r, 'www.example.org'), '192.0.2.3');
    }

    rmSync(join(zones, 'db.example.org'));
    for (const r of servers) {
      await waitFor(r, /\[INFO\] plugin\/auto: Deleting zone `example\.org\.'/);
      assert.equal(status(await dig(r.port, 'www.example.org', 'A')), 'REFUSED');
      assert.equal(await short(r, 'www.example.net'), '192.0.2.2');
    }
    // the same auto lines on both sides (paths are the same directory)
    const autoLines = (r: Running): string[] => r.output().split('\n').filter((l) => l.includes('plugin/auto:')).sort();
    assert.deepEqual(autoLines(servers[0]!), autoLines(servers[1]!));
  } finally {
    for (const r of servers) await r.stop();
  }
});
