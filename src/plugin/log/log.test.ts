import { test } from 'node:test';
import assert from 'node:assert/strict';
import { COMBINED_LOG_FORMAT, COMMON_LOG_FORMAT, DEFAULT_LOG_FORMAT, parse, plugin } from './setup.ts';
import { ResponseClass } from '../pkg/response.ts';
import { CaptureWriter, StubHandler, captureLog, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { replyTo } from '../../wire/message.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { PluginError } from '../plugin.ts';
import type { Handler } from '../plugin.ts';

const A = { name: 'example.org.', type: 1, class: 1, ttl: 5, data: { address: '1.2.3.4' } };
const SOA = {
  name: 'example.org.', type: 6, class: 1, ttl: 5,
  data: { mname: 'ns.', rname: 'h.', serial: 1, refresh: 2, retry: 3, expire: 4, minimum: 5 },
};

const answer = new StubHandler('file', (req, w) => {
  const m = replyTo(req.msg);
  m.aa = true;
  if (req.name.startsWith('nx')) {
    m.rcode = 3;
    m.authority = [SOA];
  } else m.answer = [A];
  w.writeMsg(m);
  return m.rcode;
});

async function linesFor(corefile: string, names: string[], last: Handler = answer): Promise<string[]> {
  const h = (await runSetup(plugin, corefile)).chain(last);
  return captureLog(async () => {
    for (const n of names) {
      try {
        await settle(h.serveDNS(makeRequest(n, { id: 1, port: 5353 }), new CaptureWriter()));
      } catch { /* reported errors */ }
    }
  });
}

const strip = (l: string): string => l.replace(/ [0-9.]+s$/, ' D');

const ALL: ReadonlySet<number> = new Set([ResponseClass.All]);

test('log parse', async () => {
  await parseTable('log', parse, [
    ['. {\n log\n}', { rules: [{ nameScope: '.', format: DEFAULT_LOG_FORMAT, classes: ALL }] }],
    ['. {\n log Example.org\n}', { rules: [{ nameScope: 'Example.org.', format: DEFAULT_LOG_FORMAT, classes: ALL }] }],
    ['. {\n log a.org b.org.\n}', {
      rules: [{ nameScope: 'a.org.', format: DEFAULT_LOG_FORMAT, classes: ALL }, { nameScope: 'b.org.', format: DEFAULT_LOG_FORMAT, classes: ALL }],
    }],
    ['. {\n log . "{name} {type}"\n}', { rules: [{ nameScope: '.', format: '{name} {type}', classes: ALL }] }],
    ['. {\n log . "{common}"\n log a. "{combined} x"\n}', {
      rules: [{ nameScope: '.', format: COMMON_LOG_FORMAT, classes: ALL }, { nameScope: 'a.', format: COMBINED_LOG_FORMAT + ' x', classes: ALL }],
    }],
    // One argument is a name scope, even with a brace in it.
    ['. {\n log "{name}"\n}', { rules: [{ nameScope: '{name}.', format: DEFAULT_LOG_FORMAT, classes: ALL }] }],
    ['. {\n log {\n  class denial error\n  class success\n }\n}', {
      rules: [{ nameScope: '.', format: DEFAULT_LOG_FORMAT, classes: new Set([ResponseClass.Denial, ResponseClass.Error, ResponseClass.Success]) }],
    }],
    ['. {\n log . {\n  class nope\n }\n}', 'plugin/log: invalid Class: nope'],
    ['. {\n log . {\n  foo\n }\n}', "plugin/log: Corefile:3 - Error during parsing: unknown property 'foo'"],
    ['. {\n log . {\n  class\n }\n}', "plugin/log: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'class'"],
  ]);
});

test('log default format', async () => {
  const lines = await linesFor('. {\n log\n}', ['example.org.']);
  const req = makeRequest('example.org.');
  const m = replyTo(req.msg);
  m.aa = true;
  m.answer = [A];
  const size = encodeMessage(m).length;
  assert.deepEqual(lines.map(strip), [`[INFO] 127.0.0.1:5353 - 1 "A IN example.org. udp ${req.length} false 512" NOERROR qr,aa,rd ${size} D`]);
});

test('log {combined}, custom formats and one arg = a name', async () => {
  let lines = await linesFor('. {\n log . {combined}\n}', ['example.org.']);
  assert.match(lines[0], / "0"$/);
  lines = await linesFor('. {\n log . "{proto} Request: {name} {type} {>id}"\n}', ['Example.org.']);
  assert.deepEqual(lines, ['[INFO] udp Request: example.org. A 1']);
  lines = await linesFor('. {\n log {common}\n}', ['example.org.']);
  assert.deepEqual(lines, []);
  lines = await linesFor('. {\n log . "x {common} y"\n}', ['example.org.']);
  assert.match(lines[0], /^\[INFO\] x 127\.0\.0\.1:5353 - 1 .* y$/);
});

test('log classes and several names; first matching rule wins', async () => {
  let lines = await linesFor('. {\n log . {\n  class denial\n }\n}', ['example.org.', 'nx.example.org.']);
  assert.equal(lines.length, 1);
  assert.match(lines[0], /NXDOMAIN/);
  lines = await linesFor('. {\n log . {\n  class success\n  class error\n }\n}', ['example.org.', 'nx.example.org.']);
  assert.equal(lines.length, 1);
  assert.match(lines[0], /NOERROR/);
  lines = await linesFor('. {\n log example.org example.net "A {name}"\n log . "B {name}"\n}',
    ['a.example.org.', 'a.example.net.', 'a.example.com.']);
  assert.deepEqual(lines, ['[INFO] A a.example.org.', '[INFO] A a.example.net.', '[INFO] B a.example.com.']);
  lines = await linesFor('. {\n log Example.ORG "{name}"\n}', ['a.example.org.', 'x.org.']);
  assert.deepEqual(lines, ['[INFO] a.example.org.']);
});

test('log: nothing written and SERVFAIL returned logs a synthetic reply', async () => {
  const lines = await linesFor('. {\n log . "{rcode} {>rflags} {rsize} {class}"\n}', ['example.org.'], new StubHandler('hosts', () => 2));
  const req = makeRequest('example.org.');
  assert.deepEqual(lines, [`[INFO] SERVFAIL qr,rd ${req.length} IN`]);
});

test('log: nothing written and NOERROR returned logs "-"', async () => {
  const lines = await linesFor('. {\n log . "{rcode} {>rflags} {rsize}"\n}', ['example.org.'], new StubHandler('x', () => 0));
  assert.deepEqual(lines, ['[INFO] - - 0']);
});

test('log: a reported error is logged (no next plugin), a panic is not', async () => {
  const h = (await runSetup(plugin, '. {\n log . "{rcode}"\n}')).chain();
  let lines = await captureLog(() => {
    assert.throws(() => h.serveDNS(makeRequest('example.org.'), new CaptureWriter()), PluginError);
  });
  assert.deepEqual(lines, ['[INFO] SERVFAIL']);
  const h2 = (await runSetup(plugin, '. {\n log . "{rcode}"\n}')).chain(new StubHandler('p', () => { throw new TypeError('x'); }));
  lines = await captureLog(() => {
    assert.throws(() => h2.serveDNS(makeRequest('example.org.'), new CaptureWriter()), TypeError);
  });
  assert.deepEqual(lines, []);
});

test('log: async chain', async () => {
  const next = new StubHandler('f', async (req, w) => {
    await new Promise((r) => setTimeout(r, 5));
    const m = replyTo(req.msg);
    m.rcode = 5;
    w.writeMsg(m);
    return 5;
  });
  const lines = await linesFor('. {\n log . "{rcode} {duration}"\n}', ['example.org.'], next);
  assert.equal(lines.length, 1);
  const secs = Number(lines[0].split(' ')[2].slice(0, -1));
  assert.ok(secs >= 0.004 && secs < 1, lines[0]);
});
