import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeMessage, encodeMessage, newQuery, parseRecord } from './index.ts';
import { seededRandom } from './prng.ts';
import {
  questionNameIs, scanPlainAnswer, expandNames, findOptRecord, hasCompressionPointer, questionEnd, questionMatches, removeOpt, scanRecords, skipName, withoutOpt, writeTtl,
} from './scan.ts';

function reply(edns: boolean, compress = true): Buffer {
  const m = newQuery('www.example.org.', 1);
  m.id = 42;
  m.qr = true;
  m.answer.push(parseRecord('www.example.org. 300 IN CNAME example.org.'), parseRecord('example.org. 60 IN A 192.0.2.1'));
  m.additional.push(parseRecord('ns.example.org. 30 IN A 192.0.2.53'));
  if (edns) m.edns = { udpSize: 1232, version: 0, do: true, z: 0, options: [{ code: 10, data: Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8) }] };
  return encodeMessage(m, { compress });
}

test('skipName stops at a pointer and reports its target', () => {
  const b = reply(false);
  const targets: number[] = [];
  const qEnd = questionEnd(b);
  assert.equal(qEnd, 12 + 17 + 4);
  assert.equal(skipName(b, qEnd, targets), qEnd + 2);
  assert.deepEqual(targets, [12]);
  assert.equal(skipName(b.subarray(0, 20), 12), -1);
  assert.equal(questionEnd(b.subarray(0, qEnd - 1)), -1);
});

test('questionMatches compares the question case-insensitively', () => {
  const q = encodeMessage(newQuery('www.example.org.', 1));
  const r = Buffer.from(q);
  r[13] = 0x57; // 'W'
  assert.ok(questionMatches(q, questionEnd(q), r));
  r[14] = 0x78; // 'x'
  assert.ok(!questionMatches(q, questionEnd(q), r));
});

test('scanRecords finds the TTLs and the OPT', () => {
  const b = reply(true);
  const s = scanRecords(b)!;
  assert.equal(s.ttls.length, 3);
  assert.equal(s.optEnd, b.length);
  assert.equal(findOptRecord(b), s.optStart);
  for (const at of s.ttls) writeTtl(b, at, 7);
  assert.deepEqual(decodeMessage(b).answer.map((rr) => rr.ttl), [7, 7]);
  assert.equal(scanRecords(b.subarray(0, b.length - 1)), undefined);
  assert.equal(scanRecords(reply(false))!.optStart, -1);
});

test('removeOpt / withoutOpt drop the OPT and fix ARCOUNT', () => {
  const b = reply(true);
  const plain = reply(false);
  const s = scanRecords(b)!;
  assert.deepEqual(removeOpt(b, s.optStart, s.optEnd), plain);
  assert.deepEqual(withoutOpt(b), plain);
  assert.equal(withoutOpt(plain), plain, 'no OPT: the same buffer');
  // an OPT that is not the last record (uncompressed, so records can move)
  const u = reply(true, false);
  const us = scanRecords(u)!;
  const nsStart = us.ttls[2]! - 4 - 16; // owner ns.example.org. is 16 octets
  const mid = Buffer.concat([u.subarray(0, nsStart), u.subarray(us.optStart), u.subarray(nsStart, us.optStart)]);
  assert.equal(findOptRecord(mid), nsStart);
  assert.deepEqual(withoutOpt(mid), reply(false, false));
});

test('findOptRecord: with two OPT records, the last (the one miekg\'s IsEdns0 and decodeMessage take)', () => {
  const b = reply(true);
  const s = scanRecords(b)!;
  const opt = b.subarray(s.optStart, s.optEnd);
  const two = Buffer.concat([b, opt]);
  two[11]! += 1;
  assert.equal(findOptRecord(two), b.length);
  // An OPT whose rdlength runs past the end is no OPT to patch: malformed.
  const cut = Buffer.from(b);
  cut[s.optStart + 10]! += 1; // rdlength low byte
  assert.equal(findOptRecord(cut), -2);
});

/**
 * `wire` with the last rdata occurrence of `example.org.` replaced by a pointer to the first one (the owner
 * of the first answer), RDLENGTH fixed: compression as a sender may apply it to any type.
 */
