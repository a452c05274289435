import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, plugin, type HostsOptions } from './setup.ts';
import { Hostsfile } from './hosts.ts';
import { Fall } from '../pkg/fall.ts';
import { parseHosts, parseHostIP } from './hostsfile.ts';
import { hostsMetrics } from './metrics.ts';
import { replyTo } from '../../wire/message.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { CaptureWriter, StubHandler, captureLog, makeRequest, parseTable, runSetup } from '../pkg/testing.ts';

const dir = mkdtempSync(join(tmpdir(), 'nodens-hosts-'));
const E = 'plugin/hosts: Corefile:3 - Error during parsing: ';

const fall = (...zones: string[]): Fall => {
  const f = new Fall();
  if (zones.length > 0) f.setZonesFromArgs(zones[0] === '.' ? [] : zones);
  return f;
};
const defaults: HostsOptions = {
  path: '/etc/hosts', origins: ['.'], ttl: 3600, autoReverse: true, reload: 5_000_000_000n, fall: fall(),
  fallthroughUnsupported: false, inline: [],
};

test('hosts parse', async () => {
  const missing = join(dir, 'missing');
  const regular = join(dir, 'regular');
  writeFileSync(regular, '');
  const lines = await captureLog(() => parseTable('hosts', parse, [
    ['. {\n hosts\n}', defaults],
    ['example.org {\n hosts\n}', { ...defaults, origins: ['example.org.'] }],
    [`. {\n hosts ${regular}\n}`, { ...defaults, path: regular }],
    [`. {\n hosts ${regular} Example.ORG 10.0.0.0/24\n}`, { ...defaults, path: regular, origins: ['example.org.', '0.0.10.in-addr.arpa.'] }],
    [`. {\n hosts ${missing}\n}`, { ...defaults, path: missing }],
    [`. {\n hosts ${dir}\n}`, { ...defaults, path: dir }],
    ['. {\n hosts {\n  ttl 60\n  no_reverse\n  reload 0\n  fallthrough\n  fallthrough_unsupported\n }\n}',
      { ...defaults, ttl: 60, autoReverse: false, reload: 0n, fall: fall('.'), fallthroughUnsupported: true }],
    ['. {\n hosts {\n  reload 1m\n  fallthrough a.org B.org\n }\n}', { ...defaults, reload: 60_000_000_000n, fall: fall('a.org', 'B.org') }],
    ['. {\n hosts {\n  10.0.0.1 a.example b.example\n  ::1   c.example\n  fallthrough\n }\n}',
      { ...defaults, fall: fall('.'), inline: ['10.0.0.1 a.example b.example', '::1 c.example'] }],
    ['. {\n hosts {\n  ttl\n }\n}', E + 'ttl needs a time in second'],
    ['. {\n hosts {\n  ttl x\n }\n}', E + 'ttl needs a number of second'],
    ['. {\n hosts {\n  ttl 0\n }\n}', E + 'ttl provided is invalid'],
    ['. {\n hosts {\n  ttl 65536\n }\n}', E + 'ttl provided is invalid'],
    ['. {\n hosts {\n  reload\n }\n}', E + 'reload needs a duration (zero seconds to disable)'],
    ['. {\n hosts {\n  reload 5x\n }\n}', E + "invalid duration for reload '5x'"],
    ['. {\n hosts {\n  reload -5s\n }\n}', E + "invalid negative duration for reload '-5s'"],
    ['. {\n hosts {\n  fallthrough\n  foo bar\n }\n}', "plugin/hosts: Corefile:4 - Error during parsing: unknown property 'foo'"],
    ['. {\n hosts {\n  fallthrough_unsupported\n }\n}', 'plugin/hosts: Corefile:4 - Error during parsing: fallthrough_unsupported requires fallthrough'],
    ['. {\n hosts {\n  fallthrough\n  fallthrough_unsupported x\n }\n}',
      "plugin/hosts: Corefile:4 - Error during parsing: Wrong argument count or unexpected line ending after 'x'"],
    ['. {\n hosts\n hosts\n}', 'plugin/hosts: this plugin can only be used once per Server Block'],
    [`. {\n hosts ${regular}/x\n}`,
      `plugin/hosts: Corefile:2 - Error during parsing: unable to access hosts file '${regular}/x': stat ${regular}/x: not a directory`],
  ]));
  assert.deepEqual(lines, [
    `[WARNING] plugin/hosts: File does not exist: ${missing}`,
    `[WARNING] plugin/hosts: Hosts file ${JSON.stringify(dir)} is a directory`,
  ]);
});

