// PROXY protocol headers for tests, built by hand from haproxy's proxy-protocol.txt (not by the code under test).

import { parseIP } from '../../wire/ip.ts';

export function v1Header(proto: string, src: string, dst: string, sport: number, dport: number): Buffer {
  return Buffer.from(`PROXY ${proto} ${src} ${dst} ${sport} ${dport}\r\n`, 'latin1');
}

export interface V2Spec {
  command: 'local' | 'proxy';
  proto: 'tcp' | 'udp' | 'unspec';
  src: { ip: string; port: number };
  dst: { ip: string; port: number };
  tlvs?: Buffer;
}

const SIG = [0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a];

export function v2Header(h: V2Spec): Buffer {
  const src = parseIP(h.src.ip)!;
  const dst = parseIP(h.dst.ip)!;
  const v6 = src.length === 16;
  const tlvs = h.tlvs ?? Buffer.alloc(0);
  const fam = h.proto === 'unspec' ? 0x00 : (v6 ? 0x20 : 0x10) | (h.proto === 'tcp' ? 1 : 2);
  const addrLen = h.proto === 'unspec' ? 0 : v6 ? 36 : 12;
  const b = Buffer.alloc(16 + addrLen + tlvs.length);
  Buffer.from(SIG).copy(b, 0);
  b[12] = h.command === 'local' ? 0x20 : 0x21;
  b[13] = fam;
  b.writeUInt16BE(addrLen + tlvs.length, 14);
  if (addrLen > 0) {
    const n = v6 ? 16 : 4;
    b.set(src, 16);
    b.set(dst, 16 + n);
    b.writeUInt16BE(h.src.port, 16 + 2 * n);
    b.writeUInt16BE(h.dst.port, 18 + 2 * n);
  }
  tlvs.copy(b, 16 + addrLen);
  return b;
}
