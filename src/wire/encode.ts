// Message → DNS wire format. Everything is written into one preallocated scratch buffer with a
// reused compression table (cleared per message) and copied out once.
//
// Name compression (RFC 1035 4.1.4), when asked for: owner names, question names, and the names
// inside the rdata of the types miekg/dns compresses (CNAME, MB, MD, MF, MG, MINFO, MR, MX, NS,
// PTR, RT, SOA). Names elsewhere (SRV, DNAME, NAPTR, RRSIG, ...) are written in full but still
// registered as pointer targets, as miekg does. Suffix matching is exact, letter case included, as
// in miekg: a pointer never changes the case a client sees (0x20 randomisation survives).
//
// Names are presentation form; a name without the trailing dot is treated as fully qualified.
// Records whose data is OpaqueData (`raw`) are written byte for byte, whatever their type.

import { WireError } from './error.ts';
import { parseIPv4, parseIPv6Into } from './ip.ts';
import type {
  AData, CAAData, DNSKEYData, DSData, Edns, HINFOData, Message, MXData, NAPTRData, NameData,
  NSEC3Data, NSEC3PARAMData, NSECData, OpaqueData, Question, RRSIGData, ResourceRecord, SOAData,
  SRVData, SVCBData, TLSAData, TXTData,
} from './types.ts';

const MAX_MSG = 65535;
/** Room for one record past MAX_MSG (fixed parts); variable parts are checked as written. */
let S: Buffer = Buffer.allocUnsafe(MAX_MSG + 4096);
let O = 0;
let COMPRESS = false;
const CT = new Map<number, number>();

function tooLong(): WireError {
  return new WireError('TOO_LONG', 'dns: message exceeds 65535 octets');
}

function ensure(n: number): void {
  if (O + n > S.length) {
    if (O + n > MAX_MSG + 70000) throw tooLong();
    const nb = Buffer.allocUnsafe(MAX_MSG + 70000 + 4096);
    S.copy(nb, 0, 0, O);
    S = nb;
  }
}

function w16(v: number): void {
  S[O] = v >>> 8;
  S[O + 1] = v;
  O += 2;
}

function w32(v: number): void {
  S[O] = v >>> 24;
  S[O + 1] = v >>> 16;
  S[O + 2] = v >>> 8;
  S[O + 3] = v;
  O += 4;
}

function wBytes(b: Uint8Array): void {
  ensure(b.length);
  S.set(b, O);
  O += b.length;
}

