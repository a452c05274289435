// TSIG (RFC 8945) as miekg/dns v1.1.73 does it for CoreDNS: the record's fields, the MAC input
// (request MAC, message, TSIG variables or timers only), verification of a signed message and a
// signer for the replies of one exchange. Shared by the tsig plugin (verification, signed replies)
// and the transfer plugin (multi-message streams, RFC 8945 5.3.1: each MAC chained to the previous).

import { createHmac, timingSafeEqual } from 'node:crypto';
import type { ReplySigner } from '../../core/request.ts';
import type { OpaqueData, ResourceRecord } from '../../wire/types.ts';
import { RRClass, RRType, Rcode } from '../../wire/constants.ts';
import { asciiLower } from '../../wire/name.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newQuery } from '../../wire/message.ts';

const EMPTY = new Uint8Array(0);

/**
 * The request value (`req.value`) holding the normalized name of the key whose TSIG the tsig plugin validated
 * (CoreDNS's tsig.ValidatedKeyName): set by tsig, read by dynupdate.
 */
export const VALIDATED_KEY_NAME = 'tsig/validated-key-name';

/** The algorithms miekg/dns v1.1.73 signs with (hmac-md5 is no longer supported there: ErrKeyAlg). */
const HASHES: ReadonlyMap<string, string> = new Map([
  ['hmac-sha1.', 'sha1'],
  ['hmac-sha224.', 'sha224'],
  ['hmac-sha256.', 'sha256'],
  ['hmac-sha384.', 'sha384'],
  ['hmac-sha512.', 'sha512'],
]);

/** The node:crypto hash of a TSIG algorithm name (any case, FQDN or not); undefined when unsupported. */
export function tsigHash(algorithm: string): string | undefined {
  const a = asciiLower(algorithm);
  return HASHES.get(a.endsWith('.') ? a : a + '.');
}

/** The fields of a TSIG record (RFC 8945 4.2). Names are kept in wire form, as received. */
export interface TsigFields {
  /** Algorithm name, uncompressed wire form, case as sent. */
  algorithm: Uint8Array;
  /** Time signed: seconds since the epoch, 48 bits. */
  timeSigned: number;
  fudge: number;
  mac: Uint8Array;
  origId: number;
  error: number;
  other: Uint8Array;
}

/** A name at `off` of `buf` (compression pointers followed) in uncompressed wire form; undefined when malformed. */
function readName(buf: Uint8Array, off: number): { wire: Uint8Array; end: number } | undefined {
  const out: number[] = [];
  let end = -1;
  for (let hops = 0; hops < 128; hops++) {
    if (off >= buf.length) return undefined;
    const len = buf[off]!;
    if (len === 0) {
      out.push(0);
      if (end < 0) end = off + 1;
      return out.length > 255 ? undefined : { wire: Uint8Array.from(out), end };
    }
    if ((len & 0xc0) === 0xc0) {
      if (off + 2 > buf.length) return undefined;
      if (end < 0) end = off + 2;
      off = ((len & 0x3f) << 8) | buf[off + 1]!;
      continue;
    }
    if (len & 0xc0 || off + 1 + len > buf.length) return undefined;
    for (let i = off; i <= off + len; i++) out.push(buf[i]!);
    off += len + 1;
  }
  return undefined;
}

/** `name` (wire form) with ASCII letters lower-cased: miekg's CanonicalName for the MAC input. */
function canonicalWire(name: Uint8Array): Uint8Array {
  const out = Uint8Array.from(name);
  let i = 0;
  while (i < out.length && out[i] !== 0) {
    const len = out[i]!;
    for (let j = i + 1; j <= i + len; j++) if (out[j]! >= 65 && out[j]! <= 90) out[j] = out[j]! | 0x20;
    i += len + 1;
  }
  return out;
}

