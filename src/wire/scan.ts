// Walking a wire message without decoding it: on the hot path, to find the
// question's end or the OPT record of a ready-made reply so it can be patched
// in place, or where a reply's TTLs sit so a cached copy can be served by
// patching bytes. The one home of wire walking outside the codec.

import { RRType } from './constants.ts';

/**
 * Offset just past the name at `off`, or -1 when it runs off the buffer. A compression pointer
 * ends the name (it is not followed); with `targets`, the offset each pointer points to is pushed
 * there.
 */
export function skipName(buf: Uint8Array, off: number, targets?: number[]): number {
  for (let hops = 0; hops < 128; hops++) {
    if (off >= buf.length) return -1;
    const len = buf[off]!;
    if (len === 0) return off + 1;
    if ((len & 0xc0) === 0xc0) {
      if (off + 2 > buf.length) return -1;
      if (targets !== undefined) targets.push(((len & 0x3f) << 8) | buf[off + 1]!);
      return off + 2;
    }
    if (len & 0xc0) return -1;
    off += len + 1;
  }
  return -1;
}

/**
 * Offset just past the first question when its name is labels only (no pointer, no reserved label type), ending in
 * the root within 255 octets, and type and class fit in the message: names the decoder cannot fail on. -1 otherwise.
 */
export function plainQuestionEnd(buf: Uint8Array): number {
  const n = buf.length;
  let p = 12;
  for (;;) {
    if (p >= n) return -1;
    const len = buf[p]!;
    if (len === 0) break;
    if (len > 63) return -1;
    p += len + 1;
    if (p - 12 > 254) return -1;
  }
  return p + 5 > n ? -1 : p + 5;
}

/** Offset just past the first question (12 + name + type + class); -1 when it does not fit. */
export function questionEnd(buf: Uint8Array): number {
  const end = skipName(buf, 12);
  return end < 0 || end + 4 > buf.length ? -1 : end + 4;
}

/**
 * The question of `reply` equals the one of `query` (whose question ends at `qEnd`): one question,
 * the same bytes with ASCII letters compared case-insensitively.
 */
export function questionMatches(query: Uint8Array, qEnd: number, reply: Uint8Array): boolean {
  if (reply.length < qEnd) return false;
  if (reply[4] !== 0 || reply[5] !== 1) return false;
  for (let i = 12; i < qEnd; i++) {
    let a = query[i]!, b = reply[i]!;
    if (a === b) continue;
    if (a >= 65 && a <= 90) a += 32;
    if (b >= 65 && b <= 90) b += 32;
    if (a !== b) return false;
  }
  return true;
}

/**
 * Offset of the OPT record (its owner name byte) in the additional section — the last one when
 * there are several, the one miekg's IsEdns0 (and decodeMessage) takes; -1 when there is none,
 * -2 when the message is malformed.
 */
export function findOptRecord(buf: Uint8Array): number {
  if (buf.length < 12) return -2;
  const qd = (buf[4]! << 8) | buf[5]!;
  const an = (buf[6]! << 8) | buf[7]!;
  const ns = (buf[8]! << 8) | buf[9]!;
  const ar = (buf[10]! << 8) | buf[11]!;
  let off = 12;
  for (let i = 0; i < qd; i++) {
    off = skipName(buf, off);
    if (off < 0 || off + 4 > buf.length) return -2;
    off += 4;
  }
  const before = an + ns;
  let opt = -1;
  for (let i = 0; i < before + ar; i++) {
    const start = off;
    off = skipName(buf, off);
    if (off < 0 || off + 10 > buf.length) return -2;
    const type = (buf[off]! << 8) | buf[off + 1]!;
    const rdlen = (buf[off + 8]! << 8) | buf[off + 9]!;
    off += 10 + rdlen;
    if (off > buf.length) return -2;
    if (i >= before && type === RRType.OPT) opt = start;
  }
  return opt;
}

