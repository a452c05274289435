// Presentation format: records and messages as miekg/dns `String()` prints them (which is what
// CoreDNS logs and what dig prints, except where noted), and a zone-file parser for one record.
//
// Differences between dig and miekg, and what we print:
// - SVCB/HTTPS parameters: dig style, `alpn="h2,h3" port=443 ipv4hint=192.0.2.1` (miekg quotes
//   every value). alpn, dohpath and keyNNNNN values are quoted; the others are not.
// - Long base64/hex fields (DNSKEY, RRSIG, DS digests) are printed in one piece as miekg does; dig
//   breaks them into 56-character chunks.
// - TLSA/SMIMEA certificate data is lowercase hex (miekg); DS digests uppercase (both).

import {
  classToString, stringToClass, stringToType, typeToString, opcodeToString, rcodeToString,
  extendedErrorCodeToString,
} from './constants.ts';
import { WireError } from './error.ts';
import { decodeMessage } from './decode.ts';
import { formatIPv4, formatIPv6, parseIPv4, parseIPv6 } from './ip.ts';
import { fqdn, isFqdn } from './name.ts';
import type {
  AData, CAAData, DNSKEYData, DSData, Edns, HINFOData, Message, MXData, NAPTRData, NameData,
  NSEC3Data, NSEC3PARAMData, NSECData, OpaqueData, Question, RData, RRSIGData, ResourceRecord,
  SOAData, SRVData, SVCBData, SvcParam, TLSAData, TXTData,
} from './types.ts';

// ---------------------------------------------------------------------------------------------
// byte helpers

const HEX = '0123456789abcdef';

export function toHex(b: Uint8Array, upper = false): string {
  let s = '';
  for (let i = 0; i < b.length; i++) s += HEX[b[i] >> 4] + HEX[b[i] & 15];
  return upper ? s.toUpperCase() : s;
}

function fromHex(s: string): Uint8Array {
  if (s.length & 1) throw parseErr('odd-length hex ' + JSON.stringify(s));
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) {
    const v = parseInt(s.substr(i * 2, 2), 16);
    if (Number.isNaN(v) || !/^[0-9a-fA-F]{2}$/.test(s.substr(i * 2, 2))) throw parseErr('bad hex ' + JSON.stringify(s));
    out[i] = v;
  }
  return out;
}

function toBase64(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.length).toString('base64');
}

function fromBase64(s: string): Uint8Array {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s)) throw parseErr('bad base64');
  return new Uint8Array(Buffer.from(s, 'base64'));
}

const B32HEX = '0123456789ABCDEFGHIJKLMNOPQRSTUV';

function toBase32Hex(b: Uint8Array): string {
  let s = '';
  let bits = 0;
  let v = 0;
  for (let i = 0; i < b.length; i++) {
    v = (v << 8) | b[i];
    bits += 8;
    while (bits >= 5) {
      s += B32HEX[(v >>> (bits - 5)) & 31];
      bits -= 5;
    }
    v &= (1 << bits) - 1;
  }
  if (bits > 0) s += B32HEX[(v << (5 - bits)) & 31];
  return s;
}

function fromBase32Hex(s: string): Uint8Array {
  const out: number[] = [];
  let bits = 0;
  let v = 0;
  for (const ch of s.toUpperCase()) {
    if (ch === '=') break;
    const d = B32HEX.indexOf(ch);
    if (d < 0) throw parseErr('bad base32hex');
    v = (v << 5) | d;
    bits += 5;
    if (bits >= 8) {
      out.push((v >>> (bits - 8)) & 255);
      bits -= 8;
      v &= (1 << bits) - 1;
    }
  }
  return Uint8Array.from(out);
}

/** UTF-8 bytes of `s` (a character-string value). */
export function charString(s: string): Uint8Array {
  return new Uint8Array(Buffer.from(s, 'utf8'));
}

function txtBody(b: Uint8Array): string {
  let s = '';
  for (let i = 0; i < b.length; i++) {
    const c = b[i];
    if (c === 0x22 || c === 0x5c) s += '\\' + String.fromCharCode(c);
    else if (c < 0x20 || c > 0x7e) s += '\\' + String(c).padStart(3, '0');
    else s += String.fromCharCode(c);
  }
  return s;
}

/** A character-string quoted, with `"` and `\` escaped and non-printables as `\DDD` (miekg). */
export function charStringToText(b: Uint8Array): string {
  return '"' + txtBody(b) + '"';
}

function pad2(n: number): string {
  return n < 10 ? '0' + n : String(n);
}

/** RRSIG time (uint32 seconds) as YYYYMMDDHHmmSS UTC. */
export function formatSigTime(t: number): string {
  const d = new Date(t * 1000);
  return String(d.getUTCFullYear()).padStart(4, '0') + pad2(d.getUTCMonth() + 1) + pad2(d.getUTCDate()) +
    pad2(d.getUTCHours()) + pad2(d.getUTCMinutes()) + pad2(d.getUTCSeconds());
}

// ---------------------------------------------------------------------------------------------
// formatting

const SVC_KEYS = ['mandatory', 'alpn', 'no-default-alpn', 'port', 'ipv4hint', 'ech', 'ipv6hint', 'dohpath', 'ohttp'];

function svcKeyName(k: number): string {
  return k < SVC_KEYS.length ? SVC_KEYS[k] : 'key' + k;
}

function svcKeyCode(s: string): number {
  const i = SVC_KEYS.indexOf(s.toLowerCase());
  if (i >= 0) return i;
  if (/^key\d{1,5}$/i.test(s)) {
    const n = Number(s.slice(3));
    if (n <= 65535) return n;
  }
  throw parseErr('unknown SvcParamKey ' + JSON.stringify(s));
}

function svcValueEscape(b: Uint8Array, start: number, end: number, commaEscape: boolean): string {
  let s = '';
  for (let i = start; i < end; i++) {
    const c = b[i];
    if (c === 0x22 || c === 0x5c) s += '\\' + String.fromCharCode(c);
    else if (commaEscape && c === 0x2c) s += '\\\\,';
    else if (c < 0x20 || c > 0x7e) s += '\\' + String(c).padStart(3, '0');
    else s += String.fromCharCode(c);
  }
  return s;
}

