import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { CaptureWriter, StubHandler, captureLog, makeRequest, metricValue, parseTable, runSetup, settle } from '../pkg/testing.ts';
import type { Handler } from '../plugin.ts';
import { replyTo } from '../../wire/message.ts';
import { formatRecord } from '../../wire/text.ts';

test('local parse', async () => {
  await parseTable('local', parse, [
    ['. {\n local\n}', { localhostPrefix: true }],
    ['. {\n local {\n  localhost_prefix off\n }\n}', { localhostPrefix: false }],
    ['. {\n local {\n  localhost_prefix on\n }\n}', { localhostPrefix: true }],
    ['. {\n local {\n  localhost_prefix off\n  localhost_prefix on\n }\n}', { localhostPrefix: true }],
    ['. {\n local x\n}', "plugin/local: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'x'"],
    ['. {\n local {\n  foo\n }\n}', "plugin/local: Corefile:3 - Error during parsing: unknown property 'foo'"],
    ['. {\n local {\n  localhost_prefix maybe\n }\n}', 'plugin/local: Corefile:3 - Error during parsing: localhost_prefix expects \'on\' or \'off\', got "maybe"'],
    ['. {\n local {\n  localhost_prefix\n }\n}', "plugin/local: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'localhost_prefix'"],
    ['. {\n local {\n  localhost_prefix on off\n }\n}', "plugin/local: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'off'"],
  ]);
});

const NEXT = 'next';
function chain(corefile: string): Promise<Handler> {
  const next = new StubHandler(NEXT, (req, w) => { w.writeMsg({ ...replyTo(req.msg), rcode: 99 }); return 0; });
  return runSetup(plugin, corefile).then((r) => r.chain(next));
}

/** [rcode, answer, authority] as presentation text; 'next' when the query went on. */
async function ask(h: Handler, name: string, type: number): Promise<unknown> {
  const w = new CaptureWriter();
  const req = makeRequest(name, { type });
  await settle(h.serveDNS(req, w));
  const m = w.last!;
  if (m.rcode === 99) return NEXT;
  assert.equal(m.aa, false, 'local does not set AA');
  return [m.rcode, m.answer.map(formatRecord), m.authority.map(formatRecord)];
}

const SOA = (o: string): string => `${o}\t604800\tIN\tSOA\tlocalhost. root.localhost. 1 0 0 0 604800`;

test('local answers every name of its zones as CoreDNS does', async () => {
  const h = await chain('. {\n local\n}');
  const rows: Array<[string, number, unknown]> = [
    ['localhost.', 1, [0, ['localhost.\t604800\tIN\tA\t127.0.0.1'], []]],
    ['localHOst.', 1, [0, ['localHOst.\t604800\tIN\tA\t127.0.0.1'], []]],
    ['localhost.', 28, [0, ['localhost.\t604800\tIN\tAAAA\t::1'], []]],
    ['localhost.', 2, [0, ['localhost.\t604800\tIN\tNS\tlocalhost.'], []]],
    ['localhost.', 6, [0, [SOA('localhost.')], []]],
    ['localhost.', 15, [0, [], [SOA('localhost.')]]],
    ['127.in-addr.arpa.', 1, [0, [], [SOA('127.in-addr.arpa.')]]],
    ['127.in-addr.arpa.', 28, [0, [], [SOA('127.in-addr.arpa.')]]],
    ['127.in-addr.arpa.', 2, [0, ['127.in-addr.arpa.\t604800\tIN\tNS\tlocalhost.'], []]],
    ['0.IN-addr.arpa.', 6, [0, [SOA('0.IN-addr.arpa.')], []]],
    ['255.in-addr.arpa.', 12, [0, [], [SOA('255.in-addr.arpa.')]]],
    ['1.0.0.127.in-addr.arpa.', 12, [0, ['1.0.0.127.in-addr.arpa.\t604800\tIN\tPTR\tlocalhost.'], []]],
    ['1.0.0.127.In-addr.arpa.', 15, [0, [], [SOA('127.In-addr.arpa.')]]],
    ['2.0.0.127.in-addr.arpa.', 12, [3, [], [SOA('127.in-addr.arpa.')]]],
    ['1.0.0.0.in-addr.arpa.', 12, [3, [], [SOA('0.in-addr.arpa.')]]],
    ['a.localhost.', 1, [0, ['a.localhost.\t604800\tIN\tA\t127.0.0.1'], []]],
    ['a.localhost.', 28, [0, ['a.localhost.\t604800\tIN\tAAAA\t::1'], []]],
    ['a.localhost.', 15, [0, [], [SOA('a.localhost.')]]],
    ['localhost.example.net.', 1, [0, ['localhost.example.net.\t604800\tIN\tA\t127.0.0.1'], []]],
    ['example.org.', 1, NEXT],
    ['in-addr.arpa.', 6, NEXT],
    ['mylocalhost.', 1, NEXT],
  ];
  for (const [name, type, want] of rows) assert.deepEqual(await ask(h, name, type), want, `${name} ${type}`);
});

test('local { localhost_prefix off }: names that only start with localhost. go on', async () => {
  const h = await chain('. {\n local {\n  localhost_prefix off\n }\n}');
  assert.equal(await ask(h, 'localhost.example.net.', 1), NEXT);
  assert.deepEqual(await ask(h, 'a.localhost.', 1), [0, ['a.localhost.\t604800\tIN\tA\t127.0.0.1'], []]);
});

test('local counts localhost subdomain queries and logs them at debug level', async () => {
  const h = await chain('. {\n local\n}');
  const before = await metricValue('coredns_local_localhost_requests_total');
  await ask(h, 'a.localhost.', 1);
  await ask(h, 'localhost.example.net.', 28);
  await ask(h, 'localhost.', 1); // the apex is not counted
  assert.equal(await metricValue('coredns_local_localhost_requests_total'), before + 2);
  const r = await runSetup(plugin, '. {\n local\n}');
  const dbg = r.chain(undefined);
  const lines = await captureLog(async () => {
    r.instance.log.debugEnabled = true;
    try {
      await settle(dbg.serveDNS(makeRequest('B.localhost.', { type: 28, remote: '10.0.0.9' }), new CaptureWriter()));
    } finally {
      r.instance.log.debugEnabled = false;
    }
  });
  assert.deepEqual(lines, ['[DEBUG] plugin/local: Intercepting localhost query for "b.localhost." AAAA, from 10.0.0.9']);
});

test('local at the end of the chain: other names have no next plugin', async () => {
  const h = (await runSetup(plugin, '. {\n local\n}')).chain();
  assert.throws(() => h.serveDNS(makeRequest('example.org.'), new CaptureWriter()), /plugin\/local: no next plugin found/);
});
