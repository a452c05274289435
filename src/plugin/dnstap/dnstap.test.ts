import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Dnstap, type FrameSink } from './dnstap.ts';
import { decodeTap, type DecodedTap } from './testutil.ts';
import { CaptureWriter, StubHandler, makeRequest, settle } from '../pkg/testing.ts';
import { compileFormat } from '../pkg/replacer.ts';
import { PluginError } from '../plugin.ts';
import { Rcode } from '../../wire/constants.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { replyTo } from '../../wire/message.ts';
import { isTapper, TapType } from '../pkg/dnstap.ts';

class Sink implements FrameSink {
  accepting = true;
  dropped = 0;
  readonly frames: Buffer[] = [];
  drop(): void { this.dropped++; }
  send(f: Buffer): void { this.frames.push(f); }
  get taps(): DecodedTap[] { return this.frames.map((f) => decodeTap(f.subarray(4))); }
}

const field = (d: DecodedTap, name: string): number | Buffer | undefined => d.message.find((x) => x[0] === name)?.[1];
const names = (d: DecodedTap): string[] => d.message.map((x) => x[0]);

const answer = new StubHandler('stub', (req, w) => {
  const m = replyTo(req.msg);
  m.answer.push({ name: req.qname, type: 1, class: 1, ttl: 60, data: { address: '10.0.0.1' } });
  w.writeMsg(m);
  return 0;
});

test('dnstap: CLIENT_QUERY then CLIENT_RESPONSE, with the client address and port (CoreDNS TestDnstap)', async () => {
  const sink = new Sink();
  const h = new Dnstap(sink, false, 'id', 'ver', undefined);
  h.next = answer;
  const w = new CaptureWriter();
  assert.equal(await settle(h.serveDNS(makeRequest('example.org.', { remote: '10.240.0.1', port: 40212 }), w)), 0);
  assert.equal(w.msgs.length, 1);
  const [q, r] = sink.taps;
  assert.deepEqual(q!.top, [['identity', Buffer.from('id')], ['version', Buffer.from('ver')], ['type', 1]]);
  assert.deepEqual(names(q!), ['type', 'socket_family', 'socket_protocol', 'query_address', 'query_port', 'query_time_sec', 'query_time_nsec']);
  assert.equal(field(q!, 'type'), TapType.CLIENT_QUERY);
  assert.deepEqual(field(q!, 'query_address'), Buffer.from([10, 240, 0, 1]));
  assert.equal(field(q!, 'query_port'), 40212);
  assert.deepEqual(names(r!), ['type', 'socket_family', 'socket_protocol', 'query_address', 'query_port', 'query_time_sec',
    'query_time_nsec', 'response_time_sec', 'response_time_nsec']);
  assert.equal(field(r!, 'type'), TapType.CLIENT_RESPONSE);
  assert.equal(field(r!, 'query_time_sec'), field(q!, 'query_time_sec'));
  assert.equal(field(r!, 'query_time_nsec'), field(q!, 'query_time_nsec'));
});

test('dnstap full: the query as received and the reply as the client gets it', async () => {
  const sink = new Sink();
  const h = new Dnstap(sink, true, 'id', 'ver', undefined);
  h.next = answer;
  const w = new CaptureWriter();
  const req = makeRequest('example.org.', { proto: 'tcp', remote: '2001:db8::5', port: 1234, edns: { udpSize: 1232 } });
  await settle(h.serveDNS(req, w));
  const [q, r] = sink.taps;
  assert.equal(field(q!, 'socket_family'), 2);
  assert.equal(field(q!, 'socket_protocol'), 2);
  assert.deepEqual(field(q!, 'query_message'), encodeMessage(req.msg));
  const tapped = decodeMessage(field(r!, 'response_message') as Buffer);
  assert.deepEqual(tapped.answer, w.last!.answer);
  assert.equal(tapped.id, req.msg.id);
});