function formatSvcParam(p: SvcParam): string {
  const v = p.value;
  const k = svcKeyName(p.key);
  switch (p.key) {
    case 0: {
      if (v.length % 2 !== 0) break;
      const keys: string[] = [];
      for (let i = 0; i < v.length; i += 2) keys.push(svcKeyName((v[i] << 8) | v[i + 1]));
      return k + '=' + keys.join(',');
    }
    case 1: {
      const ids: string[] = [];
      let i = 0;
      while (i < v.length) {
        const l = v[i];
        if (i + 1 + l > v.length) return k + '="' + svcValueEscape(v, 0, v.length, false) + '"';
        ids.push(svcValueEscape(v, i + 1, i + 1 + l, true));
        i += 1 + l;
      }
      return k + '="' + ids.join(',') + '"';
    }
    case 2:
      if (v.length === 0) return k;
      break;
    case 3:
      if (v.length === 2) return k + '=' + ((v[0] << 8) | v[1]);
      break;
    case 4: {
      if (v.length === 0 || v.length % 4 !== 0) break;
      const a: string[] = [];
      for (let i = 0; i < v.length; i += 4) a.push(formatIPv4(v, i));
      return k + '=' + a.join(',');
    }
    case 5:
      return k + '=' + toBase64(v);
    case 6: {
      if (v.length === 0 || v.length % 16 !== 0) break;
      const a: string[] = [];
      for (let i = 0; i < v.length; i += 16) a.push(formatIPv6(v, i));
      return k + '=' + a.join(',');
    }
    case 8:
      if (v.length === 0) return k;
      break;
  }
  return k + '="' + svcValueEscape(v, 0, v.length, false) + '"';
}

function typeList(types: number[]): string {
  let s = '';
  for (let i = 0; i < types.length; i++) s += ' ' + typeToString(types[i]);
  return s;
}

/** The rdata of `rr` in presentation format. */
export function formatRdata(rr: ResourceRecord): string {
  const d: RData = rr.data;
  if ((d as OpaqueData).raw !== undefined) return formatOpaque(rr.type, (d as OpaqueData).raw);
  switch (rr.type) {
    case 1: case 28:
      return (d as AData).address;
    case 2: case 3: case 4: case 5: case 7: case 8: case 9: case 12: case 39:
      return (d as NameData).target;
    case 6: {
      const s = d as SOAData;
      return `${s.mname} ${s.rname} ${s.serial} ${s.refresh} ${s.retry} ${s.expire} ${s.minimum}`;
    }
    case 15: {
      const m = d as MXData;
      return m.preference + ' ' + m.exchange;
    }
    case 16: case 99: case 258: case 261:
      return (d as TXTData).strings.map(charStringToText).join(' ');
    case 13: {
      const h = d as HINFOData;
      return charStringToText(h.cpu) + ' ' + charStringToText(h.os);
    }
    case 33: {
      const s = d as SRVData;
      return `${s.priority} ${s.weight} ${s.port} ${s.target}`;
    }
    case 257: {
      const c = d as CAAData;
      return `${c.flags} ${c.tag} ${charStringToText(c.value)}`;
    }
    case 35: {
      const n = d as NAPTRData;
      return `${n.order} ${n.preference} ${charStringToText(n.flags)} ${charStringToText(n.services)} ${charStringToText(n.regexp)} ${n.replacement}`;
    }
    case 43: case 59: case 32768: case 32769: {
      const s = d as DSData;
      return `${s.keyTag} ${s.algorithm} ${s.digestType} ${toHex(s.digest, true)}`;
    }
    case 48: case 60: case 25: {
      const k = d as DNSKEYData;
      return `${k.flags} ${k.protocol} ${k.algorithm} ${toBase64(k.publicKey)}`;
    }
    case 46: case 24: {
      const r = d as RRSIGData;
      return `${typeToString(r.typeCovered)} ${r.algorithm} ${r.labels} ${r.originalTTL} ${formatSigTime(r.expiration)} ${formatSigTime(r.inception)} ${r.keyTag} ${r.signerName} ${toBase64(r.signature)}`;
    }
    case 47: {
      const r = d as NSECData;
      return r.nextName + typeList(r.types);
    }
    case 50: {
      const r = d as NSEC3Data;
      const salt = r.salt.length === 0 ? '-' : toHex(r.salt, true);
      return `${r.hashAlgorithm} ${r.flags} ${r.iterations} ${salt} ${toBase32Hex(r.nextHashed)}` + typeList(r.types);
    }
    case 51: {
      const r = d as NSEC3PARAMData;
      const salt = r.salt.length === 0 ? '-' : toHex(r.salt, true);
      return `${r.hashAlgorithm} ${r.flags} ${r.iterations} ${salt}`;
    }
    case 52: case 53: {
      const t = d as TLSAData;
      return `${t.usage} ${t.selector} ${t.matchingType} ${toHex(t.certificate)}`;
    }
    case 64: case 65: {
      const s = d as SVCBData;
      let out = s.priority + ' ' + s.target;
      for (let i = 0; i < s.params.length; i++) out += ' ' + formatSvcParam(s.params[i]);
      return out;
    }
  }
  return formatOpaque(rr.type, new Uint8Array(0));
}

/** Wire name (uncompressed) at `off` in `b` → [presentation, next offset] or undefined. */
function wireName(b: Uint8Array, off: number): [string, number] | undefined {
  let s = '';
  let p = off;
  for (;;) {
    if (p >= b.length) return undefined;
    const l = b[p];
    if (l === 0) return [s === '' ? '.' : s, p + 1];
    if (l > 63 || p + 1 + l > b.length) return undefined;
    for (let i = p + 1; i <= p + l; i++) {
      const c = b[i];
      if (c === 0x2e || c === 0x20 || c === 0x27 || c === 0x40 || c === 0x3b || c === 0x28 || c === 0x29 || c === 0x22 || c === 0x5c) {
        s += '\\' + String.fromCharCode(c);
      } else if (c < 0x20 || c > 0x7e) s += '\\' + String(c).padStart(3, '0');
      else s += String.fromCharCode(c);
    }
    s += '.';
    p += 1 + l;
  }
}

