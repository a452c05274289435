import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseTable, runSetup, makeRequest, CaptureWriter, StubHandler, settle, metricValue } from '../pkg/testing.ts';
import { parse, plugin } from './setup.ts';
import { AutoPath, cnamer, firstInSearchPath } from './autopath.ts';
import { trimZone } from '../pkg/zones.ts';
import type { Request } from '../../core/request.ts';
import type { ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import { Rcode, RRType } from '../../wire/constants.ts';
import { replyTo } from '../../wire/message.ts';
import { formatRecord } from '../../wire/text.ts';
import type { Message } from '../../wire/types.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'nodens-autopath-'));
const resolv = path.join(dir, 'resolv.conf');
writeFileSync(resolv, '# a pod\nnameserver 10.0.0.10\nsearch Default.svc.cluster.local svc.cluster.local. cluster.local\noptions ndots:5\n');
const domain = path.join(dir, 'domain.conf');
writeFileSync(domain, 'search a.test\ndomain b.test\n');
const empty = path.join(dir, 'empty.conf');
writeFileSync(empty, 'nameserver 10.0.0.10\n');

test('parse: RESOLV-CONF file or @plugin, zones, and the errors of setup.go', async () => {
  const search = ['default.svc.cluster.local.', 'svc.cluster.local.', 'cluster.local.', ''];
  await parseTable('autopath', parse, [
    [`. {\n autopath ${resolv}\n}`, { zones: ['.'], search, plugin: '' }],
    [`example.org {\n autopath Example.ORG 10.0.0.0/24 ${resolv}\n}`, { zones: ['example.org.', '0.0.10.in-addr.arpa.'], search, plugin: '' }],
    ['a.test b.test {\n autopath @kubernetes\n}', { zones: ['a.test.', 'b.test.'], search: [], plugin: 'kubernetes' }],
    [`. {\n autopath ${domain}\n}`, { search: ['b.test.', ''] }],
    [`. {\n autopath ${empty}\n}`, { search: [''] }],
    // The last line counts.
    [`. {\n autopath a.test @kubernetes\n autopath b.test @other\n}`, { zones: ['b.test.'], plugin: 'other' }],
    ['. {\n autopath\n}', 'plugin/autopath: no resolv-conf specified'],
    ['. {\n autopath /nonexistent/resolv.conf\n}', 'plugin/autopath: failed to parse "/nonexistent/resolv.conf": open /nonexistent/resolv.conf: no such file or directory'],
    // A directory reads as an empty file in miekg's ClientConfigFromFile.
    [`. {\n autopath ${dir}\n}`, { search: [''] }],
  ], { partial: true });
});

test('setup: @plugin must be an AutoPather; a plugin not in the block leaves autopath idle', async () => {
  // The plugin under test is the block's only one: @autopath names itself, which is no AutoPather.
  const s = await runSetup(plugin, '. {\n autopath @autopath\n}');
  s.chain();
  await assert.rejects(s.start(), { message: 'plugin/autopath: autopath does not implement the AutoPather interface' });
  const idle = await runSetup(plugin, '. {\n autopath @kubernetes\n}');
  idle.chain();
  await idle.start();
});

test('trimZone, firstInSearchPath (dnsutil.TrimZone, autopath.go)', () => {
  assert.equal(trimZone('Foo.Bar.ns.svc.cluster.local.', 'ns.svc.cluster.local.'), 'Foo.Bar');
  assert.equal(trimZone('ns.svc.cluster.local.', 'ns.svc.cluster.local.'), undefined);
  assert.equal(trimZone('local.', 'ns.svc.cluster.local.'), undefined);
  assert.equal(trimZone('foo.', ''), 'foo');
  assert.equal(trimZone('foo.', '.'), 'foo');
  assert.ok(firstInSearchPath('a.ns.svc.', ['ns.svc.', '']));
  assert.ok(firstInSearchPath('ns.svc.', ['ns.svc.', '']));
  assert.ok(!firstInSearchPath('a.svc.', ['ns.svc.', '']));
  assert.ok(firstInSearchPath('anything.', ['']));
});

test('cnamer: a CNAME to the first record of another name, the question put back; the message is not changed', () => {
  const m: Message = replyTo({ ...makeRequest('a.svc.cluster.local.').msg });
  m.answer = [
    { name: 'a.svc.cluster.local.', type: RRType.CNAME, class: 1, ttl: 10, data: { target: 'b.example.' } },
    { name: 'b.example.', type: RRType.A, class: 1, ttl: 20, data: { address: '192.0.2.1' } },
  ];
  const out = cnamer(m, 'A.ns.svc.cluster.local.');
  assert.deepEqual(out.answer.map(formatRecord), [
    'A.ns.svc.cluster.local.\t10\tIN\tCNAME\ta.svc.cluster.local.',
    'a.svc.cluster.local.\t10\tIN\tCNAME\tb.example.',
    'b.example.\t20\tIN\tA\t192.0.2.1',
  ]);
  assert.equal(out.question[0]!.name, 'A.ns.svc.cluster.local.');
  assert.equal(m.answer.length, 2);
  assert.equal(m.question[0]!.name, 'a.svc.cluster.local.');
  // The first record owned by the asked name is skipped (case-insensitively); the next one of another name gets the CNAME.
  const same = cnamer(m, 'A.SVC.cluster.local.');
  assert.deepEqual(same.answer.map((r) => r.name), ['A.SVC.cluster.local.', 'a.svc.cluster.local.', 'b.example.']);
  assert.equal(same.answer[0]!.ttl, 20);
  // NODATA: no CNAME.
  assert.deepEqual(cnamer({ ...m, answer: [] }, 'x.').answer, []);
});

/** A chain that answers from a table: name → rcode (with an A record for NOERROR, none for 'nodata'). */
function chain(table: Record<string, number | 'nodata' | 'async' | 'throw' | 'servfail'>, asked: string[]): StubHandler {
  return new StubHandler('kubernetes', (req: Request, w: ResponseWriter) => {
    asked.push(req.qname);
    const what = table[req.name] ?? Rcode.NXDOMAIN;
    if (what === 'throw') throw new PluginError(Rcode.SERVFAIL, 'plugin/kubernetes: boom');
    if (what === 'servfail') return Rcode.SERVFAIL;
    const m = replyTo(req.msg);
    m.aa = true;
    if (what === 'nodata') {
      w.writeMsg(m);
      return Rcode.NOERROR;
    }
    if (what === 'async') {
      m.answer.push({ name: req.qname, type: RRType.A, class: 1, ttl: 30, data: { address: '192.0.2.9' } });
      return Promise.resolve().then(() => { w.writeMsg(m); return Rcode.NOERROR; });
    }
    m.rcode = what;
    if (what === Rcode.NOERROR) m.answer.push({ name: req.qname, type: RRType.A, class: 1, ttl: 30, data: { address: '192.0.2.1' } });
    w.writeMsg(m);
    return what;
  });
}

const SEARCH = ['ns.svc.cluster.local.', 'svc.cluster.local.', 'cluster.local.', ''];

function autopath(table: Parameters<typeof chain>[0], search: string[] = SEARCH, zones = ['.']): { a: AutoPath; asked: string[] } {
  const asked: string[] = [];
  const a = new AutoPath(zones, []);
  a.searchFunc = () => search;
  a.next = chain(table, asked);
  return { a, asked };
}

async function run(a: AutoPath, name: string, server = 'dns://:53'): Promise<{ rc: number; m: Message | undefined; text: string[] }> {
  const w = new CaptureWriter();
  const req = makeRequest(name);
  (req as unknown as { server: string }).server = server;
  const rc = await settle(a.serveDNS(req, w));
  const m = w.last;
  return { rc, m, text: m === undefined ? [] : [`${m.question[0]!.name} rcode=${m.rcode}`, ...m.answer.map(formatRecord)] };
}

test('handler: found at the first, a middle and the last search element; CNAME from the asked name', async () => {
  const { a, asked } = autopath({
    'svc1.ns.svc.cluster.local.': Rcode.NOERROR, 'api.prod.svc.cluster.local.': Rcode.NOERROR,
    '10-0-0-1.ns.pod.cluster.local.': Rcode.NOERROR, 'example.com.': Rcode.NOERROR,
  });
  assert.deepEqual((await run(a, 'svc1.ns.svc.cluster.local.')).text, ['svc1.ns.svc.cluster.local. rcode=0', 'svc1.ns.svc.cluster.local.\t30\tIN\tA\t192.0.2.1']);
  assert.deepEqual(asked, ['svc1.ns.svc.cluster.local.']);
  asked.length = 0;
  assert.deepEqual((await run(a, 'Api.Prod.ns.svc.cluster.local.')).text, [
    'Api.Prod.ns.svc.cluster.local. rcode=0',
    'Api.Prod.ns.svc.cluster.local.\t30\tIN\tCNAME\tApi.Prod.svc.cluster.local.',
    'Api.Prod.svc.cluster.local.\t30\tIN\tA\t192.0.2.1',
  ]);
  assert.deepEqual(asked, ['Api.Prod.ns.svc.cluster.local.', 'Api.Prod.svc.cluster.local.']);
  assert.deepEqual((await run(a, '10-0-0-1.ns.pod.ns.svc.cluster.local.')).text.slice(0, 2),
    ['10-0-0-1.ns.pod.ns.svc.cluster.local. rcode=0', '10-0-0-1.ns.pod.ns.svc.cluster.local.\t30\tIN\tCNAME\t10-0-0-1.ns.pod.cluster.local.']);
  asked.length = 0;
  assert.deepEqual((await run(a, 'example.com.ns.svc.cluster.local.')).text.slice(1, 2), ['example.com.ns.svc.cluster.local.\t30\tIN\tCNAME\texample.com.']);
  assert.deepEqual(asked, ['example.com.ns.svc.cluster.local.', 'example.com.svc.cluster.local.', 'example.com.cluster.local.', 'example.com.']);
});

test('handler: NODATA counts as found; nothing found returns the first reply as it was', async () => {
  const { a, asked } = autopath({ 'x.svc.cluster.local.': 'nodata' });
  assert.deepEqual((await run(a, 'x.ns.svc.cluster.local.')).text, ['x.ns.svc.cluster.local. rcode=0']);
  asked.length = 0;
  const r = await run(a, 'nope.ns.svc.cluster.local.');
  assert.equal(r.rc, Rcode.NXDOMAIN);
  assert.deepEqual(r.text, ['nope.ns.svc.cluster.local. rcode=3']);
  assert.equal(asked.length, 4);
  // A first expansion that failed (SERVFAIL, nothing written) and no later success: SERVFAIL for the server to write.
  const { a: b } = autopath({ 'y.ns.svc.cluster.local.': 'servfail' });
  const s = await run(b, 'y.ns.svc.cluster.local.');
  assert.equal(s.rc, Rcode.SERVFAIL);
  assert.equal(s.m, undefined);
  // A SERVFAIL expansion is skipped over.
  const { a: c } = autopath({ 'z.ns.svc.cluster.local.': 'servfail', 'z.svc.cluster.local.': Rcode.NOERROR });
  assert.equal((await run(c, 'z.ns.svc.cluster.local.')).rc, Rcode.NOERROR);
});

test('handler: an error of the chain ends the walk; the first element itself cannot be trimmed', async () => {
  const { a, asked } = autopath({ 'e.svc.cluster.local.': 'throw' });
  await assert.rejects(run(a, 'e.ns.svc.cluster.local.'), { message: 'plugin/kubernetes: boom' });
  assert.deepEqual(asked, ['e.ns.svc.cluster.local.', 'e.svc.cluster.local.']);
  await assert.rejects(run(a, 'NS.svc.cluster.local.'),
    { message: 'trimzone: overshot qname: NS.svc.cluster.local.for zone ns.svc.cluster.local.' });
  // No next plugin: CoreDNS's error.
  const alone = new AutoPath(['.'], SEARCH);
  await assert.rejects(run(alone, 'x.ns.svc.cluster.local.'), { message: 'plugin/autopath: no next plugin found' });
});

test('handler: no autopath outside the zones, without a search path, or below another element', async () => {
  const { a, asked } = autopath({});
  a.searchFunc = () => undefined;
  await run(a, 'x.ns.svc.cluster.local.');
  assert.deepEqual(asked, ['x.ns.svc.cluster.local.']);
  const { a: b, asked: asked2 } = autopath({}, SEARCH, ['example.org.']);
  await run(b, 'x.ns.svc.cluster.local.');
  assert.deepEqual(asked2, ['x.ns.svc.cluster.local.']);
  const { a: c, asked: asked3 } = autopath({});
  await run(c, 'x.other.svc.cluster.local.');
  assert.deepEqual(asked3, ['x.other.svc.cluster.local.']);
  // A resolv.conf search list is used when there is no plugin.
  const d = new AutoPath(['.'], ['a.test.', '']);
  const asked4: string[] = [];
  d.next = chain({ 'x.': Rcode.NOERROR }, asked4);
  assert.deepEqual((await run(d, 'x.a.test.')).text[1], 'x.a.test.\t30\tIN\tCNAME\tx.');
});

test('handler: asynchronous answers along the walk', async () => {
  const { a } = autopath({ 'w.cluster.local.': 'async' });
  const w = new CaptureWriter();
  const r = a.serveDNS(makeRequest('w.ns.svc.cluster.local.'), w);
  assert.ok(r instanceof Promise);
  assert.equal(await r, Rcode.NOERROR);
  assert.deepEqual(w.last!.answer.map((x) => x.name), ['w.ns.svc.cluster.local.', 'w.cluster.local.']);
});

test('metric: coredns_autopath_success_total{server} counts answers from an expansion', async () => {
  const { a } = autopath({ 'm.svc.cluster.local.': Rcode.NOERROR });
  const before = await metricValue('coredns_autopath_success_total', { server: 'dns://:1053' });
  await run(a, 'm.ns.svc.cluster.local.', 'dns://:1053');
  await run(a, 'nope.ns.svc.cluster.local.', 'dns://:1053');
  await run(a, 'm.ns.svc.cluster.local.', 'dns://:2053');
  assert.equal(await metricValue('coredns_autopath_success_total', { server: 'dns://:1053' }), before + 1);
  assert.equal(await metricValue('coredns_autopath_success_total', { server: 'dns://:2053' }), 1);
});
