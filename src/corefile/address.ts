// Server block keys and zone arguments, with the behaviour of CoreDNS's
// core/dnsserver/register.go (InspectServerBlocks), plugin/normalize.go,
// plugin/pkg/parse/transport.go and plugin/pkg/cidr/cidr.go. Name syntax (miekg/dns's
// IsDomainName, Fqdn) is wire/name.ts's.

import { CorefileError } from './errors.ts';
import { fqdn, isDomainName } from '../wire/name.ts';
import { parseCidr, type Cidr } from '../wire/ip.ts';

/** A normalised server block key. */
export interface ZoneAddr {
  /** 'dns', 'tls', 'quic', 'grpc', 'https', 'https3' (or 'unix'). */
  transport: string;
  /** Lower-case, fully qualified zone. */
  zone: string;
  /** Port as a decimal string ('' only for unix://). */
  port: string;
  /** Bind address, only used when reporting overlaps (`... on ADDR`). */
  address?: string;
}

/** Canonical `TRANSPORT://ZONE:PORT` (plus ` on ADDRESS` when set), e.g. `dns://example.org.:53`. */
export function zoneAddrString(z: ZoneAddr): string {
  let s = `${z.transport}://${z.zone}:${z.port}`;
  if (z.address !== undefined && z.address !== '') s += ` on ${z.address}`;
  return s;
}

export const Transport = {
  DNS: 'dns',
  TLS: 'tls',
  QUIC: 'quic',
  GRPC: 'grpc',
  HTTPS: 'https',
  HTTPS3: 'https3',
  UNIX: 'unix',
} as const;

export const DefaultPorts = {
  DNS: '53',
  TLS: '853',
  QUIC: '853',
  GRPC: '443',
  HTTPS: '443',
} as const;

/** Strips a known scheme prefix (case-sensitive); no prefix means plain DNS. */
export function splitTransport(s: string): { transport: string; addr: string } {
  for (const t of ['tls', 'dns', 'quic', 'grpc', 'https3', 'https', 'unix']) {
    const p = t + '://';
    if (s.startsWith(p)) return { transport: t, addr: s.slice(p.length) };
  }
  return { transport: Transport.DNS, addr: s };
}

const utf8 = new TextEncoder();

const ASCII_ONLY = /^[\x00-\x7f]*$/;

/**
 * Go's strings.ToLower (simple per-rune mapping). Unicode, not the ASCII fold of DNS names
 * (wire/name.ts asciiLower), on purpose: CoreDNS normalises Corefile zones and keys with
 * plugin.Name.Normalize / plugin.Host.NormalizeExact, which call strings.ToLower, so a zone
 * written with non-ASCII capitals (`ÄX.org`) is lower-cased there too. On ASCII text the two
 * agree, and the engine's own toLowerCase (the ASCII fold there) is what runs.
 */
export function goLower(s: string): string {
  // This runs at start-up for every zone and hosts name, before any of it is compiled: a built-in, not two
  // interpreted loops per name.
  if (ASCII_ONLY.test(s)) return s.toLowerCase();
  let out = '';
  for (const ch of s) {
    if (ch === '\u0130') {
      out += 'i';
      continue;
    }
    const l = ch.toLowerCase();
    out += Array.from(l).length === 1 ? l : ch;
  }
  return out;
}

/**
 * Code points (hex, `a-b` for a range) that Unicode 15.1 to 17.0 assigned as letters, marks, numbers,
 * punctuation or symbols. Node 24's regexps know them; Go's unicode tables (15.0.0, still in Go 1.26)
 * do not, so strconv.Quote escapes them. Found by quoting every code point with both.
 */