/** Structured text for a few common types held as OpaqueData; RFC 3597 `\# len hex` otherwise. */
function formatOpaque(type: number, raw: Uint8Array): string {
  const generic = raw.length === 0 ? '\\# 0' : `\\# ${raw.length} ${toHex(raw)}`;
  if (raw.length === 0) return generic;
  switch (type) {
    case 14: case 17: { // MINFO RP
      const a = wireName(raw, 0);
      if (!a) break;
      const b = wireName(raw, a[1]);
      if (!b || b[1] !== raw.length) break;
      return a[0] + ' ' + b[0];
    }
    case 18: case 21: case 36: { // AFSDB RT KX
      if (raw.length < 3) break;
      const a = wireName(raw, 2);
      if (!a || a[1] !== raw.length) break;
      return ((raw[0] << 8) | raw[1]) + ' ' + a[0];
    }
    case 44: // SSHFP
      if (raw.length < 2) break;
      return `${raw[0]} ${raw[1]} ${toHex(raw.subarray(2), true)}`;
    case 256: { // URI
      if (raw.length < 4) break;
      return `${(raw[0] << 8) | raw[1]} ${(raw[2] << 8) | raw[3]} ${charStringToText(raw.subarray(4))}`;
    }
  }
  return generic;
}

/** `name\tttl\tCLASS\tTYPE\trdata`, as miekg/dns `RR.String()`. */
export function formatRecord(rr: ResourceRecord): string {
  return rr.name + '\t' + rr.ttl + '\t' + classToString(rr.class) + '\t' + typeToString(rr.type) + '\t' + formatRdata(rr);
}

export function formatQuestion(q: Question): string {
  return ';' + q.name + '\t' + classToString(q.class) + '\t ' + typeToString(q.type);
}

function formatEdnsOption(code: number, data: Uint8Array): string {
  switch (code) {
    case 3: {
      // miekg adds each byte as a character in parentheses, after two blanks.
      let chars = '';
      for (const b of data) chars += '(' + String.fromCodePoint(b) + ')';
      return '\n; NSID: ' + toHex(data) + '  ' + chars;
    }
    case 8: {
      if (data.length >= 4) {
        const family = (data[0] << 8) | data[1];
        const src = data[2];
        const scope = data[3];
        const addr = data.subarray(4);
        let a: string;
        if (family === 1) {
          const b = new Uint8Array(4);
          b.set(addr.subarray(0, 4));
          a = formatIPv4(b, 0);
        } else {
          const b = new Uint8Array(16);
          b.set(addr.subarray(0, 16));
          a = formatIPv6(b, 0);
        }
        return `\n; SUBNET: ${a}/${src}/${scope}`;
      }
      break;
    }
    case 10:
      return '\n; COOKIE: ' + toHex(data);
    case 9:
      return '\n; EXPIRE: ' + (data.length === 4 ? String(((data[0] << 24) >>> 0) + ((data[1] << 16) | (data[2] << 8) | data[3])) : '');
    case 11:
      return '\n; KEEPALIVE: use tcp keepalive' + (data.length === 2 ? ` with timeout ${((data[0] << 8) | data[1]) * 100}ms` : '');
    case 12:
      return '\n; PADDING: ' + toHex(data);
    case 15: {
      if (data.length >= 2) {
        const info = (data[0] << 8) | data[1];
        const text = Buffer.from(data.subarray(2)).toString('utf8');
        return `\n; EDE: ${info} (${extendedErrorCodeToString(info) ?? ''}): (${text})`;
      }
      break;
    }
  }
  return `\n; LOCAL OPT: ${code}:0x${toHex(data)}`;
}

export function formatOpt(e: Edns): string {
  let s = '\n;; OPT PSEUDOSECTION:\n; EDNS: version ' + e.version + '; ';
  s += e.do ? 'flags: do; ' : 'flags:; ';
  if ((e.z & 0x7fff) !== 0) s += 'MBZ: 0x' + (e.z & 0x7fff).toString(16).padStart(4, '0') + ', ';
  s += 'udp: ' + e.udpSize;
  for (const o of e.options) s += formatEdnsOption(o.code, o.data);
  return s;
}

