// DNS wire format → Message. One index walk over the buffer; names are built straight into
// presentation-form strings (miekg/dns escaping); all checks are explicit so malformed input only
// ever throws WireError.
//
// Byte fields (digests, keys, signatures, character-strings, EDNS option data, opaque rdata) are
// COPIED out of the input: records may be kept (cache) long after the packet buffer is reused.
//
// Compatibility decisions (miekg/dns Unpack as reference):
// - Trailing bytes after the last record are ignored, as miekg does.
// - A question cut short by the end of the message, right after its name or right after its qtype,
//   decodes with type / class 0 for the missing fields (miekg's unpackQuestion: CoreDNS then
//   answers REFUSED for class 0). Half a field, or a name running past the end, is SHORT.
// - A message that ends right after the 12-byte header decodes to the header with empty sections
//   whatever its counts say (miekg: servers send such REFUSED replies). Likewise a message that
//   ends exactly after a question or a record: the sections stop there and the counts that promised
//   more are ignored (miekg's unpackRRslice, "l is a lie"). A count that runs into half a record,
//   or a QDCOUNT promising a question that is not there, is SHORT.
// - Compression pointers may point anywhere in the message, forwards too, as miekg follows them
//   (CoreDNS answers a question compressed with a forward pointer); a loop ends at the 127th pointer
//   of a name (miekg's maxCompressionPointers, 126) or at 255 octets of name, both errors.
// - A record with rdlength 0 decodes to OpaqueData with an empty `raw`, whatever its type (dynamic
//   update deletions use these; miekg's "noRdata").
// - Types without a structured form become OpaqueData (RFC 3597). For the types whose rdata
//   names may have been compressed by the sender (MINFO, RP, AFSDB, RT, PX, KX, NXT) the names are
//   decompressed so `raw` is self-contained.
// - The OPT record in the additional section is lifted into `msg.edns`. With more than one, the
//   last is lifted (miekg's IsEdns0 searches from the end: its size, DO, version, options and
//   extended rcode are the message's) and the earlier ones stay in `additional` as OpaqueData
//   records of type 41 (miekg keeps them in Extra; forward sends them on). OPT records in other
//   sections are left as OpaqueData.

import { WireError } from './error.ts';
import { plainQuestionEnd } from './scan.ts';
import { formatIPv4, formatIPv6 } from './ip.ts';
import type {
  Edns, EdnsOption, Message, OpaqueData, Question, RData, ResourceRecord, SvcParam,
} from './types.ts';

export { WireError } from './error.ts';

// ---- presentation tables ----

/** byte → its presentation in a name label (miekg: `\X` for specials, `\DDD` for non-printables). */
const NAME_CHR: string[] = new Array(256);
const NAME_CHR_LOWER: string[] = new Array(256);
for (let b = 0; b < 256; b++) {
  let s: string;
  if (b < 0x20 || b > 0x7e) s = '\\' + String(b).padStart(3, '0');
  else if (b === 0x2e || b === 0x20 || b === 0x27 || b === 0x40 || b === 0x3b || b === 0x28 || b === 0x29 || b === 0x22 || b === 0x5c) {
    s = '\\' + String.fromCharCode(b);
  } else s = String.fromCharCode(b);
  NAME_CHR[b] = s;
  NAME_CHR_LOWER[b] = b >= 65 && b <= 90 ? String.fromCharCode(b | 0x20) : s;
}

// ---- decoder state (module-level: decoding is synchronous) ----

let B: Uint8Array = new Uint8Array(0);
let N = 0;
let P = 0;

// small per-message cache: name start offset → decoded name (and its wire length)
const CACHE_SIZE = 16;
const cacheOff = new Int32Array(CACHE_SIZE);
const cacheWire = new Int32Array(CACHE_SIZE);
const cacheStr: string[] = new Array(CACHE_SIZE).fill('');
let cacheN = 0;

function short(): WireError {
  return new WireError('SHORT', 'dns: buffer too short (overflow unpacking)');
}

function badRdata(what: string): WireError {
  return new WireError('BAD_RDATA', 'dns: bad rdata: ' + what);
}

/**
 * Presentation bytes of a name being read: a name is at most 255 wire octets, so at most 1016 bytes of
 * presentation (every octet as `\DDD`, a dot per label). Writing bytes here and reading them out with one
 * latin1Slice makes one flat string per name, where appending character by character built a rope that
 * every later use (a Map key, lower-casing, comparisons) had to flatten first.
 */
