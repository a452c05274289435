// TSIG against vectors made by miekg/dns v1.1.73 (testdata/tsig-vectors.go.txt, its output in
// testdata/tsig-vectors.txt): verification of signed queries for every algorithm, and a signed stream
// (RFC 8945 5.3.1: each MAC covers the previous one; the later messages cover the timers only).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findTsigRecord } from '../../wire/scan.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { Rcode, RRType } from '../../wire/constants.ts';
import type { OpaqueData } from '../../wire/types.ts';
import {
  TsigError, TsigSigner, decodeBase64Std, packTsigRdata, parseTsigRdata, tsigHash, tsigKey, tsigRecord, verifyTsig, wireNameText,
  type TsigKey,
} from './tsig.ts';

const SECRET = 'c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0';
const KEYS: ReadonlyMap<string, TsigKey> = new Map([['key.example.', tsigKey(SECRET)]]);
const NO_MAC = new Uint8Array(0);

const vectors = new Map<string, { wire: Buffer; mac: Buffer }>();
for (const line of readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'testdata', 'tsig-vectors.txt'), 'utf8').split('\n')) {
  const f = line.trim().split(/\s+/);
  if (f.length < 3) continue;
  const key = f[0] === 'query' ? `query ${f[1]}` : f[0]!;
  const [hex, mac] = f[0] === 'query' ? [f[2]!, f[3]!] : [f[1]!, f[2]!];
  vectors.set(key, { wire: Buffer.from(hex, 'hex'), mac: Buffer.from(mac, 'hex') });
}

function vector(name: string): { wire: Buffer; mac: Buffer } {
  const v = vectors.get(name);
  assert.ok(v, `vector ${name}`);
  return v;
}

function verify(wire: Buffer, now: number, keys = KEYS, requestMac: Uint8Array = NO_MAC) {
  const at = findTsigRecord(wire);
  assert.ok(at > 0);
  const m = decodeMessage(wire);
  return verifyTsig(wire, at, m.additional[m.additional.length - 1]!.name, keys, requestMac, now);
}

test('queries signed by miekg/dns verify, for every algorithm', () => {
  for (const alg of ['hmac-sha1.', 'hmac-sha224.', 'hmac-sha256.', 'hmac-sha384.', 'hmac-sha512.']) {
    const v = vector(`query ${alg}`);
    const r = verify(v.wire, 1700000000);
    assert.ok(r, alg);
    assert.equal(r.error, undefined, alg);
    assert.equal(r.rcode, 0);
    assert.equal(r.owner, 'key.example.');
    assert.equal(wireNameText(r.fields.algorithm), alg);
    assert.deepEqual(Buffer.from(r.fields.mac), v.mac);
    assert.equal(r.fields.timeSigned, 1700000000);
    assert.equal(r.fields.fudge, 300);
    assert.equal(r.fields.origId, 0x1234);
  }
});

