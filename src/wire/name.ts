// Helpers on presentation-form domain names: fully qualified with a trailing dot, `\.`, `\\` and
// `\DDD` escapes for bytes that cannot appear literally. Letter case is preserved; comparisons are
// ASCII case-insensitive, as DNS requires.

import { formatIPv6Go, parseIPv4, parseIPv6 } from './ip.ts';

/** True when the final dot of `s` is a label separator (not escaped). miekg `IsFqdn`. */
export function isFqdn(s: string): boolean {
  const n = s.length;
  if (n === 0 || s.charCodeAt(n - 1) !== 46) return false;
  // count backslashes before the final dot: an odd number escapes it
  let i = n - 2;
  while (i >= 0 && s.charCodeAt(i) === 92) i--;
  return ((n - 2 - i) & 1) === 0;
}

/** Appends the root dot when missing. */
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

/** ASCII lower-casing that leaves every other character (and escapes) alone. */
export function lowerName(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 65 && c <= 90) return s.toLowerCase();
  }
  return s;
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
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 92) {
      i++;
      continue;
    }
    if (c === 46) n++;
  }
  return n;
}

/** The labels of `name` in presentation form (escapes kept), without the root. */
export function splitLabels(name: string): string[] {
  const s = fqdn(name);
  const out: string[] = [];
  if (s === '.') return out;
  let begin = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 92) {
      i++;
      continue;
    }
    if (c === 46) {
      out.push(s.slice(begin, i));
      begin = i + 1;
    }
  }
  return out;
}

/** The name without its first label; `.` has no parent (undefined). */
export function parentName(name: string): string | undefined {
  const s = fqdn(name);
  if (s === '.') return undefined;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 92) {
      i++;
      continue;
    }
    if (c === 46) return i + 1 >= s.length ? '.' : s.slice(i + 1);
  }
  return '.';
}

const IP4_ARPA = '.in-addr.arpa.';
const IP6_ARPA = '.ip6.arpa.';

/**
 * The address a reverse name stands for: `1.0.0.127.in-addr.arpa.` → `127.0.0.1`; a full
 * 32-nibble `ip6.arpa.` name → IPv6 text as Go prints it. Partial or invalid names → undefined.
 */
export function reverseToAddress(name: string): string | undefined {
  const s = lowerName(fqdn(name));
  if (s.endsWith(IP4_ARPA)) {
    const parts = s.slice(0, s.length - IP4_ARPA.length).split('.');
    if (parts.length !== 4) return undefined;
    const text = parts[3] + '.' + parts[2] + '.' + parts[1] + '.' + parts[0];
    const v = parseIPv4(text);
    if (v < 0) return undefined;
    return (v >>> 24) + '.' + ((v >>> 16) & 255) + '.' + ((v >>> 8) & 255) + '.' + (v & 255);
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

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/**
 * miekg/dns `IsDomainName` semantics: very liberal about characters; rejects the empty string,
 * empty labels (except the root name itself), a leading dot, labels over 63 octets, names over
 * 255 wire octets and a dangling backslash.
 */
export function isDomainName(s: string): boolean {
  if (s.length === 0) return false;
  if (s === '.') return true;
  const name = fqdn(s);
  let wire = 1; // the root label
  let labelLen = 0;
  let wasDot = false;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c === 92) {
      if (i + 1 >= name.length) return false; // dangling backslash
      if (i + 3 < name.length && isDigit(name.charCodeAt(i + 1)) && isDigit(name.charCodeAt(i + 2)) && isDigit(name.charCodeAt(i + 3))) {
        i += 3;
      } else i++;
      labelLen++;
      wasDot = false;
      continue;
    }
    if (c === 46) {
      if (i === 0) return false;
      if (wasDot) return false;
      wasDot = true;
      if (labelLen > 63) return false;
      wire += labelLen + 1;
      if (wire > 255) return false;
      labelLen = 0;
      continue;
    }
    labelLen += c > 0x7f ? (c > 0x7ff ? 3 : 2) : 1;
    wasDot = false;
  }
  return labelLen === 0;
}