/** A message the way miekg/dns `Msg.String()` (and so dig) lays it out. */
export function formatMessage(msg: Message): string {
  let s = ';; opcode: ' + opcodeToString(msg.opcode) + ', status: ' + rcodeToString(msg.rcode) + ', id: ' + msg.id + '\n';
  s += ';; flags:';
  if (msg.qr) s += ' qr';
  if (msg.aa) s += ' aa';
  if (msg.tc) s += ' tc';
  if (msg.rd) s += ' rd';
  if (msg.ra) s += ' ra';
  if (msg.z) s += ' z';
  if (msg.ad) s += ' ad';
  if (msg.cd) s += ' cd';
  s += '; ';
  const ar = msg.additional.length + (msg.edns ? 1 : 0);
  if (msg.opcode === 5) {
    s += `ZONE: ${msg.question.length}, PREREQ: ${msg.answer.length}, UPDATE: ${msg.authority.length}, ADDITIONAL: ${ar}\n`;
  } else {
    s += `QUERY: ${msg.question.length}, ANSWER: ${msg.answer.length}, AUTHORITY: ${msg.authority.length}, ADDITIONAL: ${ar}\n`;
  }
  if (msg.edns) s += formatOpt(msg.edns) + '\n';
  const upd = msg.opcode === 5;
  if (msg.question.length > 0) {
    s += upd ? '\n;; ZONE SECTION:\n' : '\n;; QUESTION SECTION:\n';
    for (const q of msg.question) s += formatQuestion(q) + '\n';
  }
  if (msg.answer.length > 0) {
    s += upd ? '\n;; PREREQUISITE SECTION:\n' : '\n;; ANSWER SECTION:\n';
    for (const r of msg.answer) s += formatRecord(r) + '\n';
  }
  if (msg.authority.length > 0) {
    s += upd ? '\n;; UPDATE SECTION:\n' : '\n;; AUTHORITY SECTION:\n';
    for (const r of msg.authority) s += formatRecord(r) + '\n';
  }
  if (msg.additional.length > 0) {
    s += '\n;; ADDITIONAL SECTION:\n';
    for (const r of msg.additional) s += formatRecord(r) + '\n';
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// parsing

function parseErr(what: string): WireError {
  return new WireError('PARSE', 'dns: ' + what);
}

interface Tok { t: string; q: boolean }

/** Splits one record's text into tokens: quotes, escapes kept, `;` comments and parentheses dropped. */
function tokenize(line: string): { toks: Tok[]; leadingBlank: boolean } {
  const toks: Tok[] = [];
  const n = line.length;
  let i = 0;
  const leadingBlank = n > 0 && (line[0] === ' ' || line[0] === '\t');
  while (i < n) {
    const c = line[i];
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '(' || c === ')') {
      i++;
      continue;
    }
    if (c === ';') {
      while (i < n && line[i] !== '\n') i++;
      continue;
    }
    if (c === '"') {
      let j = i + 1;
      let s = '';
      while (j < n && line[j] !== '"') {
        if (line[j] === '\\' && j + 1 < n) {
          s += line[j] + line[j + 1];
          j += 2;
        } else s += line[j++];
      }
      if (j >= n) throw parseErr('unterminated quoted string');
      toks.push({ t: s, q: true });
      i = j + 1;
      continue;
    }
    let s = '';
    while (i < n) {
      const d = line[i];
      if (d === ' ' || d === '\t' || d === '\n' || d === '\r' || d === '(' || d === ')' || d === ';' || d === '"') break;
      if (d === '\\' && i + 1 < n) {
        s += d + line[i + 1];
        i += 2;
      } else {
        s += d;
        i++;
      }
    }
    toks.push({ t: s, q: false });
  }
  return { toks, leadingBlank };
}

/** Text with `\X` / `\DDD` escapes → bytes (UTF-8 for other characters). */
function unescapeBytes(s: string): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 92 && i + 1 < s.length) {
      const d1 = s.charCodeAt(i + 1);
      if (d1 >= 48 && d1 <= 57 && i + 3 < s.length && /^\d\d\d$/.test(s.substr(i + 1, 3))) {
        const v = Number(s.substr(i + 1, 3));
        if (v > 255) throw parseErr('bad \\DDD escape');
        out.push(v);
        i += 3;
        continue;
      }
      i++;
      const rest = Buffer.from(String.fromCodePoint(s.codePointAt(i)!), 'utf8');
      if (s.codePointAt(i)! > 0xffff) i++;
      for (const b of rest) out.push(b);
      continue;
    }
    if (c < 0x80) out.push(c);
    else {
      const cp = s.codePointAt(i)!;
      if (cp > 0xffff) i++;
      for (const b of Buffer.from(String.fromCodePoint(cp), 'utf8')) out.push(b);
    }
  }
  return Uint8Array.from(out);
}

function completeName(s: string, origin: string): string {
  if (s === '@') return origin;
  if (isFqdn(s)) return s;
  return origin === '.' ? s + '.' : s + '.' + origin;
}

const TTL_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };

/** TTL/duration: plain seconds or BIND-style units (1h30m); undefined if not one. */
function parseTTL(s: string): number | undefined {
  if (/^\d+$/.test(s)) {
    const v = Number(s);
    return v <= 0xffffffff ? v : undefined;
  }
  if (!/^(\d+[smhdwSMHDW])+$/.test(s)) return undefined;
  let total = 0;
  for (const m of s.matchAll(/(\d+)([smhdwSMHDW])/g)) total += Number(m[1]) * TTL_UNITS[m[2].toLowerCase()];
  return total <= 0xffffffff ? total : undefined;
}

function num(tok: Tok | undefined, max: number, what: string): number {
  if (tok === undefined) throw parseErr('missing ' + what);
  if (!/^\d+$/.test(tok.t)) throw parseErr(`bad ${what} ${JSON.stringify(tok.t)}`);
  const v = Number(tok.t);
  if (v > max) throw parseErr(`${what} out of range`);
  return v;
}

function parseSigTime(s: string): number {
  if (/^\d{14}$/.test(s)) {
    const ms = Date.UTC(Number(s.slice(0, 4)), Number(s.slice(4, 6)) - 1, Number(s.slice(6, 8)),
      Number(s.slice(8, 10)), Number(s.slice(10, 12)), Number(s.slice(12, 14)));
    return (ms / 1000) >>> 0;
  }
  if (/^\d{1,10}$/.test(s) && Number(s) <= 0xffffffff) return Number(s);
  throw parseErr('bad signature time ' + JSON.stringify(s));
}

function parseSvcParams(toks: Tok[]): SvcParam[] {
  const params: SvcParam[] = [];
  for (let i = 0; i < toks.length; i++) {
    const tok = toks[i];
    let key: string;
    let val: string | undefined;
    let quoted = false;
    const eq = tok.t.indexOf('=');
    if (eq < 0) {
      key = tok.t;
    } else {
      key = tok.t.slice(0, eq);
      val = tok.t.slice(eq + 1);
      if (val === '' && i + 1 < toks.length && toks[i + 1].q) {
        val = toks[++i].t;
        quoted = true;
      }
    }
    void quoted;
    const code = svcKeyCode(key);
    let value: Uint8Array;
    const need = (): string => {
      if (val === undefined) throw parseErr(`SvcParam ${key} needs a value`);
      return val;
    };
    switch (code) {
      case 0: {
        const ks = need().split(',').map(svcKeyCode);
        value = new Uint8Array(ks.length * 2);
        ks.forEach((k, j) => { value[2 * j] = k >> 8; value[2 * j + 1] = k & 255; });
        break;
      }
      case 1: {
        // comma-separated, `\,` is a literal comma
        const v = need();
        const ids: number[][] = [[]];
        const bytes = unescapeBytesWithCommas(v);
        for (const b of bytes) {
          if (b === -1) ids.push([]);
          else ids[ids.length - 1].push(b);
        }
        const out: number[] = [];
        for (const id of ids) {
          if (id.length === 0 || id.length > 255) throw parseErr('bad alpn value');
          out.push(id.length, ...id);
        }
        value = Uint8Array.from(out);
        break;
      }
      case 2:
        value = new Uint8Array(0);
        break;
      case 3: {
        const p = num({ t: need(), q: false }, 65535, 'port');
        value = Uint8Array.of(p >> 8, p & 255);
        break;
      }
      case 4: {
        const as = need().split(',');
        value = new Uint8Array(as.length * 4);
        as.forEach((a, j) => {
          const v4 = parseIPv4(a);
          if (v4 < 0) throw parseErr('bad ipv4hint ' + a);
          value[4 * j] = v4 >>> 24; value[4 * j + 1] = v4 >>> 16; value[4 * j + 2] = v4 >>> 8; value[4 * j + 3] = v4;
        });
        break;
      }
      case 5:
        value = fromBase64(need());
        break;
      case 6: {
        const as = need().split(',');
        value = new Uint8Array(as.length * 16);
        as.forEach((a, j) => {
          const b = parseIPv6(a);
          if (!b) throw parseErr('bad ipv6hint ' + a);
          value.set(b, 16 * j);
        });
        break;
      }
      default:
        value = val === undefined ? new Uint8Array(0) : unescapeBytes(val);
    }
    params.push({ key: code, value });
  }
  // miekg keeps (and packs) the parameters in ascending key order, whatever the text's order
  return params.sort((a, b) => a.key - b.key);
}

