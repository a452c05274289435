import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { parse, plugin } from './setup.ts';
import { CaptureWriter, StubHandler, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import type { Request } from '../../core/request.ts';
import type { Message } from '../../wire/types.ts';
import { replyTo } from '../../wire/message.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { toHex } from '../../wire/text.ts';

test('nsid parse', async () => {
  await parseTable('nsid', parse, [
    ['. {\n nsid\n}', { data: hostname() }],
    ['. {\n nsid ps0\n}', { data: 'ps0' }],
    ['. {\n nsid "ps0"\n}', { data: 'ps0' }],
    ['. {\n nsid a b  c\n}', { data: 'a b c' }],
    ['. {\n nsid "a  b"\n}', { data: 'a  b' }],
    ['. {\n nsid a\n nsid b\n}', 'plugin/nsid: this plugin can only be used once per Server Block'],
  ]);
});

/** A request with the NSID option (empty, as dig +nsid sends it), plus EDNS otherwise as given. */
function nsidQuery(name: string, o: { udpSize?: number; do?: boolean } = {}): Request {
  const r = makeRequest(name, { edns: { udpSize: o.udpSize ?? 1232, do: o.do ?? false } });
  const m: Message = { ...r.msg, edns: { ...r.msg.edns!, options: [{ code: 3, data: new Uint8Array(0) }] } };
  return r.derive({ msg: m });
}

function answering(withOpt: boolean): StubHandler {
  return new StubHandler('whoami', (req, w) => {
    const m = replyTo(req.msg);
    if (withOpt) m.edns = { udpSize: 4096, version: 0, do: false, z: 0, options: [{ code: 10, data: new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]) }] };
    w.writeMsg(m);
    return 0;
  });
}

test('nsid adds its option (the data as bytes; hex on the wire dump) to a reply without OPT: DO set as miekg SetEdns0(size, true)', async () => {
  const h = (await runSetup(plugin, '. {\n nsid ps0\n}')).chain(answering(false));
  const w = new CaptureWriter();
  assert.equal(await settle(h.serveDNS(nsidQuery('example.org.', { udpSize: 1400 }), w)), 0);
  const e = w.last!.edns!;
  assert.equal(e.udpSize, 1400);
  assert.equal(e.do, true);
  assert.deepEqual(e.options.map((o) => [o.code, toHex(o.data)]), [[3, '707330']]);
});

test('nsid appends to an existing OPT, or overwrites an NSID option already there', async () => {
  const h = (await runSetup(plugin, '. {\n nsid éx\n}')).chain(answering(true));
  const w = new CaptureWriter();
  await settle(h.serveDNS(nsidQuery('example.org.'), w));
  assert.deepEqual(w.last!.edns!.options.map((o) => [o.code, toHex(o.data)]), [[10, '0102030405060708'], [3, 'c3a978']]);
  const h2 = (await runSetup(plugin, '. {\n nsid new\n}')).chain(new StubHandler('x', (req, w2) => {
    const m = replyTo(req.msg);
    m.edns = { udpSize: 512, version: 0, do: false, z: 0, options: [{ code: 3, data: new Uint8Array([0x6f, 0x6c, 0x64]) }] };
    w2.writeMsg(m);
    return 0;
  }));
  const w2 = new CaptureWriter();
  await settle(h2.serveDNS(nsidQuery('example.org.'), w2));
  assert.deepEqual(w2.last!.edns!.options.map((o) => [o.code, Buffer.from(o.data).toString()]), [[3, 'new']]);
});

test('nsid: ready-made replies (cache hits, forwarded answers) get the option too', async () => {
  const h = (await runSetup(plugin, '. {\n nsid ps0\n}')).chain(new StubHandler('cache', (req, w) => {
    w.writeWire(encodeMessage(replyTo(req.msg)));
    return 0;
  }));
  const w = new CaptureWriter();
  await settle(h.serveDNS(nsidQuery('example.org.'), w));
  const back = decodeMessage(encodeMessage(w.last!));
  assert.deepEqual(back.edns!.options.map((o) => [o.code, toHex(o.data)]), [[3, '707330']]);
});

test('nsid leaves replies alone when the query has no NSID option or no EDNS', async () => {
  const h = (await runSetup(plugin, '. {\n nsid ps0\n}')).chain(answering(false));
  for (const req of [makeRequest('example.org.', { edns: { udpSize: 1232 } }), makeRequest('example.org.')]) {
    const w = new CaptureWriter();
    await settle(h.serveDNS(req, w));
    assert.equal(w.last!.edns, undefined);
  }
});

test('nsid at the end of the chain: no next plugin', async () => {
  const h = (await runSetup(plugin, '. {\n nsid\n}')).chain();
  assert.throws(() => h.serveDNS(nsidQuery('example.org.'), new CaptureWriter()), /plugin\/nsid: no next plugin found/);
});
