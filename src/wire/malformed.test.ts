import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeMessage, decodeQuestionFast, encodeMessage, newQuery, parseRecord, WireError } from './index.ts';

function hdr(qd: number, an = 0, ns = 0, ar = 0): number[] {
  return [0x12, 0x34, 0x01, 0x00, 0, qd, 0, an, 0, ns, 0, ar];
}

function expectWireError(bytes: number[] | Uint8Array, code?: string): WireError {
  const buf = Uint8Array.from(bytes);
  let err: unknown;
  try {
    decodeMessage(buf);
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof WireError, 'expected WireError, got ' + String(err));
  if (code) assert.equal(err.code, code);
  return err;
}

test('compression pointers as miekg follows them: anywhere in the message, loops end in an error', () => {
  expectWireError([...hdr(1), 0xc0, 12, 0, 1, 0, 1], 'BAD_POINTER'); // points to itself: the 127th pointer fails
  expectWireError([...hdr(1), 1, 97, 0xc0, 12, 0, 1, 0, 1], 'BAD_POINTER'); // loop back to own start
  // two names pointing at each other
  expectWireError([...hdr(2), 0xc0, 18, 0, 1, 0, 1, 0xc0, 12, 0, 1, 0, 1], 'BAD_POINTER');
  expectWireError([...hdr(1), 0xc0, 40, 0, 1, 0, 1], 'BAD_POINTER'); // past the end
  // Forward: the name is the root label two octets on; CoreDNS answers such a question.
  const fwd = decodeMessage(Uint8Array.from([...hdr(1), 0xc0, 14, 0, 1, 0, 1, 0]));
  assert.deepEqual([fwd.question[0]!.name, fwd.question[0]!.type, fwd.question[0]!.class], ['.', 1, 1]);
  // Into the header: its bytes read as labels (0x01 0x00, then the root), as miekg reads them.
  const hdrPtr = decodeMessage(Uint8Array.from([...hdr(1), 0xc0, 2, 0, 1, 0, 1]));
  assert.equal(hdrPtr.question[0]!.name, '\\000.');
});

test('reserved label types, long labels, long names', () => {
  expectWireError([...hdr(1), 0x40, 0, 0, 1, 0, 1], 'BAD_LABEL');
  expectWireError([...hdr(1), 0x80, 0, 0, 1, 0, 1], 'BAD_LABEL');
  const long: number[] = [];
  for (let i = 0; i < 5; i++) long.push(63, ...new Array(63).fill(97));
  expectWireError([...hdr(1), ...long, 0, 0, 1, 0, 1], 'NAME_TOO_LONG');
  // exactly 255 octets is fine: 3×(63+1) + (61+1) + 1 = 255
  const ok = [63, ...new Array(63).fill(97), 63, ...new Array(63).fill(97), 63, ...new Array(63).fill(97), 61, ...new Array(61).fill(97), 0];
  assert.equal(ok.length, 255);
  assert.equal(decodeMessage(Uint8Array.from([...hdr(1), ...ok, 0, 1, 0, 1])).question[0].name.length, 254);
  expectWireError([...hdr(1), 63, ...new Array(63).fill(97), 63, ...new Array(63).fill(97), 63, ...new Array(63).fill(97), 62, ...new Array(62).fill(97), 0, 0, 1, 0, 1], 'NAME_TOO_LONG');
});

test('truncated data and counts past the end', () => {
  const good = Array.from(encodeMessage(newQuery('example.org.', 1)));
  const nameEnd = good.length - 4;
  for (let cut = 13; cut < good.length; cut++) {
    if (cut === nameEnd || cut === nameEnd + 2) continue; // a question cut short at a field boundary: below
    expectWireError(good.slice(0, cut), 'SHORT');
  }
  expectWireError([...hdr(2), ...good.slice(12)], 'SHORT');
  expectWireError([1, 2, 3], 'SHORT');
});

test('counts above the records present: ignored when the message ends after a whole record (miekg "count is a lie")', () => {
  const good = Array.from(encodeMessage(newQuery('example.org.', 1)));
  const opt = [0, 0, 41, 4, 0xd0, 0, 0, 0x80, 0, 0, 0];
  const m = decodeMessage(Uint8Array.from([...hdr(1, 1, 1, 2), ...good.slice(12)]));
  assert.equal(m.question.length, 1);
  assert.equal(m.answer.length + m.authority.length + m.additional.length, 0);
  const e = decodeMessage(Uint8Array.from([...hdr(1, 0, 0, 2), ...good.slice(12), ...opt]));
  assert.equal(e.edns?.udpSize, 1232);
  assert.equal(e.edns.do, true);
  const fast = decodeQuestionFast(Uint8Array.from([...hdr(1, 0, 0, 2), ...good.slice(12), ...opt]));
  assert.equal(fast?.edns, true);
  // Sections read in order: with ANCOUNT 1 the OPT is the answer, and nothing is left for EDNS.
  const an = decodeMessage(Uint8Array.from([...hdr(1, 1, 0, 1), ...good.slice(12), ...opt]));
  assert.equal(an.answer[0]?.type, 41);
  assert.equal(an.edns, undefined);
  // Into half a record: SHORT.
  expectWireError([...hdr(1, 0, 0, 2), ...good.slice(12), ...opt, 0], 'SHORT');
  expectWireError([...hdr(1, 1), ...good.slice(12), 0xc0, 12, 0, 1], 'SHORT');
  assert.throws(() => decodeQuestionFast(Uint8Array.from([...hdr(1, 0, 0, 2), ...good.slice(12), ...opt, 0])), WireError);
});