/** Like unescapeBytes but an unescaped comma yields -1 (alpn list separator). */
function unescapeBytesWithCommas(s: string): number[] {
  const out: number[] = [];
  let seg = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '\\' && i + 1 < s.length) {
      if (s[i + 1] === '\\' && s[i + 2] === ',') {
        // `\\,` inside a quoted value: a literal comma
        seg += ',';
        i += 2;
        continue;
      }
      seg += c + s[i + 1];
      i++;
      continue;
    }
    if (c === ',') {
      out.push(...unescapeBytes(seg), -1);
      seg = '';
      continue;
    }
    seg += c;
  }
  out.push(...unescapeBytes(seg));
  return out;
}

function wireNameBytes(name: string): number[] {
  // presentation → uncompressed wire (used for opaque types built from text)
  const out: number[] = [];
  if (name === '.') return [0];
  let label: number[] = [];
  const bytes = name;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (c === '\\' && i + 1 < bytes.length) {
      if (/^\d\d\d$/.test(bytes.substr(i + 1, 3))) {
        label.push(Number(bytes.substr(i + 1, 3)) & 255);
        i += 3;
      } else {
        label.push(bytes.charCodeAt(i + 1) & 255);
        i++;
      }
      continue;
    }
    if (c === '.') {
      if (label.length === 0 || label.length > 63) throw parseErr('bad name ' + JSON.stringify(name));
      out.push(label.length, ...label);
      label = [];
      continue;
    }
    for (const b of Buffer.from(c, 'utf8')) label.push(b);
  }
  if (label.length > 0) out.push(label.length, ...label);
  out.push(0);
  if (out.length > 255) throw parseErr('name too long');
  return out;
}

/** Builds the structured form of `raw` rdata of `type` by running it through the decoder. */
function rdataFromWire(type: number, raw: Uint8Array): RData {
  if (raw.length === 0) return { raw: new Uint8Array(0) };
  const buf = new Uint8Array(12 + 11 + raw.length);
  buf[7] = 1; // ancount
  const p = 12;
  buf[p] = 0;
  buf[p + 1] = type >> 8;
  buf[p + 2] = type & 255;
  buf[p + 4] = 1;
  buf[p + 9] = raw.length >> 8;
  buf[p + 10] = raw.length & 255;
  buf.set(raw, p + 11);
  return decodeMessage(buf).answer[0].data;
}

function rest(toks: Tok[], from: number): string {
  return toks.slice(from).map((t) => t.t).join('');
}

/**
 * Parses one record in zone-file syntax: `[owner] [ttl] [class] type rdata` (TTL and class
 * optional, in either order; `@` and relative names completed with `origin`; a line starting
 * with a blank uses `origin` as owner). RFC 3597 `\# len hex` accepted for every type.
 */
export function parseRecord(line: string, origin = '.', defaultTtl = 3600): ResourceRecord {
  origin = fqdn(origin);
  const { toks, leadingBlank } = tokenize(line);
  let i = 0;
  let name: string;
  if (leadingBlank) name = origin;
  else {
    if (toks.length === 0) throw parseErr('empty record');
    name = completeName(toks[i++].t, origin);
  }
  let ttl: number | undefined;
  let cls: number | undefined;
  let type: number | undefined;
  while (i < toks.length && type === undefined) {
    const t = toks[i++].t;
    const asTtl = ttl === undefined ? parseTTL(t) : undefined;
    if (asTtl !== undefined) {
      ttl = asTtl;
      continue;
    }
    const asCls = cls === undefined ? stringToClass(t) : undefined;
    if (asCls !== undefined) {
      cls = asCls;
      continue;
    }
    const asType = stringToType(t);
    if (asType === undefined) throw parseErr('unknown RR type ' + JSON.stringify(t));
    type = asType;
  }
  if (type === undefined) throw parseErr('missing RR type');
  const r = toks.slice(i);
  const data = parseRdata(type, r, origin);
  return { name, type, class: cls ?? 1, ttl: ttl ?? defaultTtl, data };
}

/** Types whose text form has a fixed number of fields (A, AAAA, the single-name types, SOA, MX, SRV). */
const FIXED_ARITY: ReadonlyMap<number, number> = new Map([
  [1, 1], [28, 1], [2, 1], [3, 1], [4, 1], [5, 1], [7, 1], [8, 1], [9, 1], [12, 1], [39, 1], [6, 7], [15, 2], [33, 4],
]);