/** A wire-form name as text (labels joined with dots, trailing dot): for matching algorithm names. */
export function wireNameText(name: Uint8Array): string {
  let s = '';
  let i = 0;
  while (i < name.length && name[i] !== 0) {
    const len = name[i]!;
    s += String.fromCharCode(...name.subarray(i + 1, i + 1 + len)) + '.';
    i += len + 1;
  }
  return s === '' ? '.' : s;
}

/** The wire form of a presentation-form name (escapes understood), through the codec. */
export function nameWire(name: string): Uint8Array {
  const q = encodeMessage(newQuery(name, RRType.TSIG, RRClass.ANY));
  return Uint8Array.from(q.subarray(12, q.length - 4));
}

/**
 * Parse TSIG rdata (`raw`, names uncompressed, as the codec keeps it; `msg`/`at` to follow pointers). As
 * miekg unpacks a TSIG record ending its message, the rdata may stop after any field (the rest is zero);
 * undefined when a field is cut or the lengths do not add up.
 */
export function parseTsigRdata(raw: Uint8Array, msg?: Uint8Array, at = 0): TsigFields | undefined {
  const buf = msg ?? raw;
  const base = msg === undefined ? 0 : at;
  const end = base + raw.length;
  const alg = readName(buf, base);
  if (alg === undefined || alg.end > end) return undefined;
  const f: TsigFields = { algorithm: alg.wire, timeSigned: 0, fudge: 0, mac: EMPTY, origId: 0, error: 0, other: EMPTY };
  let p = alg.end;
  const u16 = (): number => { const v = (buf[p]! << 8) | buf[p + 1]!; p += 2; return v; };
  if (p === end) return f;
  if (p + 6 > end) return undefined;
  f.timeSigned = ((buf[p]! << 8) | buf[p + 1]!) * 0x100000000 + ((buf[p + 2]! << 24) >>> 0) + (buf[p + 3]! << 16) + (buf[p + 4]! << 8) + buf[p + 5]!;
  p += 6;
  if (p === end) return f;
  if (p + 2 > end) return undefined;
  f.fudge = u16();
  if (p === end) return f;
  if (p + 2 > end) return undefined;
  const macLen = u16();
  if (p === end) return f;
  if (p + macLen > end) return undefined;
  f.mac = Uint8Array.from(buf.subarray(p, p + macLen));
  p += macLen;
  if (p === end) return f;
  if (p + 2 > end) return undefined;
  f.origId = u16();
  if (p === end) return f;
  if (p + 2 > end) return undefined;
  f.error = u16();
  if (p === end) return f;
  if (p + 2 > end) return undefined;
  const otherLen = u16();
  if (p === end) return f;
  if (p + otherLen !== end) return undefined;
  f.other = Uint8Array.from(buf.subarray(p, end));
  return f;
}

function put48(out: Uint8Array, p: number, v: number): void {
  const hi = Math.floor(v / 0x100000000);
  out[p] = (hi >> 8) & 0xff; out[p + 1] = hi & 0xff;
  out[p + 2] = (v >>> 24) & 0xff; out[p + 3] = (v >>> 16) & 0xff; out[p + 4] = (v >>> 8) & 0xff; out[p + 5] = v & 0xff;
}

function put16(out: Uint8Array, p: number, v: number): void {
  out[p] = (v >> 8) & 0xff;
  out[p + 1] = v & 0xff;
}

/** TSIG rdata in wire form (algorithm name uncompressed, as miekg packs it). */
export function packTsigRdata(t: TsigFields): Uint8Array {
  const out = new Uint8Array(t.algorithm.length + 16 + t.mac.length + t.other.length);
  out.set(t.algorithm, 0);
  let p = t.algorithm.length;
  put48(out, p, t.timeSigned);
  put16(out, p + 6, t.fudge);
  put16(out, p + 8, t.mac.length);
  p += 10;
  out.set(t.mac, p);
  p += t.mac.length;
  put16(out, p, t.origId);
  put16(out, p + 2, t.error);
  put16(out, p + 4, t.other.length);
  out.set(t.other, p + 6);
  return out;
}

