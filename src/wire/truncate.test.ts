import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeMessage, encodeMessage, encodeWithin, messageLength, newQuery, parseRecord } from './index.ts';
import type { Message } from './types.ts';

function manyA(n: number, edns = true): Message {
  const m = newQuery('example.org.', 1);
  m.id = 7;
  m.qr = true;
  for (let i = 0; i < n; i++) m.answer.push(parseRecord(`example.org. 300 IN A 10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`));
  if (edns) m.edns = { udpSize: 512, version: 0, do: false, z: 0, options: [] };
  return m;
}

test('many A records into 512 bytes: whole records, TC, OPT kept', () => {
  const m = manyA(100);
  const { wire, truncated } = encodeWithin(m, 512);
  assert.equal(truncated, true);
  assert.ok(wire.length <= 512);
  const d = decodeMessage(wire);
  assert.equal(d.tc, true);
  assert.ok(d.edns !== undefined);
  // compressed A record = 2 + 10 + 4 = 16 bytes; header 12 + question 17 + OPT 11
  assert.equal(d.answer.length, Math.floor((512 - 11 - 12 - 17) / 16));
  assert.deepEqual(d.answer, m.answer.slice(0, d.answer.length));
});

test('maxSize below 512 counts as 512', () => {
  const a = encodeWithin(manyA(100), 100);
  const b = encodeWithin(manyA(100), 512);
  assert.deepEqual(a.wire, b.wire);
});

test('a reply that fits uncompressed stays uncompressed', () => {
  const m = manyA(5);
  const { wire, truncated } = encodeWithin(m, 512);
  assert.equal(truncated, false);
  assert.deepEqual(wire, encodeMessage(m));
  assert.equal(decodeMessage(wire).tc, false);
});

test('fits only compressed: compressed, nothing dropped, no TC', () => {
  const m = manyA(25); // uncompressed 25×27 > 512, compressed 25×16 fits
  assert.ok(messageLength(m, false) > 512 && messageLength(m, true) <= 512);
  const { wire, truncated } = encodeWithin(m, 512);
  assert.equal(truncated, false);
  assert.deepEqual(wire, encodeMessage(m, { compress: true }));
  assert.equal(decodeMessage(wire).tc, false);
});

test('1480/1220 rule: compress when the uncompressed reply exceeds compressAbove', () => {
  const m = manyA(50); // uncompressed 12+17+50*27+11 = 1390
  const len = messageLength(m, false);
  assert.ok(len > 1220 && len < 1480);
  assert.deepEqual(encodeWithin(m, 4096, { compressAbove: 1480 }).wire, encodeMessage(m));
  assert.deepEqual(encodeWithin(m, 4096, { compressAbove: 1220 }).wire, encodeMessage(m, { compress: true }));
  assert.deepEqual(encodeWithin(m, 4096).wire, encodeMessage(m));
});

test('sections are filled in order and stop at the first record that does not fit', () => {
  const m = manyA(20);
  m.authority.push(parseRecord('example.org. 300 IN NS ns1.example.org.'));
  for (let i = 0; i < 30; i++) m.additional.push(parseRecord(`ns${i}.example.org. 300 IN A 10.1.0.${i}`));
  const { wire, truncated } = encodeWithin(m, 512);
  const d = decodeMessage(wire);
  assert.equal(truncated, true);
  assert.equal(d.answer.length, 20);
  assert.equal(d.authority.length, 1);
  assert.ok(d.additional.length > 0 && d.additional.length < 30);
  assert.ok(wire.length <= 512);
});

test('messages with TSIG are never truncated', () => {
  const m = manyA(100);
  // a well-formed TSIG rdata (root algorithm name, every field zero): the decoder checks TSIG lengths as miekg does
  m.additional.push({ name: 'key.', type: 250, class: 255, ttl: 0, data: { raw: new Uint8Array(17) } });
  const { wire, truncated } = encodeWithin(m, 512);
  assert.equal(truncated, false);
  assert.equal(decodeMessage(wire).answer.length, 100);
});

test('without EDNS the whole budget is available', () => {
  const m = manyA(100, false);
  const d = decodeMessage(encodeWithin(m, 512).wire);
  assert.equal(d.answer.length, Math.floor((512 - 12 - 17) / 16));
  assert.equal(d.edns, undefined);
});

test('over 65535 octets uncompressed: compressed, truncated to maxSize when still too big — never TOO_LONG', () => {
  // 4500 A records: 27 bytes each uncompressed (> 65535 in all), 16 compressed.
  const big = manyA(4500, false);
  assert.throws(() => messageLength(big, false), { code: 'TOO_LONG' });
  const { wire, truncated } = encodeWithin(big, 65535);
  assert.equal(truncated, true);
  const d = decodeMessage(wire);
  assert.equal(d.tc, true);
  assert.equal(d.answer.length, Math.floor((65535 - 12 - 17) / 16));
  assert.equal(wire.length, 12 + 17 + 16 * d.answer.length);
  assert.deepEqual(d.answer, big.answer.slice(0, d.answer.length));
  // 3000: fits only compressed — whole, no TC.
  const mid = manyA(3000);
  mid.edns!.udpSize = 65535;
  const m = encodeWithin(mid, 65535);
  assert.equal(m.truncated, false);
  assert.equal(m.wire.length, 12 + 17 + 16 * 3000 + 11);
  assert.equal(decodeMessage(m.wire).answer.length, 3000);
  // More records than a header can count: still just truncated.
  const huge = manyA(70000, false);
  assert.equal(decodeMessage(encodeWithin(huge, 65535).wire).answer.length, Math.floor((65535 - 12 - 17) / 16));
  assert.throws(() => encodeMessage(huge), { code: 'TOO_LONG' });
  // A maxSize above 65535 counts as 65535.
  assert.deepEqual(encodeWithin(big, 100000).wire, wire);
});
