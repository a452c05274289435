// TSIG for the conformance harness (RFC 8945), written independently of nodens's own code: signing a
// query line's message (`+tsig=ALG:NAME:SECRET[:SKEW]`) and checking the MAC of a signed reply, so the
// MAC and the time (which differ on every run) can be shown as facts ("valid", "<now>") and compared.
import { createHmac } from 'node:crypto';

export interface TsigSpec {
  /** Algorithm name as sent (e.g. hmac-sha256.). */
  algorithm: string;
  /** Key name as sent. */
  name: string;
  /** Base64 secret the client signs with. */
  secret: string;
  /** Seconds added to the client's clock (to provoke BADTIME). */
  skew: number;
}

/** The exchange's facts needed to check the reply. */
export interface TsigContext {
  spec: TsigSpec;
  /** The query's MAC. */
  mac: Buffer;
  /** The query's time signed. */
  time: number;
}

const ALGS: Record<string, string> = {
  'hmac-md5.sig-alg.reg.int.': 'md5', 'hmac-sha1.': 'sha1', 'hmac-sha224.': 'sha224', 'hmac-sha256.': 'sha256',
  'hmac-sha384.': 'sha384', 'hmac-sha512.': 'sha512',
};

function fq(n: string): string {
  return n.endsWith('.') ? n : `${n}.`;
}

/** `hmac-sha256:key.:c2VjcmV0[:SKEW]`; `hmac-md5` stands for hmac-md5.sig-alg.reg.int. as dig spells it. */
export function parseTsigFlag(v: string): TsigSpec {
  const [alg, name, secret, skew] = v.split(':');
  if (!alg || !name || !secret) throw new Error(`+tsig=ALG:NAME:SECRET[:SKEW], got ${v}`);
  const a = alg.toLowerCase() === 'hmac-md5' ? 'hmac-md5.sig-alg.reg.int.' : fq(alg);
  return { algorithm: a, name: fq(name), secret, skew: Number(skew ?? '0') };
}

function nameWire(n: string): Buffer {
  const parts: Buffer[] = [];
  for (const l of n.split('.').filter((x) => x !== '')) parts.push(Buffer.from([l.length]), Buffer.from(l, 'latin1'));
  parts.push(Buffer.from([0]));
  return Buffer.concat(parts);
}

function u48(v: number): Buffer {
  const b = Buffer.alloc(6);
  b.writeUIntBE(v, 0, 6);
  return b;
}

function u16(v: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(v, 0);
  return b;
}

function hmac(alg: string, secret: string, data: Buffer): Buffer {
  const h = ALGS[alg.toLowerCase()];
  if (!h) throw new Error(`unsupported TSIG algorithm ${alg}`);
  return createHmac(h, Buffer.from(secret, 'base64')).update(data).digest();
}

/** TSIG variables (RFC 8945 4.3.3): owner and algorithm lower-cased, class ANY, TTL 0. */
function variables(owner: string, alg: string, time: number, fudge: number, error: number, other: Buffer): Buffer {
  return Buffer.concat([nameWire(owner.toLowerCase()), u16(255), Buffer.alloc(4), nameWire(alg.toLowerCase()), u48(time), u16(fudge),
    u16(error), u16(other.length), other]);
}

/** Append a TSIG record signed with `spec` to `msg` (fudge 300). */
export function signQuery(msg: Buffer, spec: TsigSpec): { wire: Buffer; ctx: TsigContext } {
  const time = Math.floor(Date.now() / 1000) + spec.skew;
  const id = msg.readUInt16BE(0);
  const mac = hmac(spec.algorithm, spec.secret, Buffer.concat([msg, variables(spec.name, spec.algorithm, time, 300, 0, Buffer.alloc(0))]));
  const rdata = Buffer.concat([nameWire(spec.algorithm), u48(time), u16(300), u16(mac.length), mac, u16(id), u16(0), u16(0)]);
  const rr = Buffer.concat([nameWire(spec.name), u16(250), u16(255), Buffer.alloc(4), u16(rdata.length), rdata]);
  const wire = Buffer.concat([msg, rr]);
  wire.writeUInt16BE(wire.readUInt16BE(10) + 1, 10);
  return { wire, ctx: { spec, mac, time } };
}