const NEWER_THAN_GO_UNICODE = [
  '88f 897 c5c cdc 1acf-1add 1ae0-1aeb 1b4e-1b4f 1b7f 1c89-1c8a 20c1 2427-2429 2b96 2ffc-2fff 31e4-31e5',
  '31ef a7cb-a7cf a7d2 a7d4 a7da-a7dc a7f1 fbc3-fbd2 fd90-fd91 fdc8-fdce 105c0-105f3 10940-10959',
  '10d40-10d65 10d69-10d85 10d8e-10d8f 10ec2-10ec7 10ed0-10ed8 10efa-10efc 11380-11389 1138b 1138e',
  '11390-113b5 113b7-113c0 113c2 113c5 113c7-113ca 113cc-113d5 113d7-113d8 113e1-113e2 116d0-116e3',
  '11b60-11b67 11bc0-11be1 11bf0-11bf9 11db0-11ddb 11de0-11de9 11f5a 13460-143fa 16100-16139 16d40-16d79',
  '16ea0-16eb8 16ebb-16ed3 16ff2-16ff6 187f8-187ff 18cff 18d09-18d1e 18d80-18df2 1cc00-1ccfc 1cd00-1ceb3',
  '1ceba-1ced0 1cee0-1cef0 1e5d0-1e5fa 1e5ff 1e6c0-1e6de 1e6e0-1e6f5 1e6fe-1e6ff 1f6d8 1f777-1f77a',
  '1f8b2-1f8bb 1f8c0-1f8c1 1f8d0-1f8d8 1fa54-1fa57 1fa89-1fa8a 1fa8e-1fa8f 1fabe 1fac6 1fac8 1facd 1fadc',
  '1fadf 1fae9-1faea 1faef 1fbcb-1fbef 1fbfa 2b73a-2b73f 2cea2-2cead 2ebf0-2ee5d 323b0-33479',
].join(' ');

/** Sorted [first, last] pairs of NEWER_THAN_GO_UNICODE. */
const newerRanges: Array<[number, number]> = NEWER_THAN_GO_UNICODE.split(' ').map((r) => {
  const [a, b = a] = r.split('-');
  return [parseInt(a!, 16), parseInt(b, 16)];
});

function newerThanGoUnicode(cp: number): boolean {
  let lo = 0;
  let hi = newerRanges.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [a, b] = newerRanges[mid]!;
    if (cp < a) hi = mid - 1;
    else if (cp > b) lo = mid + 1;
    else return true;
  }
  return false;
}

/** Go's strconv.IsPrint for a non-ASCII code point: a letter, mark, number, punctuation or symbol of Unicode 15.0. */
function goIsPrint(ch: string, cp: number): boolean {
  return /[\p{L}\p{M}\p{N}\p{P}\p{S}]/u.test(ch) && !newerThanGoUnicode(cp);
}

/**
 * Go's strconv.Quote: the escapes Go uses, printable characters as they are, everything else as
 * \xNN, \uNNNN or \UNNNNNNNN. (Invalid UTF-8, which Go prints byte by byte, cannot reach a JS string.)
 */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    switch (ch) {
      case '"':
        out += '\\"';
        continue;
      case '\\':
        out += '\\\\';
        continue;
      case '\x07':
        out += '\\a';
        continue;
      case '\b':
        out += '\\b';
        continue;
      case '\f':
        out += '\\f';
        continue;
      case '\n':
        out += '\\n';
        continue;
      case '\r':
        out += '\\r';
        continue;
      case '\t':
        out += '\\t';
        continue;
      case '\v':
        out += '\\v';
        continue;
    }
    if (cp < 0x20 || cp === 0x7f) out += '\\x' + cp.toString(16).padStart(2, '0');
    else if (cp < 0x80 || goIsPrint(ch, cp)) out += ch;
    else if (cp < 0x10000) out += '\\u' + cp.toString(16).padStart(4, '0');
    else out += '\\U' + cp.toString(16).padStart(8, '0');
  }
  return out + '"';
}

const INT64_MAX = (1n << 63n) - 1n;
const INT64_MIN = -(1n << 63n);

/** Go's strconv.Atoi (64-bit): decimal with optional sign. */
function goAtoi(s: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const v = BigInt(s);
  if (v > INT64_MAX || v < INT64_MIN) return undefined;
  return v;
}

function byteLength(s: string): number {
  return utf8.encode(s).length;
}

/** The reverse zone for a network whose prefix falls on a label boundary (8 bits IPv4, 4 bits IPv6). */
function reverseZone(c: Cidr): string {
  let out = '';
  if (c.bytes.length === 4) {
    for (let k = c.bits / 8 - 1; k >= 0; k--) out += c.bytes[k] + '.';
    return out + 'in-addr.arpa.';
  }
  for (let k = c.bits / 4 - 1; k >= 0; k--) out += ((c.bytes[k >> 1] >> (k & 1 ? 0 : 4)) & 0xf).toString(16) + '.';
  return out + 'ip6.arpa.';
}

/**
 * cidr.Split + cidr.Reverse: the reverse zones covering a network, splitting it at the
 * next label boundary (8 bits for IPv4, 4 for IPv6) when needed.
 */