function parseRdata(type: number, r: Tok[], origin: string): RData {
  if (r.length > 0 && r[0].t === '\\#' && !r[0].q) {
    const len = num(r[1], 65535, 'rdata length');
    const raw = len === 0 ? new Uint8Array(0) : fromHex(rest(r, 2));
    if (raw.length !== len) throw parseErr('rdata length mismatch');
    return rdataFromWire(type, raw);
  }
  const nm = (k: number): string => {
    if (r[k] === undefined) throw parseErr('missing name');
    return completeName(r[k].t, origin);
  };
  // miekg rejects anything after the rdata of fixed-size types.
  const arity = FIXED_ARITY.get(type);
  if (arity !== undefined && r.length > arity) throw parseErr('garbage after rdata: ' + JSON.stringify(r[arity].t));
  switch (type) {
    case 1: {
      const v = parseIPv4(r[0]?.t ?? '');
      if (v < 0) throw parseErr('bad A address');
      return { address: r[0].t };
    }
    case 28: {
      const b = parseIPv6(r[0]?.t ?? '');
      if (!b) throw parseErr('bad AAAA address');
      return { address: formatIPv6(b, 0) };
    }
    case 2: case 3: case 4: case 5: case 7: case 8: case 9: case 12: case 39:
      return { target: nm(0) };
    case 6: {
      const dur = (k: number, what: string): number => {
        const v = r[k] === undefined ? undefined : parseTTL(r[k].t);
        if (v === undefined) throw parseErr('bad SOA ' + what);
        return v;
      };
      return {
        mname: nm(0), rname: nm(1), serial: num(r[2], 0xffffffff, 'serial'), refresh: dur(3, 'refresh'),
        retry: dur(4, 'retry'), expire: dur(5, 'expire'), minimum: dur(6, 'minimum'),
      };
    }
    case 15:
      return { preference: num(r[0], 65535, 'preference'), exchange: nm(1) };
    case 16: case 99: case 258: case 261: {
      const strings: Uint8Array[] = [];
      for (const t of r) {
        const b = unescapeBytes(t.t);
        if (b.length === 0) strings.push(b);
        for (let k = 0; k < b.length; k += 255) strings.push(b.slice(k, k + 255));
      }
      // No string at all is accepted, as by miekg (an empty rdata).
      return { strings };
    }
    case 13: {
      if (r.length !== 2) throw parseErr('HINFO needs two strings');
      return { cpu: unescapeBytes(r[0].t), os: unescapeBytes(r[1].t) };
    }
    case 33:
      return { priority: num(r[0], 65535, 'priority'), weight: num(r[1], 65535, 'weight'), port: num(r[2], 65535, 'port'), target: nm(3) };
    case 257: {
      if (r.length < 3) throw parseErr('CAA needs flags tag value');
      return { flags: num(r[0], 255, 'flags'), tag: r[1].t, value: unescapeBytes(r.slice(2).map((t) => t.t).join(' ')) };
    }
    case 35: {
      if (r.length !== 6) throw parseErr('NAPTR needs 6 fields');
      return {
        order: num(r[0], 65535, 'order'), preference: num(r[1], 65535, 'preference'),
        flags: unescapeBytes(r[2].t), services: unescapeBytes(r[3].t), regexp: unescapeBytes(r[4].t), replacement: nm(5),
      };
    }
    case 43: case 59: case 32768: case 32769:
      return {
        keyTag: num(r[0], 65535, 'key tag'), algorithm: num(r[1], 255, 'algorithm'),
        digestType: num(r[2], 255, 'digest type'), digest: fromHex(rest(r, 3)),
      };
    case 48: case 60: case 25:
      return {
        flags: num(r[0], 65535, 'flags'), protocol: num(r[1], 255, 'protocol'),
        algorithm: num(r[2], 255, 'algorithm'), publicKey: fromBase64(rest(r, 3)),
      };
    case 46: case 24: {
      const tc = stringToType(r[0]?.t ?? '');
      if (tc === undefined) throw parseErr('bad RRSIG type covered');
      return {
        typeCovered: tc, algorithm: num(r[1], 255, 'algorithm'), labels: num(r[2], 255, 'labels'),
        originalTTL: num(r[3], 0xffffffff, 'original TTL'), expiration: parseSigTime(r[4]?.t ?? ''),
        inception: parseSigTime(r[5]?.t ?? ''), keyTag: num(r[6], 65535, 'key tag'), signerName: nm(7),
        signature: fromBase64(rest(r, 8)),
      };
    }
    case 47:
      return { nextName: nm(0), types: r.slice(1).map((t) => typeOrThrow(t.t)) };
    case 50: {
      const salt = r[3]?.t === '-' ? new Uint8Array(0) : fromHex(r[3]?.t ?? '');
      return {
        hashAlgorithm: num(r[0], 255, 'hash algorithm'), flags: num(r[1], 255, 'flags'),
        iterations: num(r[2], 65535, 'iterations'), salt, nextHashed: fromBase32Hex(r[4]?.t ?? ''),
        types: r.slice(5).map((t) => typeOrThrow(t.t)),
      };
    }
    case 51: {
      const salt = r[3]?.t === '-' ? new Uint8Array(0) : fromHex(r[3]?.t ?? '');
      return { hashAlgorithm: num(r[0], 255, 'hash algorithm'), flags: num(r[1], 255, 'flags'), iterations: num(r[2], 65535, 'iterations'), salt };
    }
    case 52: case 53:
      return {
        usage: num(r[0], 255, 'usage'), selector: num(r[1], 255, 'selector'),
        matchingType: num(r[2], 255, 'matching type'), certificate: fromHex(rest(r, 3)),
      };
    case 64: case 65:
      return { priority: num(r[0], 65535, 'priority'), target: nm(1), params: parseSvcParams(r.slice(2)) };
    // opaque types with a simple text form
    case 14: case 17:
      return { raw: Uint8Array.from([...wireNameBytes(nm(0)), ...wireNameBytes(nm(1))]) };
    case 18: case 21: case 36: {
      const v = num(r[0], 65535, 'preference');
      return { raw: Uint8Array.from([v >> 8, v & 255, ...wireNameBytes(nm(1))]) };
    }
    case 44:
      return { raw: Uint8Array.from([num(r[0], 255, 'algorithm'), num(r[1], 255, 'type'), ...fromHex(rest(r, 2))]) };
    case 256: {
      const p = num(r[0], 65535, 'priority');
      const w = num(r[1], 65535, 'weight');
      if (r[2] === undefined) throw parseErr('URI needs a target');
      return { raw: Uint8Array.from([p >> 8, p & 255, w >> 8, w & 255, ...unescapeBytes(r[2].t)]) };
    }
    case 37: { // CERT
      const ct = certType(r[0]?.t ?? '');
      const tag = num(r[1], 65535, 'CERT KeyTag');
      const alg = algorithmNumber(r[2]?.t ?? '');
      return { raw: Uint8Array.from([ct >> 8, ct & 255, tag >> 8, tag & 255, alg, ...fromBase64(rest(r, 3))]) };
    }
    case 49: case 61: // DHCID OPENPGPKEY
      return { raw: fromBase64(rest(r, 0)) };
    case 108: case 109: { // EUI48 EUI64
      const n = type === 108 ? 6 : 8;
      const parts = (r[0]?.t ?? '').split('-');
      if (r.length !== 1 || parts.length !== n || !parts.every((x) => /^[0-9a-fA-F]{2}$/.test(x))) {
        throw parseErr(`bad ${typeToString(type)} Address`);
      }
      return { raw: Uint8Array.from(parts.map((x) => parseInt(x, 16))) };
    }
    case 62: { // CSYNC
      const serial = num(r[0], 0xffffffff, 'CSYNC serial');
      const flags = num(r[1], 65535, 'CSYNC flags');
      return { raw: Uint8Array.from([serial >>> 24, (serial >>> 16) & 255, (serial >>> 8) & 255, serial & 255, flags >> 8, flags & 255, ...typeBitmap(r.slice(2).map((t) => typeOrThrow(t.t)))]) };
    }
    case 63: { // ZONEMD
      const serial = num(r[0], 0xffffffff, 'ZONEMD Serial');
      return { raw: Uint8Array.from([serial >>> 24, (serial >>> 16) & 255, (serial >>> 8) & 255, serial & 255, num(r[1], 255, 'ZONEMD Scheme'), num(r[2], 255, 'ZONEMD Hash Algorithm'), ...fromHex(rest(r, 3))]) };
    }
    case 104: case 106: { // NID L64
      const pref = num(r[0], 65535, 'preference');
      const groups = (r[1]?.t ?? '').split(':');
      if (r.length !== 2 || groups.length !== 4 || !groups.every((g) => /^[0-9a-fA-F]{1,4}$/.test(g))) throw parseErr(`bad ${typeToString(type)} Locator`);
      const out = [pref >> 8, pref & 255];
      for (const g of groups) { const v = parseInt(g, 16); out.push(v >> 8, v & 255); }
      return { raw: Uint8Array.from(out) };
    }
    case 105: { // L32
      const pref = num(r[0], 65535, 'preference');
      const v4 = parseIPv4(r[1]?.t ?? '');
      if (v4 < 0 || r.length !== 2) throw parseErr('bad L32 Locator');
      return { raw: Uint8Array.from([pref >> 8, pref & 255, v4 >>> 24, (v4 >>> 16) & 255, (v4 >>> 8) & 255, v4 & 255]) };
    }
    case 107: { // LP
      const pref = num(r[0], 65535, 'preference');
      return { raw: Uint8Array.from([pref >> 8, pref & 255, ...wireNameBytes(nm(1))]) };
    }
    case 26: { // PX
      const pref = num(r[0], 65535, 'preference');
      return { raw: Uint8Array.from([pref >> 8, pref & 255, ...wireNameBytes(nm(1)), ...wireNameBytes(nm(2))]) };
    }
    case 58: // TALINK
      return { raw: Uint8Array.from([...wireNameBytes(nm(0)), ...wireNameBytes(nm(1))]) };
    case 19: case 20: case 27: { // X25 ISDN GPOS: character-strings
      const n = type === 27 ? [3, 3] : type === 20 ? [1, 2] : [1, 1];
      if (r.length < n[0] || r.length > n[1]) throw parseErr(`bad ${typeToString(type)} fields`);
      const out: number[] = [];
      for (const t of r) {
        const b = unescapeBytes(t.t);
        if (b.length > 255) throw parseErr('string too long');
        out.push(b.length, ...b);
      }
      return { raw: Uint8Array.from(out) };
    }
    case 45: { // IPSECKEY
      const prec = num(r[0], 255, 'IPSECKEY value');
      const gt = num(r[1], 255, 'IPSECKEY value');
      const alg = num(r[2], 255, 'IPSECKEY value');
      const gw = gatewayBytes(gt, r[3]?.t ?? '', origin);
      return { raw: Uint8Array.from([prec, gt, alg, ...gw, ...fromBase64(rest(r, 4))]) };
    }
    case 260: { // AMTRELAY
      const prec = num(r[0], 255, 'AMTRELAY value');
      const d = num(r[1], 1, 'AMTRELAY value');
      const gt = num(r[2], 127, 'AMTRELAY value');
      // miekg packs the gateway only when the discovery bit is clear (it switches on the combined byte)
      const gw = d === 1 ? [] : gatewayBytes(gt, r[3]?.t ?? '', origin);
      if (r.length !== (gt === 0 ? 3 : 4) && !(gt === 0 && r.length === 4 && r[3].t === '.')) throw parseErr('bad AMTRELAY gateway');
      return { raw: Uint8Array.from([prec, (d << 7) | gt, ...gw]) };
    }
    case 42: { // APL
      const out: number[] = [];
      for (const t of r) out.push(...aplItem(t.t));
      return { raw: Uint8Array.from(out) };
    }
    case 55: { // HIP
      const alg = num(r[0], 255, 'HIP PublicKeyAlgorithm');
      const hit = fromHex(r[1]?.t ?? '');
      const pk = fromBase64(r[2]?.t ?? '');
      if (hit.length === 0 || hit.length > 255 || pk.length === 0) throw parseErr('bad HIP Hit');
      const servers: number[] = [];
      for (let k = 3; k < r.length; k++) servers.push(...wireNameBytes(completeName(r[k].t, origin)));
      return { raw: Uint8Array.from([hit.length, alg, pk.length >> 8, pk.length & 255, ...hit, ...pk, ...servers]) };
    }
    case 29: // LOC
      return { raw: locBytes(r.map((t) => t.t)) };
  }
  throw parseErr(`no text syntax for type ${typeToString(type)}; use \\# generic syntax`);
}