test('hosts start-up reads the file and starts the reload timer; shutdown stops it', async () => {
  const file = join(dir, 'hosts-startup');
  writeFileSync(file, '10.0.0.1 a.example\n');
  const r = await runSetup(plugin, `. {\n hosts ${file} {\n  reload 20ms\n }\n}`);
  const h = r.chain(new StubHandler('next', () => 5));
  const w = new CaptureWriter();
  // Setup reads nothing: the file is read by the start-up hook (no entry, no fallthrough: SERVFAIL).
  assert.equal(h.serveDNS(makeRequest('a.example.'), w), 2);
  assert.equal(w.msgs.length, 0);
  await r.start();
  await h.serveDNS(makeRequest('a.example.'), w);
  assert.deepEqual(w.last!.answer.map((x) => x.data), [{ address: '10.0.0.1' }]);
  writeFileSync(file, '10.0.0.2 a.example\n');
  utimesSync(file, new Date(), new Date(Date.now() + 5000));
  await new Promise((res) => setTimeout(res, 100));
  await h.serveDNS(makeRequest('a.example.'), w);
  assert.deepEqual(w.last!.answer.map((x) => x.data), [{ address: '10.0.0.2' }]);
  assert.deepEqual(await r.stop(), []);
  writeFileSync(file, '10.0.0.3 a.example\n');
  utimesSync(file, new Date(), new Date(Date.now() + 10000));
  await new Promise((res) => setTimeout(res, 100));
  await h.serveDNS(makeRequest('a.example.'), w);
  assert.deepEqual(w.last!.answer.map((x) => x.data), [{ address: '10.0.0.2' }]);
});

test('hosts file parsing', () => {
  const m = parseHosts([
    '127.0.0.1 localhost Local.Example  # comment',
    '::1 localhost ip6-localhost',
    'fe80::1%lo0 linklocal',
    '::ffff:10.0.0.9 mapped',
    '10.0.0.1 *.wild.example.org',
    'bad line',
    '# 1.2.3.4 commented',
    '1.2.3.4',
    '10.0.0.2 out.example.net',
  ].join('\n'), ['.'], true);
  assert.deepEqual(m.name4.get('localhost.'), ['127.0.0.1']);
  assert.deepEqual(m.name4.get('local.example.'), ['127.0.0.1']);
  assert.deepEqual(m.name6.get('localhost.'), ['::1']);
  assert.deepEqual(m.name6.get('linklocal.'), ['fe80::1']);
  assert.deepEqual(m.name4.get('mapped.'), ['10.0.0.9']);
  assert.deepEqual(m.wild4.get('*.wild.example.org.'), ['10.0.0.1']);
  assert.deepEqual(m.addr.get('127.0.0.1'), ['localhost.', 'local.example.']);
  assert.equal(m.addr.has('10.0.0.1'), false);
  const z = parseHosts('10.0.0.2 out.example.net\n10.0.0.3 in.example.org', ['example.org.'], false);
  assert.equal(z.name4.has('out.example.net.'), false);
  assert.deepEqual(z.name4.get('in.example.org.'), ['10.0.0.3']);
  assert.equal(z.addr.size, 0);
  assert.deepEqual(parseHostIP('2001:DB8:0:0::1'), { family: 2, text: '2001:db8::1' });
  assert.equal(parseHostIP('01.2.3.4'), undefined);
});