test('dnstap full: a wire reply (cache hit, forward) is tapped as the message the client gets', async () => {
  const sink = new Sink();
  const h = new Dnstap(sink, true, 'id', 'ver', undefined);
  h.next = new StubHandler('wire', (rq, w) => {
    const m = replyTo(rq.msg);
    m.answer.push({ name: rq.qname, type: 1, class: 1, ttl: 60, data: { address: '10.0.0.2' } });
    w.writeWire(encodeMessage(m, { compress: true }));
    return 0;
  });
  const w = new CaptureWriter();
  await settle(h.serveDNS(makeRequest('example.org.'), w));
  assert.equal(w.msgs.length, 1);
  assert.deepEqual(decodeMessage(field(sink.taps[1]!, 'response_message') as Buffer).answer, w.last!.answer);
});

test('dnstap: a SERVFAIL the server writes is tapped as CoreDNS does (TestDnstapDeferredError), thrown or returned', async () => {
  for (const next of [
    new StubHandler('fail', () => Rcode.SERVFAIL),
    new StubHandler('throw', () => { throw new PluginError(Rcode.REFUSED, 'no'); }),
    new StubHandler('async', () => Promise.resolve(Rcode.SERVFAIL)),
  ]) {
    const sink = new Sink();
    const h = new Dnstap(sink, true, 'id', 'ver', undefined);
    h.next = next;
    const req = makeRequest('example.org.', { cd: true });
    try {
      await settle(h.serveDNS(req, new CaptureWriter()));
    } catch (e) {
      assert.ok(e instanceof PluginError);
    }
    const taps = sink.taps;
    assert.equal(taps.length, 2, next.name);
    assert.equal(field(taps[1]!, 'type'), TapType.CLIENT_RESPONSE);
    const m = decodeMessage(field(taps[1]!, 'response_message') as Buffer);
    assert.equal(m.rcode, next.name === 'throw' ? Rcode.REFUSED : Rcode.SERVFAIL);
    assert.equal(m.qr, true);
    assert.equal(m.cd, true);
    assert.equal(m.edns, undefined);
  }
  // NOERROR without a write, and other exceptions (a Go panic), tap no response.
  for (const next of [new StubHandler('silent', () => 0), new StubHandler('panic', () => { throw new Error('boom'); })]) {
    const sink = new Sink();
    const h = new Dnstap(sink, false, 'id', 'ver', undefined);
    h.next = next;
    try {
      await settle(h.serveDNS(makeRequest('example.org.'), new CaptureWriter()));
    } catch { /* the panic */ }
    assert.equal(sink.taps.length, 1, next.name);
  }
});

test('dnstap: no next plugin is CoreDNS\'s error, and the SERVFAIL is tapped', async () => {
  const sink = new Sink();
  const h = new Dnstap(sink, false, 'id', 'ver', undefined);
  await assert.rejects(async () => settle(h.serveDNS(makeRequest('a.'), new CaptureWriter())), /plugin\/dnstap: no next plugin found/);
  assert.equal(sink.taps.length, 2);
});

test('dnstap extra: placeholders and metadata are filled per message (CoreDNS TestDnstap extra)', async () => {
  const sink = new Sink();
  const h = new Dnstap(sink, false, 'id', 'ver', compileFormat('extra_field_{/metadata/test}_{type}_{name}_{class}_{proto}_{remote}_{port}_{local}_{rcode}'));
  h.next = answer;
  const req = makeRequest('example.org.', { remote: '10.240.0.1', port: 40212 });
  req.beginMetadata();
  req.setMetadata('metadata/test', 'MetadataValue');
  await settle(h.serveDNS(req, new CaptureWriter()));
  for (const t of sink.taps) {
    assert.deepEqual(t.top[2], ['extra', Buffer.from('extra_field_MetadataValue_A_example.org._IN_udp_10.240.0.1_40212_127.0.0.1_-')]);
  }
});

test('dnstap: a full or absent output drops without encoding; the handler is a Tapper', async () => {
  const sink = new Sink();
  sink.accepting = false;
  const h = new Dnstap(sink, true, 'id', 'ver', undefined);
  h.next = answer;
  await settle(h.serveDNS(makeRequest('example.org.'), new CaptureWriter()));
  assert.equal(sink.frames.length, 0);
  assert.equal(sink.dropped, 2);
  assert.ok(isTapper(h));
  assert.ok(!isTapper(answer));
});