function pointerize(wire: Buffer, rdlenAt: number): Buffer {
  const suffix = Buffer.from('\x07example\x03org\x00', 'latin1');
  const first = wire.indexOf(suffix);
  const last = wire.lastIndexOf(suffix);
  assert.ok(first >= 12 && last > first && last > rdlenAt);
  const out = Buffer.concat([wire.subarray(0, last), Buffer.from([0xc0 | (first >> 8), first & 0xff]), wire.subarray(last + suffix.length)]);
  out.writeUInt16BE(out.readUInt16BE(rdlenAt) - (suffix.length - 2), rdlenAt);
  return out;
}

/** Rdata of name-bearing types whose names the decoder expands (and a sender may have compressed). */
const NAME_RDATA = [
    'NS ns.example.org.', 'CNAME t.example.org.', 'PTR t.example.org.', 'DNAME t.example.org.', 'MX 10 mx.example.org.',
    'SOA ns.example.org. host.example.org. 1 2 3 4 5', 'SRV 1 2 3 t.example.org.',
    'NAPTR 100 10 "S" "SIP+D2U" "" _sip._udp.example.org.', 'RP m.example.org. t.example.org.', 'AFSDB 1 t.example.org.',
    'RRSIG A 8 2 300 20240101000000 20231201000000 1 example.org. AAAA',
];

/**
 * A reply whose second answer is `other. 60 IN <text>`: question, owners and rdata names share no suffix but
 * example.org., which only the first answer's owner and the rdata carry, so a pointer can only be made in the
 * rdata. `packed` is that reply with the rdata's example.org. made a pointer (undefined when the rdata has none).
 */
function otherRecord(text: string): { plain: Buffer; packed: Buffer | undefined } {
  const m = newQuery('q.', 1);
  m.qr = true;
  m.answer.push(parseRecord('example.org. 60 IN A 192.0.2.1'), parseRecord(`other. 60 IN ${text}`));
  const plain = encodeMessage(m);
  const rrStart = plain.indexOf(Buffer.from('\x05other\x00', 'latin1'));
  const packed = plain.includes(Buffer.from('\x07example\x03org\x00', 'latin1'), rrStart) ? pointerize(plain, rrStart + 7 + 8) : undefined;
  return { plain, packed };
}

test('hasCompressionPointer: owner names, and the names inside rdata of every type the decoder expands', () => {
  const rdata = [...NAME_RDATA, 'NSEC t.example.org. A', 'HTTPS 1 t.example.org.'];
  for (const text of rdata) {
    const { plain, packed } = otherRecord(text);
    assert.equal(hasCompressionPointer(plain), false, text);
    assert.equal(hasCompressionPointer(packed!), true, text);
    assert.ok(decodeMessage(packed!), 'the decoder expands it');
  }
  const plain = reply(true, false);
  assert.equal(hasCompressionPointer(plain), false);
  assert.equal(hasCompressionPointer(reply(true, true)), true, 'owner names compressed');
  assert.equal(hasCompressionPointer(plain.subarray(0, plain.length - 3)), true, 'cut short: the caller decodes and finds out');
  // Types whose rdata holds no name are not walked: bytes that look like a pointer there are data.
  const t = newQuery('q.test.', 16);
  t.qr = true;
  t.answer.push(parseRecord('q.test. 60 IN TXT "\\192\\012"'));
  assert.equal(hasCompressionPointer(encodeMessage(t)), false);
});

/** What forward sent before expandNames: the decoder's reading of `wire`, encoded again without compression. */
function reencoded(wire: Uint8Array): Buffer | undefined {
  try {
    return encodeMessage(decodeMessage(wire));
  } catch {
    return undefined;
  }
}