/** RFC 4034 type bitmap of `types`. */
function typeBitmap(types: number[]): number[] {
  const sorted = [...new Set(types)].sort((a, b) => a - b);
  const out: number[] = [];
  let i = 0;
  while (i < sorted.length) {
    const win = sorted[i] >> 8;
    const bits = new Array<number>(32).fill(0);
    let len = 0;
    while (i < sorted.length && sorted[i] >> 8 === win) {
      const low = sorted[i] & 255;
      bits[low >> 3] |= 0x80 >> (low & 7);
      len = (low >> 3) + 1;
      i++;
    }
    out.push(win, len, ...bits.slice(0, len));
  }
  return out;
}

const CERT_TYPES: Record<string, number> = { PKIX: 1, SPKI: 2, PGP: 3, IPKIX: 4, ISPKI: 5, IPGP: 6, ACPKIX: 7, IACPKIX: 8, URI: 253, OID: 254 };

function certType(s: string): number {
  const v = CERT_TYPES[s.toUpperCase()];
  if (v !== undefined) return v;
  if (!/^\d+$/.test(s) || Number(s) > 65535) throw parseErr('bad CERT Type');
  return Number(s);
}

const ALGORITHMS: Record<string, number> = {
  RSAMD5: 1, DH: 2, DSA: 3, RSASHA1: 5, 'DSA-NSEC3-SHA1': 6, 'RSASHA1-NSEC3-SHA1': 7, RSASHA256: 8, RSASHA512: 10,
  'ECC-GOST': 12, ECDSAP256SHA256: 13, ECDSAP384SHA384: 14, ED25519: 15, ED448: 16, INDIRECT: 252, PRIVATEDNS: 253, PRIVATEOID: 254,
};

