// Textual IP address helpers (no regexes, no allocation beyond the result).

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

export function formatIPv4(b: Uint8Array, off: number): string {
  return b[off] + '.' + b[off + 1] + '.' + b[off + 2] + '.' + b[off + 3];
}

function isV4Mapped(b: Uint8Array, off: number): boolean {
  for (let i = 0; i < 10; i++) if (b[off + i] !== 0) return false;
  return b[off + 10] === 0xff && b[off + 11] === 0xff;
}

/**
 * IPv6 text as Go's `net.IP.String()` prints it (RFC 5952: lowercase, longest run of two or more
 * zero groups as `::`, leftmost on ties). IPv4-mapped addresses print as dotted IPv4, like Go.
 */
export function formatIPv6Go(b: Uint8Array, off: number): string {
  if (isV4Mapped(b, off)) return formatIPv4(b, off + 12);
  return formatIPv6Groups(b, off);
}

/** IPv6 text as miekg/dns prints an AAAA record: like Go, but IPv4-mapped as `::ffff:a.b.c.d`. */
export function formatIPv6(b: Uint8Array, off: number): string {
  if (isV4Mapped(b, off)) return '::ffff:' + formatIPv4(b, off + 12);
  return formatIPv6Groups(b, off);
}

function formatIPv6Groups(b: Uint8Array, off: number): string {
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
