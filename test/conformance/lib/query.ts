// A query line from a case's queries.txt, e.g. `Example.ORG. AAAA +tcp +edns=1232 +do`, and its wire form.
// Defaults follow dig: UDP, RD set, EDNS0 with a 1232-byte buffer, DO clear.
import { parseTsigFlag, type TsigSpec } from './tsig.ts';

export interface EdnsOption {
  code: number;
  data: Buffer;
}

export interface QuerySpec {
  line: string;
  name: string;
  type: number;
  typeName: string;
  qclass: number;
  tcp: boolean;
  /**
   * `+tls`: DNS over TLS to the side's {$NODENS_CONFORMANCE_TLS_PORT}; `+https` / `+https-get`: DNS over HTTPS
   * (HTTP/2, POST or GET) to its {$NODENS_CONFORMANCE_HTTPS_PORT}; undefined: plain DNS.
   */
  secure?: 'tls' | 'https' | 'https-get';
  /** Ask over IPv6 (from and to ::1) instead of 127.0.0.1. */
  v6: boolean;
  edns: boolean;
  ednsSize: number;
  ednsVersion: number;
  ednsFlags: number; // including DO (0x8000)
  options: EdnsOption[];
  flags: number; // header bits between QR and RCODE (opcode, aa, tc, rd, ra, z, ad, cd)
  /** `+tsig=ALG:NAME:SECRET[:SKEW]`: the query is TSIG-signed (RFC 8945) as it is sent. */
  tsig?: TsigSpec;
  /** `+prereq=RR` records for the answer section (RFC 2136's prerequisite section), in order. */
  answer: Buffer[];
  /** `+update=RR` records for the authority section (RFC 2136's update section), in order. */
  authority: Buffer[];
}

export const TYPES: Record<string, number> = {
  A: 1, NS: 2, CNAME: 5, SOA: 6, NULL: 10, PTR: 12, HINFO: 13, MX: 15, TXT: 16, AAAA: 28, LOC: 29,
  SRV: 33, NAPTR: 35, DNAME: 39, OPT: 41, DS: 43, SSHFP: 44, RRSIG: 46, NSEC: 47, DNSKEY: 48,
  NSEC3: 50, NSEC3PARAM: 51, TLSA: 52, CDS: 59, CDNSKEY: 60, SVCB: 64, HTTPS: 65, SPF: 99,
  TSIG: 250, IXFR: 251, AXFR: 252, ANY: 255, URI: 256, CAA: 257,
};

export const CLASSES: Record<string, number> = { IN: 1, CH: 3, CHAOS: 3, HS: 4, NONE: 254, ANY: 255 };

const FLAG_BITS: Record<string, number> = { aa: 0x0400, tc: 0x0200, rd: 0x0100, ra: 0x0080, z: 0x0040, ad: 0x0020, cd: 0x0010 };

export function typeNumber(s: string): number {
  const up = s.toUpperCase();
  if (up in TYPES) return TYPES[up];
  const m = /^TYPE(\d+)$/.exec(up);
  if (m) return Number(m[1]);
  throw new Error(`unknown type ${s}`);
}

function classNumber(s: string): number {
  const up = s.toUpperCase();
  if (up in CLASSES) return CLASSES[up];
  const m = /^CLASS(\d+)$/.exec(up);
  if (m) return Number(m[1]);
  throw new Error(`unknown class ${s}`);
}

/** A fixed client cookie so both servers see the same bytes. */
const CLIENT_COOKIE = Buffer.from('0102030405060708', 'hex');