/** A TSIG record for a reply: `owner` in presentation form, class ANY, TTL 0. */
export function tsigRecord(owner: string, t: TsigFields): ResourceRecord<OpaqueData> {
  return { name: owner, type: RRType.TSIG, class: RRClass.ANY, ttl: 0, data: { raw: packTsigRdata(t) } };
}

/**
 * The bytes a MAC covers (RFC 8945 4.3, miekg tsigBuffer): the request MAC with its length (when there
 * is one), the message without its TSIG record and with the original ID, then the TSIG variables (owner and
 * algorithm lower-cased, class ANY, the record's TTL, time, fudge, error, other data) or, `timersOnly`,
 * only time and fudge (RFC 8945 5.3.1: the later messages of a stream).
 */
export function macInput(
  msg: Uint8Array, owner: Uint8Array, ttl: number, t: TsigFields, requestMac: Uint8Array, timersOnly: boolean,
): Uint8Array {
  const pre = requestMac.length === 0 ? 0 : 2 + requestMac.length;
  const vars = timersOnly ? 8 : owner.length + 6 + t.algorithm.length + 12 + t.other.length;
  const out = new Uint8Array(pre + msg.length + vars);
  let p = 0;
  if (pre !== 0) {
    put16(out, 0, requestMac.length);
    out.set(requestMac, 2);
    p = pre;
  }
  out.set(msg, p);
  put16(out, p, t.origId);
  p += msg.length;
  if (timersOnly) {
    put48(out, p, t.timeSigned);
    put16(out, p + 6, t.fudge);
    return out;
  }
  out.set(canonicalWire(owner), p);
  p += owner.length;
  put16(out, p, RRClass.ANY);
  out[p + 2] = (ttl >>> 24) & 0xff; out[p + 3] = (ttl >>> 16) & 0xff; out[p + 4] = (ttl >>> 8) & 0xff; out[p + 5] = ttl & 0xff;
  p += 6;
  out.set(canonicalWire(t.algorithm), p);
  p += t.algorithm.length;
  put48(out, p, t.timeSigned);
  put16(out, p + 6, t.fudge);
  put16(out, p + 8, t.error);
  put16(out, p + 10, t.other.length);
  out.set(t.other, p + 12);
  return out;
}

/** The HMAC of `data`; undefined when the algorithm is not supported. */
export function computeMac(algorithm: Uint8Array, secret: Uint8Array, data: Uint8Array): Uint8Array | undefined {
  const hash = HASHES.get(asciiLower(wireNameText(algorithm)));
  if (hash === undefined) return undefined;
  return createHmac(hash, secret).update(data).digest();
}

const B64 = new Int16Array(256).fill(-1);
for (let i = 0; i < 64; i++) B64['ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'.charCodeAt(i)] = i;

/**
 * Go's base64.StdEncoding.DecodeString (padding required, CR and LF skipped): the bytes, or the offset
 * Go's CorruptInputError reports (`illegal base64 data at input byte N`).
 */
export function decodeBase64Std(s: string): Uint8Array | number {
  const out: number[] = [];
  let si = 0;
  const n = s.length;
  const next = (): number => {
    while (si < n && (s.charCodeAt(si) === 10 || s.charCodeAt(si) === 13)) si++;
    return si < n ? s.charCodeAt(si++) : -1;
  };
  for (;;) {
    const q = [0, 0, 0, 0];
    let j = 0;
    for (; j < 4; j++) {
      const c = next();
      if (c === -1) {
        if (j === 0) return Uint8Array.from(out);
        return si - j;
      }
      if (c === 61) { // '='
        if (j < 2) return si - 1;
        if (j === 2) {
          const c2 = next();
          if (c2 === -1) return n;
          if (c2 !== 61) return si - 1;
        }
        while (si < n && (s.charCodeAt(si) === 10 || s.charCodeAt(si) === 13)) si++;
        if (si < n) return si;
        break;
      }
      const v = c < 256 ? B64[c]! : -1;
      if (v < 0) return si - 1;
      q[j] = v;
    }
    const val = (q[0]! << 18) | (q[1]! << 12) | (q[2]! << 6) | q[3]!;
    if (j >= 2) out.push((val >> 16) & 0xff);
    if (j >= 3) out.push((val >> 8) & 0xff);
    if (j === 4) out.push(val & 0xff);
    if (j < 4) return Uint8Array.from(out);
  }
}

