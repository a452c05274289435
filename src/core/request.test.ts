import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Request, MAX_LOOKUP_DEPTH, type SubQueryRouter } from './request.ts';
import { newQuery } from '../wire/message.ts';
import { encodeMessage } from '../wire/encode.ts';
import { decodeMessage, scanQuery } from '../wire/decode.ts';
import { seededRandom } from '../wire/prng.ts';
import type { Message } from '../wire/types.ts';

function request(name: string, type = 1, router?: SubQueryRouter): Request {
  const q = newQuery(name, type);
  q.edns = { udpSize: 1232, version: 0, do: true, z: 0, options: [{ code: 10, data: new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]) }] };
  const wire = encodeMessage(q);
  return new Request(decodeMessage(wire), wire, 'udp', '192.0.2.1', 5353, '127.0.0.1', 53, 'dns://:53', 1n, router);
}

test('derive: a new name is lower-cased afresh, even when it has the length of the old one', () => {
  const r = request('AAAA.example.org.');
  assert.equal(r.name, 'aaaa.example.org.');
  const d = r.derive({ name: 'BBBB.example.org.' });
  assert.equal(d.name, 'bbbb.example.org.');
  assert.equal(d.qname, 'BBBB.example.org.');
  // The original is untouched.
  assert.equal(r.name, 'aaaa.example.org.');
  assert.equal(r.msg.question[0]!.name, 'AAAA.example.org.');
});

test('derive: type, class and transport; size follows the transport', () => {
  const r = request('a.example.');
  const d = r.derive({ type: 28, class: 3, proto: 'tcp' });
  assert.deepEqual([d.qtype, d.qclass, d.proto, d.size], [28, 3, 'tcp', 65535]);
  assert.deepEqual([r.qtype, r.qclass, r.proto, r.size], [1, 1, 'udp', 1232]);
  assert.equal(d.remoteAddress, '192.0.2.1');
  assert.equal(d.server, 'dns://:53');
});

test('derive: the wire form is the client\'s bytes until the message changes, then the new message encoded', () => {
  const r = request('a.example.');
  assert.equal(r.derive({ proto: 'tcp' }).wire, r.wire);
  const d = r.derive({ msg: { ...r.msg, ad: true } });
  assert.notEqual(d.wire, r.wire);
  assert.equal(decodeMessage(d.wire).ad, true);
  const renamed = r.derive({ name: 'longer-name.example.' });
  assert.equal(decodeMessage(renamed.wire).question[0]!.name, 'longer-name.example.');
  assert.equal(renamed.length, renamed.wire.length);
  assert.notEqual(renamed.questionEnd, r.questionEnd);
});

test('derive: metadata, Extended DNS Errors and the plugin at work are shared with the original', () => {
  const r = request('a.example.');
  r.beginMetadata();
  const d = r.derive({ name: 'b.example.' });
  d.setMetadata('test/label', 'x');
  d.addExtendedError({ code: 15, data: new Uint8Array([0, 22]) });
  d.plugin = 'forward';
  assert.equal(r.metadata('test/label'), 'x');
  assert.equal(r.extendedErrors?.length, 1);
  assert.equal(r.plugin, 'forward');
  r.setMetadata('test/lazy', () => 'computed');
  assert.equal(d.metadata('test/lazy'), 'computed');
  assert.deepEqual(d.metadataLabels(), ['test/label', 'test/lazy']);
  // A derivation of a derivation still shares.
  d.derive({ type: 28 }).setMetadata('test/deep', 'y');
  assert.equal(r.metadata('test/deep'), 'y');
});