/** Where a message's records sit, as `scanRecords` finds them. */
export interface RecordScan {
  /** Offset just past the question section. */
  qEnd: number;
  /** Offsets of the 4-byte TTL fields of all non-OPT records, in wire order. */
  ttls: number[];
  /** Offset of the OPT record's first byte, -1 when there is none. */
  optStart: number;
  /** Offset just past the OPT record. */
  optEnd: number;
}

/** Scan a well-formed message; undefined when the framing does not add up. */
export function scanRecords(b: Uint8Array): RecordScan | undefined {
  if (b.length < 12) return undefined;
  const qd = (b[4]! << 8) | b[5]!;
  const rrs = ((b[6]! << 8) | b[7]!) + ((b[8]! << 8) | b[9]!) + ((b[10]! << 8) | b[11]!);
  let p = 12;
  for (let i = 0; i < qd; i++) {
    p = skipName(b, p);
    if (p < 0) return undefined;
    p += 4;
  }
  if (p > b.length) return undefined;
  const out: RecordScan = { qEnd: p, ttls: [], optStart: -1, optEnd: -1 };
  for (let i = 0; i < rrs; i++) {
    const start = p;
    p = skipName(b, p);
    if (p < 0 || p + 10 > b.length) return undefined;
    const type = (b[p]! << 8) | b[p + 1]!;
    const rdlen = (b[p + 8]! << 8) | b[p + 9]!;
    const end = p + 10 + rdlen;
    if (end > b.length) return undefined;
    if (type === RRType.OPT) {
      out.optStart = start;
      out.optEnd = end;
    } else {
      out.ttls.push(p + 4);
    }
    p = end;
  }
  return out;
}

/** Writes a 32-bit TTL at `at`. */
export function writeTtl(b: Uint8Array, at: number, ttl: number): void {
  b[at] = ttl >>> 24;
  b[at + 1] = (ttl >>> 16) & 0xff;
  b[at + 2] = (ttl >>> 8) & 0xff;
  b[at + 3] = ttl & 0xff;
}

/** A copy of `buf` without the OPT record at [start, end), ARCOUNT one less. */
export function removeOpt(buf: Uint8Array, start: number, end: number): Buffer {
  const out = Buffer.allocUnsafe(buf.length - (end - start));
  out.set(buf.subarray(0, start), 0);
  out.set(buf.subarray(end), start);
  const ar = ((out[10]! << 8) | out[11]!) - 1;
  out[10] = ar >> 8;
  out[11] = ar & 0xff;
  return out;
}

/** `buf` without its OPT record: a copy, or `buf` itself when it has none (or cannot be walked). */
export function withoutOpt(buf: Uint8Array): Uint8Array {
  const at = findOptRecord(buf);
  if (at < 0) return buf;
  const p = skipName(buf, at); // the root name, one byte, in any sane message
  const rdlen = (buf[p + 8]! << 8) | buf[p + 9]!;
  return removeOpt(buf, at, p + 10 + rdlen);
}

/**
 * Where the names sit in the rdata of the types whose names a sender may compress (the ones the decoder
 * expands): bytes before the first name, and how many names follow back to back. NAPTR is walked apart
 * (rdataNameRun).
 */
function rdataNames(type: number): number {
  switch (type) {
    case 2: case 3: case 4: case 5: case 7: case 8: case 9: case 12: case 39: case 47: case 30:
      return 1;                 // NS MD MF CNAME MB MG MR PTR DNAME NSEC NXT: name first
    case 6: case 14: case 17:
      return 2;                 // SOA MINFO RP: two names
    case 15: case 18: case 21: case 36: case 64: case 65:
      return (2 << 8) | 1;      // MX AFSDB RT KX SVCB HTTPS: u16, name
    case 26:
      return (2 << 8) | 2;      // PX: u16, two names
    case 33:
      return (6 << 8) | 1;      // SRV: three u16, name
    case 24: case 46:
      return (18 << 8) | 1;     // SIG RRSIG: 18 fixed bytes, signer name
    default:
      return 0;
  }
}

/**
 * Where the names of a record's rdata `b[start, end)` begin and how many follow back to back, packed as
 * `(offset << 2) | count` (count 0: the type has none). NAPTR's name comes after three character-strings.
 */