test('hosts file parsing as CoreDNS 1.15.0: over-long fields are dropped with an error line, ASCII white space only', () => {
  const lines: string[] = [];
  const log = { debug() {}, info() {}, warning() {}, fatal() {}, debugEnabled: false, error(m: string) { lines.push(m); } };
  const long = 'x'.repeat(1100) + '.example.org';
  const m = parseHosts([
    `10.0.0.1 ${long} kept.example.org`,
    `${'1'.repeat(1025)} lost.example.org`,
    '10.0.0.2 after.example.org',
    `10.0.0.3 ${'é'.repeat(513)}`, // 1026 bytes in UTF-8, 513 characters
    `10.0.0.4 ${'a'.repeat(1020)}.org`, // exactly 1024 bytes: kept
    '10.0.0.5 nb\u00a0space.example.org',
  ].join('\n'), ['.'], false, 'Hosts file "/etc/hosts"', log);
  assert.deepEqual(m.name4.get('kept.example.org.'), ['10.0.0.1']);
  assert.equal(m.name4.has(long.toLowerCase() + '.'), false);
  assert.deepEqual(m.name4.get('after.example.org.'), ['10.0.0.2'], 'the lines after an over-long one are read');
  assert.equal(m.name4.has('lost.example.org.'), false);
  assert.deepEqual(m.name4.get('a'.repeat(1020) + '.org.'), ['10.0.0.4']);
  assert.deepEqual(m.name4.get('nb\u00a0space.example.org.'), ['10.0.0.5'], 'U+00A0 does not split a field');
  assert.deepEqual(lines, [
    'Hosts file "/etc/hosts", line 1: name longer than 1024 bytes, dropping the name',
    'Hosts file "/etc/hosts", line 2: address longer than 1024 bytes, dropping the line',
    'Hosts file "/etc/hosts", line 4: name longer than 1024 bytes, dropping the name',
  ]);
});

test('inline entries: an over-long field is reported as coming from the inline entries', async () => {
  const logs = await captureLog(() => runSetup(plugin, `example.org {\n hosts {\n  10.0.0.1 ${'y'.repeat(1030)}\n  10.0.0.2 ok.example.org\n }\n}`));
  assert.ok(logs.includes('[ERROR] plugin/hosts: Inline hosts entries, line 1: name longer than 1024 bytes, dropping the name'), logs.join('\n'));
});

async function hostsChain(body: string, next?: StubHandler) {
  const r = await runSetup(plugin, body);
  await r.start();
  return { h: r.chain(next), r };
}

test('hosts answers A, AAAA and PTR; AA set; owner is the lower-cased qname', async () => {
  const { h } = await hostsChain('example.org {\n hosts {\n  10.0.0.1 foo.example.org\n  ::1 foo.example.org\n  10.0.0.2 foo.example.org bar.example.org\n }\n}');
  const w = new CaptureWriter();
  assert.equal(h.serveDNS(makeRequest('FOO.example.org.'), w), 0);
  const m = w.last!;
  assert.equal(m.aa, true);
  assert.deepEqual(m.answer, [
    { name: 'foo.example.org.', type: 1, class: 1, ttl: 3600, data: { address: '10.0.0.1' } },
    { name: 'foo.example.org.', type: 1, class: 1, ttl: 3600, data: { address: '10.0.0.2' } },
  ]);
  await h.serveDNS(makeRequest('foo.example.org.', { type: 28 }), w);
  assert.deepEqual(w.last!.answer.map((r) => r.data), [{ address: '::1' }]);
  await h.serveDNS(makeRequest('2.0.0.10.in-addr.arpa.', { type: 12 }), w);
  assert.deepEqual(w.last!.answer.map((r) => r.data), [{ target: 'foo.example.org.' }, { target: 'bar.example.org.' }]);
  // NODATA for other types when the name exists
  await h.serveDNS(makeRequest('foo.example.org.', { type: 16 }), w);
  assert.deepEqual(w.last!.answer, []);
  assert.equal(w.last!.rcode, 0);
  // unknown name: SERVFAIL, nothing written
  const before = w.msgs.length;
  assert.equal(h.serveDNS(makeRequest('nope.example.org.'), w), 2);
  assert.equal(w.msgs.length, before);
});