test('expandNames: the bytes of decoding and re-encoding, for compressed owners, question and rdata names', () => {
  const rdata = [...NAME_RDATA, 'TXT "\\192\\012" "example"', 'AAAA 2001:db8::1'];
  for (const text of rdata) {
    const { plain, packed: withPointer } = otherRecord(text);
    const packed = withPointer ?? plain;
    assert.deepEqual(expandNames(packed), plain, text);
    assert.deepEqual(expandNames(packed), reencoded(packed), text);
  }
  // Types the decoder parses (and may reject) are left to it, even without a name to expand.
  for (const text of ['CAA 0 issue "ca.example.org"', 'TYPE65280 \\# 3 c00c00', 'DS 1 8 2 abcd']) {
    const m = newQuery('q.', 1);
    m.qr = true;
    m.answer.push(parseRecord('q. 60 IN A 192.0.2.1'), parseRecord(`q. 60 IN ${text}`));
    assert.equal(expandNames(encodeMessage(m, { compress: true })), undefined, text);
  }
  // the encoder's own compression (owners, question, CNAME targets), with EDNS and its options last
  for (const edns of [false, true]) {
    const packed = reply(edns, true);
    assert.ok(hasCompressionPointer(packed));
    assert.deepEqual(expandNames(packed), reply(edns, false));
    assert.deepEqual(expandNames(packed), reencoded(packed));
  }
});

test('expandNames leaves to the decoder whatever is not plainly framed', () => {
  const packed = reply(true, true);
  assert.equal(expandNames(packed.subarray(0, packed.length - 1)), undefined, 'cut short');
  assert.equal(expandNames(Buffer.concat([packed, Buffer.of(0)])), undefined, 'trailing byte');
  const counts = Buffer.from(packed);
  counts[7] = 3; // ANCOUNT one more than there is
  assert.equal(expandNames(counts), undefined, 'a count that is a lie');
  // HTTPS and NSEC: the decoder parses past the names
  for (const text of ['HTTPS 1 t.example.org. alpn=h2', 'NSEC t.example.org. A']) {
    assert.equal(expandNames(otherRecord(text).packed!), undefined, text);
  }
  // A with rdlength 5: the decoder's error, not a copy
  const a = newQuery('q.', 1);
  a.qr = true;
  a.answer.push(parseRecord('q. 60 IN A 192.0.2.1'));
  const bad = Buffer.concat([encodeMessage(a), Buffer.of(9)]);
  bad.writeUInt16BE(5, bad.length - 7);
  assert.equal(expandNames(bad), undefined);
  // a pointer loop
  const loop = Buffer.from(packed);
  loop.writeUInt16BE(0xc00c, 12);
  assert.equal(expandNames(loop), undefined);
});

test('expandNames agrees with decode and re-encode on mutated replies (whenever it answers)', () => {
  // Deterministic: the same corpus every run.
  const rand = seededRandom(0x9e3779b9);
  const m = newQuery('www.example.org.', 1);
  m.qr = true;
  m.answer.push(parseRecord('www.example.org. 300 IN CNAME example.org.'), parseRecord('example.org. 60 IN A 192.0.2.1'));
  m.authority.push(parseRecord('example.org. 60 IN SOA ns.example.org. host.example.org. 1 2 3 4 5'));
  m.additional.push(
    parseRecord('ns.example.org. 30 IN MX 10 mx.example.org.'), parseRecord('_s._udp.example.org. 30 IN SRV 1 2 3 ns.example.org.'),
    parseRecord('example.org. 30 IN TXT "a" "bc"'), parseRecord('ns.example.org. 30 IN AAAA 2001:db8::53'),
    parseRecord('1.2.0.192.in-addr.arpa. 30 IN PTR ns.example.org.'), parseRecord('example.org. 30 IN RP mx.example.org. ns.example.org.'),
    parseRecord('example.org. 30 IN RRSIG A 8 2 300 20240101000000 20231201000000 1 example.org. AAAA'),
    parseRecord('example.org. 30 IN NAPTR 100 10 "S" "SIP+D2U" "" _s._udp.example.org.'),
  );
  m.edns = { udpSize: 1232, version: 0, do: true, z: 0, options: [{ code: 10, data: Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8) }] };
  const base = encodeMessage(m, { compress: true });
  let expanded = 0;
  for (let i = 0; i < 50_000; i++) {
    const x = Buffer.from(base);
    for (let k = 1 + rand(3); k > 0; k--) x[12 + rand(x.length - 12)] = rand(4) === 0 ? 0xc0 | rand(2) : rand(256);
    const got = expandNames(x);
    if (got === undefined) continue;
    expanded++;
    assert.deepEqual(got, reencoded(x), x.toString('hex'));
  }
  assert.ok(expanded > 1000, `only ${expanded} of the mutants were expanded`);
});