test('a question cut short after its name or its qtype decodes with 0 for the rest (miekg unpackQuestion)', () => {
  const good = Array.from(encodeMessage(newQuery('example.org.', 28)));
  const nameEnd = good.length - 4;
  const nameOnly = Uint8Array.from(good.slice(0, nameEnd));
  assert.deepEqual(decodeMessage(nameOnly).question, [{ name: 'example.org.', type: 0, class: 0 }]);
  const withType = Uint8Array.from(good.slice(0, nameEnd + 2));
  assert.deepEqual(decodeMessage(withType).question, [{ name: 'example.org.', type: 28, class: 0 }]);
  const fast = decodeQuestionFast(withType);
  assert.equal(fast?.qtype, 28);
  assert.equal(fast.qclass, 0);
  assert.equal(fast.questionEnd, withType.length);
  // Only where the message ends: a second question that is missing is SHORT, and so is half a field.
  expectWireError([...hdr(2), ...good.slice(12, nameEnd)], 'SHORT');
  expectWireError(good.slice(0, nameEnd + 1), 'SHORT');
  expectWireError(good.slice(0, nameEnd + 3), 'SHORT');
  assert.throws(() => decodeQuestionFast(Uint8Array.from(good.slice(0, nameEnd + 1))), WireError);
});

test('rdata inconsistent with rdlength', () => {
  const m = newQuery('example.org.', 1);
  m.answer.push(parseRecord('example.org. 1 IN MX 10 mail.example.org.'));
  const w = Array.from(encodeMessage(m));
  // rdlength is the 2 bytes before the rdata; make it one larger (and add a byte so it is in bounds)
  const rdl = w.length - 20 - 2;
  w[rdl + 1]++;
  w.push(0);
  expectWireError(w, 'BAD_RDATA');
  // A record with 5 bytes
  const a = [...hdr(0, 1), 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 5, 1, 2, 3, 4, 5];
  expectWireError(a, 'BAD_RDATA');
});

test('two OPT records: the last is the message\'s EDNS, the earlier one stays an additional record', () => {
  const q = newQuery('example.org.', 1);
  const w = Array.from(encodeMessage(q));
  // 4096, DO, NSID  /  1232, extended rcode 1, COOKIE
  const first = [0, 0, 41, 0x10, 0, 0, 0, 0x80, 0, 0, 4, 0, 3, 0, 0];
  const last = [0, 0, 41, 4, 0xd0, 1, 0, 0, 0, 0, 6, 0, 10, 0, 2, 0xab, 0xcd];
  const two = [...w, ...first, ...last];
  two[11] = 2;
  const m = decodeMessage(Uint8Array.from(two));
  assert.deepEqual(m.edns, { udpSize: 1232, version: 0, do: false, z: 0, options: [{ code: 10, data: Uint8Array.from([0xab, 0xcd]) }] });
  assert.equal(m.rcode, 16, 'extended rcode from the last OPT only');
  assert.deepEqual(m.additional, [{ name: '.', type: 41, class: 4096, ttl: 0x8000, data: { raw: Uint8Array.from([0, 3, 0, 0]) } }]);
  // Re-encoded, the earlier OPT comes first and the message's last, as they arrived.
  assert.deepEqual(Array.from(encodeMessage(m)), two);
  const fast = decodeQuestionFast(Uint8Array.from(two));
  assert.equal(fast?.udpSize, 1232);
  assert.equal(fast.do, false);
  assert.equal(fast.optStart, w.length + first.length);
  // Swapped: the 4096/DO/NSID one wins.
  const swapped = [...w, ...last, ...first];
  swapped[11] = 2;
  const s2 = decodeMessage(Uint8Array.from(swapped));
  assert.equal(s2.edns?.udpSize, 4096);
  assert.equal(s2.edns.do, true);
  assert.equal(s2.rcode, 0);
  assert.equal(s2.additional[0]?.class, 1232);
  assert.equal(decodeQuestionFast(Uint8Array.from(swapped))?.do, true);
  // A malformed earlier OPT is still an error.
  const bad = [...w, 0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 3, 0, 3, 0, ...last];
  bad[11] = 2;
  const err = expectWireError(bad, 'SHORT');
  assert.equal(err.partial?.question[0].name, 'example.org.');
});

function check(buf: Uint8Array): void {
  try {
    decodeMessage(buf);
  } catch (e) {
    if (!(e instanceof WireError) || e.code === 'INTERNAL') throw e;
  }
  try {
    decodeQuestionFast(buf);
  } catch (e) {
    if (!(e instanceof WireError) || e.code === 'INTERNAL') throw e;
  }
}