const NAME_BUF = Buffer.allocUnsafe(1024);
/** byte → 0 when it stands for itself in a name label, else 1 (an escape); lower-case table: A-Z too. */
const NAME_PLAIN: Uint8Array = new Uint8Array(256);
const NAME_PLAIN_LOWER: Uint8Array = new Uint8Array(256);
for (let b = 0; b < 256; b++) {
  NAME_PLAIN[b] = NAME_CHR[b]!.length === 1 && NAME_CHR[b]!.charCodeAt(0) === b ? 0 : 1;
  NAME_PLAIN_LOWER[b] = NAME_PLAIN[b]! === 0 && !(b >= 65 && b <= 90) ? 0 : 1;
}

/** Writes the presentation of `c` (an escape, or an upper-case letter lowered) at `o`; returns the new end. */
function putSpecial(c: number, table: string[], o: number): number {
  const t = table[c]!;
  for (let k = 0; k < t.length; k++) NAME_BUF[o++] = t.charCodeAt(k);
  return o;
}

/** Reads the name at P, advances P past it; returns presentation form. */
function readName(lower: boolean): string {
  const b = B;
  const n = N;
  const table = lower ? NAME_CHR_LOWER : NAME_CHR;
  const plain = lower ? NAME_PLAIN_LOWER : NAME_PLAIN;
  const out = NAME_BUF;
  const start = P;
  let p = P;
  let end = -1;
  let o = 0; // bytes of presentation written to NAME_BUF
  let wire = 1;
  let hops = 0;
  for (;;) {
    if (p >= n) throw short();
    const c = b[p];
    if (c === 0) {
      p++;
      break;
    }
    const t = c & 0xc0;
    if (t === 0) {
      const e = p + 1 + c;
      if (e > n) throw short();
      wire += c + 1;
      if (wire > 255) throw new WireError('NAME_TOO_LONG', 'dns: domain name exceeded 255 wire-format octets');
      for (let i = p + 1; i < e; i++) {
        const x = b[i];
        if (plain[x] === 0) out[o++] = x;
        else o = putSpecial(x, table, o);
      }
      out[o++] = 0x2e;
      p = e;
    } else if (t === 0xc0) {
      if (p + 1 >= n) throw short();
      const target = ((c & 0x3f) << 8) | b[p + 1];
      if (end < 0) end = p + 2;
      if (target >= n || ++hops > 126) {
        throw new WireError('BAD_POINTER', 'dns: bad compression pointer');
      }
      if (!lower) {
        for (let k = 0; k < cacheN; k++) {
          if (cacheOff[k] === target) {
            wire += cacheWire[k] - 1;
            if (wire > 255) throw new WireError('NAME_TOO_LONG', 'dns: domain name exceeded 255 wire-format octets');
            const cached = cacheStr[k];
            const s = o === 0 ? cached : cached === '.' ? out.toString('latin1', 0, o) : out.toString('latin1', 0, o) + cached;
            P = end;
            if (cacheN < CACHE_SIZE) {
              cacheOff[cacheN] = start;
              cacheWire[cacheN] = wire;
              cacheStr[cacheN++] = s;
            }
            return s;
          }
        }
      }
      p = target;
    } else {
      throw new WireError('BAD_LABEL', 'dns: reserved label type');
    }
  }
  P = end < 0 ? p : end;
  const s = o === 0 ? '.' : out.toString('latin1', 0, o);
  if (!lower && cacheN < CACHE_SIZE) {
    cacheOff[cacheN] = start;
    cacheWire[cacheN] = wire;
    cacheStr[cacheN++] = s;
  }
  return s;
}

/**
 * Skips the name at P without building it (same checks as readName); with `out`, appends the
 * name's uncompressed wire form there (RDATA kept opaque). Allocation-free without `out`: the
 * decoder runs it over every additional record of every query.
 */