/** A configured key: the base64 text and its bytes, or the offset Go's decoder fails at. */
export interface TsigKey {
  readonly secret: string;
  readonly bytes: Uint8Array | number;
}

export function tsigKey(secret: string): TsigKey {
  return { secret, bytes: decodeBase64Std(secret) };
}

/** miekg's error texts for a failed verification (what CoreDNS logs). */
export const TsigError = {
  secret: 'dns: no secrets defined',
  sig: 'dns: bad signature',
  time: 'dns: bad time',
  keyAlg: 'dns: bad key algorithm',
  auth: 'dns: bad authentication',
  format: 'dns: bad rdata',
} as const;

/** The outcome of verifying a signed message: undefined error when valid. */
export interface TsigVerification {
  /** The TSIG record's owner (presentation form as decoded: the key name, case as sent). */
  readonly owner: string;
  readonly ownerWire: Uint8Array;
  readonly ttl: number;
  readonly fields: TsigFields;
  /** miekg's error text, or undefined when the MAC and the time are good. */
  readonly error: string | undefined;
  /** The TSIG rcode CoreDNS answers with (0 when valid): BADKEY, BADTIME or BADSIG. */
  readonly rcode: number;
}

/**
 * miekg's TsigVerifyWithProvider for a message whose TSIG record starts at `at` (its last record; `owner`
 * is that record's decoded owner name): the key looked up by the owner name exactly as sent, then the MAC,
 * then the time (|now - time signed| within fudge). Undefined when the record cannot be read.
 */
export function verifyTsig(
  wire: Uint8Array, at: number, owner: string, keys: ReadonlyMap<string, TsigKey>, requestMac: Uint8Array, now: number,
): TsigVerification | undefined {
  const on = readName(wire, at);
  if (on === undefined) return undefined;
  const p = on.end;
  if (p + 10 > wire.length) return undefined;
  const ttl = ((wire[p + 4]! << 24) >>> 0) + (wire[p + 5]! << 16) + (wire[p + 6]! << 8) + wire[p + 7]!;
  const rdlen = (wire[p + 8]! << 8) | wire[p + 9]!;
  if (p + 10 + rdlen > wire.length) return undefined;
  const fields = parseTsigRdata(wire.subarray(p + 10, p + 10 + rdlen), wire, p + 10);
  if (fields === undefined) return undefined;
  const result = (error: string | undefined): TsigVerification => ({
    owner, ownerWire: on.wire, ttl, fields, error,
    rcode: error === undefined ? 0 : error === TsigError.secret ? Rcode.BADKEY : error === TsigError.time ? Rcode.BADTIME : Rcode.BADSIG,
  });
  // stripTsig: a message whose header says NOTAUTH is refused before anything else.
  if ((wire[3]! & 0x0f) === Rcode.NOTAUTH) return result(TsigError.auth);
  const key = keys.get(owner);
  if (key === undefined) return result(TsigError.secret);
  // tsigBuffer fills in a zero time (now) and a zero fudge (300) before computing.
  const t: TsigFields = fields.timeSigned === 0 || fields.fudge === 0
    ? { ...fields, timeSigned: fields.timeSigned === 0 ? now : fields.timeSigned, fudge: fields.fudge === 0 ? 300 : fields.fudge }
    : fields;
  if (typeof key.bytes === 'number') return result(`illegal base64 data at input byte ${key.bytes}`);
  const stripped = Uint8Array.from(wire.subarray(0, at));
  put16(stripped, 10, ((wire[10]! << 8) | wire[11]!) - 1);
  const mac = computeMac(t.algorithm, key.bytes, macInput(stripped, on.wire, ttl, t, requestMac, false));
  if (mac === undefined) return result(TsigError.keyAlg);
  if (mac.length !== fields.mac.length || !timingSafeEqual(mac, fields.mac)) return result(TsigError.sig);
  const skew = Math.abs(now - t.timeSigned);
  if (t.fudge < skew) return result(TsigError.time);
  return result(undefined);
}