test('hosts: an A/AAAA answer written as bytes is what encoding the reply Message gives', async () => {
  const { h } = await hostsChain('. {\n hosts {\n  10.0.0.1 foo.example.org\n  10.0.0.2 foo.example.org\n  2001:db8::1 foo.example.org\n' +
    '  192.0.2.7 a\\.b.example\n  192.0.2.8 \\200x.example\n  ttl 77\n }\n}');
  const cases: Array<[string, { type?: number; rd?: boolean; cd?: boolean; opcode?: number; id?: number }]> = [
    ['FoO.Example.ORG.', { rd: true, cd: true, id: 1 }],
    ['foo.example.org.', { type: 28, rd: false, id: 65535 }],
    ['A\\.B.example.', { cd: true }],
    ['\\200X.example.', {}],
    ['foo.example.org.', { opcode: 4, rd: true, cd: true }],
  ];
  for (const [name, o] of cases) {
    const req = makeRequest(name, o);
    let bytes: Uint8Array | undefined;
    assert.equal(h.serveDNS(req, { writeMsg() { assert.fail('the Message path was taken for ' + name); }, writeWire(b) { bytes = b; } }), 0);
    const want = replyTo(req.msg);
    want.aa = true;
    const ips = o.type === 28 ? ['2001:db8::1'] : name.startsWith('A') ? ['192.0.2.7'] : name.startsWith('\\') ? ['192.0.2.8'] : ['10.0.0.1', '10.0.0.2'];
    want.answer = ips.map((address) => ({ name: req.name, type: o.type ?? 1, class: 1, ttl: 77, data: { address } }));
    assert.deepEqual(bytes, encodeMessage(want), name);
  }
});

test('hosts: outside zones and PTR misses go to the next plugin; fallthrough', async () => {
  const next = new StubHandler('next', () => 5);
  const { h } = await hostsChain('example.org {\n hosts {\n  10.0.0.1 foo.example.org\n }\n}', next);
  const w = new CaptureWriter();
  assert.equal(h.serveDNS(makeRequest('foo.example.net.'), w), 5);
  assert.equal(h.serveDNS(makeRequest('9.9.9.9.in-addr.arpa.', { type: 12 }), w), 5);
  assert.equal(h.serveDNS(makeRequest('nope.example.org.'), w), 2);
  const { h: f } = await hostsChain('. {\n hosts {\n  10.0.0.1 foo.example.org\n  fallthrough example.org\n }\n}', next);
  assert.equal(f.serveDNS(makeRequest('nope.example.org.'), w), 5);
  assert.equal(f.serveDNS(makeRequest('nope.example.net.'), w), 2);
  assert.equal(f.serveDNS(makeRequest('foo.example.org.', { type: 16 }), w), 0);
  const { h: u } = await hostsChain('. {\n hosts {\n  10.0.0.1 foo.example.org\n  fallthrough\n  fallthrough_unsupported\n }\n}', next);
  assert.equal(u.serveDNS(makeRequest('foo.example.org.', { type: 16 }), w), 5);
  assert.equal(u.serveDNS(makeRequest('foo.example.org.', { type: 1 }), w), 0);
});

