// Helpers on presentation-form domain names: fully qualified with a trailing dot, `\.`, `\\` and
// `\DDD` escapes for bytes that cannot appear literally. Letter case is preserved; comparisons are
// ASCII case-insensitive, as DNS requires (RFC 4343). This is the one home of name case folding,
// comparison, FQDN and label operations: everything else in src uses these.

import { formatIPv4Number, formatIPv6Go, parseIPv4, parseIPv6 } from './ip.ts';

/** True when the final dot of `s` is a label separator (not escaped). miekg `IsFqdn`. */
export function isFqdn(s: string): boolean {
  const n = s.length;
  if (n === 0 || s.charCodeAt(n - 1) !== 46) return false;
  // count backslashes before the final dot: an odd number escapes it
  let i = n - 2;
  while (i >= 0 && s.charCodeAt(i) === 92) i--;
  return ((n - 2 - i) & 1) === 0;
}

/** Appends the root dot when missing. miekg `Fqdn`. */
export function fqdn(s: string): string {
  return isFqdn(s) ? s : s + '.';
}

function lowerCode(c: number): number {
  return c >= 65 && c <= 90 ? c | 0x20 : c;
}

/** ASCII case-insensitive equality of two names (exact text otherwise). */
export function nameEqual(a: string, b: string): boolean {
  if (a === b) return true;
  const n = a.length;
  if (n !== b.length) return false;
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y && lowerCode(x) !== lowerCode(y)) return false;
  }
  return true;
}

/**
 * ASCII-only lower-casing, as DNS requires (RFC 4343): A-Z become a-z, every other character
 * (and escape) stays. Returns the same string when nothing changes, so a name that is already
 * lower case costs no allocation.
 */
export function asciiLower(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 65 && c <= 90) return lowerFrom(s, i);
  }
  return s;
}

function lowerFrom(s: string, from: number): string {
  let out = s.slice(0, from);
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i);
    out += c >= 65 && c <= 90 ? String.fromCharCode(c + 32) : s[i];
  }
  return out;
}

/** The library's older name for {@link asciiLower} (same function). */
export const lowerName = asciiLower;

/**
 * Index of the first character of the label after the one that contains `i` (just past the next
 * unescaped dot at or after `i`); `s.length` when no label follows. miekg `NextLabel` without its
 * `end` flag. Allocation-free: the server's zone routing walks every query name with it.
 */
export function nextLabel(s: string, i: number): number {
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 92) {
      i++;
      continue;
    }
    if (c === 46) return i + 1;
  }
  return s.length;
}

/** True when the character at `i` (a dot) is a label separator, i.e. preceded by an even number of backslashes. */
function isSeparatorAt(s: string, i: number): boolean {
  let j = i - 1;
  while (j >= 0 && s.charCodeAt(j) === 92) j--;
  return ((i - 1 - j) & 1) === 0;
}

/**
 * `child` is equal to or below `parent` (label-aware, case-insensitive, `.` is the parent of all).
 * Both are treated as fully qualified.
 */
export function isSubdomain(child: string, parent: string): boolean {
  const p = fqdn(parent);
  if (p === '.') return true;
  const c = fqdn(child);
  const pl = p.length;
  const cl = c.length;
  if (cl < pl) return false;
  if (cl === pl) return nameEqual(c, p);
  // c must end with "." + p where that dot separates labels
  const start = cl - pl;
  if (c.charCodeAt(start - 1) !== 46 || !isSeparatorAt(c, start - 1)) return false;
  for (let i = 0; i < pl; i++) {
    const x = c.charCodeAt(start + i);
    const y = p.charCodeAt(i);
    if (x !== y && lowerCode(x) !== lowerCode(y)) return false;
  }
  return true;
}

/** Number of labels; the root has 0. miekg `CountLabel`. */
export function countLabels(name: string): number {
  const s = fqdn(name);
  if (s === '.') return 0;
  let n = 0;
  for (let i = 0; i < s.length; i = nextLabel(s, i)) n++;
  return n;
}

/** The labels of `name` in presentation form (escapes kept), without the root. */
export function splitLabels(name: string): string[] {
  const s = fqdn(name);
  const out: string[] = [];
  if (s === '.') return out;
  for (let begin = 0; begin < s.length;) {
    const i = nextLabel(s, begin);
    out.push(s.slice(begin, i - 1));
    begin = i;
  }
  return out;
}

/** The name without its first label; `.` has no parent (undefined). */
export function parentName(name: string): string | undefined {
  const s = fqdn(name);
  if (s === '.') return undefined;
  const i = nextLabel(s, 0);
  return i >= s.length ? '.' : s.slice(i);
}