function skipName(out?: number[]): void {
  const b = B;
  const n = N;
  let p = P;
  let end = -1;
  let wire = 1;
  let hops = 0;
  for (;;) {
    if (p >= n) throw short();
    const c = b[p];
    if (c === 0) {
      if (out !== undefined) out.push(0);
      p++;
      break;
    }
    const t = c & 0xc0;
    if (t === 0) {
      const e = p + 1 + c;
      if (e > n) throw short();
      wire += c + 1;
      if (wire > 255) throw new WireError('NAME_TOO_LONG', 'dns: domain name exceeded 255 wire-format octets');
      if (out !== undefined) for (let i = p; i < e; i++) out.push(b[i]);
      p = e;
    } else if (t === 0xc0) {
      if (p + 1 >= n) throw short();
      const target = ((c & 0x3f) << 8) | b[p + 1];
      if (end < 0) end = p + 2;
      if (target >= n || ++hops > 126) throw new WireError('BAD_POINTER', 'dns: bad compression pointer');
      p = target;
    } else throw new WireError('BAD_LABEL', 'dns: reserved label type');
  }
  P = end < 0 ? p : end;
}

function u16(p: number): number {
  return (B[p] << 8) | B[p + 1];
}

function u32(p: number): number {
  return B[p] * 0x1000000 + ((B[p + 1] << 16) | (B[p + 2] << 8) | B[p + 3]);
}

const EMPTY = new Uint8Array(0);

/** Copy of B[a, e) as a plain Uint8Array. */
function copy(a: number, e: number): Uint8Array {
  if (e <= a) return EMPTY.slice();
  const out = new Uint8Array(e - a);
  out.set(B.subarray(a, e));
  return out;
}

/** Reads a <character-string> at P bounded by `end`. */
function readCharString(end: number): Uint8Array {
  if (P >= end) throw short();
  const l = B[P];
  const a = P + 1;
  const e = a + l;
  if (e > end) throw short();
  P = e;
  return copy(a, e);
}

function readTypeBitmap(end: number): number[] {
  const types: number[] = [];
  let lastWindow = -1;
  while (P < end) {
    if (P + 2 > end) throw short();
    const window = B[P];
    const len = B[P + 1];
    if (len === 0 || len > 32) throw badRdata('bitmap length');
    if (window <= lastWindow) throw badRdata('bitmap window order');
    lastWindow = window;
    P += 2;
    if (P + len > end) throw short();
    for (let j = 0; j < len; j++) {
      const byte = B[P + j];
      if (byte === 0) continue;
      for (let bit = 0; bit < 8; bit++) {
        if (byte & (0x80 >> bit)) types.push(window * 256 + j * 8 + bit);
      }
    }
    P += len;
  }
  return types;
}