export function parseQueryLine(line: string): QuerySpec {
  const words = line.trim().split(/\s+/);
  if (words.length < 1 || words[0] === '') throw new Error('empty query line');
  const q: QuerySpec = {
    line: line.trim(), name: words[0], type: 1, typeName: 'A', qclass: 1, tcp: false, v6: false, edns: true, ednsSize: 1232,
    ednsVersion: 0, ednsFlags: 0, options: [], flags: FLAG_BITS.rd, answer: [], authority: [],
  };
  let typeSeen = false;
  for (const w of words.slice(1)) {
    if (!w.startsWith('+')) {
      if (typeSeen) throw new Error(`unexpected word ${w} in "${line}"`);
      q.typeName = w.toUpperCase();
      q.type = typeNumber(w);
      typeSeen = true;
      continue;
    }
    const [key, val] = w.slice(1).split('=', 2) as [string, string | undefined];
    switch (key.toLowerCase()) {
      case 'tcp': q.tcp = true; break;
      case 'udp': q.tcp = false; break;
      case 'tls': q.secure = 'tls'; break;
      case 'https': q.secure = 'https'; break;
      case 'https-get': q.secure = 'https-get'; break;
      case 'v6': q.v6 = true; break;
      case 'noedns': q.edns = false; break;
      case 'edns':
        q.edns = true;
        if (val !== undefined) q.ednsSize = Number(val);
        break;
      case 'ednsver': q.edns = true; q.ednsVersion = Number(val ?? '0'); break;
      case 'ednsflags': q.edns = true; q.ednsFlags = (q.ednsFlags & 0x8000) | (Number(val ?? '0') & 0x7fff); break;
      case 'do': q.edns = true; q.ednsFlags |= 0x8000; break;
      case 'nsid': q.edns = true; q.options.push({ code: 3, data: Buffer.alloc(0) }); break;
      case 'cookie':
        q.edns = true;
        q.options.push({ code: 10, data: val ? Buffer.from(val, 'hex') : CLIENT_COOKIE });
        break;
      case 'ednsopt': {
        // +ednsopt=CODE[:HEX]
        q.edns = true;
        const [code, hex] = (val ?? '').split(':');
        q.options.push({ code: Number(code), data: Buffer.from(hex ?? '', 'hex') });
        break;
      }
      case 'subnet': q.edns = true; q.options.push({ code: 8, data: subnetOption(val ?? '') }); break;
      case 'class': q.qclass = classNumber(val ?? 'IN'); break;
      case 'opcode': q.flags = (q.flags & ~0x7800) | ((Number(val ?? '0') & 0xf) << 11); break;
      case 'tsig': q.tsig = parseTsigFlag(val ?? ''); break;
      case 'prereq': q.answer.push(encodeRecordSpec(val ?? '')); break;
      case 'update': q.authority.push(encodeRecordSpec(val ?? '')); break;
      case 'norec': q.flags &= ~FLAG_BITS.rd; break;
      case 'rec': q.flags |= FLAG_BITS.rd; break;
      default: {
        const k = key.toLowerCase();
        if (k in FLAG_BITS) { q.flags |= FLAG_BITS[k]; break; }
        if (k.startsWith('no') && k.slice(2) in FLAG_BITS) { q.flags &= ~FLAG_BITS[k.slice(2)]; break; }
        throw new Error(`unknown query option ${w} in "${line}"`);
      }
    }
  }
  return q;
}

/**
 * dig's `+subnet=ADDR[/LEN]`: an EDNS0 client-subnet option (code 8, RFC 7871) with family 1 or 2, source
 * prefix LEN (default the full address), scope 0 and only the address bytes the prefix covers, masked.
 */
export function subnetOption(spec: string): Buffer {
  const [addr = '', len] = spec.split('/', 2);
  const v6 = addr.includes(':');
  const bytes = v6 ? ipv6Bytes(addr) : Buffer.from(addr.split('.').map((x) => {
    const n = Number(x);
    if (!/^\d{1,3}$/.test(x) || n > 255) throw new Error(`bad +subnet address ${addr}`);
    return n;
  }));
  if (bytes.length !== (v6 ? 16 : 4)) throw new Error(`bad +subnet address ${addr}`);
  const max = v6 ? 128 : 32;
  const prefix = len === undefined ? max : Number(len);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max) throw new Error(`bad +subnet prefix ${spec}`);
  const n = Math.ceil(prefix / 8);
  const out = Buffer.alloc(4 + n);
  out.writeUInt16BE(v6 ? 2 : 1, 0);
  out[2] = prefix;
  out[3] = 0;
  for (let i = 0; i < n; i++) {
    const keep = Math.min(8, prefix - i * 8);
    out[4 + i] = bytes[i]! & ((0xff << (8 - keep)) & 0xff);
  }
  return out;
}

function ipv6Bytes(s: string): Buffer {
  const [head = '', tail] = s.split('::', 2);
  const hs = head === '' ? [] : head.split(':');
  const ts = tail === undefined || tail === '' ? [] : tail.split(':');
  const fill = tail === undefined ? 0 : 8 - hs.length - ts.length;
  const groups = [...hs, ...Array<string>(Math.max(fill, 0)).fill('0'), ...ts];
  if (groups.length !== 8 || groups.some((g) => !/^[0-9a-fA-F]{1,4}$/.test(g))) throw new Error(`bad +subnet address ${s}`);
  const b = Buffer.alloc(16);
  groups.forEach((g, i) => { b.writeUInt16BE(parseInt(g, 16), i * 2); });
  return b;
}