function readName(b: Buffer, off: number): { name: string; end: number } {
  const labels: string[] = [];
  while (b[off] !== 0) {
    const len = b[off]!;
    if (len & 0xc0) throw new Error('compressed name in TSIG rdata');
    labels.push(b.subarray(off + 1, off + 1 + len).toString('latin1'));
    off += len + 1;
  }
  return { name: labels.length ? `${labels.join('.')}.` : '.', end: off + 1 };
}

/**
 * The reply's TSIG record (its last record: `owner`, `rdata`) rendered with what changes between runs
 * replaced by what it means: the time (`0`, `<query time>`, `<now>`), the MAC (`none`, `valid`, `INVALID`:
 * checked over the query MAC, the reply and the variables with the client's key), the server time in
 * other data (`<now>`).
 */
export function renderTsig(reply: Buffer, owner: string, ttl: number, rdata: Buffer, sentId: number, ctx: TsigContext | undefined): string {
  const alg = readName(rdata, 0);
  let p = alg.end;
  const time = rdata.readUIntBE(p, 6);
  const fudge = rdata.readUInt16BE(p + 6);
  const macLen = rdata.readUInt16BE(p + 8);
  const mac = rdata.subarray(p + 10, p + 10 + macLen);
  p += 10 + macLen;
  const origId = rdata.readUInt16BE(p);
  const error = rdata.readUInt16BE(p + 2);
  const other = rdata.subarray(p + 6, p + 6 + rdata.readUInt16BE(p + 4));
  const now = Math.floor(Date.now() / 1000);
  const near = (t: number) => Math.abs(t - now) <= 10;
  // Near now first: a reply signed a second after the query must not look different.
  const timeText = time === 0 ? '0' : near(time) ? '<now>' : ctx && time === ctx.time ? '<query time>' : String(time);
  let macText = 'none';
  if (macLen > 0) {
    if (!ctx) macText = `${macLen} bytes (unchecked: unsigned query)`;
    else {
      const ownerWire = nameWire(owner);
      const rrLen = ownerWire.length + 10 + rdata.length;
      const start = reply.length - rrLen;
      if (!reply.subarray(start, start + ownerWire.length).equals(ownerWire)) macText = 'INVALID (TSIG owner not uncompressed)';
      else {
        const msg = Buffer.from(reply.subarray(0, start));
        msg.writeUInt16BE(origId, 0);
        msg.writeUInt16BE(msg.readUInt16BE(10) - 1, 10);
        const vars = Buffer.concat([nameWire(owner.toLowerCase()), u16(255), Buffer.from([ttl >>> 24, (ttl >> 16) & 0xff, (ttl >> 8) & 0xff, ttl & 0xff]),
          nameWire(alg.name.toLowerCase()), u48(time), u16(fudge), u16(error), u16(other.length), other]);
        const want = hmac(alg.name, ctx.spec.secret, Buffer.concat([u16(ctx.mac.length), ctx.mac, msg, vars]));
        macText = want.equals(mac) ? `valid (${macLen} bytes)` : `INVALID (${macLen} bytes)`;
      }
    }
  }
  const otherText = other.length === 0 ? '-' : other.length === 6 && near(other.readUIntBE(0, 6)) ? '<now>' : other.toString('hex');
  const errText = ['NOERROR', 'BADSIG', 'BADKEY', 'BADTIME', 'BADMODE', 'BADNAME', 'BADALG', 'BADTRUNC'][error === 0 ? 0 : error - 15] ?? String(error);
  return `${alg.name} time=${timeText} fudge=${fudge} mac=${macText} origid=${origId === sentId ? 'ok' : origId} error=${errText} other=${otherText}`;
}
