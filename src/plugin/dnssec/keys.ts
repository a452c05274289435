// DNSSEC signing keys: BIND's K<zone>+<alg>+<tag>.key / .private pairs, as CoreDNS reads them
// (plugin/dnssec/dnskey.go with miekg/dns ReadRR and DNSKEY.ReadPrivateKey), turned into node:crypto keys.

import { createPrivateKey, sign as cryptoSign, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseRecord } from '../../wire/text.ts';
import { RRType } from '../../wire/constants.ts';
import type { DNSKEYData, ResourceRecord } from '../../wire/types.ts';

/** DNSSEC algorithm numbers CoreDNS (miekg/dns) can sign with. */
export const Algorithm = {
  RSASHA1: 5,
  RSASHA1NSEC3SHA1: 7,
  RSASHA256: 8,
  RSASHA512: 10,
  ECDSAP256SHA256: 13,
  ECDSAP384SHA384: 14,
  ED25519: 15,
} as const;

/** One loaded key: its DNSKEY record (as read from the .key file), key tag and private key. */
export interface SigningKey {
  readonly dnskey: ResourceRecord<DNSKEYData>;
  readonly tag: number;
  readonly algorithm: number;
  /** Zone key with the SEP bit set (RFC 4034 2.1.1). */
  readonly ksk: boolean;
  /** Zone key with the SEP bit unset. */
  readonly zsk: boolean;
  /** Signs `data` as the DNSKEY's algorithm prescribes (RSA PKCS#1 v1.5, ECDSA r||s, Ed25519). */
  sign(data: Uint8Array): Buffer;
}

const ZONE_FLAG = 0x100;
const SEP_FLAG = 0x1;

/** RFC 4034 appendix B key tag of a DNSKEY's rdata. */
export function keyTag(k: DNSKEYData): number {
  let ac = 0;
  ac += k.flags;
  ac += (k.protocol << 8) | k.algorithm;
  const p = k.publicKey;
  for (let i = 0; i < p.length; i++) ac += (i & 1) === 0 ? p[i]! << 8 : p[i]!;
  ac += (ac >>> 16) & 0xffff;
  return ac & 0xffff;
}

// miekg/dns error texts.
const ERR_PRIV_KEY = 'dns: bad private key';
const ERR_KEY = 'dns: bad key';
const ERR_ALG = 'dns: bad algorithm';

/** Go's os.Open error for a missing or unreadable file. */
function readFileGo(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file or directory'
      : code === 'EACCES' ? 'permission denied'
        : code === 'EISDIR' ? 'is a directory' : (e as Error).message;
    throw new Error(`open ${file}: ${why}`, { cause: e });
  }
}

/** The first record of a zone-file text (miekg ReadRR: origin ".", default TTL 3600), or undefined for none. */
function readFirstRecord(text: string, file: string): ResourceRecord | undefined {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = stripComment(lines[i]!).trim();
    if (line === '') continue;
    try {
      return parseRecord(line, '.', 3600);
    } catch (e) {
      throw new Error(`${file}: ${(e as Error).message} at line: ${i + 1}`, { cause: e });
    }
  }
  return undefined;
}

function stripComment(line: string): string {
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === '\\') { i++; continue; }
    if (c === '"') quoted = !quoted;
    else if (c === ';' && !quoted) return line.slice(0, i);
  }
  return line;
}

/** The `Key: value` lines of a .private file, keys lower-cased (miekg parseKey). */
function readPrivateFields(text: string, file: string): Map<string, string> {
  const m = new Map<string, string>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = stripComment(lines[i]!);
    if (line.trim() === '') continue;
    const colon = line.indexOf(':');
    if (colon < 0) {
      const tok = line.trim().split(/\s+/)[0]!;
      const col = line.indexOf(tok) + 1;
      throw new Error(`${file}: dns: no private key seen: ${JSON.stringify(tok)} at line: ${i + 1}:${col}`);
    }
    m.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return m;
}

