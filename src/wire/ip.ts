// IP addresses and networks: parsing and printing text with Go's net package rules (no
// regexes, no allocation beyond the result). The one home of IP parsing in src.

/** Parses dotted-quad IPv4 text; returns the address as an unsigned 32-bit number or -1. */
export function parseIPv4(s: string): number {
  const n = s.length;
  if (n < 7 || n > 15) return -1;
  let v = 0;
  let part = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c === 46) {
      if (digits === 0) return -1;
      v = v * 256 + part;
      part = 0;
      digits = 0;
      dots++;
      if (dots > 3) return -1;
    } else if (c >= 48 && c <= 57) {
      if (digits > 0 && part === 0) return -1; // leading zero (Go rejects these too)
      part = part * 10 + (c - 48);
      if (part > 255) return -1;
      digits++;
    } else return -1;
  }
  if (dots !== 3 || digits === 0) return -1;
  return v * 256 + part;
}

function hexVal(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

/** Parses IPv6 text (RFC 4291, including embedded IPv4 tail) into `out` at `off`; false if invalid. */
export function parseIPv6Into(s: string, out: Uint8Array, off: number): boolean {
  const n = s.length;
  if (n < 2 || n > 45) return false;
  const groups: number[] = [];
  let ellipsis = -1;
  let i = 0;
  if (s.charCodeAt(0) === 58) {
    if (s.charCodeAt(1) !== 58) return false;
    ellipsis = 0;
    i = 2;
    if (i === n) {
      out.fill(0, off, off + 16);
      return true;
    }
  }
  while (i < n) {
    // one group or an IPv4 tail
    let j = i;
    let v = 0;
    while (j < n && j - i < 5) {
      const h = hexVal(s.charCodeAt(j));
      if (h < 0) break;
      v = v * 16 + h;
      j++;
    }
    if (j < n && s.charCodeAt(j) === 46) {
      // IPv4 tail
      if (groups.length > 6) return false;
      const v4 = parseIPv4(s.slice(i));
      if (v4 < 0) return false;
      groups.push(v4 >>> 16, v4 & 0xffff);
      i = n;
      break;
    }
    if (j === i || j - i > 4) return false;
    groups.push(v);
    i = j;
    if (i === n) break;
    if (s.charCodeAt(i) !== 58) return false;
    i++;
    if (i < n && s.charCodeAt(i) === 58) {
      if (ellipsis >= 0) return false;
      ellipsis = groups.length;
      i++;
      if (i === n) break;
    } else if (i === n) return false;
  }
  if (ellipsis < 0) {
    if (groups.length !== 8) return false;
  } else {
    if (groups.length > 7) return false;
    const fill = 8 - groups.length;
    groups.splice(ellipsis, 0, ...new Array<number>(fill).fill(0));
  }
  for (let k = 0; k < 8; k++) {
    out[off + 2 * k] = groups[k] >>> 8;
    out[off + 2 * k + 1] = groups[k] & 0xff;
  }
  return true;
}

export function parseIPv6(s: string): Uint8Array | undefined {
  const b = new Uint8Array(16);
  return parseIPv6Into(s, b, 0) ? b : undefined;
}

/**
 * Go's net.ParseIP on text, keeping the family of the text: 4 bytes for dotted IPv4, 16 for IPv6
 * (including `::ffff:a.b.c.d`); undefined when `s` is not an address (a `%zone` is not one).
 */
export function parseIP(s: string): Uint8Array | undefined {
  const v = parseIPv4(s);
  if (v >= 0) return Uint8Array.of(v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255);
  return parseIPv6(s);
}

export function formatIPv4(b: Uint8Array, off: number): string {
  return b[off] + '.' + b[off + 1] + '.' + b[off + 2] + '.' + b[off + 3];
}

/** Dotted-quad text of an IPv4 address held as a number (what parseIPv4 returns). */
export function formatIPv4Number(v: number): string {
  return (v >>> 24) + '.' + ((v >>> 16) & 255) + '.' + ((v >>> 8) & 255) + '.' + (v & 255);
}

/** The 16 bytes at `off` are an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`). */
export function isIPv4Mapped(b: Uint8Array, off: number): boolean {
  for (let i = 0; i < 10; i++) if (b[off + i] !== 0) return false;
  return b[off + 10] === 0xff && b[off + 11] === 0xff;
}

/** The 4 IPv4 bytes of a 4-byte address or of an IPv4-mapped 16-byte one (Go's To4); undefined otherwise. */
export function ipv4Of(ip: Uint8Array): Uint8Array | undefined {
  if (ip.length === 4) return ip;
  return ip.length === 16 && isIPv4Mapped(ip, 0) ? ip.subarray(12) : undefined;
}

/** Go's net.IP.Equal: the same bytes, an IPv4 address being equal to its IPv4-mapped form. */
export function ipEqual(a: Uint8Array, b: Uint8Array): boolean {
  let x: Uint8Array | undefined = a;
  let y: Uint8Array | undefined = b;
  if (x.length !== y.length) {
    x = ipv4Of(x);
    y = ipv4Of(y);
    if (x === undefined || y === undefined) return false;
  }
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

/** `::ffff:127.0.0.1` → `127.0.0.1`, as Go reports IPv4 clients of a dual-stack socket; other text unchanged. */
export function plainAddress(a: string): string {
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

/**
 * IPv6 text as Go's `net.IP.String()` prints it (RFC 5952: lowercase, longest run of two or more
 * zero groups as `::`, leftmost on ties). IPv4-mapped addresses print as dotted IPv4, like Go.
 */
export function formatIPv6Go(b: Uint8Array, off: number): string {
  if (isIPv4Mapped(b, off)) return formatIPv4(b, off + 12);
  return formatIPv6Groups(b, off);
}

/** IPv6 text as miekg/dns prints an AAAA record: like Go, but IPv4-mapped as `::ffff:a.b.c.d`. */
export function formatIPv6(b: Uint8Array, off: number): string {
  if (isIPv4Mapped(b, off)) return '::ffff:' + formatIPv4(b, off + 12);
  return formatIPv6Groups(b, off);
}

/**
 * IPv6 text in hex groups only (lowercase, longest run of two or more zero groups as `::`,
 * leftmost on ties), IPv4-mapped addresses included (`::ffff:7f00:1`).
 */
export function formatIPv6Groups(b: Uint8Array, off: number): string {
  let bestStart = -1;
  let bestLen = 0;
  let curStart = -1;
  for (let g = 0; g < 8; g++) {
    if (b[off + 2 * g] === 0 && b[off + 2 * g + 1] === 0) {
      if (curStart < 0) curStart = g;
      const len = g - curStart + 1;
      if (len > bestLen) {
        bestLen = len;
        bestStart = curStart;
      }
    } else curStart = -1;
  }
  if (bestLen < 2) bestStart = -1;
  let s = '';
  for (let g = 0; g < 8; g++) {
    if (g === bestStart) {
      s += '::';
      g += bestLen - 1;
      continue;
    }
    if (s.length > 0 && s.charCodeAt(s.length - 1) !== 58) s += ':';
    s += ((b[off + 2 * g] << 8) | b[off + 2 * g + 1]).toString(16);
  }
  return s;
}

/** An IP network: its address with the host bits cleared (4 or 16 bytes) and the prefix length. */
export interface Cidr {
  readonly bytes: Uint8Array;
  readonly bits: number;
}

/**
 * Go's net.ParseCIDR: an address as parseIP takes it (no zone), `/`, a decimal prefix length of
 * at most 32 (IPv4 text) or 128 (IPv6 text). Undefined when `s` is not of that form.
 */
export function parseCidr(s: string): Cidr | undefined {
  const slash = s.indexOf('/');
  if (slash < 0) return undefined;
  const ip = parseIP(s.slice(0, slash));
  if (ip === undefined || slash + 1 === s.length) return undefined;
  const max = ip.length * 8;
  let bits = 0;
  for (let i = slash + 1; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return undefined;
    bits = bits * 10 + (c - 48);
    if (bits > max) return undefined;
  }
  for (let i = 0; i < ip.length; i++) {
    const left = bits - 8 * i;
    if (left < 8) ip[i] &= left <= 0 ? 0 : (0xff << (8 - left)) & 0xff;
  }
  return { bytes: ip, bits };
}

/**
 * `ip` (4 or 16 bytes) lies in `c`. An IPv4-mapped IPv6 address counts as its IPv4 address for an
 * IPv4 network (Go's To4); a 4-byte address is never inside an IPv6 network.
 */
export function cidrContains(c: Cidr, ip: Uint8Array): boolean {
  let b: Uint8Array | undefined = ip;
  if (c.bytes.length === 4) {
    b = ipv4Of(ip);
    if (b === undefined) return false;
  } else if (ip.length !== 16) {
    return false;
  }
  let bits = c.bits;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((b[i] & mask) !== (c.bytes[i] & mask)) return false;
  }
  return true;
}

/** Go's net.IPNet.String() for a network parsed by ParseCIDR: an IPv4-mapped network prints as IPv4, with the mask's last 32 bits. */
export function formatIPNetGo(c: Cidr): string {
  if (c.bytes.length === 4) return formatIPv4(c.bytes, 0) + '/' + c.bits;
  if (isIPv4Mapped(c.bytes, 0)) return formatIPv4(c.bytes, 12) + '/' + Math.max(0, c.bits - 96);
  return formatIPv6Go(c.bytes, 0) + '/' + c.bits;
}
