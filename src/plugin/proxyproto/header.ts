// PROXY protocol headers (haproxy's proxy-protocol.txt, v1 text and v2 binary), read as go-proxyproto v0.15.0
// (the library CoreDNS 1.15.0 uses) reads them: the same acceptance rules and the same error texts, because
// CoreDNS logs those texts for dropped UDP datagrams.

import { formatIPv4, formatIPv6Go, parseIPv4, parseIPv6 } from '../../wire/ip.ts';

/** v1 signature `PROXY`. */
const SIGV1 = [0x50, 0x52, 0x4f, 0x58, 0x59];
/** v2 signature. */
const SIGV2 = [0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a];
/** go-proxyproto's MaxV2HeaderSize. */
const MAX_V2_LENGTH = 4096;

export const Transport = {
  UNSPEC: 0x00, TCPv4: 0x11, UDPv4: 0x12, TCPv6: 0x21, UDPv6: 0x22, UnixStream: 0x31, UnixDatagram: 0x32,
} as const;
const SUPPORTED_TRANSPORTS = new Set<number>(Object.values(Transport));
const LOCAL = 0x20;
const PROXY = 0x21;

/** A parsed header. `source` is undefined for LOCAL (and v1 UNKNOWN), where the connection's own peer stands. */
export interface Header {
  version: 1 | 2;
  local: boolean;
  transport: number;
  /** The source as Go's net.Addr.String() host part prints it (an IP, or a Unix path). */
  sourceHost: string;
  sourcePort: number;
  /** The source is an IP (TCP or UDP address); false for a Unix address. */
  sourceIsIP: boolean;
  /** Bytes the header took. */
  length: number;
  /** The raw TLV vector (v2), empty when none. */
  tlvs: Uint8Array;
}

/** A header was there and is not valid: `message` is go-proxyproto's error text. */
export class HeaderError extends Error {}

/** Not enough bytes yet (streams only: a datagram is all there is). */
export const NEED_MORE = 'more' as const;

const E = {
  cantReadV1: "proxyproto: can't read version 1 header",
  v1TooLong: 'proxyproto: version 1 header must be 107 bytes or less',
  crlf: 'proxyproto: version 1 header is invalid, must end with \\r\\n',
  cmd: "proxyproto: can't read proxy protocol version and command",
  family: "proxyproto: can't read address family or protocol",
  length: "proxyproto: can't read length",
  unsupportedCmd: 'proxyproto: unsupported proxy protocol version and command',
  unsupportedFamily: 'proxyproto: unsupported address family and protocol',
  invalidLength: 'proxyproto: invalid length',
  invalidAddress: 'proxyproto: invalid address',
  invalidPort: 'proxyproto: invalid port number',
} as const;

function startsWith(b: Uint8Array, sig: readonly number[], n: number): boolean {
  for (let i = 0; i < n; i++) if (b[i] !== sig[i]) return false;
  return true;
}

/**
 * go-proxyproto's Read over `b`: undefined when no header starts it (ErrNoProxyProtocol), NEED_MORE when `stream`
 * and the bytes so far cannot decide, else the header; throws HeaderError. For a stream, `b` is what the
 * connection's first reads buffered: a v1 line must be complete in it (the library's slow-loris rule).
 */
export function readHeader(b: Uint8Array, stream: boolean): Header | undefined | typeof NEED_MORE {
  if (b.length === 0) return stream ? NEED_MORE : undefined;
  if (b[0] !== SIGV1[0] && b[0] !== SIGV2[0]) return undefined;
  if (b.length < 5) return stream && startsWith(b, b[0] === SIGV1[0] ? SIGV1 : SIGV2, b.length) ? NEED_MORE : undefined;
  if (startsWith(b, SIGV1, 5)) return parseV1(b);
  if (b.length < 12) return stream && startsWith(b, SIGV2, b.length) ? NEED_MORE : undefined;
  if (!startsWith(b, SIGV2, 12)) return undefined;
  return parseV2(b, stream);
}

function parseV1(b: Uint8Array): Header {
  // The library reads byte by byte within what is buffered (at most its 256-byte buffer).
  const avail = Math.min(b.length, 256);
  let end = -1;
  for (let i = 0; i < avail; i++) {
    if (b[i] === 0x0a) { end = i; break; }
    if (i + 1 === 107) throw new HeaderError(E.v1TooLong);
  }
  if (end < 0) throw new HeaderError(E.cantReadV1);
  const lineLen = end + 1;
  if (lineLen < 2 || b[end - 1] !== 0x0d) throw new HeaderError(E.crlf);
  const tokens = Buffer.from(b.buffer, b.byteOffset, end - 1).toString('latin1').split(' ');
  if (tokens[0] !== 'PROXY') throw new HeaderError(E.cantReadV1);
  if (tokens.length < 2) throw new HeaderError(E.family);
  let transport: number;
  switch (tokens[1]) {
    case 'TCP4': transport = Transport.TCPv4; break;
    case 'TCP6': transport = Transport.TCPv6; break;
    case 'UNKNOWN': transport = Transport.UNSPEC; break;
    default: throw new HeaderError(E.family);
  }
  if (transport === Transport.UNSPEC) {
    return { version: 1, local: true, transport, sourceHost: '', sourcePort: 0, sourceIsIP: false, length: lineLen, tlvs: EMPTY };
  }
  if (tokens.length !== 6) throw new HeaderError(E.family);
  const src = v1Address(transport, tokens[2]!);
  v1Address(transport, tokens[3]!);
  const sport = v1Port(tokens[4]!);
  v1Port(tokens[5]!);
  return { version: 1, local: false, transport, sourceHost: src, sourcePort: sport, sourceIsIP: true, length: lineLen, tlvs: EMPTY };
}