test('metadata: setMetadata is a no-op until the metadata collection began it (metadata.SetValueFunc); values always work', () => {
  const r = request('a.example.');
  assert.equal(r.setMetadata('test/label', 'x'), false);
  assert.equal(r.metadata('test/label'), undefined);
  assert.deepEqual(r.metadataLabels(), []);
  r.setValue('forward/upstream', '192.0.2.53:53');
  assert.equal(r.derive({ type: 28 }).value('forward/upstream'), '192.0.2.53:53');
  r.beginMetadata();
  assert.equal(r.derive({ type: 28 }).setMetadata('test/label', 'x'), true);
  assert.equal(r.metadata('test/label'), 'x');
  // A new collection starts afresh (a later candidate block's collector).
  r.beginMetadata();
  assert.equal(r.metadata('test/label'), undefined);
  r.view = 'internal';
  assert.equal(r.derive({ type: 28 }).view, 'internal');
});

test('lookup: without a running server it rejects with CoreDNS\'s text', async () => {
  await assert.rejects(request('a.example.').lookup('b.example.', 1), /no full server is running/);
});

test('lookup: a copy of the query (flags, EDNS options) with the new question, its own context', async () => {
  let seen: Request | undefined;
  const router: SubQueryRouter = {
    exchange(req) {
      seen = req;
      const m: Message = { ...req.msg, qr: true, answer: [] };
      return Promise.resolve(m);
    },
  };
  const r = request('a.example.', 1, router);
  r.beginMetadata();
  r.setMetadata('test/label', 'outer');
  const reply = await r.lookup('target.example', 28);
  assert.ok(seen !== undefined);
  assert.deepEqual(seen.msg.question, [{ name: 'target.example.', type: 28, class: 1 }]);
  assert.equal(seen.msg.id, r.msg.id);
  assert.equal(seen.msg.rd, r.msg.rd);
  assert.deepEqual(seen.msg.edns, r.msg.edns);
  assert.notEqual(seen.msg.edns, r.msg.edns); // a copy, not the same object
  assert.equal(seen.remoteAddress, '192.0.2.1');
  // CoreDNS serves a sub-query with the query's context: its metadata until a block's collection begins anew.
  assert.equal(seen.metadata('test/label'), 'outer');
  seen.beginMetadata();
  assert.equal(seen.metadata('test/label'), undefined);
  seen.setMetadata('test/inner', '1');
  assert.equal(seen.metadata('test/inner'), '1');
  assert.equal(r.metadata('test/inner'), undefined);
  assert.equal(r.metadata('test/label'), 'outer');
  assert.equal(reply?.question[0]!.name, 'target.example.');
});

test('lookup: nesting is bounded (a CNAME that leads back to itself cannot recurse for ever)', async () => {
  let calls = 0;
  const router: SubQueryRouter = {
    exchange(req) {
      calls++;
      return req.lookup(req.name, req.qtype);
    },
  };
  await assert.rejects(request('loop.example.', 1, router).lookup('loop.example.', 1), /nested more than 8 deep/);
  assert.equal(calls, MAX_LOOKUP_DEPTH);
});

test('deadline: Infinity by default; derive keeps the earlier one; lookups carry it', async () => {
  let seen: Request | undefined;
  const router: SubQueryRouter = { exchange(req) { seen = req; return Promise.resolve(undefined); } };
  const r = request('example.org.', 1, router);
  assert.equal(r.deadline, Infinity);
  const d = r.derive({ deadline: 1000 });
  assert.equal(d.deadline, 1000);
  assert.equal(d.derive({ deadline: 2000 }).deadline, 1000);
  assert.equal(d.derive({ deadline: 500 }).deadline, 500);
  assert.equal(d.derive({ name: 'x.' }).deadline, 1000);
  await d.lookup('other.example.', 1);
  assert.equal(seen!.deadline, 1000);
});

test('values: a lookup starts with a copy of the query\'s values (CoreDNS context values); what it sets stays its own', async () => {
  let seen: Request | undefined;
  const router: SubQueryRouter = { exchange(req) { seen = req; return Promise.resolve(undefined); } };
  const r = request('example.org.', 1, router);
  await r.lookup('other.example.', 1);
  assert.equal(seen!.value('k'), undefined);
  r.derive({ type: 28 }).setValue('k', 'v');
  await r.lookup('other.example.', 1);
  assert.equal(seen!.value('k'), 'v');
  seen!.setValue('sub', '1');
  assert.equal(r.value('sub'), undefined);
});

