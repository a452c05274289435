// native/memory.c: clean read-only file mappings given back, in this very process (real pages, real /proc).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';
import { deflateSync, inflateSync } from 'node:zlib';
import { releaseCleanPages } from './memory.ts';

const built = existsSync(fileURLToPath(new URL('../../build/native/memory.node', import.meta.url)));

/** kB of this process resident in mappings of Node's own binary (`code`: only its executable ones, or only the others). */
function binaryResident(code?: boolean): number {
  let kb = 0;
  let inBinary = false;
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header !== null) inBinary = header[2] === process.execPath && (code === undefined || header[1]!.includes('x') === code);
    else if (inBinary && line.startsWith('Rss:')) kb += Number(line.split(/\s+/)[1]);
  }
  return kb;
}

test('releaseCleanPages(true) gives back the binary\'s data and leaves its code resident', () => {
  const code = binaryResident(true);
  const data = binaryResident(false);
  const released = releaseCleanPages(true);
  if (!built || process.env.NODENS_NATIVE === '0') {
    assert.equal(released, 0);
    return;
  }
  assert.ok(released > 1024, `released ${released} kB`);
  assert.ok(binaryResident(false) < data - 1024, `data resident ${data} -> ${binaryResident(false)} kB`);
  // The code is what was resident, or more (this test runs code that faults pages in): never released.
  assert.ok(binaryResident(true) >= code - 64, `code resident ${code} -> ${binaryResident(true)} kB`);
});

test('releaseCleanPages gives back resident pages of Node\'s binary, and everything still runs after', () => {
  if (process.env.NODENS_REQUIRE_NATIVE === '1' && process.env.NODENS_NATIVE !== '0') assert.ok(built, 'NODENS_REQUIRE_NATIVE=1: memory.node must be built');
  const before = binaryResident();
  const released = releaseCleanPages();
  const after = binaryResident();
  if (!built || process.env.NODENS_NATIVE === '0') {
    assert.equal(released, 0);
    return;
  }
  assert.ok(released > 4096, `released ${released} kB`);
  assert.ok(after < before - 4096, `binary resident ${before} -> ${after} kB`);
  // Code and read-only data come back on use: a little of everything, with known answers.
  assert.equal(createHash('sha256').update('abc').digest('hex'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(inflateSync(deflateSync(Buffer.from('x'.repeat(1000)))).toString(), 'x'.repeat(1000));
  assert.equal(new Intl.NumberFormat('de-DE').format(1234567.5), '1.234.567,5', 'ICU data read again');
  assert.equal(/^(a+)+b$/.test('aaab'), true);
  assert.equal(JSON.parse(JSON.stringify({ a: [1, 2, 3] })).a[2], 3);
  assert.ok(binaryResident() > after, 'pages came back as they were used');
  // Nothing written is ever released: a second call finds only what came back clean.
  assert.ok(releaseCleanPages() >= 0);
});