test('hosts wildcards: exactly one label, exact names win, no PTR', async () => {
  const next = new StubHandler('next', () => 5);
  const { h } = await hostsChain('. {\n hosts {\n  10.0.0.1 *.w.example\n  10.0.0.2 a.w.example\n }\n}', next);
  const w = new CaptureWriter();
  await h.serveDNS(makeRequest('x.w.example.'), w);
  assert.deepEqual(w.last!.answer.map((r) => [r.name, r.data]), [['x.w.example.', { address: '10.0.0.1' }]]);
  await h.serveDNS(makeRequest('a.w.example.'), w);
  assert.deepEqual(w.last!.answer.map((r) => r.data), [{ address: '10.0.0.2' }]);
  assert.equal(h.serveDNS(makeRequest('w.example.'), w), 2);
  assert.equal(h.serveDNS(makeRequest('y.x.w.example.'), w), 2);
  assert.equal(h.serveDNS(makeRequest('1.0.0.10.in-addr.arpa.', { type: 12 }), w), 5);
});

test('hosts file, ttl, no_reverse, inline merged after the file, reload by mtime and size', async () => {
  const file = join(dir, 'hosts1');
  writeFileSync(file, '10.0.0.1 a.example\n');
  const { h, r } = await hostsChain(`. {\n hosts ${file} {\n  ttl 60\n  no_reverse\n  reload 20ms\n  10.0.0.9 a.example\n }\n}`,
    new StubHandler('next', () => 5));
  const w = new CaptureWriter();
  await h.serveDNS(makeRequest('a.example.'), w);
  assert.deepEqual(w.last!.answer.map((x) => [x.ttl, x.data]), [[60, { address: '10.0.0.1' }], [60, { address: '10.0.0.9' }]]);
  assert.equal(h.serveDNS(makeRequest('1.0.0.10.in-addr.arpa.', { type: 12 }), w), 5);
  assert.equal(await entriesOf(file), 2);
  writeFileSync(file, '10.0.0.1 a.example\n10.0.0.3 b.example\n');
  utimesSync(file, new Date(), new Date(Date.now() + 5000));
  await new Promise((res) => setTimeout(res, 100));
  await h.serveDNS(makeRequest('b.example.'), w);
  assert.deepEqual(w.last!.answer.map((x) => x.data), [{ address: '10.0.0.3' }]);
  assert.equal(await entriesOf(file), 3);
  assert.deepEqual(await r.stop(), []);
});

async function entriesOf(file: string): Promise<number | undefined> {
  return (await hostsMetrics().hostsEntries.get()).values.find((v) => v.labels.hostsfile === file)?.value;
}

test('blocks serving the same hosts file share one parsed map; a changed file, other options or dropped fields do not', () => {
  const file = join(dir, 'shared');
  writeFileSync(file, '10.0.0.1 a.example\n');
  const read = (origins = ['.'], autoReverse = true, log?: Parameters<typeof parseHosts>[4]) => {
    const f = new Hostsfile(file, origins, autoReverse, [], log);
    f.readHosts();
    return f.hmap;
  };
  const first = read();
  assert.deepEqual(first.name4.get('a.example.'), ['10.0.0.1']);
  assert.equal(read(), first, 'a second block reads the same file: the same map');
  assert.notEqual(read(['example.']), first, 'other zones: parsed again');
  assert.notEqual(read(['.'], false), first, 'no_reverse: parsed again');
  writeFileSync(file, '10.0.0.2 a.example\n');
  utimesSync(file, new Date(), new Date(Date.now() + 5000));
  const changed = read();
  assert.deepEqual(changed.name4.get('a.example.'), ['10.0.0.2'], 'a changed file is parsed again');
  // Each instance logs the fields it drops, as each CoreDNS instance does: no sharing then.
  writeFileSync(file, `10.0.0.3 ${'x'.repeat(1100)} b.example\n`);
  utimesSync(file, new Date(), new Date(Date.now() + 10000));
  const lines: string[] = [];
  const log = { debug() {}, info() {}, warning() {}, fatal() {}, debugEnabled: false, error(m: string) { lines.push(m); } };
  const a = read(['.'], true, log);
  const b = read(['.'], true, log);
  assert.notEqual(a, b);
  assert.equal(lines.length, 2);
});