test('limitUdpSize (bufsize): the root and every derived request report the lower size; never raised; lookups ask with it', async () => {
  let seen: Request | undefined;
  const router: SubQueryRouter = { exchange(req) { seen = req; return Promise.resolve(undefined); } };
  const r = request('example.org.', 1, router);
  const d = r.derive({ name: 'x.example.org.' });
  d.limitUdpSize(1000);
  assert.equal(r.udpSize, 1000);
  assert.equal(r.size, 1000);
  assert.equal(r.msg.edns!.udpSize, 1232, 'the message itself is not changed');
  r.limitUdpSize(1100);
  assert.equal(d.udpSize, 1000, 'a later, larger limit does not raise it');
  await r.lookup('other.example.', 1);
  assert.equal(seen!.msg.edns!.udpSize, 1000);
  const plain = new Request(newQuery('a.', 1), undefined, 'udp', '192.0.2.1', 1, '127.0.0.1', 53, 'dns://:53', 1n);
  plain.limitUdpSize(600);
  assert.equal(plain.udpSize, undefined);
  assert.equal(plain.size, 512);
});

test('replyBase: the received query unless a plugin edited it in place (header)', () => {
  const r = request('example.org.');
  assert.equal(r.replyBase, r.msg);
  const msg: Message = { ...r.msg, rd: false };
  const d = r.derive({ msg });
  assert.equal(r.replyBase, r.msg, 'a plain derive is not an edit');
  const e = d.derive({ msg, inPlace: true });
  assert.equal(r.replyBase, msg);
  assert.equal(e.replyBase, msg);
});

test('a request made from a scan answers as the decoded one, and decodes its Message only when asked', () => {
  const q = newQuery('WwW.Example.ORG.', 28);
  q.id = 0xbeef;
  q.cd = true;
  q.ad = true;
  q.edns = { udpSize: 700, version: 0, do: true, z: 3, options: [] };
  const wire = encodeMessage(q);
  const scanned = scanQuery(wire)!;
  const s = new Request(undefined, wire, 'udp', '192.0.2.1', 5353, '127.0.0.1', 53, 'dns://:53', 1n, undefined, scanned);
  const d = new Request(decodeMessage(wire), wire, 'udp', '192.0.2.1', 5353, '127.0.0.1', 53, 'dns://:53', 1n);
  const facts = (r: Request): unknown[] => [r.qname, r.name, r.qtype, r.qclass, r.do, r.udpSize, r.size, r.id, r.flags, r.edns,
    r.replyEdns, r.questionEnd, r.length, r.hasWire];
  assert.deepEqual(facts(s), facts(d));
  assert.equal(s.scannedQuestion, true);
  assert.equal(d.scannedQuestion, false);
  // Asked for, the Message is the decoded one, and the OPT already handed out is its OPT.
  const edns = s.edns;
  assert.deepEqual(s.msg, d.msg);
  assert.equal(s.msg.edns, edns);
  assert.equal(s.scannedQuestion, false);
  assert.deepEqual(facts(s), facts(d));
  // An in-place edit is seen through the accessors, as for a decoded request.
  const s2 = new Request(undefined, wire, 'udp', '192.0.2.1', 5353, '127.0.0.1', 53, 'dns://:53', 1n, undefined, scanQuery(wire));
  s2.derive({ msg: { ...q, question: [{ name: 'x.', type: 1, class: 1 }], edns: { ...q.edns, udpSize: 1400, do: false } }, inPlace: true });
  assert.deepEqual([s2.qtype, s2.do, s2.udpSize, s2.replyEdns?.udpSize, s2.edns?.udpSize], [1, false, 1400, 1400, 700]);
  assert.throws(() => new Request(undefined, wire, 'udp', '192.0.2.1', 5353, '127.0.0.1', 53, 'dns://:53', 1n), /a message or a scanned query/);
});