test('verification failures: BADKEY, BADSIG, BADTIME (after the MAC), NOTAUTH header', () => {
  const v = vector('query hmac-sha256.');
  // the fudge works both ways
  assert.equal(verify(v.wire, 1700000300)?.error, undefined);
  assert.equal(verify(v.wire, 1699999700)?.error, undefined);
  const late = verify(v.wire, 1700000301);
  assert.equal(late?.error, TsigError.time);
  assert.equal(late?.rcode, Rcode.BADTIME);
  const unknown = verify(v.wire, 1700000000, new Map([['other.', tsigKey(SECRET)]]));
  assert.equal(unknown?.error, TsigError.secret);
  assert.equal(unknown?.rcode, Rcode.BADKEY);
  const wrong = verify(v.wire, 1700000000, new Map([['key.example.', tsigKey('b3RoZXJvdGhlcm90aGVyb3RoZXI=')]]));
  assert.equal(wrong?.error, TsigError.sig);
  assert.equal(wrong?.rcode, Rcode.BADSIG);
  // a wrong secret at the wrong time is BADSIG: the MAC is checked first (CVE-2017-3142/3143)
  assert.equal(verify(v.wire, 1800000000, new Map([['key.example.', tsigKey('b3RoZXJvdGhlcm90aGVyb3RoZXI=')]]))?.rcode, Rcode.BADSIG);
  const badB64 = verify(v.wire, 1700000000, new Map([['key.example.', tsigKey('not*base64')]]));
  assert.equal(badB64?.error, 'illegal base64 data at input byte 3');
  assert.equal(badB64?.rcode, Rcode.BADSIG);
  // a changed byte of the message
  const tampered = Buffer.from(v.wire);
  tampered[15]! ^= 0x20;
  assert.equal(verify(tampered, 1700000000)?.rcode, Rcode.BADSIG);
  // a truncated MAC is not accepted (miekg compares whole MACs: BADSIG, never BADTRUNC)
  const f = verify(v.wire, 1700000000)!.fields;
  const short = rebuild(v.wire, { ...f, mac: f.mac.subarray(0, 16) });
  assert.equal(verify(short, 1700000000)?.rcode, Rcode.BADSIG);
  // an unsupported algorithm (hmac-md5 in miekg/dns v1.1.73)
  const md5 = rebuild(v.wire, { ...f, algorithm: Buffer.from('08686d61632d6d6435077369672d616c67037265670369 6e7400'.replace(/ /g, ''), 'hex') });
  const m = verify(md5, 1700000000);
  assert.equal(m?.error, TsigError.keyAlg);
  assert.equal(m?.rcode, Rcode.BADSIG);
  // a header rcode NOTAUTH
  const notauth = Buffer.from(v.wire);
  notauth[3] = (notauth[3]! & 0xf0) | Rcode.NOTAUTH;
  assert.equal(verify(notauth, 1700000000)?.error, TsigError.auth);
});

/** The message with its TSIG rdata replaced. */
function rebuild(wire: Buffer, f: ReturnType<typeof parseTsigRdata> & object): Buffer {
  const m = decodeMessage(wire);
  const last = m.additional[m.additional.length - 1]!;
  m.additional[m.additional.length - 1] = { ...last, data: { raw: packTsigRdata(f) } };
  // keep the OPT before the TSIG, as sent
  const body = encodeMessage({ ...m, additional: m.additional.slice(0, -1) });
  const tsig = encodeMessage({ ...m, question: [], edns: undefined, additional: [m.additional[m.additional.length - 1]!] });
  const out = Buffer.concat([body, tsig.subarray(12)]);
  out.writeUInt16BE(out.readUInt16BE(10) + 1, 10);
  return out;
}

test('TSIG rdata: parse and pack round-trip, the codec keeps it byte for byte', () => {
  const v = vector('query hmac-sha512.');
  const at = findTsigRecord(v.wire);
  const m = decodeMessage(v.wire);
  const rr = m.additional[m.additional.length - 1]!;
  assert.equal(rr.type, RRType.TSIG);
  assert.equal(rr.class, 255);
  const raw = (rr.data as OpaqueData).raw;
  const f = parseTsigRdata(raw)!;
  assert.equal(f.timeSigned, 1700000000);
  assert.equal(f.mac.length, 64);
  assert.equal(f.error, 0);
  assert.equal(f.other.length, 0);
  assert.deepEqual(Buffer.from(packTsigRdata(f)), Buffer.from(raw));
  // 48-bit times above 2^32
  const big = { ...f, timeSigned: 0xabcdef012345, other: Uint8Array.from([0, 0, 0x65, 0x53, 0xf1, 0]) };
  assert.deepEqual(parseTsigRdata(packTsigRdata(big)), big);
  // the codec re-encodes the record byte for byte (it writes the OPT last, so the TSIG moves before it)
  const again = decodeMessage(encodeMessage(m));
  assert.deepEqual(Buffer.from((again.additional[again.additional.length - 1]!.data as OpaqueData).raw), Buffer.from(raw));
  assert.ok(at > 0);
  assert.equal(parseTsigRdata(raw.subarray(0, raw.length - 1)), undefined);
});