test('fuzz: 100k random and bit-flipped packets only ever throw WireError', () => {
  const seeds: Uint8Array[] = [];
  const big = newQuery('example.org.', 255);
  big.qr = true;
  for (const l of [
    'example.org. 300 IN A 1.2.3.4', 'example.org. IN AAAA 2001:db8::1', 'example.org. IN MX 10 mail.example.org.',
    '@ IN SOA ns1 host 1 2 3 4 5', 'x IN TXT "a" "b"', 'x IN SRV 1 2 3 t.example.org.', 'x IN CAA 0 issue "ca"',
    'x IN NAPTR 1 2 "a" "b" "c" r.example.org.', 'x IN DS 1 8 2 ABCD', 'x IN DNSKEY 257 3 8 AwEAAQ==',
    'x IN RRSIG A 8 2 300 20240101000000 20231201000000 1 example.org. AAAA', 'x IN NSEC y.example.org. A NS',
    'x IN NSEC3 1 0 1 AB 2VPTU5TIMAMQTTGL4LUU9KG21E0AOR3S A', 'x IN NSEC3PARAM 1 0 0 AB', 'x IN TLSA 3 1 1 ab',
    'x IN HTTPS 1 . alpn="h2" port=443', 'x IN RP a.example.org. b.example.org.', 'x IN AFSDB 1 a.example.org.',
    'x IN HINFO "a" "b"', 'x IN CNAME y',
  ]) big.answer.push(parseRecord(l, 'example.org.'));
  big.edns = { udpSize: 1232, version: 0, do: true, z: 0, options: [{ code: 10, data: new Uint8Array(8) }] };
  seeds.push(encodeMessage(big, { compress: true }), encodeMessage(big), encodeMessage(newQuery('a.b.c.', 1)));
  const start = Date.now();
  let seed = 12345;
  const rand = (n: number): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed % n;
  };
  for (let i = 0; i < 100_000; i++) {
    let buf: Uint8Array;
    if (i % 4 === 0) {
      buf = new Uint8Array(rand(300));
      for (let j = 0; j < buf.length; j++) buf[j] = rand(256);
      if (buf.length > 12) {
        buf[4] = 0;
        buf[5] = rand(3);
        buf[7] = rand(4);
        buf[11] = rand(3);
      }
    } else {
      const s = seeds[rand(seeds.length)];
      buf = Uint8Array.from(s.subarray(0, rand(8) === 0 ? rand(s.length + 1) : s.length));
      const flips = 1 + rand(4);
      for (let f = 0; f < flips && buf.length > 0; f++) buf[rand(buf.length)] ^= 1 << rand(8);
    }
    check(buf);
  }
  const fuzzMs = Date.now() - start;
  // Pathological input (a pointer loop walked without a bound, say) costs orders of magnitude more than a
  // well-formed packet: compare with decoding the well-formed seeds as often, in the same run, so that
  // the load of a shared machine slows both sides alike.
  const calStart = Date.now();
  for (let i = 0; i < 100_000; i++) check(seeds[i % seeds.length]!);
  const calibrationMs = Math.max(Date.now() - calStart, 1);
  assert.ok(fuzzMs < 20 * calibrationMs, `bounded time: ${fuzzMs} ms for the fuzz input vs ${calibrationMs} ms for as many well-formed packets`);
});

test('TSIG rdata is unpacked field by field as miekg does: lengths must add up; a last record may stop at a field', () => {
  const q = Buffer.from('123401000001000000000001076578616d706c65036f72670000010001', 'hex');
  const tsig = (rdata: string, arcount = 1) => {
    const rd = Buffer.from(rdata, 'hex');
    const rr = Buffer.concat([Buffer.from('036b657900' + '00fa00ff00000000', 'hex'), Buffer.from([rd.length >> 8, rd.length & 0xff]), rd]);
    const m = Buffer.concat([q, rr]);
    m.writeUInt16BE(arcount, 10);
    return m;
  };
  const alg = '0b686d61632d73686132353600'; // hmac-sha256.
  const full = alg + '00006553f100' + '012c' + '0004' + 'aabbccdd' + '1234' + '0000' + '0000';
  const ok = decodeMessage(tsig(full));
  assert.equal(ok.additional[0]!.type, 250);
  assert.equal(Buffer.from((ok.additional[0]!.data as { raw: Uint8Array }).raw).toString('hex'), full);
  // the message ends after the fudge: accepted, the rest is zero
  assert.doesNotThrow(() => decodeMessage(tsig(alg + '00006553f100012c')));
  // a MAC size past the end, other data shorter than its length, bytes left over
  assert.throws(() => decodeMessage(tsig(alg + '00006553f100012c' + '0040aabb')), WireError);
  assert.throws(() => decodeMessage(tsig(alg + '00006553f100012c00001234000000050102')), WireError);
  assert.throws(() => decodeMessage(tsig(full + '00')), WireError);
});