function rdataNameRun(b: Uint8Array, type: number, start: number, end: number): number {
  if (type === 35) { // NAPTR: order, preference, three character-strings, replacement
    let at = start + 4;
    for (let s = 0; s < 3 && at < end; s++) at += 1 + b[at]!;
    return (at << 2) | 1;
  }
  const n = rdataNames(type);
  return ((start + (n >> 8)) << 2) | (n & 0xff);
}

/** Whether the name at `off` uses a compression pointer; -1 when it runs off the buffer. */
function namePointer(buf: Uint8Array, off: number, end: number): { next: number; pointer: boolean } {
  for (let hops = 0; hops < 128; hops++) {
    if (off >= end) return { next: -1, pointer: false };
    const len = buf[off]!;
    if (len === 0) return { next: off + 1, pointer: false };
    if ((len & 0xc0) === 0xc0) return { next: off + 2, pointer: true };
    if (len & 0xc0) return { next: -1, pointer: false };
    off += len + 1;
  }
  return { next: -1, pointer: false };
}

/**
 * Whether a message uses name compression anywhere the decoder would expand it (question, owners, the
 * names inside rdata). CoreDNS writes every reply it unpacked without compression unless it must
 * compress to fit, so a ready-made reply from elsewhere (an upstream) that has pointers has to be
 * re-encoded. True as well when the message cannot be walked, so the caller decodes it and finds out.
 */
export function hasCompressionPointer(b: Uint8Array): boolean {
  if (b.length < 12) return true;
  const qd = (b[4]! << 8) | b[5]!;
  const rrs = ((b[6]! << 8) | b[7]!) + ((b[8]! << 8) | b[9]!) + ((b[10]! << 8) | b[11]!);
  let p = 12;
  for (let i = 0; i < qd; i++) {
    const n = namePointer(b, p, b.length);
    if (n.next < 0 || n.pointer) return true;
    p = n.next + 4;
  }
  for (let i = 0; i < rrs; i++) {
    const n = namePointer(b, p, b.length);
    if (n.next < 0 || n.pointer) return true;
    p = n.next;
    if (p + 10 > b.length) return true;
    const type = (b[p]! << 8) | b[p + 1]!;
    const rdlen = (b[p + 8]! << 8) | b[p + 9]!;
    const start = p + 10;
    const end = start + rdlen;
    if (end > b.length) return true;
    const run = rdataNameRun(b, type, start, end);
    let at = run >> 2;
    const names = run & 3;
    for (let k = 0; k < names && at < end; k++) {
      const r = namePointer(b, at, end);
      if (r.next < 0 || r.pointer) return true;
      at = r.next;
    }
    p = end;
  }
  return false;
}

/**
 * Where the TSIG record of a message sits (RFC 8945: the last record of the additional section):
 * the offset of its first byte when the last additional record is a TSIG and no other additional
 * record is; -1 when there is none; -3 when a TSIG record is not the last additional record; -2
 * when the message cannot be walked.
 */
export function findTsigRecord(buf: Uint8Array): number {
  if (buf.length < 12) return -2;
  const qd = (buf[4]! << 8) | buf[5]!;
  const before = ((buf[6]! << 8) | buf[7]!) + ((buf[8]! << 8) | buf[9]!);
  const ar = (buf[10]! << 8) | buf[11]!;
  let off = 12;
  for (let i = 0; i < qd; i++) {
    off = skipName(buf, off);
    if (off < 0 || off + 4 > buf.length) return -2;
    off += 4;
  }
  let tsig = -1;
  for (let i = 0; i < before + ar; i++) {
    const start = off;
    off = skipName(buf, off);
    if (off < 0 || off + 10 > buf.length) return -2;
    const type = (buf[off]! << 8) | buf[off + 1]!;
    const rdlen = (buf[off + 8]! << 8) | buf[off + 9]!;
    off += 10 + rdlen;
    if (off > buf.length) return -2;
    if (i < before || type !== RRType.TSIG) continue;
    if (i !== before + ar - 1) return -3;
    tsig = start;
  }
  return tsig;
}

