// Shared pieces of nodens's forwarding-loop guard, used by the loop plugin's
// extended mode (`loop { ... }`) and by `nodens doctor`:
//
// * identity: a secret per process tree (shared with -workers children through
//   an environment variable set by the primary), from which each server block
//   derives its hop nonce and recognises its own probe names, whichever worker
//   receives them;
// * the hop-trace EDNS0 option (a code from the local/experimental range);
// * probe names `<R1>.<R2>.<zone>` that look like CoreDNS's but whose second
//   label is a MAC of the first, so only the block that sent a probe claims it;
// * address classification and the remedies printed with every finding.

import { createHmac, randomBytes } from 'node:crypto';
import { networkInterfaces } from 'node:os';
import type { EdnsOption } from '../../wire/types.ts';
import type { UpstreamOrigin } from './upstreams.ts';
import { workerId } from './workers.ts';
import { formatIPv4, formatIPv6Groups, ipv4Of, parseIP } from '../../wire/ip.ts';
import { EdnsOption as OptionCode, ExtendedErrorCode } from '../../wire/constants.ts';

/** EDNS0 option code of the hop trace (RFC 6891 local/experimental range 65001–65534). */
export const HOP_TRACE_OPTION = 65433;
/** Format version carried in the first byte of the option. */
const TRACE_VERSION = 1;
/** At most this many hops are listed (the count keeps counting). */
export const MAX_LISTED_HOPS = 16;
/** Length of a block's hop nonce. */
export const NONCE_LEN = 6;

/** RFC 8914 EDE info code used for looping queries: 22 No Reachable Authority. */
export const LOOP_EDE_CODE = ExtendedErrorCode.NoReachableAuthority;
/** CPU string of the HINFO answer a block gives to its own probe when it comes back. */
export const PROBE_MARKER = 'nodens-loop-probe';

/**
 * The environment variable through which `nodens -workers N` hands its workers
 * the loop secret of the server they serve together (set by the primary when it
 * forks them; read only in a cluster worker, never written by this module).
 */
export const LOOP_SECRET_ENV = 'NODENS_LOOP_SECRET';

/**
 * A new secret for one server (a lineage), or in a `-workers` thread the one its
 * supervisor made: every worker of a server then recognises the server's probes
 * and hop nonces, and two servers in one process never share an identity.
 */
export function serverSecret(): Buffer {
  const inherited = process.env[LOOP_SECRET_ENV];
  if (workerId() > 0 && inherited !== undefined && /^[0-9a-f]{64}$/.test(inherited)) return Buffer.from(inherited, 'hex');
  return randomBytes(32);
}

function mac(secret: Uint8Array, ...parts: string[]): Buffer {
  const h = createHmac('sha256', secret);
  for (const p of parts) h.update(p).update('\0');
  return h.digest();
}

const TWO62 = 1n << 62n;

function macNumber(secret: Uint8Array, ...parts: string[]): string {
  return (mac(secret, ...parts).readBigUInt64BE(0) % TWO62).toString();
}

/** A uniformly random integer in [0, 2^62), decimal (CoreDNS's probe label). */
export function randomLabel(): string {
  return (randomBytes(8).readBigUInt64BE(0) % TWO62).toString();
}

/** The identity of one server block (same in every worker of one server). */
export class BlockIdentity {
  /** What makes a block distinct: its keys and listen hosts. */
  readonly key: string;
  readonly nonce: Uint8Array;
  /** The nonce in hex: names this block in EDE texts and logs. */
  readonly id: string;
  private readonly secret: Uint8Array;

  /** `secret`: the server's (serverSecret()), shared by all its blocks and workers. */
  constructor(key: string, secret: Uint8Array) {
    this.key = key;
    this.secret = secret;
    this.nonce = mac(secret, 'nonce', key).subarray(0, NONCE_LEN);
    this.id = Buffer.from(this.nonce).toString('hex');
  }

  /** A fresh probe name below `zone` (lower-case FQDN) that only this block recognises. */
  probeName(zone: string): string {
    const r1 = randomLabel();
    const r2 = macNumber(this.secret, 'probe', this.key, r1, zone);
    return zone === '.' ? `${r1}.${r2}.` : `${r1}.${r2}.${zone}`;
  }

  /** Whether the lower-cased `name` is a probe this block (in any worker) sent. */
  isProbe(name: string): boolean {
    const c = name.charCodeAt(0);
    if (c < 48 || c > 57) return false;
    const d1 = name.indexOf('.');
    if (d1 < 1 || d1 > 19) return false;
    const d2 = name.indexOf('.', d1 + 1);
    if (d2 < 0 || d2 - d1 - 1 > 19) return false;
    const r1 = name.slice(0, d1);
    const r2 = name.slice(d1 + 1, d2);
    if (!/^[0-9]+$/.test(r1) || !/^[0-9]+$/.test(r2)) return false;
    const zone = d2 + 1 >= name.length ? '.' : name.slice(d2 + 1);
    return macNumber(this.secret, 'probe', this.key, r1, zone) === r2;
  }

  hasNonce(n: Uint8Array): boolean {
    if (n.length !== NONCE_LEN) return false;
    for (let i = 0; i < NONCE_LEN; i++) if (n[i] !== this.nonce[i]) return false;
    return true;
  }
}

// ---- the hop trace -------------------------------------------------------------------------------

export interface Hop {
  nonce: Uint8Array;
  /** The address the query arrived on at that hop ('' when unknown). */
  addr: string;
  port: number;
}

export interface HopTrace {
  /** Number of nodens hops the query has passed (may exceed path.length). */
  hops: number;
  path: Hop[];
}

/** Text of a 4- or 16-byte address; IPv4-mapped IPv6 stays in hex groups (`::ffff:7f00:1`). */
function formatIp(b: Uint8Array): string {
  return b.length === 4 ? formatIPv4(b, 0) : formatIPv6Groups(b, 0);
}