test('canonicalWire: whenever a scanned query says so, its bytes are its message encoded (20,000 random queries)', () => {
  const rand = seededRandom(0x1234567);
  let canonical = 0;
  for (let i = 0; i < 20_000; i++) {
    // a name of random labels (any bytes: dots, backslashes, spaces, upper case), random header flags, maybe an OPT
    const labels: Buffer[] = [];
    for (let k = rand(4); k > 0; k--) labels.push(Buffer.from(Array.from({ length: 1 + rand(8) }, () => rand(5) === 0 ? rand(256) : 97 + rand(26))));
    const name = Buffer.concat([...labels.flatMap((l) => [Buffer.of(l.length), l]), Buffer.of(0)]);
    const header = Buffer.alloc(12);
    header.writeUInt16BE(rand(65536), 0);
    header.writeUInt16BE(rand(65536) & ~0x8000 & ~0x7800, 2); // a query, opcode QUERY; any other bit
    header.writeUInt16BE(1, 4);
    const opt = rand(3) !== 0;
    header.writeUInt16BE(opt || rand(8) === 0 ? 1 : 0, 10); // sometimes a count that lies
    const tail = Buffer.from([rand(256), rand(256), rand(256), rand(256)]);
    const parts = [header, name, tail];
    if (opt) {
      const o = Buffer.alloc(11);
      o.writeUInt16BE(41, 1);
      o.writeUInt16BE(rand(65536), 3);
      o[5] = rand(6) === 0 ? rand(256) : 0; // extended rcode
      o[6] = rand(3) === 0 ? rand(256) : 0; // version
      o.writeUInt16BE(rand(65536), 7);
      parts.push(o);
    }
    if (rand(10) === 0) parts.push(Buffer.from([rand(256)])); // trailing bytes
    const wire = Buffer.concat(parts);
    const s = scanQuery(wire);
    if (s === undefined) continue;
    const r = new Request(undefined, wire, 'udp', '192.0.2.1', 5353, '127.0.0.1', 53, 'dns://:53', 1n, undefined, s);
    const encoded = encodeMessage(decodeMessage(wire));
    if (!r.canonicalWire) continue; // (conservative: an OPT's extended rcode bits round-trip too, but are rare)
    canonical++;
    assert.deepEqual(Buffer.from(encoded), wire, wire.toString('hex'));
  }
  assert.ok(canonical > 5000, `canonical: ${canonical}`);
});

test('withAdBit: a scanned query gets a copy of its bytes with AD set, still undecoded; others a derived message', () => {
  const q = newQuery('Case.Example.', 28);
  q.edns = { udpSize: 1232, version: 0, do: true, z: 0, options: [] };
  const wire = encodeMessage(q);
  const r = new Request(undefined, wire, 'udp', '192.0.2.1', 5353, '127.0.0.1', 53, 'dns://:53', 1n, undefined, scanQuery(wire));
  r.zone = 'example.';
  const d = r.withAdBit();
  assert.notEqual(d, r);
  assert.equal(d.scannedQuestion, true, 'not decoded');
  assert.equal(d.flags & 0x20, 0x20);
  assert.equal(r.flags & 0x20, 0, 'the original keeps its bits');
  assert.deepEqual([d.qname, d.name, d.qtype, d.qclass, d.do, d.id, d.zone, d.size], [r.qname, r.name, 28, 1, true, r.id, 'example.', 1232]);
  assert.ok(d.canonicalWire);
  assert.equal(d.msg.ad, true);
  assert.deepEqual(encodeMessage(d.msg), d.wire);
  assert.equal(d.withAdBit(), d, 'already set: itself');
  d.setValue('k', 'v');
  assert.equal(r.value('k'), 'v', 'context shared with the original');
  // decoded (or edited) queries take derive's path
  const decoded = request('a.example.');
  const dd = decoded.withAdBit();
  assert.equal(dd.msg.ad, true);
  assert.equal(decoded.msg.ad, false);
});