function algorithmNumber(s: string): number {
  const v = ALGORITHMS[s.toUpperCase()];
  if (v !== undefined) return v;
  if (!/^\d+$/.test(s) || Number(s) > 255) throw parseErr('bad CERT Algorithm');
  return Number(s);
}

/** The gateway field of IPSECKEY/AMTRELAY for gateway type `gt`. */
function gatewayBytes(gt: number, s: string, origin: string): number[] {
  switch (gt) {
    case 0:
      if (s !== '' && s !== '.') throw parseErr('bad gateway');
      return [];
    case 1: {
      const v4 = parseIPv4(s);
      if (v4 < 0) throw parseErr('bad gateway');
      return [v4 >>> 24, (v4 >>> 16) & 255, (v4 >>> 8) & 255, v4 & 255];
    }
    case 2: {
      const b = parseIPv6(s);
      if (!b) throw parseErr('bad gateway');
      return [...b];
    }
    case 3:
      return wireNameBytes(completeName(s, origin));
  }
  throw parseErr('bad gateway type');
}

/** One APL item `[!]family:address/prefix` (RFC 3123), address bytes with trailing zeros cut. */
function aplItem(s: string): number[] {
  const m = /^(!?)([12]):([^/]+)\/(\d{1,3})$/.exec(s);
  if (m === null) throw parseErr('bad APL prefix ' + JSON.stringify(s));
  const family = Number(m[2]);
  const prefix = Number(m[4]);
  let addr: number[];
  if (family === 1) {
    const v4 = parseIPv4(m[3]);
    if (v4 < 0 || prefix > 32) throw parseErr('bad APL address');
    addr = [v4 >>> 24, (v4 >>> 16) & 255, (v4 >>> 8) & 255, v4 & 255];
  } else {
    const b = parseIPv6(m[3]);
    if (!b || prefix > 128) throw parseErr('bad APL address');
    addr = [...b];
  }
  let n = addr.length;
  while (n > 0 && addr[n - 1] === 0) n--;
  return [0, family, prefix, (m[1] === '!' ? 0x80 : 0) | n, ...addr.slice(0, n)];
}

/** RFC 1876 size/precision in centimetres as the 4-bit mantissa, 4-bit exponent byte. */
function locPrecision(s: string, what: string): number {
  const m = /^(\d+)(?:\.(\d{1,2}))?m?$/.exec(s);
  if (m === null) throw parseErr('bad LOC ' + what);
  let cm = Number(m[1]) * 100 + Number((m[2] ?? '').padEnd(2, '0') || '0');
  let e = 0;
  while (cm >= 10 && e < 9) {
    cm = Math.floor(cm / 10);
    e++;
  }
  if (cm > 9) throw parseErr('bad LOC ' + what);
  return (cm << 4) | e;
}

/** RFC 1876 LOC text (`d [m [s]] N|S d [m [s]] E|W alt[m] [siz [hp [vp]]]`) to wire bytes. */
function locBytes(f: string[]): Uint8Array {
  let i = 0;
  const coord = (pos: string, neg: string, what: string): number => {
    let deg = 0;
    let min = 0;
    let sec = 0;
    const d = f[i++];
    if (d === undefined || !/^\d+$/.test(d)) throw parseErr('bad LOC ' + what);
    deg = Number(d);
    if (f[i] !== undefined && /^\d+$/.test(f[i])) {
      min = Number(f[i++]);
      if (f[i] !== undefined && /^\d+(\.\d+)?$/.test(f[i])) sec = Number(f[i++]);
    }
    const h = (f[i++] ?? '').toUpperCase();
    if (h !== pos && h !== neg) throw parseErr('bad LOC ' + what);
    const ms = Math.round(((deg * 60 + min) * 60 + sec) * 1000);
    return h === neg ? 0x80000000 - ms : 0x80000000 + ms;
  };
  const lat = coord('N', 'S', 'Latitude');
  const lon = coord('E', 'W', 'Longitude');
  const am = /^(-?\d+(?:\.\d{1,2})?)m?$/.exec(f[i++] ?? '');
  if (am === null) throw parseErr('bad LOC Altitude');
  const alt = Math.round(Number(am[1]) * 100) + 10000000;
  const size = f[i] !== undefined ? locPrecision(f[i++], 'Size') : 0x12;
  const hp = f[i] !== undefined ? locPrecision(f[i++], 'HorizPre') : 0x16;
  const vp = f[i] !== undefined ? locPrecision(f[i++], 'VertPre') : 0x13;
  if (i < f.length) throw parseErr('garbage after rdata: ' + JSON.stringify(f[i]));
  const out = new Uint8Array(16);
  const dv = new DataView(out.buffer);
  out[0] = 0;
  out[1] = size;
  out[2] = hp;
  out[3] = vp;
  dv.setUint32(4, lat >>> 0);
  dv.setUint32(8, lon >>> 0);
  dv.setUint32(12, alt >>> 0);
  return out;
}

function typeOrThrow(s: string): number {
  const t = stringToType(s);
  if (t === undefined) throw parseErr('unknown type ' + JSON.stringify(s));
  return t;
}