function encodeName(name: string): Buffer {
  const parts: Buffer[] = [];
  const trimmed = name === '.' ? '' : name.replace(/\.$/, '');
  if (trimmed !== '') {
    for (const label of trimmed.split('.')) {
      const b = Buffer.from(label, 'latin1');
      if (b.length === 0 || b.length > 63) throw new Error(`bad label in ${name}`);
      parts.push(Buffer.from([b.length]), b);
    }
  }
  parts.push(Buffer.from([0]));
  return Buffer.concat(parts);
}

/**
 * A record for an UPDATE's sections, `NAME,TTL,CLASS,TYPE[,RDATA...]` (commas, as query lines split on
 * spaces): no RDATA is an rdlength of 0 (RFC 2136's deletions and existence checks); otherwise by type:
 * A/AAAA an address, NS/CNAME/PTR/DNAME a name, TXT one string per field, MX `PREF,NAME`,
 * SOA `MNAME,RNAME,SERIAL,REFRESH,RETRY,EXPIRE,MINIMUM`, any type `hex:HEX` for raw rdata.
 */
export function encodeRecordSpec(spec: string): Buffer {
  const [name = '', ttl = '0', cls = 'IN', type = 'A', ...rd] = spec.split(',');
  const t = typeNumber(type);
  let rdata: Buffer;
  if (rd.length === 0) rdata = Buffer.alloc(0);
  else if (rd[0]!.startsWith('hex:')) rdata = Buffer.from(rd[0]!.slice(4), 'hex');
  else {
    switch (t) {
      case 1: rdata = Buffer.from(rd[0]!.split('.').map(Number)); break;
      case 28: rdata = ipv6Bytes(rd[0]!); break;
      case 2: case 5: case 12: case 39: rdata = encodeName(rd[0]!); break;
      case 16: rdata = Buffer.concat(rd.map((x) => { const b = Buffer.from(x, 'latin1'); return Buffer.concat([Buffer.from([b.length]), b]); })); break;
      case 15: { const p = Buffer.alloc(2); p.writeUInt16BE(Number(rd[0]), 0); rdata = Buffer.concat([p, encodeName(rd[1] ?? '.')]); break; }
      case 6: {
        const nums = Buffer.alloc(20);
        for (let i = 0; i < 5; i++) nums.writeUInt32BE(Number(rd[2 + i] ?? '0') >>> 0, i * 4);
        rdata = Buffer.concat([encodeName(rd[0]!), encodeName(rd[1] ?? '.'), nums]);
        break;
      }
      default: throw new Error(`no RDATA syntax for type ${type} in ${spec} (use hex:)`);
    }
  }
  const head = Buffer.alloc(10);
  head.writeUInt16BE(t, 0);
  head.writeUInt16BE(classNumber(cls), 2);
  head.writeUInt32BE(Number(ttl) >>> 0, 4);
  head.writeUInt16BE(rdata.length, 8);
  return Buffer.concat([encodeName(name), head, rdata]);
}

export function encodeQuery(q: QuerySpec, id: number): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  header.writeUInt16BE(q.flags & 0x7ff0, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(q.answer.length, 6);
  header.writeUInt16BE(q.authority.length, 8);
  header.writeUInt16BE(q.edns ? 1 : 0, 10);
  const qtail = Buffer.alloc(4);
  qtail.writeUInt16BE(q.type, 0);
  qtail.writeUInt16BE(q.qclass, 2);
  const parts = [header, encodeName(q.name), qtail, ...q.answer, ...q.authority];
  if (q.edns) {
    const opts = Buffer.concat(q.options.map((o) => {
      const h = Buffer.alloc(4);
      h.writeUInt16BE(o.code, 0);
      h.writeUInt16BE(o.data.length, 2);
      return Buffer.concat([h, o.data]);
    }));
    const opt = Buffer.alloc(11);
    opt[0] = 0; // root owner
    opt.writeUInt16BE(41, 1);
    opt.writeUInt16BE(q.ednsSize, 3);
    opt[5] = 0; // extended rcode
    opt[6] = q.ednsVersion;
    opt.writeUInt16BE(q.ednsFlags, 7);
    opt.writeUInt16BE(opts.length, 9);
    parts.push(opt, opts);
  }
  return Buffer.concat(parts);
}

export function parseQueriesFile(text: string): QuerySpec[] {
  return text.split('\n')
    .map((l) => l.replace(/(^|\s)#.*$/, '').trim())
    .filter((l) => l !== '')
    .map(parseQueryLine);
}