/** Decodes rdata of `type` in [P, end); P ends at `end`. */
function readRdata(type: number, end: number): RData {
  const start = P;
  let d: RData;
  switch (type) {
    case 1: // A
      if (end - start !== 4) throw badRdata('A length');
      d = { address: formatIPv4(B, start) };
      P = end;
      return d;
    case 28: // AAAA
      if (end - start !== 16) throw badRdata('AAAA length');
      d = { address: formatIPv6(B, start) };
      P = end;
      return d;
    case 2: case 3: case 4: case 5: case 7: case 8: case 9: case 12: case 39:
      d = { target: readName(false) };
      break;
    case 6: { // SOA
      const mname = readName(false);
      const rname = readName(false);
      if (P + 20 > end) throw short();
      const p = P;
      d = { mname, rname, serial: u32(p), refresh: u32(p + 4), retry: u32(p + 8), expire: u32(p + 12), minimum: u32(p + 16) };
      P += 20;
      break;
    }
    case 15: { // MX
      if (P + 2 > end) throw short();
      const preference = u16(P);
      P += 2;
      d = { preference, exchange: readName(false) };
      break;
    }
    case 16: case 99: case 258: case 261: { // TXT SPF AVC RESINFO
      const strings: Uint8Array[] = [];
      while (P < end) strings.push(readCharString(end));
      d = { strings };
      break;
    }
    case 13: { // HINFO
      const cpu = readCharString(end);
      const os = readCharString(end);
      d = { cpu, os };
      break;
    }
    case 33: { // SRV
      if (P + 6 > end) throw short();
      const p = P;
      P += 6;
      d = { priority: u16(p), weight: u16(p + 2), port: u16(p + 4), target: readName(false) };
      break;
    }
    case 257: { // CAA
      if (P + 2 > end) throw short();
      const flags = B[P];
      const tl = B[P + 1];
      P += 2;
      if (P + tl > end) throw short();
      let tag = '';
      for (let i = P; i < P + tl; i++) tag += String.fromCharCode(B[i]);
      P += tl;
      d = { flags, tag, value: copy(P, end) };
      P = end;
      break;
    }
    case 35: { // NAPTR
      if (P + 4 > end) throw short();
      const order = u16(P);
      const preference = u16(P + 2);
      P += 4;
      const flags = readCharString(end);
      const services = readCharString(end);
      const regexp = readCharString(end);
      d = { order, preference, flags, services, regexp, replacement: readName(false) };
      break;
    }
    case 43: case 59: case 32768: case 32769: { // DS CDS TA DLV
      if (P + 4 > end) throw short();
      d = { keyTag: u16(P), algorithm: B[P + 2], digestType: B[P + 3], digest: copy(P + 4, end) };
      P = end;
      break;
    }
    case 48: case 60: case 25: { // DNSKEY CDNSKEY KEY
      if (P + 4 > end) throw short();
      d = { flags: u16(P), protocol: B[P + 2], algorithm: B[P + 3], publicKey: copy(P + 4, end) };
      P = end;
      break;
    }
    case 46: case 24: { // RRSIG SIG
      if (P + 18 > end) throw short();
      const p = P;
      P += 18;
      const signerName = readName(false);
      if (P > end) throw short();
      d = {
        typeCovered: u16(p), algorithm: B[p + 2], labels: B[p + 3], originalTTL: u32(p + 4),
        expiration: u32(p + 8), inception: u32(p + 12), keyTag: u16(p + 16), signerName,
        signature: copy(P, end),
      };
      P = end;
      break;
    }
    case 47: { // NSEC
      const nextName = readName(false);
      if (P > end) throw short();
      d = { nextName, types: readTypeBitmap(end) };
      break;
    }
    case 50: { // NSEC3
      if (P + 5 > end) throw short();
      const hashAlgorithm = B[P];
      const flags = B[P + 1];
      const iterations = u16(P + 2);
      const sl = B[P + 4];
      P += 5;
      if (P + sl + 1 > end) throw short();
      const salt = copy(P, P + sl);
      P += sl;
      const hl = B[P++];
      if (P + hl > end) throw short();
      const nextHashed = copy(P, P + hl);
      P += hl;
      d = { hashAlgorithm, flags, iterations, salt, nextHashed, types: readTypeBitmap(end) };
      break;
    }
    case 51: { // NSEC3PARAM
      if (P + 5 > end) throw short();
      const sl = B[P + 4];
      if (P + 5 + sl !== end) throw badRdata('NSEC3PARAM salt length');
      d = { hashAlgorithm: B[P], flags: B[P + 1], iterations: u16(P + 2), salt: copy(P + 5, end) };
      P = end;
      break;
    }
    case 52: case 53: { // TLSA SMIMEA
      if (P + 3 > end) throw short();
      d = { usage: B[P], selector: B[P + 1], matchingType: B[P + 2], certificate: copy(P + 3, end) };
      P = end;
      break;
    }
    case 64: case 65: { // SVCB HTTPS
      if (P + 2 > end) throw short();
      const priority = u16(P);
      P += 2;
      const target = readName(false);
      if (P > end) throw short();
      const params: SvcParam[] = [];
      while (P < end) {
        if (P + 4 > end) throw short();
        const key = u16(P);
        const l = u16(P + 2);
        P += 4;
        if (P + l > end) throw short();
        params.push({ key, value: copy(P, P + l) });
        P += l;
      }
      d = { priority, target, params };
      break;
    }
    // Opaque types whose names may arrive compressed: decompress into raw.
    case 14: case 17: // MINFO RP: name name
      return opaqueNames(end, 0, 2, false);
    case 18: case 21: case 36: // AFSDB RT KX: u16 name
      return opaqueNames(end, 2, 1, false);
    case 26: // PX: u16 name name
      return opaqueNames(end, 2, 2, false);
    case 30: // NXT: name bitmap
      return opaqueNames(end, 0, 1, true);
    case 250: // TSIG
      return tsigRdata(end);
    default:
      d = { raw: copy(P, end) };
      P = end;
      return d;
  }
  if (P !== end) {
    if (P > end) throw short();
    throw badRdata('rdlength mismatch');
  }
  return d;
}

