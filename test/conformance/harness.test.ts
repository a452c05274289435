// Unit tests of the conformance harness itself (no servers): query encoding, rendering, normalisation, diff.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dnsPacket from 'dns-packet';
import { encodeQuery, parseQueryLine, parseQueriesFile } from './lib/query.ts';
import { DEFAULT_NORMALISE, parseReply, renderPair } from './lib/render.ts';
import { sideBySide } from './lib/diff.ts';

test('query line defaults follow dig: RD, EDNS0 1232, UDP', () => {
  const q = parseQueryLine('Example.ORG. AAAA');
  assert.equal(q.name, 'Example.ORG.');
  assert.equal(q.type, 28);
  assert.equal(q.tcp, false);
  assert.equal(q.v6, false);
  assert.equal(q.edns, true);
  assert.equal(q.ednsSize, 1232);
  assert.equal(q.flags, 0x0100);
});

test('query flags', () => {
  const q = parseQueryLine('foo.example.net. TXT +noedns +tcp +norec +cd +class=CH');
  assert.equal(q.edns, false);
  assert.equal(q.tcp, true);
  assert.equal(q.flags, 0x0010);
  assert.equal(q.qclass, 3);
  const d = parseQueryLine('example.org. MX +edns=4096 +do');
  assert.equal(d.ednsSize, 4096);
  assert.equal(d.ednsFlags, 0x8000);
  assert.equal(parseQueryLine('example.org. A +v6').v6, true);
  assert.throws(() => parseQueryLine('example.org. A +bogus'));
  assert.equal(parseQueriesFile('# c\n\nexample.org. A # trailing\n').length, 1);
});

test('encoded query decodes with dns-packet, name case kept', () => {
  const q = parseQueryLine('Example.ORG. A +do +cookie');
  const p = dnsPacket.decode(encodeQuery(q, 4660)) as any;
  assert.equal(p.id, 4660);
  assert.equal(p.questions[0].name, 'Example.ORG');
  assert.equal(p.additionals[0].type, 'OPT');
  assert.equal(p.additionals[0].flag_do, true);
  assert.equal(p.additionals[0].options[0].code, 10);
});

test('+subnet=ADDR/LEN encodes a client-subnet option as dig does', () => {
  const opt = (line: string): string => parseQueryLine(line).options[0]!.data.toString('hex');
  assert.equal(parseQueryLine('a. A +subnet=81.2.69.142/24').options[0]!.code, 8);
  assert.equal(opt('a. A +subnet=81.2.69.142/24'), '00011800' + '510245');
  assert.equal(opt('a. A +subnet=81.2.69.142'), '00012000' + '5102458e');
  assert.equal(opt('a. A +subnet=81.2.69.142/20'), '00011400' + '510240');
  assert.equal(opt('a. A +subnet=0.0.0.0/0'), '00010000');
  assert.equal(opt('a. A +subnet=2001:db8:1::5/56'), '00023800' + '20010db8000100');
  assert.equal(opt('a. A +subnet=::1'), '00028000' + '00000000000000000000000000000001');
  assert.throws(() => parseQueryLine('a. A +subnet=81.2.69.300/24'));
  assert.throws(() => parseQueryLine('a. A +subnet=81.2.69.1/33'));
  assert.throws(() => parseQueryLine('a. A +subnet=2001:db8::g/64'));
});

function reply(ttl: number, answers: string[], id = 7): Buffer {
  return dnsPacket.encode({
    type: 'response', id, flags: dnsPacket.AUTHORITATIVE_ANSWER,
    questions: [{ type: 'A', name: 'x.example' }],
    answers: answers.map((a) => ({ type: 'A', name: 'x.example', ttl, data: a })),
  } as any);
}