/** `v(1) hops(1) { nonce(6) family(1: 0, 4 or 6) addr(0|4|16) port(2) }*` */
export function encodeTrace(t: HopTrace): Uint8Array {
  const parts: number[] = [TRACE_VERSION, Math.min(t.hops, 255)];
  for (const h of t.path.slice(0, MAX_LISTED_HOPS)) {
    for (let i = 0; i < NONCE_LEN; i++) parts.push(h.nonce[i] ?? 0);
    const b = h.addr === '' ? undefined : parseIP(h.addr);
    if (b === undefined) parts.push(0);
    else { parts.push(b.length === 4 ? 4 : 6); for (const x of b) parts.push(x); }
    parts.push((h.port >> 8) & 0xff, h.port & 0xff);
  }
  return Uint8Array.from(parts);
}

export function decodeTrace(d: Uint8Array): HopTrace | undefined {
  if (d.length < 2 || d[0] !== TRACE_VERSION) return undefined;
  const t: HopTrace = { hops: d[1]!, path: [] };
  let p = 2;
  while (p < d.length) {
    if (p + NONCE_LEN + 1 > d.length) return undefined;
    const nonce = d.slice(p, p + NONCE_LEN);
    p += NONCE_LEN;
    const fam = d[p++]!;
    const n = fam === 0 ? 0 : fam === 4 ? 4 : fam === 6 ? 16 : -1;
    if (n < 0 || p + n + 2 > d.length) return undefined;
    const addr = n === 0 ? '' : formatIp(d.subarray(p, p + n));
    p += n;
    const port = (d[p]! << 8) | d[p + 1]!;
    p += 2;
    t.path.push({ nonce, addr, port });
  }
  return t;
}

export function hostPort(addr: string, port: number): string {
  if (addr === '') return `:${port}`;
  return addr.includes(':') ? `[${addr}]:${port}` : `${addr}:${port}`;
}

/** `127.0.0.1:53 -> 127.0.0.2:53 -> 127.0.0.1:53` */
export function formatPath(path: readonly Hop[]): string {
  return path.map((h) => hostPort(h.addr, h.port)).join(' -> ');
}

/** An Extended DNS Error option (RFC 8914): info code, then UTF-8 EXTRA-TEXT. */
export function edeOption(code: number, text: string): EdnsOption {
  const t = Buffer.from(text, 'utf8');
  const data = new Uint8Array(2 + t.length);
  data[0] = code >> 8;
  data[1] = code & 0xff;
  data.set(t, 2);
  return { code: OptionCode.EDE, data };
}

// ---- addresses -------------------------------------------------------------------------------

export type AddressClass = 'loopback' | 'link-local' | 'unspecified' | 'other';

export function classifyAddress(host: string): AddressClass {
  const ip = parseIP(host.replace(/%.*$/, ''));
  if (ip === undefined) return 'other';
  const b = ipv4Of(ip) ?? ip; // IPv4-mapped IPv6 is classified as its IPv4 address
  if (b.length === 4) {
    if (b[0] === 127) return 'loopback';
    if (b[0] === 169 && b[1] === 254) return 'link-local';
    if (b.every((x) => x === 0)) return 'unspecified';
    return 'other';
  }
  if (b.subarray(0, 15).every((x) => x === 0)) return b[15] === 1 ? 'loopback' : b[15] === 0 ? 'unspecified' : 'other';
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) return 'link-local';
  return 'other';
}

/** Canonical text of an IP address (so `::0001` and `::1` compare equal); the input when it is not an IP. */
export function canonicalIp(host: string): string {
  const b = parseIP(host.replace(/%.*$/, ''));
  return b === undefined ? host : formatIp(b);
}

/** Every address of this host's interfaces, canonical, plus the loopback ranges' usual members. */
export function localAddresses(): Set<string> {
  const out = new Set<string>(['127.0.0.1', '::1']);
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) out.add(canonicalIp(a.address));
  }
  return out;
}

/** Whether packets to `host` stay on this machine: loopback, unspecified, or one of our interface addresses. */
export function isLocalAddress(host: string, locals: ReadonlySet<string>): boolean {
  const c = classifyAddress(host);
  if (c === 'loopback' || c === 'unspecified') return true;
  return locals.has(canonicalIp(host));
}

/** Split `ip:port` / `[v6]:port`. */
export function splitAddr(addr: string): { host: string; port: number } | undefined {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(addr) ?? /^([^:]+):(\d+)$/.exec(addr);
  if (m === null) return undefined;
  return { host: m[1]!, port: Number(m[2]) };
}

// ---- explanations --------------------------------------------------------------------------------

/** Where an upstream came from (the same shape as the upstream capability's origin). */
export type OriginLike = UpstreamOrigin;

export function originText(o: OriginLike | undefined): string {
  if (o === undefined) return 'unknown origin';
  return `${o.source === 'resolvconf' ? 'resolv.conf' : 'Corefile'} ${o.file}:${o.line}`;
}

/** The remedies of the troubleshooting guide, fitted to where the upstream came from. */
export function remedyFor(o: OriginLike | undefined): string {
  if (o?.source === 'resolvconf') {
    return `remedy: point kubelet's resolvConf at the real resolver file (e.g. /run/systemd/resolve/resolv.conf) so ${o.file} holds no local/loopback or node-local address, ` +
      'or disable the local stub resolver (systemd-resolved DNSStubListener=no) and restore the file, ' +
      'or forward to explicit upstream addresses instead of the file';
  }
  return 'remedy: forward to explicit upstream addresses that do not send queries back to this server ' +
    '(not this server\'s own or loopback addresses; check the upstream\'s own forwarders)';
}