function opaqueNames(end: number, fixed: number, names: number, rest: boolean): OpaqueData {
  const out: number[] = [];
  if (P + fixed > end) throw short();
  for (let i = 0; i < fixed; i++) out.push(B[P + i]);
  P += fixed;
  for (let i = 0; i < names; i++) {
    skipName(out);
    if (P > end) throw short();
  }
  if (rest) {
    while (P < end) out.push(B[P++]);
  }
  if (P !== end) throw badRdata('rdlength mismatch');
  return { raw: Uint8Array.from(out) };
}

/**
 * TSIG rdata (RFC 8945 4.2) as miekg unpacks it, kept opaque with the algorithm name decompressed: the
 * fields in order (algorithm, time 48 bits, fudge, MAC size, MAC, original ID, error, other length, other
 * data); the message may end after any field (the rest is zero), a field running past the message or
 * lengths that do not add up to the rdlength are malformed.
 */
function tsigRdata(end: number): OpaqueData {
  const out: number[] = [];
  skipName(out);
  const field = (n: number): number => {
    if (P + n > N) throw short();
    let v = 0;
    for (let i = 0; i < n; i++) {
      v = v * 256 + B[P];
      out.push(B[P++]);
    }
    return v;
  };
  for (const n of [6, 2]) {
    if (P === N) break;
    field(n);
  }
  if (P !== N) {
    const macLen = field(2);
    if (P !== N) {
      field(macLen);
      for (let i = 0; i < 2 && P !== N; i++) field(2);
      if (P !== N) {
        const otherLen = field(2);
        if (P !== N) field(otherLen);
      }
    }
  }
  if (P !== end) throw badRdata('rdlength mismatch');
  return { raw: Uint8Array.from(out) };
}

function readRecord(): ResourceRecord {
  const name = readName(false);
  const p = P;
  if (p + 10 > N) throw short();
  const type = u16(p);
  const cls = u16(p + 2);
  const ttl = u32(p + 4);
  const rdlen = u16(p + 8);
  P = p + 10;
  const end = P + rdlen;
  if (end > N) throw short();
  let data: RData;
  if (rdlen === 0) data = { raw: new Uint8Array(0) };
  else data = readRdata(type, end);
  P = end;
  return { name, type, class: cls, ttl, data };
}

function readOpt(name: string, cls: number, ttl: number, end: number): Edns {
  const options: EdnsOption[] = [];
  while (P < end) {
    if (P + 4 > end) throw short();
    const code = u16(P);
    const l = u16(P + 2);
    P += 4;
    if (P + l > end) throw short();
    options.push({ code, data: copy(P, P + l) });
    P += l;
  }
  const flags = ttl & 0xffff;
  const edns: Edns = {
    udpSize: cls,
    version: (ttl >>> 16) & 0xff,
    do: (flags & 0x8000) !== 0,
    z: flags & 0x7fff,
    options,
  };
  if (name !== '.') edns.name = name;
  return edns;
}

// qtype and qclass of the question last read by readQuestionTail
let QT = 0;
let QC = 0;

/**
 * Reads the qtype and qclass after a question name into QT / QC. A question cut short by the end
 * of the message — after its name, or after its qtype — gets 0 for what is missing, as miekg's
 * unpackQuestion does; half a field is SHORT (a name running past the end already was).
 */
function readQuestionTail(): void {
  QT = 0;
  QC = 0;
  if (P === N) return;
  if (P + 2 > N) throw short();
  QT = u16(P);
  P += 2;
  if (P === N) return;
  if (P + 2 > N) throw short();
  QC = u16(P);
  P += 2;
}

function newMsgFromHeader(): Message {
  const b1 = B[2];
  const b2 = B[3];
  return {
    id: (B[0] << 8) | B[1],
    qr: (b1 & 0x80) !== 0,
    opcode: (b1 >> 3) & 0xf,
    aa: (b1 & 0x04) !== 0,
    tc: (b1 & 0x02) !== 0,
    rd: (b1 & 0x01) !== 0,
    ra: (b2 & 0x80) !== 0,
    z: (b2 & 0x40) !== 0,
    ad: (b2 & 0x20) !== 0,
    cd: (b2 & 0x10) !== 0,
    rcode: b2 & 0xf,
    question: [],
    answer: [],
    authority: [],
    additional: [],
    edns: undefined,
  };
}