test('TTL decay and shuffle normalise only what is declared', () => {
  const a = parseReply({ bytes: reply(60, ['1.1.1.1', '2.2.2.2']), localPort: 1 }, 7);
  const b = parseReply({ bytes: reply(59, ['2.2.2.2', '1.1.1.1']), localPort: 1 }, 7);
  const [la, lb] = renderPair(a, b, { ...DEFAULT_NORMALISE, shuffle: true, ttlDecay: 2 });
  assert.deepEqual(la, lb);
  const c = parseReply({ bytes: reply(60, ['1.1.1.1', '2.2.2.2']), localPort: 1 }, 7);
  const d = parseReply({ bytes: reply(59, ['2.2.2.2', '1.1.1.1']), localPort: 1 }, 7);
  const [lc, ld] = renderPair(c, d, DEFAULT_NORMALISE);
  assert.notDeepEqual(lc, ld);
});

function axfr(records: [string, string, string][]): Buffer {
  const data = (type: string, v: string): unknown => (type === 'SOA'
    ? { mname: 'ns.z', rname: 'h.z', serial: Number(v), refresh: 1, retry: 1, expire: 1, minimum: 1 }
    : v);
  return dnsPacket.encode({
    type: 'response', id: 7, flags: dnsPacket.AUTHORITATIVE_ANSWER,
    questions: [{ type: 'AXFR', name: 'z' }],
    answers: records.map(([name, type, v]) => ({ type, name, ttl: 60, data: data(type, v) })),
  } as any);
}

test('a zone transfer compares owners in order but the types of one owner in any order', () => {
  const soa: [string, string, string] = ['z', 'SOA', '1'];
  const ref = parseReply({ bytes: axfr([soa, ['a.z', 'A', '192.0.2.1'], ['a.z', 'AAAA', '2001:db8::1'], ['b.z', 'A', '192.0.2.2'], soa]), localPort: 1 }, 7);
  const sameSet = parseReply({ bytes: axfr([soa, ['a.z', 'AAAA', '2001:db8::1'], ['a.z', 'A', '192.0.2.1'], ['b.z', 'A', '192.0.2.2'], soa]), localPort: 1 }, 7);
  const [la, lb] = renderPair(ref, sameSet, DEFAULT_NORMALISE);
  assert.deepEqual(la, lb);
  const ref2 = parseReply({ bytes: axfr([soa, ['a.z', 'A', '192.0.2.1'], ['b.z', 'A', '192.0.2.2'], soa]), localPort: 1 }, 7);
  const ownersSwapped = parseReply({ bytes: axfr([soa, ['b.z', 'A', '192.0.2.2'], ['a.z', 'A', '192.0.2.1'], soa]), localPort: 1 }, 7);
  const [lc, ld] = renderPair(ref2, ownersSwapped, DEFAULT_NORMALISE);
  assert.notDeepEqual(lc, ld);
  const ref3 = parseReply({ bytes: axfr([soa, ['a.z', 'A', '192.0.2.1'], soa]), localPort: 1 }, 7);
  const soaMoved = parseReply({ bytes: axfr([['a.z', 'A', '192.0.2.1'], soa, soa]), localPort: 1 }, 7);
  const [le, lf] = renderPair(ref3, soaMoved, DEFAULT_NORMALISE);
  assert.notDeepEqual(le, lf);
});

test('ID mismatch and missing replies are visible', () => {
  const a = parseReply({ bytes: reply(60, ['1.1.1.1'], 8), localPort: 1 }, 7);
  assert.match(a.head[0], /MISMATCH/);
  const none = parseReply({ error: 'no reply over UDP within 2000 ms', localPort: 1 }, 7);
  assert.match(none.head[0], /no reply/);
});

test('side-by-side diff marks changed lines', () => {
  const out = sideBySide(['a', 'b', 'c'], ['a', 'B', 'c', 'd'], 'left', 'right');
  assert.match(out, /b +\| B/);
  assert.match(out, /> d/);
});

function signed(alg: number, inception: number, sig: string): Buffer {
  return dnsPacket.encode({
    type: 'response', id: 7, flags: dnsPacket.AUTHORITATIVE_ANSWER,
    questions: [{ type: 'A', name: 'x.example' }],
    answers: [
      { type: 'A', name: 'x.example', ttl: 60, data: '1.1.1.1' },
      {
        type: 'RRSIG', name: 'x.example', ttl: 60,
        data: {
          typeCovered: 'A', algorithm: alg, labels: 2, originalTTL: 3600, expiration: inception + 11 * 3600 * 24,
          inception, keyTag: 1, signersName: 'example', signature: Buffer.from(sig),
        },
      },
    ],
  } as any);
}