function badName(name: string, why: string): WireError {
  return new WireError(why === 'long' ? 'NAME_TOO_LONG' : 'BAD_LABEL', `dns: bad domain name ${JSON.stringify(name)}: ${why}`);
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

// Compression works on the bytes already written, not on strings: each name is first written in
// full; then, from its longest suffix down, a hash of the wire suffix is looked up
// in CT (hash → offset of an earlier occurrence), verified byte by byte, and the tail replaced by
// a pointer. No string hashing or slicing on the hot path.
const labelPos = new Int32Array(130);
const suffixHash = new Int32Array(130);

/** Wire name at `a` (uncompressed) equals the one at `b` (may use pointers), byte for byte. */
function suffixEqual(a: number, b: number): boolean {
  for (let guard = 0; guard < 256; guard++) {
    let lb = S[b];
    while (lb >= 0xc0) {
      b = ((lb & 0x3f) << 8) | S[b + 1];
      lb = S[b];
    }
    const la = S[a];
    if (la !== lb) return false;
    if (la === 0) return true;
    for (let i = 1; i <= la; i++) if (S[a + i] !== S[b + i]) return false;
    a += la + 1;
    b += lb + 1;
  }
  return false;
}

/**
 * Writes `name` at O. `compress`: may end in a pointer. With message compression on, every
 * suffix is registered as a future pointer target (as miekg does, even for names not compressed).
 */
function writeName(name: string, compress: boolean): void {
  const n = name.length;
  if (n === 0 || (n === 1 && name.charCodeAt(0) === 46)) {
    S[O++] = 0;
    return;
  }
  const nameStart = O;
  let nl = 0;
  let i = 0;
  while (i < n) {
    const lenPos = O++;
    labelPos[nl++] = lenPos;
    let len = 0;
    for (; i < n; i++) {
      let c = name.charCodeAt(i);
      if (c === 46) break;
      if (c === 92) {
        if (i + 1 >= n) throw badName(name, 'dangling backslash');
        const c1 = name.charCodeAt(i + 1);
        if (isDigit(c1) && i + 3 < n && isDigit(name.charCodeAt(i + 2)) && isDigit(name.charCodeAt(i + 3))) {
          c = (c1 - 48) * 100 + (name.charCodeAt(i + 2) - 48) * 10 + (name.charCodeAt(i + 3) - 48);
          if (c > 255) throw badName(name, 'bad \\DDD escape');
          i += 3;
          S[O++] = c;
          len++;
          if (len > 63) throw badName(name, 'label longer than 63 octets');
          continue;
        }
        i++;
        c = c1;
      }
      if (c < 0x80) {
        S[O++] = c;
        len++;
      } else {
        // non-ASCII text: UTF-8 bytes
        const cp = name.codePointAt(i)!;
        if (cp > 0xffff) i++;
        const bytes = Buffer.from(String.fromCodePoint(cp), 'utf8');
        for (let k = 0; k < bytes.length; k++) S[O++] = bytes[k];
        len += bytes.length;
      }
      if (len > 63) throw badName(name, 'label longer than 63 octets');
    }
    if (len === 0) throw badName(name, 'empty label');
    S[lenPos] = len;
    if (O - nameStart > 254) throw badName(name, 'long');
    i++; // past the dot
  }
  S[O++] = 0;
  if (!COMPRESS) return;
  // suffix hashes, shortest first
  let h = 0x2f;
  for (let k = nl - 1; k >= 0; k--) {
    const p = labelPos[k];
    const l = S[p];
    h = Math.imul(h ^ l, 0x01000193);
    for (let j = 1; j <= l; j++) h = Math.imul(h ^ S[p + j], 0x01000193);
    suffixHash[k] = h;
  }
  for (let k = 0; k < nl; k++) {
    const p = labelPos[k];
    const q = CT.get(suffixHash[k]);
    if (q !== undefined) {
      if (compress && suffixEqual(p, q)) {
        S[p] = 0xc0 | (q >>> 8);
        S[p + 1] = q;
        O = p + 2;
        return;
      }
    } else if (p < 0x4000) CT.set(suffixHash[k], p);
  }
}

function wCharString(b: Uint8Array): void {
  if (b.length > 255) throw new WireError('BAD_VALUE', 'dns: character-string longer than 255 octets');
  ensure(b.length + 1);
  S[O++] = b.length;
  S.set(b, O);
  O += b.length;
}

function wAddress4(a: string): void {
  const v = parseIPv4(a);
  if (v < 0) throw new WireError('BAD_VALUE', 'dns: bad A address ' + JSON.stringify(a));
  w32(v);
}

function wAddress6(a: string): void {
  if (!parseIPv6Into(a, S, O)) throw new WireError('BAD_VALUE', 'dns: bad AAAA address ' + JSON.stringify(a));
  O += 16;
}

function wTypeBitmap(types: number[]): void {
  if (types.length === 0) return;
  const sorted = types.length > 1 ? Array.from(new Set(types)).sort((a, b) => a - b) : types;
  let i = 0;
  while (i < sorted.length) {
    const window = sorted[i] >>> 8;
    const bits = new Uint8Array(32);
    let maxByte = 0;
    while (i < sorted.length && sorted[i] >>> 8 === window) {
      const t = sorted[i] & 0xff;
      bits[t >>> 3] |= 0x80 >>> (t & 7);
      if ((t >>> 3) + 1 > maxByte) maxByte = (t >>> 3) + 1;
      i++;
    }
    ensure(2 + maxByte);
    S[O++] = window;
    S[O++] = maxByte;
    S.set(bits.subarray(0, maxByte), O);
    O += maxByte;
  }
}

function writeRdata(rr: ResourceRecord): void {
  const d = rr.data;
  if ((d as OpaqueData).raw !== undefined) {
    wBytes((d as OpaqueData).raw);
    return;
  }
  switch (rr.type) {
    case 1:
      wAddress4((d as AData).address);
      return;
    case 28:
      wAddress6((d as AData).address);
      return;
    case 2: case 3: case 4: case 5: case 7: case 8: case 9: case 12:
      writeName((d as NameData).target, true);
      return;
    case 39:
      writeName((d as NameData).target, false);
      return;
    case 6: {
      const s = d as SOAData;
      writeName(s.mname, true);
      writeName(s.rname, true);
      w32(s.serial);
      w32(s.refresh);
      w32(s.retry);
      w32(s.expire);
      w32(s.minimum);
      return;
    }
    case 15: {
      const m = d as MXData;
      w16(m.preference);
      writeName(m.exchange, true);
      return;
    }
    case 16: case 99: case 258: case 261: {
      const strs = (d as TXTData).strings;
      for (let i = 0; i < strs.length; i++) wCharString(strs[i]);
      return;
    }
    case 13: {
      const h = d as HINFOData;
      wCharString(h.cpu);
      wCharString(h.os);
      return;
    }
    case 33: {
      const s = d as SRVData;
      w16(s.priority);
      w16(s.weight);
      w16(s.port);
      writeName(s.target, false);
      return;
    }
    case 257: {
      const c = d as CAAData;
      if (c.tag.length > 255) throw new WireError('BAD_VALUE', 'dns: CAA tag too long');
      ensure(2 + c.tag.length);
      S[O++] = c.flags;
      S[O++] = c.tag.length;
      for (let i = 0; i < c.tag.length; i++) S[O++] = c.tag.charCodeAt(i);
      wBytes(c.value);
      return;
    }
    case 35: {
      const n = d as NAPTRData;
      w16(n.order);
      w16(n.preference);
      wCharString(n.flags);
      wCharString(n.services);
      wCharString(n.regexp);
      writeName(n.replacement, false);
      return;
    }
    case 43: case 59: case 32768: case 32769: {
      const s = d as DSData;
      w16(s.keyTag);
      S[O++] = s.algorithm;
      S[O++] = s.digestType;
      wBytes(s.digest);
      return;
    }
    case 48: case 60: case 25: {
      const k = d as DNSKEYData;
      w16(k.flags);
      S[O++] = k.protocol;
      S[O++] = k.algorithm;
      wBytes(k.publicKey);
      return;
    }
    case 46: case 24: {
      const r = d as RRSIGData;
      w16(r.typeCovered);
      S[O++] = r.algorithm;
      S[O++] = r.labels;
      w32(r.originalTTL);
      w32(r.expiration);
      w32(r.inception);
      w16(r.keyTag);
      writeName(r.signerName, false);
      wBytes(r.signature);
      return;
    }
    case 47: {
      const r = d as NSECData;
      writeName(r.nextName, false);
      wTypeBitmap(r.types);
      return;
    }
    case 50: {
      const r = d as NSEC3Data;
      S[O++] = r.hashAlgorithm;
      S[O++] = r.flags;
      w16(r.iterations);
      wCharString(r.salt);
      wCharString(r.nextHashed);
      wTypeBitmap(r.types);
      return;
    }
    case 51: {
      const r = d as NSEC3PARAMData;
      S[O++] = r.hashAlgorithm;
      S[O++] = r.flags;
      w16(r.iterations);
      wCharString(r.salt);
      return;
    }
    case 52: case 53: {
      const t = d as TLSAData;
      S[O++] = t.usage;
      S[O++] = t.selector;
      S[O++] = t.matchingType;
      wBytes(t.certificate);
      return;
    }
    case 64: case 65: {
      const s = d as SVCBData;
      w16(s.priority);
      writeName(s.target, false);
      for (let i = 0; i < s.params.length; i++) {
        const p = s.params[i];
        if (p.value.length > 65535) throw tooLong();
        ensure(4);
        w16(p.key);
        w16(p.value.length);
        wBytes(p.value);
      }
      return;
    }
    default:
      throw new WireError('BAD_VALUE', `dns: no wire form for type ${rr.type} with this data (use { raw })`);
  }
}

function writeRecord(rr: ResourceRecord): void {
  if (O > MAX_MSG) throw tooLong();
  writeName(rr.name, true);
  w16(rr.type);
  w16(rr.class);
  w32(rr.ttl);
  const lenPos = O;
  O += 2;
  writeRdata(rr);
  const rdlen = O - lenPos - 2;
  if (rdlen > 0xffff) throw tooLong();
  S[lenPos] = rdlen >>> 8;
  S[lenPos + 1] = rdlen;
}

function writeQuestion(q: Question): void {
  if (O > MAX_MSG) throw tooLong();
  writeName(q.name, true);
  w16(q.type);
  w16(q.class);
}

/** Wire length of the OPT record for `edns`. */
export function optLength(edns: Edns): number {
  let l = 11;
  const name = edns.name;
  if (name !== undefined && name !== '.') l += name.length + 1; // upper bound for odd owners
  for (let i = 0; i < edns.options.length; i++) l += 4 + edns.options[i].data.length;
  return l;
}

function writeOpt(edns: Edns, rcode: number): void {
  if (O > MAX_MSG) throw tooLong();
  const save = COMPRESS;
  COMPRESS = false;
  writeName(edns.name ?? '.', false);
  COMPRESS = save;
  w16(41);
  w16(edns.udpSize);
  S[O++] = (rcode >>> 4) & 0xff;
  S[O++] = edns.version;
  w16((edns.do ? 0x8000 : 0) | (edns.z & 0x7fff));
  const lenPos = O;
  O += 2;
  for (let i = 0; i < edns.options.length; i++) {
    const o = edns.options[i];
    if (o.data.length > 65535) throw tooLong();
    ensure(4);
    w16(o.code);
    w16(o.data.length);
    wBytes(o.data);
  }
  const rdlen = O - lenPos - 2;
  if (rdlen > 0xffff) throw tooLong();
  S[lenPos] = rdlen >>> 8;
  S[lenPos + 1] = rdlen;
}

function headerFlags(msg: Message, tc: boolean): number {
  return (msg.qr ? 0x8000 : 0) | ((msg.opcode & 0xf) << 11) | (msg.aa ? 0x400 : 0) | (tc ? 0x200 : 0) |
    (msg.rd ? 0x100 : 0) | (msg.ra ? 0x80 : 0) | (msg.z ? 0x40 : 0) | (msg.ad ? 0x20 : 0) |
    (msg.cd ? 0x10 : 0) | (msg.rcode & 0xf);
}

function writeHeader(msg: Message, tc: boolean, an: number, ns: number, ar: number): void {
  const save = O;
  O = 0;
  w16(msg.id);
  w16(headerFlags(msg, tc));
  w16(msg.question.length);
  w16(an);
  w16(ns);
  w16(ar);
  O = save;
}

function checkRcode(msg: Message): void {
  if (msg.rcode > 0xf && msg.edns === undefined) {
    throw new WireError('BAD_VALUE', 'dns: extended rcode needs an OPT record (msg.edns)');
  }
  if (msg.question.length > 0xffff) throw tooLong();
}

/** More records than a header can count: such a message is also longer than MAX_MSG. */
function tooManyRecords(msg: Message): boolean {
  return msg.answer.length > 0xffff || msg.authority.length > 0xffff || msg.additional.length > 0xfffe;
}

/**
 * Encodes into the scratch buffer; returns the length. A message longer than MAX_MSG throws
 * TOO_LONG — or, with `stopAbove`, is written only until it is known to be: the return value is
 * then above MAX_MSG (not the full length) and the scratch holds no message.
 */
function encodeScratch(msg: Message, compress: boolean, stopAbove: boolean): number {
  checkRcode(msg);
  if (tooManyRecords(msg)) {
    if (stopAbove) return MAX_MSG + 1;
    throw tooLong();
  }
  COMPRESS = compress;
  if (compress) CT.clear();
  O = 12;
  try {
    for (let i = 0; i < msg.question.length; i++) writeQuestion(msg.question[i]);
    for (let s = 0; s < 3; s++) {
      const rrs = s === 0 ? msg.answer : s === 1 ? msg.authority : msg.additional;
      for (let i = 0; i < rrs.length; i++) {
        if (O > MAX_MSG && stopAbove) return O;
        writeRecord(rrs[i]);
      }
    }
    if (msg.edns !== undefined) writeOpt(msg.edns, msg.rcode);
  } catch (e) {
    if (e instanceof WireError) throw e;
    throw new WireError('BAD_VALUE', 'dns: cannot encode message: ' + String(e));
  }
  if (O > MAX_MSG) {
    if (stopAbove) return O;
    throw tooLong();
  }
  writeHeader(msg, msg.tc, msg.answer.length, msg.authority.length, msg.additional.length + (msg.edns ? 1 : 0));
  return O;
}

function copyOut(len: number): Buffer {
  const out = Buffer.allocUnsafe(len);
  S.copy(out, 0, 0, len);
  return out;
}

/** Encodes `msg`; returns a fresh Buffer of the exact length. Throws WireError on unencodable values. */
export function encodeMessage(msg: Message, opts?: { compress?: boolean }): Buffer {
  const len = encodeScratch(msg, opts?.compress === true, false);
  return copyOut(len);
}

/** The message last encoded into the scratch buffer (by plainLengthWithin), copied out. Internal. */
export function copyLastEncoded(len: number): Buffer {
  return copyOut(len);
}

/** Exact wire length of `msg` with or without compression. Throws TOO_LONG above 65535 octets. */
export function messageLength(msg: Message, compress: boolean): number {
  return encodeScratch(msg, compress, false);
}

/**
 * The uncompressed wire length of `msg` when it is at most 65535 octets (the message is then in
 * the scratch buffer for copyLastEncoded); otherwise some number above 65535, without encoding the
 * rest — such a message can still go out compressed or truncated (truncate.ts). Internal.
 */
export function plainLengthWithin(msg: Message): number {
  return encodeScratch(msg, false, true);
}

/**
 * miekg/dns `Truncate` semantics on the scratch buffer (used by truncate.ts): compressed; the OPT
 * set aside; whole records kept in order Answer → Authority → Additional while the running
 * length stays within `size - optLength`; the rest dropped; TC set if anything was dropped; OPT
 * re-appended. Returns the wire and whether records were dropped.
 */
export function encodeTruncated(msg: Message, size: number): { wire: Buffer; truncated: boolean } {
  checkRcode(msg); // the record counts written are at most what fits in `size`
  COMPRESS = true;
  CT.clear();
  O = 12;
  let budget = size;
  if (msg.edns !== undefined) budget -= optLength(msg.edns);
  let l = 12;
  const counts = [0, 0, 0];
  try {
    for (let i = 0; i < msg.question.length; i++) writeQuestion(msg.question[i]);
    l = O;
    const sections = [msg.answer, msg.authority, msg.additional];
    outer: for (let s = 0; s < 3; s++) {
      if (l >= budget) break;
      const rrs = sections[s];
      for (let i = 0; i < rrs.length; i++) {
        const before = O;
        writeRecord(rrs[i]);
        if (O > budget) {
          O = before;
          break outer;
        }
        counts[s]++;
        l = O;
        if (O === budget) break outer;
      }
    }
    if (msg.edns !== undefined) writeOpt(msg.edns, msg.rcode);
  } catch (e) {
    if (e instanceof WireError) throw e;
    throw new WireError('BAD_VALUE', 'dns: cannot encode message: ' + String(e));
  }
  const truncated = counts[0] < msg.answer.length || counts[1] < msg.authority.length ||
    counts[2] < msg.additional.length;
  writeHeader(msg, msg.tc || truncated, counts[0], counts[1], counts[2] + (msg.edns ? 1 : 0));
  return { wire: copyOut(O), truncated };
}