/**
 * Decodes one DNS message. Throws WireError (only) on malformed input. `scanned`: what scanQuery read of
 * these same bytes, whose question is taken as it is instead of being read again.
 */
export function decodeMessage(buf: Uint8Array, scanned?: ScannedQuery): Message {
  if (buf.length < 12) throw new WireError('SHORT', 'dns: message shorter than the header');
  B = buf;
  N = buf.length;
  P = 12;
  cacheN = 0;
  const msg = newMsgFromHeader();
  const qd = u16(4);
  const an = u16(6);
  const ns = u16(8);
  const ar = u16(10);
  if (N === 12) {
    B = EMPTY;
    return msg;
  }
  try {
    if (scanned !== undefined) {
      msg.question.push({ name: scanned.qname, type: scanned.qtype, class: scanned.qclass });
      P = scanned.questionEnd;
    } else {
      for (let i = 0; i < qd; i++) {
        const name = readName(false);
        readQuestionTail();
        const q: Question = { name, type: QT, class: QC };
        msg.question.push(q);
      }
    }
    // A message that ends exactly after a record has no more records, whatever the counts say
    // (miekg: "dh.Ancount is a lie"); a count that runs into half a record is SHORT.
    for (let i = 0; i < an && P < N; i++) msg.answer.push(readRecord());
    for (let i = 0; i < ns && P < N; i++) msg.authority.push(readRecord());
    let optAt = -1; // wire offset of the OPT lifted into msg.edns
    let optIndex = 0; // where in msg.additional it stood
    let optExt = 0;
    for (let i = 0; i < ar && P < N; i++) {
      const start = P;
      skipName();
      if (P + 10 <= N && u16(P) === 41) {
        // OPT. With several, the last is the message's (miekg IsEdns0 searches from the end);
        // the earlier ones stay in the additional section as plain records.
        if (optAt >= 0) {
          P = optAt;
          msg.additional.splice(optIndex, 0, readRecord());
        }
        P = start;
        const name = readName(false);
        const p = P;
        const cls = u16(p + 2);
        const ttl = u32(p + 4);
        const end = p + 10 + u16(p + 8);
        if (end > N) throw short();
        P = p + 10;
        msg.edns = readOpt(name, cls, ttl, end);
        optAt = start;
        optIndex = msg.additional.length;
        optExt = ttl >>> 24;
        P = end;
      } else {
        P = start;
        msg.additional.push(readRecord());
      }
    }
    if (optAt >= 0) msg.rcode |= optExt << 4;
  } catch (e) {
    const partial = newMsgFromHeader();
    partial.question = msg.question;
    B = EMPTY;
    if (e instanceof WireError) throw new WireError(e.code, e.message, partial);
    const err = new WireError('INTERNAL', 'dns: unexpected decoding failure: ' + String(e), partial);
    (err as { cause?: unknown }).cause = e;
    throw err;
  }
  B = EMPTY;
  return msg;
}

/** Facts about a query read without building a Message (hot path: cache lookups). */
export interface QueryFacts {
  id: number;
  /** Header flag word (bytes 2–3), rcode bits included. */
  flags: number;
  /** First question's name, ASCII lower-cased, presentation form. */
  qname: string;
  qtype: number;
  qclass: number;
  /** Offset just past the first question. */
  questionEnd: number;
  qdcount: number;
  ancount: number;
  nscount: number;
  arcount: number;
  /** An OPT record was found in the additional section (the facts are the last one's, as decodeMessage's edns). */
  edns: boolean;
  udpSize: number;
  do: boolean;
  ednsVersion: number;
  /** Offset of the first byte of the OPT record (when edns; the last one when there are several), else -1. */
  optStart: number;
}

/**
 * Reads the first question and the EDNS facts of a message. Returns undefined when qdcount is 0.
 * Throws WireError on malformed input (the same checks as decodeMessage for the parts it walks;
 * answer/authority/other additional records are skipped, not validated beyond their framing).
 */
