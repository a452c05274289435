import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ResourceRecord } from '../../wire/types.ts';
import { Opcode, Rcode, RRType } from '../../wire/constants.ts';
import { Instance } from '../../core/instance.ts';
import { createRegistry } from '../../index.ts';
import type { ServerLogger } from '../plugin.ts';
import { Fall } from '../pkg/fall.ts';
import { NotAuthoritativeError, isTransferer } from '../pkg/transfer.ts';
import { CaptureWriter, StubHandler, captureLog, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { parse, plugin, type FileOptions } from './setup.ts';
import { File } from './file.ts';
import { ZoneSource } from '../pkg/zone/source.ts';
import { transferZone } from '../pkg/zone/answer.ts';
import { zoneFromText } from '../pkg/zone/load.ts';
import { Zone } from '../pkg/zone/zone.ts';

const dir = mkdtempSync(join(tmpdir(), 'nodens-filep-'));
const db = join(dir, 'db.example.org');
copyFileSync(join(import.meta.dirname, 'testdata', 'db.example.org'), db);
copyFileSync(join(import.meta.dirname, 'testdata', 'db.example.org.inc'), join(dir, 'db.example.org.inc'));
const E = 'plugin/file: Corefile:3 - Error during parsing: ';

const fall = (...zones: string[]): Fall => {
  const f = new Fall();
  if (zones.length > 0) f.setZonesFromArgs(zones[0] === '.' ? [] : zones);
  return f;
};
const M = 60_000_000_000n;

test('file parse', async () => {
  await parseTable<FileOptions>('file', parse, [
    ['example.org {\n file db\n}', { entries: [{ path: 'db', origins: ['example.org.'], reload: M, reloadByMtime: false }], fall: fall() }],
    ['. {\n file db Example.ORG example.net\n}', { entries: [{ path: 'db', origins: ['example.org.', 'example.net.'], reload: M, reloadByMtime: false }], fall: fall() }],
    ['example.org {\n file /abs/db {\n  reload 30s\n  reload_by_mtime\n  fallthrough\n  upstream 8.8.8.8\n }\n}',
      { entries: [{ path: '/abs/db', origins: ['example.org.'], reload: 30_000_000_000n, reloadByMtime: true }], fall: fall('.') }],
    // reload and reload_by_mtime carry over to the later lines, as in CoreDNS
    ['. {\n file a a.org {\n  reload 0\n }\n file b b.org\n}', {
      entries: [{ path: 'a', origins: ['a.org.'], reload: 0n, reloadByMtime: false }, { path: 'b', origins: ['b.org.'], reload: 0n, reloadByMtime: false }],
      fall: fall(),
    }],
    ['. {\n file db a.org {\n  fallthrough b.org\n }\n}', { entries: [{ path: 'db', origins: ['a.org.'], reload: M, reloadByMtime: false }], fall: fall('b.org') }],
    ['. {\n file\n}', "plugin/file: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'file'"],
    ['. {\n file db {\n  reload\n }\n}', 'plugin/file: reload duration value is expected'],
    ['. {\n file db {\n  reload 5x\n }\n}', 'plugin/file: plugin/file: time: unknown unit "x" in duration "5x"'],
    ['. {\n file db {\n  foo\n }\n}', E + "unknown property 'foo'"],
    ['. {\n file db {\n  transfer to *\n }\n}', E + "unknown property 'transfer'"],
  ]);
});

/** An instance of the built-in plugins (root and file under test). */
async function instanceWith(corefile: string): Promise<Instance> {
  return Instance.create({ corefile, file: 'Corefile', defaultPort: '53', registry: createRegistry() });
}

/** A logger keeping `[LEVEL] message` lines. */
function testLog(lines: string[] = []): ServerLogger {
  return {
    debugEnabled: false,
    debug: (m: string) => { lines.push('[DEBUG] ' + m); }, info: (m: string) => { lines.push('[INFO] ' + m); },
    warning: (m: string) => { lines.push('[WARNING] ' + m); }, error: (m: string) => { lines.push('[ERROR] ' + m); },
    fatal: (m: string) => { lines.push('[FATAL] ' + m); },
  };
}

test('setup: root resolves relative files; missing files warn or fail; zone errors stop the start', async () => {
  const lines = await captureLog(async () => {
    const i = await instanceWith(`example.org {\n root ${dir}\n file db.example.org\n}`);
    assert.equal(i.blockConfigs()[0]!.root, dir);
    await assert.rejects(instanceWith('example.org {\n file missing.db {\n  reload 0\n }\n}'),
      { message: 'plugin/file: plugin/file: open missing.db: no such file or directory' });
    await instanceWith(`example.org {\n root ${dir}\n file missing.db\n}`);
    await assert.rejects(instanceWith(`example.net {\n file ${db}\n}`),
      { message: `plugin/file: file "${db}" has SOA owner example.org. that does not match origin example.net.` });
  });
  assert.deepEqual(lines, [`[WARNING] plugin/file: Failed to open "open ${dir}/missing.db: no such file or directory": trying again in 1m0s`]);
});

function fileHandler(zones: Record<string, string>, opts: { fall?: Fall; next?: StubHandler } = {}): { f: File; lines: string[] } {
  const lines: string[] = [];
  const log = testLog(lines);
  const m = new Map<string, ZoneSource>();
  for (const [origin, text] of Object.entries(zones)) m.set(origin, new ZoneSource(origin, 'db', zoneFromText(text, origin, 'db'), 0, false));
  return { f: new File(opts.next, m, opts.fall ?? new Fall(), log), lines };
}

const ZONE = '$TTL 300\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.53\nwww A 192.0.2.1\nsub NS ns.sub\nns.sub A 192.0.2.9\na.b A 192.0.2.2\n';

test('handler: AA, rcodes, referrals, REFUSED outside without next, AXFR refused, NOTIFY dropped', async () => {
  const { f, lines } = fileHandler({ 'example.org.': ZONE });
  const run = async (name: string, type: number = RRType.A, o: { opcode?: number } = {}): Promise<{ rc: number; w: CaptureWriter }> => {
    const w = new CaptureWriter();
    const rc = await settle(f.serveDNS(makeRequest(name, { type, ...o }), w));
    return { rc, w };
  };
  let r = await run('www.example.org.');
  assert.equal(r.rc, Rcode.NOERROR);
  assert.equal(r.w.last!.aa, true);
  assert.deepEqual(r.w.last!.answer.map((a) => a.name), ['www.example.org.']);
  r = await run('nope.example.org.');
  assert.equal(r.w.last!.rcode, Rcode.NXDOMAIN);
  assert.equal(r.w.last!.authority[0]!.type, RRType.SOA);
  r = await run('b.example.org.');
  assert.equal(r.w.last!.rcode, Rcode.NOERROR);
  r = await run('host.sub.example.org.');
  assert.equal(r.w.last!.aa, false);
  assert.deepEqual(r.w.last!.authority.map((a) => a.type), [RRType.NS]);
  assert.deepEqual(r.w.last!.additional.map((a) => a.name), ['ns.sub.example.org.']);
  r = await run('www.example.com.');
  assert.equal(r.rc, Rcode.REFUSED);
  assert.equal(r.w.msgs.length, 0);
  r = await run('example.org.', RRType.AXFR);
  assert.equal(r.rc, Rcode.REFUSED);
  r = await run('example.org.', RRType.SOA, { opcode: Opcode.NOTIFY });
  assert.equal(r.rc, Rcode.NOERROR);
  assert.equal(r.w.msgs.length, 0);
  assert.deepEqual(lines, ['[INFO] Dropping notify from 127.0.0.1 for example.org.']);
  // the reply's records are copies: a later plugin editing them leaves the zone alone
  r = await run('www.example.org.');
  r.w.last!.answer[0]!.ttl = 1;
  r = await run('www.example.org.');
  assert.equal(r.w.last!.answer[0]!.ttl, 300);
});

test('handler: a zone whose file could not be read answers SERVFAIL', async () => {
  const m = new Map([['example.org.', new ZoneSource('example.org.', 'db', new Zone('example.org.'), 0, false)]]);
  const f = new File(undefined, m, new Fall(), testLog());
  const w = new CaptureWriter();
  assert.equal(await settle(f.serveDNS(makeRequest('www.example.org.'), w)), Rcode.SERVFAIL);
  assert.equal(w.msgs.length, 0);
});

test('handler: fallthrough passes NXDOMAIN and empty non-terminals of its zones on, nothing else', async () => {
  const next = new StubHandler('whoami', () => Rcode.NOERROR);
  const { f } = fileHandler({ 'example.org.': ZONE }, { fall: fall('example.org'), next });
  for (const [name, type, through] of [
    ['nope.example.org.', RRType.A, true], ['b.example.org.', RRType.A, true], ['www.example.org.', RRType.A, false],
    ['www.example.org.', RRType.MX, false], ['host.sub.example.org.', RRType.A, false], ['www.example.com.', RRType.A, true],
  ] as const) {
    const before = next.calls;
    await settle(f.serveDNS(makeRequest(name, { type }), new CaptureWriter()));
    assert.equal(next.calls - before, through ? 1 : 0, `${name} ${type}`);
  }
});

async function collect(it: AsyncIterable<ResourceRecord[]>): Promise<string[][]> {
  const out: string[][] = [];
  for await (const batch of it) out.push(batch.map((r) => `${r.name} ${r.type}`));
  return out;
}

test('Transferer: apex, names in canonical order, SOA; IXFR at the current serial is the SOA alone', async () => {
  const { f } = fileHandler({ 'example.org.': ZONE });
  assert.ok(isTransferer(f));
  const axfr = await collect(f.transfer('example.org.', 0));
  assert.deepEqual(axfr, [
    ['example.org. 6', 'example.org. 2'],
    ['a.b.example.org. 1'], ['ns.example.org. 1'], ['sub.example.org. 2'], ['ns.sub.example.org. 1'], ['www.example.org. 1'],
    ['example.org. 6'],
  ]);
  assert.deepEqual(await collect(f.transfer('example.org.', 1)), [['example.org. 6']]);
  assert.equal((await collect(f.transfer('example.org.', 7))).length, 7);
  assert.throws(() => f.transfer('sub.example.org.', 0), NotAuthoritativeError);
  assert.throws(() => f.transfer('example.com.', 0), NotAuthoritativeError);
  assert.throws(() => transferZone(new Zone('example.org.'), 0), { message: 'no SOA' });
});

test('reload: a new serial is read and logged, an unchanged one is not, errors are logged and keep the zone', async () => {
  const file = join(dir, 'reload.db');
  const text = (serial: number, extra = ''): string => `$TTL 60\n@ SOA ns h ${serial} 2 3 4 5\nwww A 192.0.2.1\n${extra}`;
  writeFileSync(file, text(1));
  const src = new ZoneSource('example.org.', file, zoneFromText(text(1), 'example.org.', file), 60_000, false);
  const lines: string[] = [];
  const log = testLog(lines);
  src.reloadOnce(log);
  assert.deepEqual(lines, []);
  writeFileSync(file, text(2, 'new A 192.0.2.2\n'));
  src.reloadOnce(log);
  assert.equal(src.zone.serial, 2);
  assert.ok(src.zone.search('new.example.org.'));
  writeFileSync(file, text(3, 'bad A 1.2.3\n'));
  src.reloadOnce(log);
  assert.equal(src.zone.serial, 2);
  mkdirSync(join(dir, 'gone'), { recursive: true });
  const gone = new ZoneSource('example.org.', join(dir, 'gone', 'x.db'), src.zone, 60_000, false);
  gone.reloadOnce(log);
  assert.deepEqual(lines, [
    `[INFO] Successfully reloaded zone "example.org." in "${file}" with 2 SOA serial`,
    `[ERROR] Parsing zone "example.org.": failed to parse file "${file}" for origin example.org. with error ${file}: dns: bad A A: "1.2.3" at line: 4:11`,
    `[ERROR] Failed to open zone "example.org." in "${join(dir, 'gone', 'x.db')}": open ${join(dir, 'gone', 'x.db')}: no such file or directory`,
  ]);
});

test('reload_by_mtime: a newer file is read whatever its serial', () => {
  const file = join(dir, 'mtime.db');
  writeFileSync(file, '$TTL 60\n@ SOA ns h 5 2 3 4 5\n');
  const src = new ZoneSource('example.org.', file, zoneFromText('$TTL 60\n@ SOA ns h 5 2 3 4 5\n', 'example.org.', file), 60_000, true);
  src.mtimeMs = Date.now() + 10_000;
  const lines: string[] = [];
  const log = testLog(lines);
  src.reloadOnce(log);
  assert.deepEqual(lines, []);
  writeFileSync(file, '$TTL 60\n@ SOA ns h 5 2 3 4 5\nwww A 192.0.2.1\n');
  const later = new Date(Date.now() + 20_000);
  utimesSync(file, later, later);
  src.reloadOnce(log);
  assert.ok(src.zone.search('www.example.org.'));
  assert.deepEqual(lines, [`[INFO] Successfully reloaded zone "example.org." in "${file}" with 5 SOA serial`]);
});

test('setup: the reload ticker runs from startup to shutdown', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval'] });
  const file = join(dir, 'tick.db');
  writeFileSync(file, '$TTL 60\n@ SOA ns h 1 2 3 4 5\n');
  const r = await runSetup(plugin, `example.org {\n file ${file} {\n  reload 10s\n }\n}`);
  const chain = r.chain();
  await r.start();
  writeFileSync(file, '$TTL 60\n@ SOA ns h 2 2 3 4 5\nwww A 192.0.2.7\n');
  const lines = await captureLog(() => { t.mock.timers.tick(10_000); });
  assert.deepEqual(lines, [`[INFO] plugin/file: Successfully reloaded zone "example.org." in "${file}" with 2 SOA serial`]);
  const w = new CaptureWriter();
  await settle(chain.serveDNS(makeRequest('www.example.org.'), w));
  assert.equal(w.last!.answer.length, 1);
  await r.stop();
  writeFileSync(file, '$TTL 60\n@ SOA ns h 3 2 3 4 5\n');
  assert.deepEqual(await captureLog(() => { t.mock.timers.tick(20_000); }), []);
});