test('scanPlainAnswer: whenever it answers, the message decodes to the same facts (60,000 mutants of plain and other replies)', () => {
  const rand = seededRandom(0x2545f491);
  const plain = newQuery('Www.Example.org.', 1);
  plain.qr = true;
  plain.rd = true;
  plain.ra = true;
  plain.answer.push(parseRecord('www.example.org. 300 IN A 192.0.2.1'), parseRecord('www.example.org. 60 IN A 192.0.2.2'));
  plain.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [{ code: 10, data: Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8) }] };
  const v6 = newQuery('v6.example.', 28);
  v6.qr = true;
  v6.answer.push(parseRecord('v6.example. 7200 IN AAAA 2001:db8::1'));
  const other = newQuery('www.example.org.', 1);
  other.qr = true;
  other.answer.push(parseRecord('www.example.org. 300 IN CNAME example.org.'), parseRecord('example.org. 60 IN A 192.0.2.1'));
  const bases = [encodeMessage(plain, { compress: true }), encodeMessage(plain), encodeMessage(v6, { compress: true }), encodeMessage(other, { compress: true })];
  let plainSeen = 0;
  for (let i = 0; i < 60_000; i++) {
    const base = bases[i % bases.length]!;
    const x = Buffer.from(base);
    if (i >= 4) for (let k = 1 + rand(2); k > 0; k--) x[2 + rand(x.length - 2)] = rand(4) === 0 ? 0xc0 | rand(2) : rand(256);
    const a = scanPlainAnswer(x);
    if (a === undefined) continue;
    plainSeen++;
    const m = decodeMessage(x);
    const hex = x.toString('hex');
    // what typify needs for NoError: not AXFR/IXFR, no RRSIG (so DO does not matter), answers with NOERROR
    assert.ok(a.qtype !== 251 && a.qtype !== 252, hex);
    assert.equal(m.rcode, 0, hex);
    assert.ok(m.qr && !m.tc && m.opcode === 0, hex);
    assert.equal(m.question.length, 1, hex);
    assert.equal(m.question[0]!.type, a.qtype, hex);
    assert.equal(m.question[0]!.class, a.qclass, hex);
    assert.ok(m.answer.length > 0 && m.authority.length === 0 && m.additional.length === 0, hex);
    assert.ok(m.answer.every((rr) => rr.type === 1 || rr.type === 28), hex);
    assert.equal(a.types, (m.answer.some((rr) => rr.type === 1) ? 1 : 0) | (m.answer.some((rr) => rr.type === 28) ? 2 : 0), hex);
    assert.equal(a.minTtl, Math.min(...m.answer.map((rr) => rr.ttl)), hex);
    const s = scanRecords(x)!;
    assert.deepEqual(a.ttls, s.ttls, hex);
    assert.equal(a.optStart, s.optStart, hex);
    assert.equal(a.qEnd, s.qEnd, hex);
    // questionNameIs: true exactly for the decoded name lower-cased, when it answers at all
    const lower = m.question[0]!.name.toLowerCase();
    if (questionNameIs(x, lower)) assert.equal(m.question[0]!.name.toLowerCase(), lower);
    assert.equal(questionNameIs(x, lower + 'x'), false, hex);
  }
  assert.ok(plainSeen > 1000, `only ${plainSeen} plain`);
  assert.equal(scanPlainAnswer(bases[3]!), undefined, 'a CNAME chain is not plain');
  assert.ok(questionNameIs(bases[0]!, 'www.example.org.'));
  assert.equal(questionNameIs(bases[0]!, 'www.example.org'), false);
  assert.equal(questionNameIs(bases[0]!, 'ww.example.org.'), false);
  assert.ok(questionNameIs(encodeMessage(newQuery('.', 2)), '.'));
});