/** Scratch for `expandNames`: an expanded message is written here, then copied out at its size. */
const EXPANDED = Buffer.allocUnsafe(65535);
/** Cursor into EXPANDED while `expandNames` writes (module state: one message at a time, no closures). */
let X = 0;

/**
 * Copies the name at `off` into EXPANDED at X, following compression pointers; returns the offset just past the
 * name where it sits in `b`, or -1 for anything the decoder might treat otherwise than a plain expansion: a name
 * running past `end`, a reserved label type, more than 126 pointers, or more than 255 octets (the decoder's errors).
 */
function expandName(b: Uint8Array, off: number, end: number): number {
  let next = -1;
  let wire = 1;
  let hops = 0;
  const out = EXPANDED;
  for (;;) {
    if (off >= end) return -1;
    const len = b[off]!;
    if (len === 0) {
      if (X >= out.length) return -1;
      out[X++] = 0;
      return next < 0 ? off + 1 : next;
    }
    if ((len & 0xc0) === 0xc0) {
      if (off + 1 >= end || ++hops > 126) return -1;
      if (next < 0) next = off + 2;
      // a pointer may point anywhere in the message (miekg follows forward pointers too), not only in this rdata
      off = ((len & 0x3f) << 8) | b[off + 1]!;
      end = b.length;
      continue;
    }
    if ((len & 0xc0) !== 0) return -1;
    const e = off + 1 + len;
    wire += len + 1;
    if (e > end || wire > 255 || X + len + 1 > out.length) return -1;
    for (let i = off; i < e; i++) out[X++] = b[i]!;
    off = e;
  }
}

/** Copies b[from, to) into EXPANDED at X; false when it does not fit. */
function copyBytes(b: Uint8Array, from: number, to: number): boolean {
  const out = EXPANDED;
  if (X + (to - from) > out.length) return false;
  // a loop: the pieces are short (a record's fixed fields, an address), and subarray() would allocate a view each
  if (to - from > 64) {
    out.set(b.subarray(from, to), X);
    X += to - from;
  } else {
    for (let i = from; i < to; i++) out[X++] = b[i]!;
  }
  return true;
}

/**
 * The message without name compression: the question, every owner and the names inside the rdata of the types
 * the decoder expands (those `hasCompressionPointer` looks at) written out in full, everything else byte for
 * byte. It equals what decoding and re-encoding without compression gives (CoreDNS's unpack and pack of an
 * upstream's reply), without building the message: forward's path for compressed replies.
 *
 * Undefined whenever the message is not plainly framed, and the caller decodes it instead and so meets every rule
 * of the decoder: counts that do not match the records, trailing bytes, an rdata whose names do not fill it as
 * the type says, an OPT record that is not the single last additional record with the root as owner and
 * well-framed options, or a result above 65535 bytes.
 */