/** Go's base64.StdEncoding.DecodeString, with its error text. */
function fromBase64(s: string): Buffer {
  const clean = s.replace(/[\r\n]/g, '');
  for (let i = 0; i < clean.length; i++) {
    const c = clean.charCodeAt(i);
    const ok = (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 43 || c === 47 || c === 61;
    if (!ok) throw new Error(`illegal base64 data at input byte ${i}`);
  }
  if (clean.length % 4 !== 0) throw new Error(`illegal base64 data at input byte ${clean.length - (clean.length % 4)}`);
  return Buffer.from(clean, 'base64');
}

function b64url(b: Uint8Array): string {
  return Buffer.from(b).toString('base64url');
}

function bigFrom(b: Uint8Array): bigint {
  return b.length === 0 ? 0n : BigInt('0x' + Buffer.from(b).toString('hex'));
}

function bigBytes(n: bigint): Buffer {
  let h = n.toString(16);
  if (h.length % 2 === 1) h = '0' + h;
  return Buffer.from(h, 'hex');
}

function modInverse(a: bigint, m: bigint): bigint {
  let [r0, r1] = [((a % m) + m) % m, m];
  let [s0, s1] = [1n, 0n];
  while (r1 !== 0n) {
    const q = r0 / r1;
    [r0, r1] = [r1, r0 - q * r1];
    [s0, s1] = [s1, s0 - q * s1];
  }
  return ((s0 % m) + m) % m;
}

function rsaKey(pub: Uint8Array, f: Map<string, string>): KeyObject {
  // RFC 3110: exponent length (1 byte, or 0 then 2 bytes), exponent, modulus.
  if (pub.length < 3) throw new Error(ERR_KEY);
  let off = 1;
  let elen = pub[0]!;
  if (elen === 0) {
    elen = (pub[1]! << 8) | pub[2]!;
    off = 3;
  }
  if (off + elen >= pub.length) throw new Error(ERR_KEY);
  const e = pub.subarray(off, off + elen);
  const n = pub.subarray(off + elen);
  const d = bigFrom(fromBase64(f.get('privateexponent') ?? ''));
  const p = bigFrom(fromBase64(f.get('prime1') ?? ''));
  const q = bigFrom(fromBase64(f.get('prime2') ?? ''));
  if (d === 0n || p === 0n || q === 0n) throw new Error(ERR_PRIV_KEY);
  return createPrivateKey({
    format: 'jwk',
    key: {
      kty: 'RSA', n: b64url(n), e: b64url(e), d: b64url(bigBytes(d)), p: b64url(bigBytes(p)), q: b64url(bigBytes(q)),
      dp: b64url(bigBytes(d % (p - 1n))), dq: b64url(bigBytes(d % (q - 1n))), qi: b64url(bigBytes(modInverse(q, p))),
    },
  });
}

function ecdsaKey(pub: Uint8Array, f: Map<string, string>, size: number, crv: string): KeyObject {
  if (pub.length !== 2 * size) throw new Error(ERR_KEY);
  const raw = fromBase64(f.get('privatekey') ?? '');
  const d = Buffer.alloc(size);
  if (raw.length > size) throw new Error(ERR_PRIV_KEY);
  raw.copy(d, size - raw.length);
  return createPrivateKey({
    format: 'jwk',
    key: { kty: 'EC', crv, x: b64url(pub.subarray(0, size)), y: b64url(pub.subarray(size)), d: b64url(d) },
  });
}

const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

function ed25519Key(f: Map<string, string>): KeyObject {
  const seed = fromBase64(f.get('privatekey') ?? '');
  if (seed.length !== 32) throw new Error(ERR_PRIV_KEY);
  return createPrivateKey({ format: 'der', type: 'pkcs8', key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]) });
}

function signerFor(alg: number, key: KeyObject): (data: Uint8Array) => Buffer {
  switch (alg) {
    case Algorithm.RSASHA1:
    case Algorithm.RSASHA1NSEC3SHA1:
      return (data) => cryptoSign('sha1', data, key);
    case Algorithm.RSASHA256:
      return (data) => cryptoSign('sha256', data, key);
    case Algorithm.RSASHA512:
      return (data) => cryptoSign('sha512', data, key);
    case Algorithm.ECDSAP256SHA256:
      return (data) => cryptoSign('sha256', data, { key, dsaEncoding: 'ieee-p1363' });
    case Algorithm.ECDSAP384SHA384:
      return (data) => cryptoSign('sha384', data, { key, dsaEncoding: 'ieee-p1363' });
    case Algorithm.ED25519:
      return (data) => cryptoSign(null, data, key);
    default:
      throw new Error(ERR_ALG);
  }
}

/**
 * Reads one key pair as CoreDNS's ParseKeyFile does, with its error texts: `open F: no such file or
 * directory`, `F: dns: ... at line: N`, `no public key found`, `dns: bad private key`, `dns: bad algorithm`.
 */
export function readKeyFiles(pubFile: string, privFile: string): SigningKey {
  const pubText = readFileGo(pubFile);
  const rr = readFirstRecord(pubText, pubFile);
  const privText = readFileGo(privFile);
  if (rr === undefined || rr.type !== RRType.DNSKEY) throw new Error('no public key found');
  const dnskey = rr as ResourceRecord<DNSKEYData>;
  const f = readPrivateFields(privText, privFile);
  const format = f.get('private-key-format');
  if (format !== 'v1.2' && format !== 'v1.3') throw new Error(ERR_PRIV_KEY);
  const algoStr = (f.get('algorithm') ?? '').split(' ')[0]!;
  if (!/^\d{1,3}$/.test(algoStr) || Number(algoStr) > 255) throw new Error(ERR_PRIV_KEY);
  const privAlg = Number(algoStr);
  const pub = dnskey.data.publicKey;
  let key: KeyObject;
  switch (privAlg) {
    case Algorithm.RSASHA1:
    case Algorithm.RSASHA1NSEC3SHA1:
    case Algorithm.RSASHA256:
    case Algorithm.RSASHA512:
      key = rsaKey(pub, f);
      break;
    case Algorithm.ECDSAP256SHA256:
      key = ecdsaKey(pub, f, 32, 'P-256');
      break;
    case Algorithm.ECDSAP384SHA384:
      key = ecdsaKey(pub, f, 48, 'P-384');
      break;
    case Algorithm.ED25519:
      key = ed25519Key(f);
      break;
    default:
      throw new Error(ERR_ALG);
  }
  const d = dnskey.data;
  return {
    dnskey,
    tag: keyTag(d),
    algorithm: d.algorithm,
    ksk: (d.flags & ZONE_FLAG) !== 0 && (d.flags & SEP_FLAG) === 1,
    zsk: (d.flags & ZONE_FLAG) !== 0 && (d.flags & SEP_FLAG) === 0,
    sign: signerFor(d.algorithm, key),
  };
}
