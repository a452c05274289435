import { test } from 'node:test';
import assert from 'node:assert/strict';
import { messageLength, nameWireLength } from './msglen.ts';
import { encodeMessage, messageLength as encodedLength } from './encode.ts';
import { newQuery, replyTo } from './message.ts';
import type { Message } from './types.ts';

test('messageLength equals the uncompressed encoding', () => {
  const m: Message = {
    ...replyTo(newQuery('example.org.', 1)),
    answer: [
      { name: 'example.org.', type: 1, class: 1, ttl: 5, data: { address: '1.2.3.4' } },
      { name: 'example.org.', type: 16, class: 1, ttl: 1, data: { strings: [new Uint8Array(3), new Uint8Array(0)] } },
    ],
    authority: [
      {
        name: 'example.org.', type: 6, class: 1, ttl: 5,
        data: { mname: 'ns.example.org.', rname: 'h.example.org.', serial: 1, refresh: 2, retry: 3, expire: 4, minimum: 5 },
      },
      { name: 'example.org.', type: 2, class: 1, ttl: 5, data: { target: 'ns.example.org.' } },
    ],
    additional: [{ name: 'a\\.b.example.org.', type: 33, class: 1, ttl: 1, data: { priority: 1, weight: 2, port: 3, target: '.' } }],
    edns: { udpSize: 4096, version: 0, do: false, z: 0, options: [{ code: 10, data: new Uint8Array(8) }] },
  };
  assert.equal(messageLength(m), encodedLength(m, false));
  assert.equal(messageLength(m), encodeMessage(m).length);
  assert.equal(nameWireLength('.'), 1);
  assert.equal(nameWireLength('a.b.'), 5);
  assert.equal(nameWireLength('\\065.b.'), 5);
});

test('messageLength counts DNSKEY keys and RRSIG signatures as miekg does: base64.DecodedLen, a multiple of 3', () => {
  const m: Message = {
    ...replyTo(newQuery('example.org.', 48)),
    answer: [
      { name: 'example.org.', type: 48, class: 1, ttl: 5, data: { flags: 256, protocol: 3, algorithm: 15, publicKey: new Uint8Array(32) } },
      {
        name: 'example.org.', type: 46, class: 1, ttl: 5,
        data: { typeCovered: 48, algorithm: 15, labels: 2, originalTTL: 3600, expiration: 2, inception: 1, keyTag: 7, signerName: 'example.org.', signature: new Uint8Array(64) },
      },
    ],
  };
  // 32 key bytes count 33, 64 signature bytes count 66 (CoreDNS's response size metrics and {rsize})
  assert.equal(messageLength(m), encodeMessage(m, { compress: false }).length + 1 + 2);
});
