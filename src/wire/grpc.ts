// DNS over gRPC on the wire (CoreDNS's pb/dns.proto): service `coredns.dns.DnsService`, unary rpc `Query`,
// `message DnsPacket { bytes msg = 1; }` both ways, each message after gRPC's 5-octet prefix (a flags octet,
// 0 for uncompressed, and the big-endian length). Shared by the grpc:// server and the grpc plugin.

/** The rpc's HTTP/2 path. */
export const GRPC_PATH = '/coredns.dns.DnsService/Query';
/** CoreDNS's maxProtobufPayloadBytes: dns.MaxMsgSize plus the field tag and a 3-octet length, both ways. */
export const MAX_PAYLOAD = 65535 + 4;

/**
 * pb.DnsPacket encoded by hand (one field, `bytes msg = 1`: a protobuf dependency would be far bigger than
 * these few lines): the tag 0x0a, the length as a varint, the message; after the 5-octet gRPC prefix.
 */
export function grpcFrame(msg: Uint8Array): Buffer {
  const n = msg.length;
  const varLen = n < 0x80 ? 1 : n < 0x4000 ? 2 : 3;
  const pbLen = 1 + varLen + n;
  const out = Buffer.allocUnsafe(5 + pbLen);
  out[0] = 0;
  out.writeUInt32BE(pbLen, 1);
  out[5] = 0x0a;
  let p = 6;
  let v = n;
  while (v >= 0x80) {
    out[p++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  out[p++] = v;
  out.set(msg, p);
  return out;
}

/**
 * The `msg` field of a serialised DnsPacket in b[start, end): proto3 rules (the last occurrence wins, unknown
 * fields are skipped, a missing field is empty); undefined when the bytes are not valid protobuf.
 */
export function decodeDnsPacket(b: Buffer, start: number, end: number): Buffer | undefined {
  let msg: Buffer = EMPTY;
  let p = start;
  while (p < end) {
    const tag = readVarint(b, p, end);
    if (tag === undefined) return undefined;
    p = tag.next;
    const field = Math.floor(tag.value / 8);
    const wire = tag.value % 8;
    if (field === 0) return undefined;
    switch (wire) {
      case 0: {
        const v = readVarint(b, p, end);
        if (v === undefined) return undefined;
        p = v.next;
        break;
      }
      case 1: p += 8; break;
      case 5: p += 4; break;
      case 2: {
        const l = readVarint(b, p, end);
        if (l === undefined || l.next + l.value > end) return undefined;
        if (field === 1) msg = b.subarray(l.next, l.next + l.value);
        p = l.next + l.value;
        break;
      }
      default: return undefined; // groups (3, 4) and the reserved wire types
    }
    if (p > end) return undefined;
  }
  return msg;
}

const EMPTY = Buffer.alloc(0);

/** A base-128 varint of at most 10 octets (values past 2^53 only need to be told apart from small ones). */
function readVarint(b: Buffer, p: number, end: number): { value: number; next: number } | undefined {
  let value = 0;
  let mul = 1;
  for (let i = 0; i < 10; i++) {
    if (p >= end) return undefined;
    const c = b[p++]!;
    value += (c & 0x7f) * mul;
    if ((c & 0x80) === 0) return { value, next: p };
    mul *= 128;
  }
  return undefined;
}

/** gRPC's grpc-message encoding: printable ASCII but `%` as is, every other octet of the UTF-8 as %XX. */
export function encodeGrpcMessage(s: string): string {
  let plain = true;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) { plain = false; break; }
  }
  if (plain) return s;
  let out = '';
  for (const byte of Buffer.from(s, 'utf8')) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : '%' + byte.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}


/** The inverse of encodeGrpcMessage (a malformed escape is kept as written, as grpc-go does). */
export function decodeGrpcMessage(s: string): string {
  if (!s.includes('%')) return s;
  const out: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x25 && i + 2 < s.length && /^[0-9A-Fa-f]{2}$/.test(s.slice(i + 1, i + 3))) {
      out.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      out.push(c & 0xff);
    }
  }
  return Buffer.from(out).toString('utf8');
}
