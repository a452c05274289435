import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FrameEncoder } from './encode.ts';
import { TapType, type TapMessage } from '../pkg/dnstap.ts';
import { decodeTap, dnstapRead, fstrmFile } from './testutil.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newQuery, replyTo } from '../../wire/message.ts';

const env = { identity: Buffer.from('ns1'), version: Buffer.from('CoreDNS-1.15.0') };
const query = newQuery('example.org.', 1);
query.id = 4660;
const reply = replyTo(query);
reply.answer.push({ name: 'example.org.', type: 1, class: 1, ttl: 300, data: { address: '10.0.0.1' } });
// Milliseconds as a double: sub-millisecond parts exact in binary (0.125 ms = 125000 ns).
const T0 = Date.UTC(2024, 0, 2, 3, 4, 5) + 0.125; // 2024-01-02T03:04:05.000125Z

test('encoder: exact fields, in field order, as CoreDNS sets them', () => {
  const enc = new FrameEncoder();
  const m: TapMessage = {
    type: TapType.CLIENT_QUERY, proto: 'udp', queryAddress: '10.240.0.1', queryPort: 40212, queryTime: T0,
  };
  const frame = enc.frame(env, undefined, m);
  assert.equal(frame.readUInt32BE(0), frame.length - 4);
  const d = decodeTap(frame.subarray(4));
  assert.deepEqual(d.top, [['identity', Buffer.from('ns1')], ['version', Buffer.from('CoreDNS-1.15.0')], ['type', 1]]);
  assert.deepEqual(d.message, [
    ['type', 5], ['socket_family', 1], ['socket_protocol', 1], ['query_address', Buffer.from([10, 240, 0, 1])],
    ['query_port', 40212], ['query_time_sec', 1704164645], ['query_time_nsec', 125000],
  ]);
  // The protobuf alone is the frame without its length.
  assert.deepEqual(enc.encode(env, undefined, m), frame.subarray(4));
});

test('encoder: IPv6, IPv4-mapped, both addresses (family of the last), extra, TCP, wire messages', () => {
  const enc = new FrameEncoder();
  const q = encodeMessage(query);
  const d = decodeTap(enc.frame(env, Buffer.from('x'), {
    type: TapType.FORWARDER_RESPONSE, proto: 'tcp', queryAddress: '::ffff:127.0.0.1', queryPort: 5000,
    responseAddress: '2001:db8::53', responsePort: 53, queryTime: T0, responseTime: T0 + 1500.5, responseMessage: q,
  }).subarray(4));
  assert.deepEqual(d.top.map((x) => x[0]), ['identity', 'version', 'extra', 'type']);
  const ip6 = Buffer.alloc(16);
  ip6.writeUInt16BE(0x2001, 0);
  ip6.writeUInt16BE(0x0db8, 2);
  ip6.writeUInt16BE(0x53, 14);
  assert.deepEqual(d.message, [
    ['type', 8], ['socket_family', 2], ['socket_protocol', 2], ['query_address', Buffer.from([127, 0, 0, 1])],
    ['response_address', ip6], ['query_port', 5000], ['response_port', 53], ['query_time_sec', 1704164645],
    ['query_time_nsec', 125000], ['response_time_sec', 1704164646], ['response_time_nsec', 500625000],
    ['response_message', q],
  ]);
  // No address: neither family nor protocol (CoreDNS sets them with an address only).
  const bare = decodeTap(enc.frame(env, undefined, { type: TapType.FORWARDER_QUERY, proto: 'udp', queryTime: T0 }).subarray(4));
  assert.deepEqual(bare.message.map((x) => x[0]), ['type', 'query_time_sec', 'query_time_nsec']);
  // A large message: multi-byte lengths stay right.
  const big = Buffer.alloc(70000, 7);
  const dl = decodeTap(enc.frame(env, undefined, { type: TapType.CLIENT_RESPONSE, proto: 'tcp', queryTime: T0, responseMessage: big }).subarray(4));
  assert.deepEqual(dl.message.at(-1), ['response_message', big]);
});

test('encoder: dnstap-read (bind9) decodes what it writes', () => {
  const enc = new FrameEncoder();
  const q = encodeMessage(query);
  const r = encodeMessage(reply);
  const payloads = [
    enc.encode(env, undefined, { type: TapType.CLIENT_QUERY, proto: 'udp', queryAddress: '192.0.2.7', queryPort: 5353, queryTime: T0, queryMessage: q }),
    enc.encode(env, Buffer.from('extra!'), { type: TapType.CLIENT_RESPONSE, proto: 'tcp', queryAddress: '2001:db8::7', queryPort: 5354, queryTime: T0, responseTime: T0 + 2, responseMessage: r }),
    enc.encode(env, undefined, { type: TapType.FORWARDER_QUERY, proto: 'udp', queryAddress: '127.0.0.1', queryPort: 40000, responseAddress: '127.0.0.53', responsePort: 53, queryTime: T0, queryMessage: q }),
    enc.encode(env, undefined, { type: TapType.FORWARDER_RESPONSE, proto: 'udp', queryAddress: '127.0.0.1', queryPort: 40000, responseAddress: '127.0.0.53', responsePort: 53, queryTime: T0, responseTime: T0 + 3, responseMessage: r }),
  ];
  const dir = mkdtempSync(join(tmpdir(), 'dnstap-enc-'));
  const file = join(dir, 'x.fstrm');
  writeFileSync(file, fstrmFile(payloads));
  const docs = dnstapRead(file).split('\n---\n');
  assert.equal(docs.length, 4);
  const has = (i: number, ...lines: string[]): void => {
    for (const l of lines) assert.ok(docs[i]!.includes(l), `message ${i} lacks ${JSON.stringify(l)}:\n${docs[i]}`);
  };
  for (let i = 0; i < 4; i++) has(i, 'type: MESSAGE', 'identity: ns1', 'version: CoreDNS-1.15.0');
  has(0, 'type: CLIENT_QUERY', 'query_time: !!timestamp 2024-01-02T03:04:05Z', 'socket_family: INET', 'socket_protocol: UDP',
    'query_address: "192.0.2.7"', 'query_port: 5353', "- 'example.org. IN A'", 'id: 4660', 'message_size: 29b');
  has(1, 'type: CLIENT_RESPONSE', 'socket_family: INET6', 'socket_protocol: TCP', 'query_address: "2001:db8::7"',
    'query_port: 5354', "- 'example.org. 300 IN A 10.0.0.1'", 'flags: qr rd');
  has(2, 'type: FORWARDER_QUERY', 'query_address: "127.0.0.1"', 'response_address: "127.0.0.53"', 'query_port: 40000', 'response_port: 53');
  has(3, 'type: FORWARDER_RESPONSE', 'response_time: !!timestamp 2024-01-02T03:04:05Z', "- 'example.org. 300 IN A 10.0.0.1'");
});
