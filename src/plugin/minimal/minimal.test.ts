import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { CaptureWriter, StubHandler, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { replyTo } from '../../wire/message.ts';
import { PluginError } from '../plugin.ts';
import type { Message } from '../../wire/types.ts';

const A = { name: 'example.org.', type: 1, class: 1, ttl: 5, data: { address: '1.2.3.4' } };
const NS = { name: 'example.org.', type: 2, class: 1, ttl: 5, data: { target: 'ns.example.org.' } };
const SOA = {
  name: 'example.org.', type: 6, class: 1, ttl: 5,
  data: { mname: 'ns.', rname: 'h.', serial: 1, refresh: 2, retry: 3, expire: 4, minimum: 5 },
};
const GLUE = { name: 'ns.example.org.', type: 1, class: 1, ttl: 5, data: { address: '5.6.7.8' } };

async function through(reply: (m: Message) => void, rc = 0) {
  const next = new StubHandler('next', (req, w) => {
    const m = replyTo(req.msg);
    reply(m);
    w.writeMsg(m);
    return rc;
  });
  const h = (await runSetup(plugin, '. {\n minimal\n}')).chain(next);
  const w = new CaptureWriter();
  const r = await settle(h.serveDNS(makeRequest('example.org.'), w));
  return { r, w };
}

test('minimal parse', async () => {
  await parseTable('minimal', parse, [
    ['. {\n minimal\n}', {}],
    // Only the first line of a block is read (CoreDNS).
    ['. {\n minimal\n minimal yes\n}', {}],
    ['. {\n minimal yes\n}', "plugin/minimal: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'yes'"],
  ]);
});

test('minimal strips authority and additional (and OPT) of positive answers', async () => {
  const { r, w } = await through((m) => {
    m.answer = [A];
    m.authority = [NS];
    m.additional = [GLUE];
    m.edns = { udpSize: 4096, version: 0, do: false, z: 0, options: [] };
  });
  assert.equal(r, 0);
  assert.deepEqual(w.last!.answer, [A]);
  assert.deepEqual(w.last!.authority, []);
  assert.deepEqual(w.last!.additional, []);
  assert.equal(w.last!.edns, undefined);
});

test('minimal passes denials, errors and delegations through untouched', async () => {
  for (const set of [
    (m: Message) => { m.authority = [SOA]; },
    (m: Message) => { m.rcode = 3; m.authority = [SOA]; },
    (m: Message) => { m.rcode = 5; m.additional = [GLUE]; },
    (m: Message) => { m.authority = [NS]; m.additional = [GLUE]; },
  ]) {
    const { r, w } = await through(set);
    assert.equal(r, 0);
    const m = replyTo(makeRequest('example.org.').msg);
    set(m);
    assert.deepEqual(w.last!.authority, m.authority);
    assert.deepEqual(w.last!.additional, m.additional);
  }
});

test('minimal: nothing written → the rcode goes back to the server; errors pass unchanged', async () => {
  const h = (await runSetup(plugin, '. {\n minimal\n}')).chain(new StubHandler('hosts', () => 2));
  const w = new CaptureWriter();
  assert.equal(h.serveDNS(makeRequest('example.org.'), w), 2);
  assert.equal(w.msgs.length, 0);
  const boom = new PluginError(2, 'boom');
  const h2 = (await runSetup(plugin, '. {\n minimal\n}')).chain(new StubHandler('f', (req, w2) => {
    w2.writeMsg(replyTo(req.msg));
    throw boom;
  }));
  assert.throws(() => h2.serveDNS(makeRequest('example.org.'), w), (e) => e === boom);
  assert.equal(w.msgs.length, 0);
});

test('minimal: async next', async () => {
  const next = new StubHandler('next', async (req, w) => {
    const m = replyTo(req.msg);
    m.answer = [A];
    m.additional = [GLUE];
    w.writeMsg(m);
    return 0;
  });
  const h = (await runSetup(plugin, '. {\n minimal\n}')).chain(next);
  const w = new CaptureWriter();
  assert.equal(await settle(h.serveDNS(makeRequest('example.org.'), w)), 0);
  assert.deepEqual(w.last!.additional, []);
});
