// auto end to end: a running server picks up a zone file added to its directory and drops one removed,
// on its `reload 1s` walk, as CoreDNS's auto does.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startProcess } from '../helpers/server.ts';
import { dig, status } from '../helpers/dig.ts';

const zone = (origin: string, serial: number, addr: string): string =>
  `$TTL 60\n@ SOA ns.${origin}. h.${origin}. ${serial} 7200 3600 1209600 60\n@ NS ns\nns A 192.0.2.53\nwww A ${addr}\n`;

async function until(fn: () => Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('auto: zones appear and disappear with the files of the directory', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-auto-e2e-'));
  writeFileSync(join(dir, 'db.example.org'), zone('example.org', 1, '192.0.2.1'));
  const p = await startProcess(`.:{PORT} {\n  bind 127.0.0.1\n  auto {\n    directory ${dir}\n    reload 1s\n  }\n}\n`);
  try {
    await p.waitFor(/Inserting zone `example\.org\.' from:/);
    let out = await dig(p.port, 'www.example.org', 'A', '+short');
    assert.equal(out.trim(), '192.0.2.1');
    assert.equal(status(await dig(p.port, 'www.example.net', 'A')), 'REFUSED');

    writeFileSync(join(dir, 'db.example.net'), zone('example.net', 1, '192.0.2.2'));
    await p.waitFor(/\[INFO\] plugin\/auto: Inserting zone `example\.net\.' from: /);
    out = await dig(p.port, 'www.example.net', 'A', '+short');
    assert.equal(out.trim(), '192.0.2.2');

    // a new serial reloads the zone (the zone's own ticker, logged by plugin/file)
    writeFileSync(join(dir, 'db.example.org'), zone('example.org', 2, '192.0.2.3'));
    await p.waitFor(/\[INFO\] plugin\/file: Successfully reloaded zone "example\.org\." in ".*db\.example\.org" with 2 SOA serial/);
    await until(async () => (await dig(p.port, 'www.example.org', 'A', '+short')).trim() === '192.0.2.3');

    rmSync(join(dir, 'db.example.org'));
    await p.waitFor(/\[INFO\] plugin\/auto: Deleting zone `example\.org\.'/);
    assert.equal(status(await dig(p.port, 'www.example.org', 'A')), 'REFUSED');
    assert.equal((await dig(p.port, 'www.example.net', 'A', '+short')).trim(), '192.0.2.2');
  } finally {
    await p.stop();
  }
});