test('a signed stream: the signer chains each MAC to the previous one (miekg vectors)', () => {
  const q = vector('stream-query');
  const qr = verify(q.wire, 1700000000);
  assert.equal(qr?.error, undefined);
  const signer = new TsigSigner(KEYS, qr!.fields.mac, () => 1);
  for (let i = 0; i < 3; i++) {
    const v = vector(`stream-${i}`);
    const at = findTsigRecord(v.wire);
    const unsigned = Buffer.from(v.wire.subarray(0, at));
    unsigned.writeUInt16BE(unsigned.readUInt16BE(10) - 1, 10);
    signer.timersOnly = i > 0;
    const stub = tsigRecord('key.example.', {
      algorithm: qr!.fields.algorithm, timeSigned: 1700000001 + i, fudge: 300, mac: new Uint8Array(0), origId: 0x4321, error: 0,
      other: new Uint8Array(0),
    });
    const out = signer.sign(unsigned, stub);
    assert.ok(out);
    assert.equal(Buffer.from(out).toString('hex'), v.wire.toString('hex'), `message ${i}`);
    assert.deepEqual(Buffer.from(signer.priorMac), v.mac);
  }
});

test('signer: zero time and fudge filled in, BADKEY/BADSIG unsigned, unknown key sends nothing', () => {
  const q = vector('query hmac-sha256.');
  const f = verify(q.wire, 1700000000)!.fields;
  const at = findTsigRecord(q.wire);
  const unsigned = Buffer.from(q.wire.subarray(0, at));
  unsigned.writeUInt16BE(unsigned.readUInt16BE(10) - 1, 10);
  const stub = (error: number, owner = 'key.example.') => tsigRecord(owner, {
    algorithm: f.algorithm, timeSigned: 0, fudge: 0, mac: new Uint8Array(0), origId: 0x1234, error, other: new Uint8Array(0),
  });
  const signed = new TsigSigner(KEYS, new Uint8Array(0), () => 1700000000).sign(Buffer.from(unsigned), stub(0))!;
  // exactly the query vector: same key, time, fudge, no request MAC
  assert.equal(Buffer.from(signed).toString('hex'), q.wire.toString('hex'));
  for (const error of [Rcode.BADKEY, Rcode.BADSIG]) {
    const out = new TsigSigner(new Map(), f.mac, () => 1700000000).sign(Buffer.from(unsigned), stub(error, 'unknown.'))!;
    const m = decodeMessage(out);
    const t = parseTsigRdata((m.additional[m.additional.length - 1]!.data as OpaqueData).raw)!;
    assert.equal(t.timeSigned, 0);
    assert.equal(t.fudge, 300);
    assert.equal(t.mac.length, 0);
    assert.equal(t.error, error);
  }
  assert.equal(new TsigSigner(new Map(), f.mac).sign(Buffer.from(unsigned), stub(0, 'unknown.')), undefined);
});

test('base64 as Go StdEncoding decodes it', () => {
  assert.deepEqual(Buffer.from(decodeBase64Std('c2VjcmV0') as Uint8Array), Buffer.from('secret'));
  assert.deepEqual(Buffer.from(decodeBase64Std('YQ==') as Uint8Array), Buffer.from('a'));
  assert.deepEqual(Buffer.from(decodeBase64Std('YWI=') as Uint8Array), Buffer.from('ab'));
  assert.deepEqual(Buffer.from(decodeBase64Std('YW\nJj') as Uint8Array), Buffer.from('abc'));
  assert.deepEqual(Buffer.from(decodeBase64Std('') as Uint8Array), Buffer.alloc(0));
  assert.equal(decodeBase64Std('YQ'), 0);
  assert.equal(decodeBase64Std('YWJjZ'), 4);
  assert.equal(decodeBase64Std('not*base64'), 3);
  assert.equal(decodeBase64Std('YQ==YQ=='), 4);
  assert.equal(decodeBase64Std('Y==='), 1);
  assert.equal(tsigHash('HMAC-SHA256'), 'sha256');
  assert.equal(tsigHash('hmac-md5.sig-alg.reg.int.'), undefined);
});

test('findTsigRecord: last record, not last (FORMERR), none', () => {
  const v = vector('query hmac-sha256.');
  assert.ok(findTsigRecord(v.wire) > 0);
  const m = decodeMessage(v.wire);
  assert.equal(findTsigRecord(encodeMessage({ ...m, additional: [] })), -1);
  // TSIG, then the OPT (the encoder writes the OPT last)
  assert.equal(findTsigRecord(encodeMessage(m)), -3);
  assert.equal(findTsigRecord(v.wire.subarray(0, 20)), -2);
});