export function expandNames(b: Uint8Array): Buffer | undefined {
  const n = b.length;
  if (n < 12) return undefined;
  const qd = (b[4]! << 8) | b[5]!;
  const an = (b[6]! << 8) | b[7]!;
  const ns = (b[8]! << 8) | b[9]!;
  const ar = (b[10]! << 8) | b[11]!;
  const rrs = an + ns + ar;
  X = 0;
  copyBytes(b, 0, 12);
  let p = 12;
  for (let i = 0; i < qd; i++) {
    p = expandName(b, p, n);
    if (p < 0 || p + 4 > n || !copyBytes(b, p, p + 4)) return undefined;
    p += 4;
  }
  for (let i = 0; i < rrs; i++) {
    const ownerAt = p;
    p = expandName(b, p, n);
    if (p < 0 || p + 10 > n) return undefined;
    const type = (b[p]! << 8) | b[p + 1]!;
    const rdlen = (b[p + 8]! << 8) | b[p + 9]!;
    const start = p + 10;
    const end = start + rdlen;
    if (end > n) return undefined;
    if (type === RRType.OPT) {
      // lifted into the message's EDNS by the decoder and written back last: plain only as the last record
      if (i !== rrs - 1 || i < an + ns || b[ownerAt] !== 0) return undefined;
      for (let o = start; o < end;) {
        if (o + 4 > end) return undefined;
        o += 4 + ((b[o + 2]! << 8) | b[o + 3]!);
        if (o > end) return undefined;
      }
      if (!copyBytes(b, p, end)) return undefined;
      p = end;
      continue;
    }
    const lengthAt = X + 8;
    if (!copyBytes(b, p, start)) return undefined; // type, class, TTL, rdlength (rewritten below)
    const rdataAt = X;
    if (rdlen !== 0) {
      const run = rdataNameRun(b, type, start, end);
      let at = run >> 2;
      const names = run & 3;
      if (names === 0) {
        // Only rdata the decoder cannot reject once framed; other types (TSIG, DNSKEY, CAA...) take its path.
        if (type === RRType.A) {
          if (rdlen !== 4) return undefined;
        } else if (type === RRType.AAAA) {
          if (rdlen !== 16) return undefined;
        } else if (type === RRType.TXT) {
          for (let s = start; s !== end;) {
            s += 1 + b[s]!;
            if (s > end) return undefined;
          }
        } else {
          return undefined;
        }
        if (!copyBytes(b, start, end)) return undefined;
      } else {
        // rdata the decoder parses past its names (NSEC and NXT bitmaps, SVCB parameters) takes the decoder's path
        if (type === 47 || type === 30 || type === 64 || type === 65) return undefined;
        if (at > end || !copyBytes(b, start, at)) return undefined;
        for (let k = 0; k < names; k++) {
          at = expandName(b, at, end);
          if (at < 0) return undefined;
        }
        // after the names: SOA's five counters, (RR)SIG's signature; nothing for the other types
        const tail = end - at;
        if (type === RRType.SOA ? tail !== 20 : type !== 24 && type !== 46 && tail !== 0) return undefined;
        if (!copyBytes(b, at, end)) return undefined;
      }
    }
    const len = X - rdataAt;
    EXPANDED[lengthAt] = len >> 8;
    EXPANDED[lengthAt + 1] = len & 0xff;
    p = end;
  }
  if (p !== n) return undefined;
  const copy = Buffer.allocUnsafe(X);
  EXPANDED.copy(copy, 0, 0, X);
  return copy;
}

/**
 * Offset just past the name at `off` when the decoder reads it as a plain name (labels and compression pointers,
 * within the message, at most 126 pointers and 255 octets: expandName's rules, without copying); -1 otherwise.
 */
function plainNameEnd(b: Uint8Array, off: number): number {
  let next = -1;
  let wire = 1;
  let hops = 0;
  const n = b.length;
  for (;;) {
    if (off >= n) return -1;
    const len = b[off]!;
    if (len === 0) return next < 0 ? off + 1 : next;
    if ((len & 0xc0) === 0xc0) {
      if (off + 1 >= n || ++hops > 126) return -1;
      if (next < 0) next = off + 2;
      off = ((len & 0x3f) << 8) | b[off + 1]!;
      continue;
    }
    if ((len & 0xc0) !== 0) return -1;
    wire += len + 1;
    if (off + 1 + len > n || wire > 255) return -1;
    off += len + 1;
  }
}

/** What `scanPlainAnswer` found: the facts the cache needs, where decoding would have given the same. */
export interface PlainAnswer {
  /** Offset just past the question. */
  qEnd: number;
  qtype: number;
  qclass: number;
  /** The smallest TTL of the answer records (unsigned, as decoded). */
  minTtl: number;
  /** Record types among the answers: 1 A, 2 AAAA (both bits: both). */
  types: number;
  /** Offsets of the answer records' TTL fields. */
  ttls: number[];
  /** The OPT record's offsets (-1, -1 without one); when present it is the message's last record. */
  optStart: number;
  optEnd: number;
}