export function decodeQuestionFast(buf: Uint8Array): QueryFacts | undefined {
  if (buf.length < 12) throw new WireError('SHORT', 'dns: message shorter than the header');
  B = buf;
  N = buf.length;
  P = 12;
  cacheN = 0;
  try {
    const qd = u16(4);
    if (qd === 0) return undefined;
    const an = u16(6);
    const ns = u16(8);
    const ar = u16(10);
    const qname = readName(true);
    readQuestionTail();
    const qtype = QT;
    const qclass = QC;
    const questionEnd = P;
    const facts: QueryFacts = {
      id: u16(0), flags: u16(2), qname, qtype, qclass, questionEnd,
      qdcount: qd, ancount: an, nscount: ns, arcount: ar,
      edns: false, udpSize: 0, do: false, ednsVersion: 0, optStart: -1,
    };
    if (ar === 0) return facts;
    for (let i = 1; i < qd; i++) {
      skipName();
      readQuestionTail();
    }
    const skip = an + ns;
    for (let i = 0; i < skip + ar && P < N; i++) {
      const start = P;
      skipName();
      if (P + 10 > N) throw short();
      const end = P + 10 + u16(P + 8);
      if (end > N) throw short();
      if (i >= skip && u16(P) === 41) {
        facts.edns = true;
        facts.udpSize = u16(P + 2);
        facts.ednsVersion = B[P + 5];
        facts.do = (B[P + 6] & 0x80) !== 0;
        facts.optStart = start;
      }
      P = end;
    }
    return facts;
  } catch (e) {
    if (e instanceof WireError) throw e;
    throw new WireError('INTERNAL', 'dns: unexpected decoding failure: ' + String(e));
  } finally {
    B = EMPTY;
  }
}

/**
 * What the server needs of a query of the usual shape, read without building a Message (see scanQuery).
 * `edns` is the object decodeMessage would make of the OPT record (no options), undefined without one.
 */
export interface ScannedQuery {
  /** The question's name as sent (case kept), presentation form: decodeMessage's question[0].name. */
  readonly qname: string;
  readonly qtype: number;
  readonly qclass: number;
  /** Offset just past the question. */
  readonly questionEnd: number;
  readonly edns: Edns | undefined;
}

/**
 * The question and OPT of a query of the shape nearly every client sends — one question whose name has no
 * compression pointer, no answer or authority records, and at most an OPT record without options (root
 * owner) as additional record — or undefined for any other message (the caller decodes it in full).
 * Whenever it returns facts, decodeMessage of the same bytes succeeds and agrees with them, so a Message
 * can be built later, only if a plugin asks for it. Never throws.
 */
export function scanQuery(buf: Uint8Array): ScannedQuery | undefined {
  const n = buf.length;
  if (n < 17 || buf[4] !== 0 || buf[5] !== 1 || buf[6] !== 0 || buf[7] !== 0 || buf[8] !== 0 || buf[9] !== 0 || buf[10] !== 0) return undefined;
  const ar = buf[11]!;
  if (ar > 1) return undefined;
  // Labels only, ending in the root within 255 octets and the message: readName cannot fail on them. A question
  // cut short is left to decodeMessage's special cases.
  const qEnd = plainQuestionEnd(buf);
  if (qEnd < 0) return undefined;
  let edns: Edns | undefined;
  // A message that ends after the question has no OPT, whatever ARCOUNT says (decodeMessage: the count is a lie).
  if (ar === 1 && qEnd < n) {
    // The OPT record: root owner, type 41, class = UDP size, TTL = ext-rcode, version, DO|Z; no options.
    if (qEnd + 11 > n || buf[qEnd] !== 0 || buf[qEnd + 1] !== 0 || buf[qEnd + 2] !== 41) return undefined;
    if (buf[qEnd + 9] !== 0 || buf[qEnd + 10] !== 0) return undefined;
    const flags = (buf[qEnd + 7]! << 8) | buf[qEnd + 8]!;
    edns = {
      udpSize: (buf[qEnd + 3]! << 8) | buf[qEnd + 4]!,
      version: buf[qEnd + 6]!,
      do: (flags & 0x8000) !== 0,
      z: flags & 0x7fff,
      options: [],
    };
  }
  B = buf;
  N = n;
  P = 12;
  cacheN = 0;
  const qname = readName(false);
  B = EMPTY;
  return { qname, qtype: (buf[qEnd - 4]! << 8) | buf[qEnd - 3]!, qclass: (buf[qEnd - 2]! << 8) | buf[qEnd - 1]!, questionEnd: qEnd, edns };
}