const IP4_ARPA = '.in-addr.arpa.';
const IP6_ARPA = '.ip6.arpa.';

/**
 * The address a reverse name stands for: `1.0.0.127.in-addr.arpa.` → `127.0.0.1`; a full
 * 32-nibble `ip6.arpa.` name → IPv6 text as Go prints it. Partial or invalid names → undefined.
 */
export function reverseToAddress(name: string): string | undefined {
  const s = asciiLower(fqdn(name));
  if (s.endsWith(IP4_ARPA)) {
    const parts = s.slice(0, s.length - IP4_ARPA.length).split('.');
    if (parts.length !== 4) return undefined;
    const text = parts[3] + '.' + parts[2] + '.' + parts[1] + '.' + parts[0];
    const v = parseIPv4(text);
    if (v < 0) return undefined;
    return formatIPv4Number(v);
  }
  if (s.endsWith(IP6_ARPA)) {
    const body = s.slice(0, s.length - IP6_ARPA.length);
    if (body.length !== 63) return undefined;
    const b = new Uint8Array(16);
    for (let k = 0; k < 32; k++) {
      const c = body.charCodeAt(k * 2);
      if (k < 31 && body.charCodeAt(k * 2 + 1) !== 46) return undefined;
      let h: number;
      if (c >= 48 && c <= 57) h = c - 48;
      else if (c >= 97 && c <= 102) h = c - 87;
      else return undefined;
      const nib = 31 - k; // first label is the lowest nibble
      if (nib & 1) b[nib >> 1] |= h;
      else b[nib >> 1] |= h << 4;
    }
    return formatIPv6Go(b, 0);
  }
  return undefined;
}

/** `127.0.0.1` → `1.0.0.127.in-addr.arpa.`; IPv6 → the 32-nibble `ip6.arpa.` name. Throws on invalid input. */
export function addressToReverse(ip: string): string {
  const v = parseIPv4(ip);
  if (v >= 0) {
    return (v & 255) + '.' + ((v >>> 8) & 255) + '.' + ((v >>> 16) & 255) + '.' + (v >>> 24) + IP4_ARPA;
  }
  const b = parseIPv6(ip);
  if (b === undefined) throw new TypeError('invalid IP address: ' + ip);
  let s = '';
  for (let i = 15; i >= 0; i--) {
    s += (b[i] & 15).toString(16) + '.' + (b[i] >> 4).toString(16) + '.';
  }
  return s + IP6_ARPA.slice(1);
}

const utf8 = new TextEncoder();

function isAscii(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return false;
  return true;
}

/** The UTF-8 bytes of `s` as a string of char codes 0-255 (`s` itself when it is ASCII). */
function utf8Codes(s: string): string {
  if (isAscii(s)) return s;
  const b = utf8.encode(s);
  let out = '';
  for (const c of b) out += String.fromCharCode(c);
  return out;
}

function isDigitByte(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/**
 * miekg/dns `IsDomainName` (v1.1.72), on the UTF-8 bytes of `s`: any bytes allowed; rejects
 * empty input, empty labels, a leading dot (except `.`), labels of 64+ octets, names longer
 * than miekg's 256-octet limit on the wire and a dangling backslash. Encodes only non-ASCII names.
 */
export function isDomainName(s: string): boolean {
  const lenmsg = 256;
  if (s.length === 0) return false;
  // An ASCII name is its own UTF-8: its char codes are walked without encoding (rewrite checks names per query).
  const b = utf8Codes(fqdn(s));
  let off = 0;
  let begin = 0;
  let wasDot = false;
  let escape = false;
  for (let i = 0; i < b.length; i++) {
    switch (b.charCodeAt(i)) {
      case 0x5c: // '\\'
        escape = !escape;
        if (off + 1 > lenmsg) return false;
        if (isDigitByte(b.charCodeAt(i + 1)) && isDigitByte(b.charCodeAt(i + 2)) && isDigitByte(b.charCodeAt(i + 3))) {
          i += 3;
          begin += 3;
        } else {
          i++;
          begin++;
        }
        wasDot = false;
        break;
      case 0x2e: {
        // '.'
        escape = false;
        if (i === 0 && b.length > 1) return false; // leading dot
        if (wasDot) return false; // empty label
        wasDot = true;
        const labelLen = i - begin;
        if (labelLen >= 64) return false;
        off += 1 + labelLen;
        if (off > lenmsg) return false;
        begin = i + 1;
        break;
      }
      default:
        escape = false;
        wasDot = false;
    }
  }
  return !escape;
}