/**
 * The facts of a reply of the shape most forwarded answers have, read without decoding: a response to a standard
 * query (QR, opcode QUERY, no TC) with rcode NOERROR (the OPT's extended bits zero too), one question whose name
 * is plain labels and whose type is not AXFR or IXFR, one or more answer records, all A (4 bytes) or AAAA (16 bytes) with decodable owners, no
 * authority records, and as additional section at most the one OPT record, last, root-owned, with well-framed
 * options; counts and length exact. Such a message decodes (decodeMessage accepts it and reads the same facts);
 * undefined for anything else, which the caller decodes.
 */
export function scanPlainAnswer(b: Uint8Array): PlainAnswer | undefined {
  const n = b.length;
  if (n < 12 || (b[2]! & 0xfa) !== 0x80 || (b[3]! & 0x0f) !== 0) return undefined; // QR; opcode 0; no TC; NOERROR
  if (b[4] !== 0 || b[5] !== 1 || b[8] !== 0 || b[9] !== 0 || b[10] !== 0 || b[11]! > 1) return undefined;
  const an = (b[6]! << 8) | b[7]!;
  if (an === 0) return undefined;
  const qEnd = plainQuestionEnd(b);
  if (qEnd < 0) return undefined;
  const qtype = (b[qEnd - 4]! << 8) | b[qEnd - 3]!;
  const qclass = (b[qEnd - 2]! << 8) | b[qEnd - 1]!;
  if (qtype === RRType.AXFR || qtype === RRType.IXFR) return undefined; // typify: Meta
  let minTtl = Infinity;
  let types = 0;
  const ttls: number[] = [];
  let p = qEnd;
  for (let i = 0; i < an; i++) {
    p = plainNameEnd(b, p);
    if (p < 0 || p + 10 > n) return undefined;
    const type = (b[p]! << 8) | b[p + 1]!;
    const rdlen = (b[p + 8]! << 8) | b[p + 9]!;
    if (type === RRType.A ? rdlen !== 4 : type !== RRType.AAAA || rdlen !== 16) return undefined;
    types |= type === RRType.A ? 1 : 2;
    const ttl = ((b[p + 4]! << 24) | (b[p + 5]! << 16) | (b[p + 6]! << 8) | b[p + 7]!) >>> 0;
    if (ttl < minTtl) minTtl = ttl;
    ttls.push(p + 4);
    p += 10 + rdlen;
    if (p > n) return undefined;
  }
  let optStart = -1;
  let optEnd = -1;
  if (b[11] === 1) {
    // the OPT: root owner, type 41, extended rcode 0, options framed to the end
    if (p + 11 > n || b[p] !== 0 || b[p + 1] !== 0 || b[p + 2] !== RRType.OPT || b[p + 5] !== 0) return undefined;
    const end = p + 11 + ((b[p + 9]! << 8) | b[p + 10]!);
    if (end !== n) return undefined;
    for (let o = p + 11; o < end;) {
      if (o + 4 > end) return undefined;
      o += 4 + ((b[o + 2]! << 8) | b[o + 3]!);
      if (o > end) return undefined;
    }
    optStart = p;
    optEnd = end;
  } else if (p !== n) {
    return undefined;
  }
  return { qEnd, qtype, qclass, minTtl, types, ttls, optStart, optEnd };
}

/**
 * The question name of `b` (plain labels at 12) is `lower`, a lower-cased name in presentation form with its final
 * dot, compared case-insensitively. False also when a label holds a byte other than a letter, digit, `-` or `_`
 * (whose presentation form may be escaped): the caller then decodes.
 */
export function questionNameIs(b: Uint8Array, lower: string): boolean {
  let p = 12;
  let i = 0;
  const n = b.length;
  for (;;) {
    if (p >= n) return false;
    const len = b[p++]!;
    if (len === 0) return lower.length === (i === 0 ? 1 : i) && (i !== 0 || lower === '.');
    if (len > 63 || p + len > n) return false;
    for (const end = p + len; p < end; p++) {
      let c = b[p]!;
      if (c >= 65 && c <= 90) c += 32;
      else if (!((c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 45 || c === 95)) return false;
      if (lower.charCodeAt(i++) !== c) return false;
    }
    if (lower.charCodeAt(i++) !== 46) return false;
  }
}