const EMPTY = new Uint8Array(0);

/**
 * netip.ParseAddr for a v1 address: IPv4 text for TCP4; IPv6 text (an IPv4-mapped one included) for TCP6; no zone.
 * The texts of netip's own parse errors are not reproduced (only a logged UDP drop could show them, and a v1 header
 * is refused on UDP anyway).
 */
function v1Address(transport: number, s: string): string {
  const v4 = parseIPv4(s);
  if (v4 >= 0) {
    if (transport === Transport.TCPv4) return s;
    throw new HeaderError(E.invalidAddress);
  }
  const b6 = s.includes('%') ? undefined : parseIPv6(s);
  if (b6 === undefined) throw new HeaderError(`${E.invalidAddress}: ParseAddr(${JSON.stringify(s)}): unable to parse IP`);
  if (transport === Transport.TCPv6) return formatIPv6Go(b6, 0);
  throw new HeaderError(E.invalidAddress);
}

/** strconv.ParseUint(s, 10, 16) with no leading zero. */
function v1Port(s: string): number {
  if (s.length > 1 && s[0] === '0') throw new HeaderError(E.invalidPort);
  if (!/^[0-9]+$/.test(s)) throw new HeaderError(`${E.invalidPort}: strconv.ParseUint: parsing ${JSON.stringify(s)}: invalid syntax`);
  const n = Number(s);
  if (n > 65535) throw new HeaderError(`${E.invalidPort}: strconv.ParseUint: parsing ${JSON.stringify(s)}: value out of range`);
  return n;
}

function parseV2(b: Uint8Array, stream: boolean): Header | typeof NEED_MORE {
  const more = (err: string): typeof NEED_MORE => {
    if (stream) return NEED_MORE;
    throw new HeaderError(err);
  };
  if (b.length < 13) return more(`${E.cmd}: EOF`);
  const cmd = b[12]!;
  if (cmd !== LOCAL && cmd !== PROXY) throw new HeaderError(E.unsupportedCmd);
  if (b.length < 14) return more(`${E.family}: EOF`);
  let transport = b[13]!;
  if (!SUPPORTED_TRANSPORTS.has(transport)) throw new HeaderError(E.unsupportedFamily);
  const local = cmd === LOCAL;
  if (transport === Transport.UNSPEC && !local) throw new HeaderError(E.unsupportedFamily);
  if (b.length < 16) return more(`${E.length}: ${b.length === 14 ? 'EOF' : 'unexpected EOF'}`);
  const length = (b[14]! << 8) | b[15]!;
  const family = transport & 0xf0;
  const minimum = family === 0x10 ? 12 : family === 0x20 ? 36 : family === 0x30 ? 216 : 0;
  if (length < minimum) {
    if (!local) throw new HeaderError(E.invalidLength);
    if (length > MAX_V2_LENGTH) throw new HeaderError(E.invalidLength);
    if (b.length < 16 + length) return more(`${E.invalidLength}: EOF`);
    return { version: 2, local: true, transport: Transport.UNSPEC, sourceHost: '', sourcePort: 0, sourceIsIP: false, length: 16 + length, tlvs: EMPTY };
  }
  const h: Header = { version: 2, local, transport, sourceHost: '', sourcePort: 0, sourceIsIP: false, length: 16 + length, tlvs: EMPTY };
  if (length === 0) return h;
  if (length > MAX_V2_LENGTH) throw new HeaderError(E.invalidLength);
  const avail = b.length - 16;
  if (avail < length && stream) return NEED_MORE;
  // Datagram: what the payload holds of the declared length, as the library's LimitReader sees it.
  const body = Math.min(avail, length);
  let addrLen = 0;
  if (family === 0x10 || family === 0x20) {
    addrLen = family === 0x10 ? 12 : 36;
    if (body < addrLen) throw new HeaderError(`${E.invalidAddress}: ${body === 0 ? 'EOF' : 'unexpected EOF'}`);
    const ipLen = family === 0x10 ? 4 : 16;
    h.sourceHost = ipLen === 4 ? formatIPv4(b, 16) : formatIPv6Go(b, 16);
    h.sourcePort = (b[16 + 2 * ipLen]! << 8) | b[17 + 2 * ipLen]!;
    h.sourceIsIP = (transport & 0x0f) === 0x01 || (transport & 0x0f) === 0x02;
  } else if (family === 0x30) {
    addrLen = 216;
    if (body < addrLen) throw new HeaderError(`${E.invalidAddress}: ${body === 0 ? 'EOF' : 'unexpected EOF'}`);
    let n = 0;
    while (n < 108 && b[16 + n] !== 0) n++;
    h.sourceHost = Buffer.from(b.buffer, b.byteOffset + 16, n).toString('latin1');
  }
  const tlvLen = length - addrLen;
  if (tlvLen > 0) {
    const got = body - addrLen;
    if (got < tlvLen) {
      // io.ReadFull: nothing read is io.EOF (ignored, then the length check fails), a part is ErrUnexpectedEOF.
      if (got === 0) throw new HeaderError(E.invalidLength);
      throw new HeaderError('unexpected EOF');
    }
    h.tlvs = b.subarray(16 + addrLen, 16 + length);
  }
  return h;
}

/** Whether a header's transport is a datagram one (UDPv4, UDPv6, Unix datagram). */
export function isDatagram(transport: number): boolean {
  return (transport & 0x0f) === 0x02;
}