/** Unix time in seconds. */
function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}

/**
 * Signs the replies of one exchange as miekg's ResponseWriter does (TsigGenerateWithProvider): the key
 * is looked up by the reply TSIG record's owner; a zero time becomes now and a zero fudge 300; a record
 * whose error is BADKEY or BADSIG goes out unsigned (time 0, no MAC; RFC 8945 5.3.2). Each MAC becomes
 * the "request MAC" of the next message, so a sequence of messages is chained (RFC 8945 5.3.1); set
 * `timersOnly` for the messages after the first of a stream when the peer expects it.
 */
export class TsigSigner implements ReplySigner {
  /** The MAC the next message's MAC covers first: the request's, then each signed message's. */
  priorMac: Uint8Array;
  /** Cover only time and fudge instead of all TSIG variables (miekg's TsigTimersOnly). */
  timersOnly = false;
  private readonly keys: ReadonlyMap<string, TsigKey>;
  private readonly clock: () => number;
  private ownerText = '';
  private ownerBytes: Uint8Array | undefined;

  constructor(keys: ReadonlyMap<string, TsigKey>, requestMac: Uint8Array, clock: () => number = unixNow) {
    this.keys = keys;
    this.priorMac = requestMac;
    this.clock = clock;
  }

  sign(wire: Uint8Array, tsig: ResourceRecord): Uint8Array | undefined {
    const raw = (tsig.data as Partial<OpaqueData>).raw;
    const stub = raw === undefined ? undefined : parseTsigRdata(raw);
    if (stub === undefined) return undefined;
    if (this.ownerBytes === undefined || this.ownerText !== tsig.name) {
      this.ownerBytes = nameWire(tsig.name);
      this.ownerText = tsig.name;
    }
    const owner = this.ownerBytes;
    const t: TsigFields = {
      ...stub,
      timeSigned: stub.timeSigned === 0 ? this.clock() : stub.timeSigned,
      fudge: stub.fudge === 0 ? 300 : stub.fudge,
    };
    const out: TsigFields = { ...t, timeSigned: 0, mac: EMPTY };
    if (t.error !== Rcode.BADKEY && t.error !== Rcode.BADSIG) {
      const key = this.keys.get(tsig.name);
      if (key === undefined || typeof key.bytes === 'number') return undefined;
      const mac = computeMac(t.algorithm, key.bytes, macInput(wire, owner, tsig.ttl, t, this.priorMac, this.timersOnly));
      if (mac === undefined) return undefined;
      out.timeSigned = t.timeSigned;
      out.mac = mac;
    }
    const rdata = packTsigRdata(out);
    const msg = new Uint8Array(wire.length + owner.length + 10 + rdata.length);
    msg.set(wire, 0);
    put16(msg, 0, t.origId);
    let p = wire.length;
    msg.set(owner, p);
    p += owner.length;
    put16(msg, p, RRType.TSIG);
    put16(msg, p + 2, RRClass.ANY);
    const ttl = tsig.ttl;
    msg[p + 4] = (ttl >>> 24) & 0xff; msg[p + 5] = (ttl >>> 16) & 0xff; msg[p + 6] = (ttl >>> 8) & 0xff; msg[p + 7] = ttl & 0xff;
    put16(msg, p + 8, rdata.length);
    msg.set(rdata, p + 10);
    put16(msg, 10, ((wire[10]! << 8) | wire[11]!) + 1);
    this.priorMac = out.mac;
    return msg;
  }
}