test('rrsig: same-second deterministic signatures compared; else times within the skew aligned and signatures masked', () => {
  const pair = (x: Buffer, y: Buffer, rrsig: boolean): [string[], string[]] =>
    renderPair(parseReply({ bytes: x, localPort: 1 }, 7), parseReply({ bytes: y, localPort: 1 }, 7), { ...DEFAULT_NORMALISE, rrsig });
  // Ed25519, same second: the signature bytes count
  let [a, b] = pair(signed(15, 1000, 'aaa'), signed(15, 1000, 'bbb'), true);
  assert.notDeepEqual(a, b);
  [a, b] = pair(signed(15, 1000, 'aaa'), signed(15, 1000, 'aaa'), true);
  assert.deepEqual(a, b);
  // a second apart: aligned and masked
  [a, b] = pair(signed(15, 1000, 'aaa'), signed(15, 1001, 'bbb'), true);
  assert.deepEqual(a, b);
  assert.ok(a.some((l) => l.includes('<signature>')));
  // ECDSA: always masked
  [a, b] = pair(signed(13, 1000, 'aaa'), signed(13, 1000, 'bbb'), true);
  assert.deepEqual(a, b);
  // beyond the skew, or undeclared: a difference
  [a, b] = pair(signed(13, 1000, 'aaa'), signed(13, 1100, 'aaa'), true);
  assert.notDeepEqual(a, b);
  [a, b] = pair(signed(13, 1000, 'aaa'), signed(13, 1001, 'aaa'), false);
  assert.notDeepEqual(a, b);
});

test('+tsig: the query is signed; a signed reply renders its MAC as checked, its time as what it means', async () => {
  const { signQuery } = await import('./lib/tsig.ts');
  // nodens's own TSIG code as the other side: two independent implementations must agree
  const { TsigSigner, tsigKey, tsigRecord, verifyTsig } = await import('../../src/plugin/pkg/tsig.ts');
  const { findTsigRecord } = await import('../../src/wire/scan.ts');
  const secret = 'c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0';
  const q = parseQueryLine(`example.org. A +tsig=hmac-sha256:Key.Example:${secret}`);
  assert.deepEqual(q.tsig, { algorithm: 'hmac-sha256.', name: 'Key.Example.', secret, skew: 0 });
  assert.equal(parseQueryLine(`x. A +tsig=hmac-md5:k:${secret}:-400`).tsig?.algorithm, 'hmac-md5.sig-alg.reg.int.');
  assert.throws(() => parseQueryLine('x. A +tsig=hmac-sha256:k'));
  const { wire, ctx } = signQuery(encodeQuery(q, 99), q.tsig!);
  const keys = new Map([['Key.Example.', tsigKey(secret)]]);
  const now = Math.floor(Date.now() / 1000);
  const v = verifyTsig(wire, findTsigRecord(wire), 'Key.Example.', keys, new Uint8Array(0), now);
  assert.equal(v?.error, undefined);
  const body = dnsPacket.encode({ type: 'response', id: 99, flags: 0x0100, questions: [{ type: 'A', name: 'example.org' }] } as any);
  const stub = tsigRecord('Key.Example.', { ...v!.fields, timeSigned: 0, fudge: 0, mac: new Uint8Array(0), origId: 99 });
  const signed = Buffer.from(new TsigSigner(keys, v!.fields.mac).sign(Buffer.from(body), stub)!);
  const line = (b: Buffer) => parseReply({ bytes: b, localPort: 1 }, 99, ctx).sections.at(-1)!.records.at(-1)!.rest;
  assert.equal(line(signed), 'ANY\tTSIG\thmac-sha256. time=<now> fudge=300 mac=valid (32 bytes) origid=ok error=NOERROR other=-');
  const tampered = Buffer.from(signed);
  tampered[2] ^= 0x01;
  assert.match(line(tampered), /mac=INVALID/);
});
