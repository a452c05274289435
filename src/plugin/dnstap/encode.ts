// The dnstap protobuf (dnstap.proto's Dnstap and Message), encoded by hand with
// exactly the fields CoreDNS sets, and the Frame Streams framing around it.
//
// Fields are written in field-number order, as Go's protobuf does. Addresses
// follow CoreDNS's msg package: IPv4 (and IPv4-mapped IPv6) as 4 bytes with
// family INET, anything else as 16 bytes with family INET6; the family is that
// of the last address set (the response address when both are present).

import type { TapMessage } from '../pkg/dnstap.ts';
import { ipv4Of, parseIP, plainAddress } from '../../wire/ip.ts';

/** dnstap.proto SocketFamily / SocketProtocol. */
const FAMILY_INET = 1;
const FAMILY_INET6 = 2;
const PROTO_UDP = 1;
const PROTO_TCP = 2;
/** Dnstap.Type MESSAGE. */
const DNSTAP_MESSAGE = 1;

/** The fields of the Dnstap envelope fixed at setup (identity, version) or per message (extra). */
export interface Envelope {
  identity: Uint8Array;
  version: Uint8Array;
}

/** A growable scratch buffer: one per output, reused for every frame; a frame is copied out once. */
export class FrameEncoder {
  private buf: Buffer = Buffer.allocUnsafe(1024);
  private pos = 0;

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const b = Buffer.allocUnsafe(size);
    this.buf.copy(b, 0, 0, this.pos);
    this.buf = b;
  }

  private varint(v: number): void {
    this.ensure(10);
    const b = this.buf;
    // Values up to 2^53: the low 7 bits by arithmetic (a uint64 seconds count does not fit in 32 bits).
    while (v >= 0x80) {
      b[this.pos++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    b[this.pos++] = v;
  }

  private tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  private bytes(field: number, v: Uint8Array): void {
    this.tag(field, 2);
    this.varint(v.length);
    this.ensure(v.length);
    this.buf.set(v, this.pos);
    this.pos += v.length;
  }

  private fixed32(field: number, v: number): void {
    this.tag(field, 5);
    this.ensure(4);
    this.buf.writeUInt32LE(v >>> 0, this.pos);
    this.pos += 4;
  }

  private uvarint(field: number, v: number): void {
    this.tag(field, 0);
    this.varint(v);
  }

  /** Where a length-delimited body starts; its varint length is inserted by endLength. */
  private beginLength(): number {
    return this.pos;
  }

  /** Inserts the varint length of what was written since `start`, shifting it. */
  private endLength(start: number): void {
    const len = this.pos - start;
    let n = 1;
    for (let v = len; v >= 0x80; v = Math.floor(v / 0x80)) n++;
    this.ensure(n);
    this.buf.copy(this.buf, start + n, start, this.pos);
    let p = start;
    let v = len;
    while (v >= 0x80) {
      this.buf[p++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[p] = v;
    this.pos += n;
  }

  private time(secField: number, nsecField: number, ms: number): void {
    const sec = Math.floor(ms / 1000);
    let nsec = Math.round((ms - sec * 1000) * 1e6);
    if (nsec > 999_999_999) nsec = 999_999_999;
    this.uvarint(secField, sec);
    this.fixed32(nsecField, nsec);
  }

  /** An address field; returns the socket family it implies (0 when the text is no address). */
  private address(field: number, text: string): number {
    const ip = parseIP(plainAddress(text));
    if (ip === undefined) return 0;
    const v4 = ipv4Of(ip);
    if (v4 !== undefined) {
      this.bytes(field, v4);
      return FAMILY_INET;
    }
    this.bytes(field, ip);
    return FAMILY_INET6;
  }

  /** The Dnstap protobuf of `m` (no framing). */
  encode(env: Envelope, extra: Uint8Array | undefined, m: TapMessage): Buffer {
    this.pos = 0;
    this.write(env, extra, m);
    return Buffer.from(this.buf.subarray(0, this.pos));
  }

  /** A Frame Streams data frame (big-endian length, then the Dnstap protobuf) of `m`. */
  frame(env: Envelope, extra: Uint8Array | undefined, m: TapMessage): Buffer {
    this.pos = 4;
    this.write(env, extra, m);
    this.buf.writeUInt32BE(this.pos - 4, 0);
    return Buffer.from(this.buf.subarray(0, this.pos));
  }

  private write(env: Envelope, extra: Uint8Array | undefined, m: TapMessage): void {
    this.bytes(1, env.identity);
    this.bytes(2, env.version);
    if (extra !== undefined) this.bytes(3, extra);
    // Message (field 14): its body is written in place, then its length is inserted before it.
    this.tag(14, 2);
    const start = this.beginLength();
    this.writeMessage(m);
    this.endLength(start);
    this.uvarint(15, DNSTAP_MESSAGE);
  }

  private writeMessage(m: TapMessage): void {
    this.uvarint(1, m.type);
    // socket_family (2) and socket_protocol (3) come before the addresses in field order, but the family
    // depends on them: reserve both as one-byte varints (their values are 1 or 2) and fill them in after.
    const famAt = this.pos;
    this.ensure(4);
    this.pos += 4;
    let family = 0;
    if (m.queryAddress !== undefined) {
      const f = this.address(4, m.queryAddress);
      if (f !== 0) family = f;
    }
    if (m.responseAddress !== undefined) {
      const f = this.address(5, m.responseAddress);
      if (f !== 0) family = f;
    }
    const b = this.buf;
    if (family !== 0) {
      b[famAt] = (2 << 3) | 0;
      b[famAt + 1] = family;
      b[famAt + 2] = (3 << 3) | 0;
      b[famAt + 3] = m.proto === 'tcp' ? PROTO_TCP : PROTO_UDP;
    } else {
      // No address: neither family nor protocol is set (CoreDNS sets both only with an address).
      b.copy(b, famAt, famAt + 4, this.pos);
      this.pos -= 4;
    }
    if (m.queryAddress !== undefined && m.queryPort !== undefined) this.uvarint(6, m.queryPort);
    if (m.responseAddress !== undefined && m.responsePort !== undefined) this.uvarint(7, m.responsePort);
    this.time(8, 9, m.queryTime);
    if (m.queryMessage !== undefined) this.bytes(10, m.queryMessage);
    if (m.responseTime !== undefined) this.time(12, 13, m.responseTime);
    if (m.responseMessage !== undefined) this.bytes(14, m.responseMessage);
  }
}

// Frame Streams control frames (https://farsightsec.github.io/fstrm/): an escape (a zero length), the
// control frame's length, its type, then fields; the only field is CONTENT_TYPE.
export const CONTROL_ACCEPT = 0x01;
export const CONTROL_START = 0x02;
export const CONTROL_STOP = 0x03;
export const CONTROL_READY = 0x04;
export const CONTROL_FINISH = 0x05;
const FIELD_CONTENT_TYPE = 0x01;
export const CONTENT_TYPE = Buffer.from('protobuf:dnstap.Dnstap');

/** A control frame with the dnstap content type (READY, START) or without a field (STOP). */
export function controlFrame(type: number, withContentType: boolean): Buffer {
  const body = withContentType ? 4 + 4 + 4 + CONTENT_TYPE.length : 4;
  const b = Buffer.alloc(8 + body);
  b.writeUInt32BE(0, 0);
  b.writeUInt32BE(body, 4);
  b.writeUInt32BE(type, 8);
  if (withContentType) {
    b.writeUInt32BE(FIELD_CONTENT_TYPE, 12);
    b.writeUInt32BE(CONTENT_TYPE.length, 16);
    CONTENT_TYPE.copy(b, 20);
  }
  return b;
}

/** A decoded control frame: its type and content types. */
export interface Control {
  type: number;
  contentTypes: Buffer[];
}

/**
 * Reads one control frame from the front of `buf`: undefined while incomplete; throws on a data frame
 * or a malformed control frame. Returns the frame and the bytes it used.
 */
export function readControl(buf: Buffer): { control: Control; used: number } | undefined {
  if (buf.length < 8) return undefined;
  if (buf.readUInt32BE(0) !== 0) throw new Error('framestream: control frame expected');
  const len = buf.readUInt32BE(4);
  if (len < 4 || len > 512) throw new Error('framestream: control frame too big');
  if (buf.length < 8 + len) return undefined;
  const type = buf.readUInt32BE(8);
  const contentTypes: Buffer[] = [];
  let p = 12;
  const end = 8 + len;
  while (p + 8 <= end) {
    const f = buf.readUInt32BE(p);
    const flen = buf.readUInt32BE(p + 4);
    if (p + 8 + flen > end) throw new Error('framestream: control frame decode failure');
    if (f === FIELD_CONTENT_TYPE) contentTypes.push(buf.subarray(p + 8, p + 8 + flen));
    p += 8 + flen;
  }
  return { control: { type, contentTypes }, used: end };
}
