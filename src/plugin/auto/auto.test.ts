import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rcode, RRType } from '../../wire/constants.ts';
import type { ResourceRecord } from '../../wire/types.ts';
import type { ServerLogger } from '../plugin.ts';
import { GoRegexp } from '../pkg/regexp.ts';
import { NotAuthoritativeError, isTransferer } from '../pkg/transfer.ts';
import { CaptureWriter, StubHandler, captureLog, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { parse, plugin, type AutoOptions } from './setup.ts';
import { Auto, originFor } from './auto.ts';

const M = 60_000_000_000n;
const E = 'plugin/auto: Corefile:3 - Error during parsing: ';
const dir = mkdtempSync(join(tmpdir(), 'nodens-auto-'));

type AutoView = Omit<AutoOptions, 'regexp'> & { regexp: string };
const view = (o: AutoOptions): AutoView => ({ ...o, regexp: o.regexp.source });

test('auto parse', async () => {
  await parseTable<AutoOptions, AutoView>('auto', parse, [
    ['example.org {\n auto\n}', { origins: ['example.org.'], directory: '', regexp: 'db\\.(.*)', template: '${1}', reload: M }],
    [`. {\n auto Example.ORG example.net {\n  directory ${dir}\n  reload 0\n  upstream 8.8.8.8\n }\n}`,
      { origins: ['example.org.', 'example.net.'], directory: dir, regexp: 'db\\.(.*)', template: '${1}', reload: 0n }],
    [`. {\n auto {\n  directory zones www\\.db\\.(.*) {1}.{1}\n  reload 45s\n }\n}`,
      { origins: ['.'], directory: 'zones', regexp: 'www\\.db\\.(.*)', template: '${1}.${1}', reload: 45_000_000_000n }],
    // a later line's zones replace the earlier's; the options carry over
    ['. {\n auto a.org {\n  reload 5s\n }\n auto b.org\n}', { origins: ['b.org.'], directory: '', regexp: 'db\\.(.*)', template: '${1}', reload: 5_000_000_000n }],
    ['. {\n auto {\n  directory\n }\n}', E + "Wrong argument count or unexpected line ending after 'directory'"],
    [`. {\n auto {\n  directory ${dir} (.*)\n }\n}`, E + `Wrong argument count or unexpected line ending after '(.*)'`],
    [`. {\n auto {\n  directory ${dir} (.*) {1} extra\n }\n}`, E + "Wrong argument count or unexpected line ending after 'extra'"],
    [`. {\n auto {\n  directory ${dir} db.* {1}\n }\n}`, E + 'Need at least one sub expression'],
    [`. {\n auto {\n  directory ${dir} (a {1}\n }\n}`, 'plugin/auto: error parsing regexp: missing closing ): `(a`'],
    [`. {\n auto {\n  directory ${dir} ${'a'.repeat(10001)} {1}\n }\n}`, E + 'regexp too large'],
    ['. {\n auto {\n  reload\n }\n}', 'plugin/auto: reload duration value is expected'],
    ['. {\n auto {\n  reload 5x\n }\n}', 'plugin/auto: plugin/file: time: unknown unit "x" in duration "5x"'],
    ['. {\n auto {\n  reload -1s\n }\n}', 'plugin/auto: plugin/file: invalid duration'],
    ['. {\n auto {\n  fallthrough\n }\n}', E + "unknown property 'fallthrough'"],
  ], { view });
});

test('auto parse: a missing directory warns, one that cannot be examined is an error', async () => {
  const lines = await captureLog(async () => {
    await parseTable<AutoOptions, AutoView>('auto', parse, [[`. {\n auto {\n  directory ${dir}/missing\n }\n}`, { directory: `${dir}/missing` }]], { view, partial: true });
  });
  assert.deepEqual(lines, [`[WARNING] plugin/auto: Directory does not exist: ${dir}/missing`]);
  // a path through a file: stat fails with ENOTDIR (whoever runs the test)
  const file = join(dir, 'plain');
  writeFileSync(file, '');
  await parseTable('auto', parse, [[`. {\n auto {\n  directory ${file}/x\n }\n}`, `${E}Unable to access root path '${file}/x': stat ${file}/x: not a directory`]], { view });
});

test('origins from file names: unanchored regexp, Go Expand template, FQDN', () => {
  const def = GoRegexp.compile('db\\.(.*)');
  assert.equal(originFor(def, '${1}', '/z/db.example.org'), 'example.org.');
  assert.equal(originFor(def, '${1}', '/z/xdb.example.org.'), 'example.org.');
  assert.equal(originFor(def, '${1}', '/z/example.org'), undefined);
  const re = GoRegexp.compile('^(.*)\\.(zone)$');
  assert.equal(originFor(re, '${2}.${1}', 'a.test.zone'), 'zone.a.test.');
  assert.equal(originFor(re, '${1}', 'a.test.zone.bak'), undefined);
  // Go's $1x is the group named "1x": empty
  assert.equal(originFor(re, '$1x', 'a.test.zone'), '.');
});

const soa = (origin: string, serial: number, extra = ''): string =>
  `$TTL 300\n@ SOA ns.${origin}. h.${origin}. ${serial} 7200 3600 1209600 3600\n@ NS ns\nns A 192.0.2.53\n${extra}`;

function testLog(lines: string[]): ServerLogger {
  return {
    debugEnabled: false,
    debug: (m) => { lines.push('[DEBUG] ' + m); }, info: (m) => { lines.push('[INFO] ' + m); },
    warning: (m) => { lines.push('[WARNING] ' + m); }, error: (m) => { lines.push('[ERROR] ' + m); },
    fatal: (m) => { lines.push('[FATAL] ' + m); },
  };
}

function autoFor(directory: string, o: Partial<AutoOptions> = {}, next?: StubHandler): { a: Auto; lines: string[] } {
  const lines: string[] = [];
  const a = new Auto(next, {
    origins: ['.'], directory, regexp: GoRegexp.compile('db\\.(.*)'), template: '${1}', reload: 0n, ...o,
  }, testLog(lines), testLog(lines));
  return { a, lines };
}

test('walk: zones appear, move and disappear; bad files are skipped with CoreDNS warnings', () => {
  const z = mkdtempSync(join(tmpdir(), 'nodens-autow-'));
  writeFileSync(join(z, 'db.example.org'), soa('example.org', 1, 'www A 192.0.2.1\n'));
  writeFileSync(join(z, 'db.example.com'), soa('example.com', 2));
  writeFileSync(join(z, 'db.zero.test'), soa('zero.test', 0));
  writeFileSync(join(z, 'db.bad.test'), '$TTL 300\nother.test. SOA ns h 3 1 1 1 1\n');
  writeFileSync(join(z, 'README'), 'not a zone');
  mkdirSync(join(z, 'sub'));
  writeFileSync(join(z, 'sub', 'db.example.net'), soa('example.net', 4));
  const { a, lines } = autoFor(z);
  a.walk();
  assert.deepEqual([...a.zones.keys()].sort(), ['example.com.', 'example.net.', 'example.org.']);
  assert.deepEqual(lines, [
    `[WARNING] Parse zone \`bad.test.': file "${z}/db.bad.test" has SOA owner other.test. that does not match origin bad.test.`,
    '[INFO] Inserting zone `example.com.\' from: ' + join(z, 'db.example.com'),
    '[INFO] Inserting zone `example.org.\' from: ' + join(z, 'db.example.org'),
    `[WARNING] Parse zone \`zero.test.': no change in SOA serial for origin zero.test. in file ${z}/db.zero.test, with 0 SOA serial`,
    '[INFO] Inserting zone `example.net.\' from: ' + join(z, 'sub', 'db.example.net'),
  ]);
  // a file that failed is tried again on every walk
  lines.length = 0;
  a.walk();
  assert.equal(lines.length, 2);
  rmSync(join(z, 'db.bad.test'));
  rmSync(join(z, 'db.zero.test'));
  lines.length = 0;
  rmSync(join(z, 'db.example.com'));
  // the same origin from a second file: the first one walked wins, with a warning
  writeFileSync(join(z, 'sub', 'db.example.org'), soa('example.org', 9));
  a.walk();
  assert.deepEqual([...a.zones.keys()].sort(), ['example.net.', 'example.org.']);
  assert.deepEqual(lines, [
    `[WARNING] Multiple zone files match origin "example.org.": using "${z}/db.example.org" instead of "${z}/sub/db.example.org"`,
    '[INFO] Deleting zone `example.com.\'',
  ]);
  // a known zone whose file moved is repointed, not reloaded
  rmSync(join(z, 'db.example.org'));
  lines.length = 0;
  a.walk();
  assert.equal(a.zones.get('example.org.')!.file, join(z, 'sub', 'db.example.org'));
  assert.equal(a.zones.get('example.org.')!.zone.serial, 1);
  assert.deepEqual(lines, []);
  a.shutdown();
});

test('walk: a missing directory warns; symlinked directories resolve', () => {
  const { a, lines } = autoFor(join(dir, 'nowhere'));
  a.walk();
  assert.deepEqual(lines, [`[WARNING] error reading ${dir}/nowhere: lstat ${dir}/nowhere: no such file or directory`]);
  const z = mkdtempSync(join(tmpdir(), 'nodens-autol-'));
  writeFileSync(join(z, 'db.example.org'), soa('example.org', 1));
  const link = join(dir, 'link');
  symlinkSync(z, link);
  const b = autoFor(link);
  b.a.walk();
  assert.deepEqual(b.lines, [`[INFO] Inserting zone \`example.org.' from: ${z}/db.example.org`]);
});

test('handler: answers in its zones, passes on outside them, REFUSED/SERVFAIL as CoreDNS, AXFR refused, transfers', async () => {
  const z = mkdtempSync(join(tmpdir(), 'nodens-autoh-'));
  writeFileSync(join(z, 'db.example.org'), soa('example.org', 1, 'www A 192.0.2.1\nsub NS ns.sub\nns.sub A 192.0.2.9\n'));
  writeFileSync(join(z, 'db.example.net'), soa('example.net', 1));
  const next = new StubHandler('whoami', (_r, w) => { w.writeMsg({ ...makeRequest('x.').msg, qr: true }); return Rcode.NOERROR; });
  const { a } = autoFor(z, { origins: ['example.org.', 'missing.test.'] }, next);
  a.walk();
  const run = async (name: string, type: number = RRType.A): Promise<{ rc: number; w: CaptureWriter }> => {
    const w = new CaptureWriter();
    const rc = await settle(a.serveDNS(makeRequest(name, { type }), w));
    return { rc, w };
  };
  let r = await run('www.example.org.');
  assert.equal(r.rc, Rcode.NOERROR);
  assert.equal(r.w.last!.aa, true);
  assert.deepEqual(r.w.last!.answer.map((x) => x.data), [{ address: '192.0.2.1' }]);
  r = await run('nope.example.org.');
  assert.equal(r.w.last!.rcode, Rcode.NXDOMAIN);
  r = await run('a.sub.example.org.');
  assert.equal(r.w.last!.aa, false);
  r = await run('example.org.', RRType.AXFR);
  assert.equal(r.rc, Rcode.REFUSED);
  assert.equal(next.calls, 0);
  // loaded, but not one of auto's zones; and one of its zones without a file: the next plugin
  r = await run('www.example.net.');
  r = await run('www.missing.test.');
  assert.equal(next.calls, 2);
  // without a next plugin: REFUSED for a zone without file, SERVFAIL (nextOrFailure) outside the zones
  const b = autoFor(z, { origins: ['example.org.', 'missing.test.'] });
  b.a.walk();
  assert.equal(await settle(b.a.serveDNS(makeRequest('www.missing.test.'), new CaptureWriter())), Rcode.REFUSED);
  assert.throws(() => b.a.serveDNS(makeRequest('www.example.com.'), new CaptureWriter()), { message: 'plugin/auto: no next plugin found', rcode: Rcode.SERVFAIL });
  // Transferer
  assert.ok(isTransferer(a));
  const got: ResourceRecord[] = [];
  for await (const batch of a.transfer('example.net.', 0)) got.push(...batch);
  assert.deepEqual(got.map((x) => x.type), [RRType.SOA, RRType.NS, RRType.A, RRType.SOA]);
  assert.throws(() => a.transfer('example.com.', 0), NotAuthoritativeError);
  a.shutdown();
  b.a.shutdown();
});

test('setup: zones load at startup, the reload interval rescans the directory and reloads changed serials', async () => {
  const z = mkdtempSync(join(tmpdir(), 'nodens-autos-'));
  writeFileSync(join(z, 'db.example.org'), soa('example.org', 1, 'www A 192.0.2.1\n'));
  const lines = await captureLog(async () => {
    const s = await runSetup(plugin, `. {\n auto {\n  directory ${z}\n  reload 50ms\n }\n}`);
    const a = s.chain() as Auto;
    await s.start();
    assert.deepEqual([...a.zones.keys()], ['example.org.']);
    writeFileSync(join(z, 'db.example.net'), soa('example.net', 1));
    writeFileSync(join(z, 'db.example.org'), soa('example.org', 2, 'www A 192.0.2.2\n'));
    await new Promise((r) => setTimeout(r, 250));
    assert.deepEqual([...a.zones.keys()].sort(), ['example.net.', 'example.org.']);
    assert.equal(a.zones.get('example.org.')!.zone.serial, 2);
    rmSync(join(z, 'db.example.org'));
    await new Promise((r) => setTimeout(r, 250));
    assert.deepEqual([...a.zones.keys()], ['example.net.']);
    assert.deepEqual(await s.stop(), []);
  });
  // the zone's own reload ticker may fire between the file's removal and the walk that drops the zone
  const race = `[ERROR] plugin/file: Failed to open zone "example.org." in "${z}/db.example.org": open ${z}/db.example.org: no such file or directory`;
  assert.deepEqual(lines.filter((l) => l !== race).sort(), [
    `[INFO] plugin/auto: Inserting zone \`example.org.' from: ${z}/db.example.org`,
    `[INFO] plugin/auto: Inserting zone \`example.net.' from: ${z}/db.example.net`,
    `[INFO] plugin/file: Successfully reloaded zone "example.org." in "${z}/db.example.org" with 2 SOA serial`,
    '[INFO] plugin/auto: Deleting zone `example.org.\'',
  ].sort());
});
