import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { applyRulesWire } from './header.ts';
import { CaptureWriter, StubHandler, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import type { Request } from '../../core/request.ts';
import type { Message } from '../../wire/types.ts';
import { replyTo } from '../../wire/message.ts';
import { encodeMessage } from '../../wire/encode.ts';

test('header parse', async () => {
  await parseTable('header', parse, [
    ['. {\n header {\n  query set aa\n }\n}', { query: [{ flag: 'aa', state: true }], response: [] }],
    ['. {\n header {\n  response set ra aa\n  response clear rd\n  query clear rd\n }\n}', {
      query: [{ flag: 'rd', state: false }],
      response: [{ flag: 'ra', state: true }, { flag: 'aa', state: true }, { flag: 'rd', state: false }],
    }],
    ['. {\n header {\n  QUERY SET RA\n  Response Clear AA\n }\n}', { query: [{ flag: 'ra', state: true }], response: [{ flag: 'aa', state: false }] }],
    // The first header line that yields rules is used; the lines after it are not read.
    ['. {\n header {\n }\n header {\n  query set rd\n }\n header {\n  bogus\n }\n}', { query: [{ flag: 'rd', state: true }], response: [] }],
    ['. {\n header\n}', "plugin/header: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'header'"],
    ['. {\n header {\n }\n}', "plugin/header: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after '}'"],
    ['. {\n header {\n  foo set aa\n }\n}', 'plugin/header: setting up rule: invalid selector=foo should be query or response'],
    ['. {\n header {\n  set aa\n }\n}', 'plugin/header: setting up rule: invalid selector=set should be query or response'],
    ['. {\n header {\n  query\n }\n}', 'plugin/header: setting up rule: no flag action provided'],
    ['. {\n header {\n  query set\n }\n}', 'plugin/header: setting up rule: invalid length for flags, at least one should be provided'],
    ['. {\n header {\n  response BAD aa\n }\n}', 'plugin/header: setting up rule: unknown flag action=bad, should be set or clear'],
    ['. {\n header {\n  response set ad\n }\n}', 'plugin/header: setting up rule: unknown/unsupported flag=ad'],
    ['. {\n header {\n  query clear CD\n }\n}', 'plugin/header: setting up rule: unknown/unsupported flag=cd'],
  ]);
});

function flags(m: Message): string {
  return (['aa', 'ra', 'rd'] as const).filter((f) => m[f]).join(' ');
}

test('header: query rules change what the rest of the chain sees; response rules change the reply', async () => {
  const seen: Request[] = [];
  const next = new StubHandler('whoami', (req, w) => {
    seen.push(req);
    const m = replyTo(req.msg);
    m.aa = true;
    w.writeMsg(m);
    return 0;
  });
  const h = (await runSetup(plugin, '. {\n header {\n  query clear rd\n  query set aa\n  response set ra\n  response clear aa\n }\n}')).chain(next);
  const req = makeRequest('example.org.', { rd: true });
  const w = new CaptureWriter();
  assert.equal(await settle(h.serveDNS(req, w)), 0);
  assert.equal(flags(seen[0]!.msg), 'aa');
  assert.equal(req.msg.rd, true, 'the original message is not changed');
  assert.equal(req.replyBase.rd, false, 'the server answers errors from the edited query');
  assert.equal(flags(w.last!), 'ra');
});

test('header: ready-made replies get the response rules in their flag bytes', async () => {
  const next = new StubHandler('cache', (req, w) => {
    const m = replyTo(req.msg);
    m.aa = true;
    w.writeWire(encodeMessage(m));
    return 0;
  });
  const h = (await runSetup(plugin, '. {\n header {\n  response set ra rd\n  response clear aa\n }\n}')).chain(next);
  const w = new CaptureWriter();
  await settle(h.serveDNS(makeRequest('example.org.', { rd: false }), w));
  assert.equal(flags(w.last!), 'ra rd');
  const b = new Uint8Array([0, 0, 0x85, 0x80]);
  applyRulesWire(b, [{ flag: 'aa', state: false }, { flag: 'rd', state: false }, { flag: 'ra', state: false }]);
  assert.deepEqual([...b], [0, 0, 0x80, 0]);
});

test('header: without query rules the request goes on unchanged; at the end of the chain there is no next plugin', async () => {
  const seen: Request[] = [];
  const next = new StubHandler('x', (req) => { seen.push(req); return 2; });
  const h = (await runSetup(plugin, '. {\n header {\n  response set ra\n }\n}')).chain(next);
  const req = makeRequest('example.org.');
  assert.equal(await settle(h.serveDNS(req, new CaptureWriter())), 2);
  assert.equal(seen[0], req);
  const end = (await runSetup(plugin, '. {\n header {\n  response set ra\n }\n}')).chain();
  assert.throws(() => end.serveDNS(req, new CaptureWriter()), /plugin\/header: no next plugin found/);
});