function cidrReverseZones(c: Cidr): string[] {
  const boundary = c.bytes.length === 4 ? 8 : 4;
  if (c.bits % boundary === 0) return [reverseZone(c)];
  const newBits = Math.ceil(c.bits / boundary) * boundary;
  // The subnets differ only in bits [c.bits, newBits), which lie in one byte.
  const at = (newBits - 1) >> 3;
  const shift = 7 - ((newBits - 1) & 7);
  const out: string[] = [];
  for (let i = 0; i < 1 << (newBits - c.bits); i++) {
    const bytes = c.bytes.slice();
    bytes[at] |= i << shift;
    out.push(reverseZone({ bytes, bits: newBits }));
  }
  return out;
}

/**
 * CoreDNS plugin.SplitHostPort: takes a trailing `:PORT` (if numeric), validates the
 * name, and expands a CIDR into reverse zones. Throws CorefileError with CoreDNS's bare
 * message (no prefix).
 */
export function splitHostPort(s: string): { hosts: string[]; port: string } {
  let port = '';
  const colon = s.lastIndexOf(':');
  if (colon === s.length - 1) {
    // (also true for the empty string: LastIndex is -1)
    throw new CorefileError(`expecting data after last colon: ${goQuote(s)}`);
  }
  if (colon !== -1) {
    const p = goAtoi(s.slice(colon + 1));
    if (p !== undefined) {
      port = p.toString();
      s = s.slice(0, colon);
    }
  }
  const len = byteLength(s);
  if (len > 255) throw new CorefileError(`specified zone is too long: ${len} > 255`);
  if (!isDomainName(s)) throw new CorefileError(`zone is not a valid domain name: ${s}`);
  const c = parseCidr(s);
  if (c === undefined) return { hosts: [s], port };
  if (s[0] === ':' || (s[0] === '0' && s.includes(':'))) throw new CorefileError(`invalid CIDR ${s}`);
  return { hosts: cidrReverseZones(c), port };
}

/** plugin.Name(s).Normalize(): lower-case (Go's strings.ToLower, see goLower) and fully qualified. */
export function normalizeName(s: string): string {
  return goLower(fqdn(s));
}

/**
 * Parses one server block key as CoreDNS's InspectServerBlocks does. A CIDR key yields
 * several ZoneAddrs. Throws CorefileError `error inspecting server blocks: ...`.
 */
export function parseKey(key: string, defaultPort: string): ZoneAddr[] {
  const { transport, addr } = splitTransport(key);
  let hosts: string[];
  let port: string;
  try {
    ({ hosts, port } = splitHostPort(addr));
    for (const h of hosts) splitHostPort(fqdn(h));
  } catch (e) {
    if (e instanceof CorefileError) throw new CorefileError(`error inspecting server blocks: ${e.message}`);
    throw e;
  }
  if (port === '') {
    switch (transport) {
      case Transport.DNS:
        port = defaultPort;
        break;
      case Transport.TLS:
        port = DefaultPorts.TLS;
        break;
      case Transport.QUIC:
        port = DefaultPorts.QUIC;
        break;
      case Transport.GRPC:
        port = DefaultPorts.GRPC;
        break;
      case Transport.HTTPS:
      case Transport.HTTPS3:
        port = DefaultPorts.HTTPS;
        break;
    }
  }
  return hosts.map((h) => ({ transport, zone: normalizeName(h), port }));
}

/**
 * plugin.Host(s).NormalizeExact(): strip the scheme and port, expand a CIDR, lower-case
 * and qualify. Returns [] when `s` is not valid.
 */
export function normalizeHostExact(s: string): string[] {
  const { addr } = splitTransport(s);
  try {
    return splitHostPort(addr).hosts.map(normalizeName);
  } catch (e) {
    if (e instanceof CorefileError) return [];
    throw e;
  }
}

/**
 * Zones given as plugin arguments (plugin.OriginsFromArgsOrServerBlock with arguments):
 * each normalised with normalizeHostExact, invalid ones silently dropped.
 */
export function normalizeZones(args: readonly string[]): string[] {
  const out: string[] = [];
  for (const a of args) for (const z of normalizeHostExact(a)) out.push(z);
  return out;
}

/**
 * plugin.OriginsFromArgsOrServerBlock: the normalised arguments, or when there are none
 * the server block keys (e.g. `dns://example.org.:53`) reduced to their zone.
 */
export function originsFromArgsOrServerBlock(args: readonly string[], serverBlockKeys: readonly string[]): string[] {
  if (args.length === 0) {
    return serverBlockKeys.map((k) => {
      const sx = normalizeHostExact(k);
      return sx.length === 0 ? k : sx[0];
    });
  }
  return normalizeZones(args);
}
