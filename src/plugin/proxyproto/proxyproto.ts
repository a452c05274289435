// The PROXY protocol of one listen address: CoreDNS's connection policy (plugin/proxyproto/setup.go), its UDP
// PacketConn (plugin/pkg/proxyproto: v2 only, invalid datagrams dropped with a warning, Spectrum session tracking)
// and go-proxyproto's Listener for TCP (the header on the first read; a bad or refused one closes the connection).

import type { ProxiedPeer, ProxyProtocol, ServerLogger } from '../plugin.ts';
import { cidrContains, parseIP, type Cidr } from '../../wire/ip.ts';
import { HeaderError, NEED_MORE, Transport, isDatagram, readHeader, type Header } from './header.ts';

/** go-proxyproto's policies (REQUIRE is never chosen by CoreDNS's policy function). */
export const Policy = { USE: 'use', IGNORE: 'ignore', REJECT: 'reject', SKIP: 'skip' } as const;
export type Policy = typeof Policy[keyof typeof Policy];

/** Peer addresses whose policy is remembered (ProxyProtocolPolicy.policies). */
const POLICY_CACHE_MAX = 4096;

/** CoreDNS's default cap of tracked UDP sessions (udpSessionMaxEntries). */
export const UDP_SESSION_MAX = 10240;

export interface ProxyOptions {
  allow: Cidr[];
  /** `default`: the policy for sources outside `allow`; undefined when not written. */
  defaultPolicy: Policy | undefined;
  /** `udp_session_tracking` TTL in ms; 0: off. */
  sessionTtlMs: number;
  /** `udp_session_tracking`'s max sessions; 0: the default. */
  maxSessions: number;
  /** `tlv_metadata`: hand the header's TLVs to the request (the `proxyproto/tlv` label). */
  tlvMetadata: boolean;
}

/**
 * CoreDNS's rawTLVs: the vector split and joined again (go-proxyproto's SplitTLVs/JoinTLVs: a NOOP TLV loses its
 * value), in hex; undefined when there is none or it does not split (a truncated TLV).
 */
export function tlvHex(raw: Uint8Array): string | undefined {
  if (raw.length === 0) return undefined;
  let out = '';
  for (let i = 0; i < raw.length;) {
    if (raw.length - i <= 2) return undefined;
    const type = raw[i]!;
    const len = (raw[i + 1]! << 8) | raw[i + 2]!;
    i += 3;
    if (i + len > raw.length) return undefined;
    if (type === 0x04) out += '040000';
    else out += Buffer.from(raw.buffer, raw.byteOffset + i - 3, len + 3).toString('hex');
    i += len;
  }
  return out;
}

/** CoreDNS's ConnPolicy: without `allow`, `default` if written, else USE; with it, USE inside, `default` outside. */
export function policyFor(o: ProxyOptions, address: string): Policy {
  if (o.allow.length === 0) return o.defaultPolicy ?? Policy.USE;
  const ip = parseIP(address);
  if (ip === undefined) return Policy.REJECT;
  for (const c of o.allow) if (cidrContains(c, ip)) return Policy.USE;
  return o.defaultPolicy ?? Policy.IGNORE;
}

interface Session {
  header: Header;
  expires: number;
}

/** Go's net.UDPAddr.String() of a peer. */
function hostPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

export class ProxyProtocolPolicy implements ProxyProtocol {
  private readonly o: ProxyOptions;
  private readonly log: ServerLogger;
  /**
   * The policy of each peer address seen lately: a balancer sends from a few addresses, so this saves parsing the
   * address and walking `allow` per datagram (measured: ~45% of the cost of a header with `allow`). Bounded:
   * cleared when it reaches POLICY_CACHE_MAX entries.
   */
  private readonly policies = new Map<string, Policy>();
  /** Spectrum sessions, keyed by the sender: a Map in least-recently-used order (the first entry is the oldest). */
  private readonly sessions = new Map<string, Session>();

  constructor(o: ProxyOptions, log: ServerLogger) {
    this.o = o;
    this.log = log;
  }

  /** policyFor through the per-address cache (only with `allow`: without it the policy is one constant). */
  private policyOf(address: string): Policy {
    if (this.o.allow.length === 0) return this.o.defaultPolicy ?? Policy.USE;
    let p = this.policies.get(address);
    if (p === undefined) {
      p = policyFor(this.o, address);
      if (this.policies.size >= POLICY_CACHE_MAX) this.policies.clear();
      this.policies.set(address, p);
    }
    return p;
  }

  datagram(wire: Buffer, peer: ProxiedPeer): number {
    const policy = this.policyOf(peer.address);
    if (policy === Policy.SKIP) return 0;
    let h: Header | undefined;
    try {
      const r = readHeader(wire, false);
      h = r === NEED_MORE ? undefined : r;
      if (h !== undefined) {
        if (h.version !== 2) throw new Error(`unsupported Proxy Protocol version ${h.version} (only v2 supported for UDP)`);
        if (h.transport !== Transport.UDPv4 && h.transport !== Transport.UDPv6) {
          throw new Error(`PROXY Protocol header is not UDP type (transport protocol: 0x${h.transport.toString(16)})`);
        }
      }
      if (h !== undefined && policy === Policy.REJECT) throw new Error('connection rejected by Proxy Protocol connection policy');
    } catch (e) {
      const msg = e instanceof HeaderError ? `parsing Proxy Protocol header (packet size: ${wire.length}): ${e.message}` : (e as Error).message;
      // CoreDNS drops the datagram (an error would end its read loop) and says so.
      this.log.warning(`dropping invalid Proxy Protocol packet from ${hostPort(peer.address, peer.port)}: ${msg}`);
      return -1;
    }
    if (policy !== Policy.USE) return h === undefined ? 0 : h.length;
    const ttl = this.o.sessionTtlMs;
    if (h !== undefined) {
      if (!h.local) {
        if (ttl > 0) this.store(peer, h);
        peer.address = h.sourceHost;
        peer.port = h.sourcePort;
        if (this.o.tlvMetadata) peer.tlv = tlvHex(h.tlvs);
      }
      // A header alone opens a Spectrum session: nothing to answer.
      if (ttl > 0 && h.length === wire.length) return -1;
      return h.length;
    }
    if (ttl > 0 && this.sessions.size > 0) {
      const s = this.lookup(peer);
      if (s !== undefined) {
        peer.address = s.header.sourceHost;
        peer.port = s.header.sourcePort;
        if (this.o.tlvMetadata) peer.tlv = tlvHex(s.header.tlvs);
      }
    }
    return 0;
  }

  stream(head: Buffer, peer: ProxiedPeer): number {
    const policy = this.policyOf(peer.address);
    // SKIP: go-proxyproto hands the raw connection on; the header's bytes, if any, reach the DNS reader.
    if (policy === Policy.SKIP) return 0;
    let h;
    try {
      h = readHeader(head, true);
    } catch (e) {
      if (e instanceof HeaderError) return -1;
      throw e;
    }
    if (h === NEED_MORE) return -2;
    if (h === undefined) return 0;
    if (policy === Policy.REJECT) return -1;
    if (policy === Policy.USE && !h.local) {
      // Conn.RemoteAddr is the header's source: its transport is what the request's Proto reports (a Unix address
      // is neither *net.UDPAddr nor *net.TCPAddr: `udp`, port 0, its path as the IP).
      peer.address = h.sourceHost;
      peer.port = h.sourceIsIP ? h.sourcePort : 0;
      peer.proto = h.sourceIsIP && !isDatagram(h.transport) ? 'tcp' : 'udp';
    }
    if (policy === Policy.USE && !h.local && this.o.tlvMetadata) peer.tlv = tlvHex(h.tlvs);
    return h.length;
  }

  private store(peer: ProxiedPeer, header: Header): void {
    const key = peer.address + '|' + peer.port;
    this.sessions.delete(key);
    const max = this.o.maxSessions > 0 ? this.o.maxSessions : UDP_SESSION_MAX;
    if (this.sessions.size >= max) this.evict(max);
    // The TLVs are copied (a session must not keep the whole datagram alive), and only when they are used.
    const tlvs = this.o.tlvMetadata ? Uint8Array.from(header.tlvs) : new Uint8Array(0);
    this.sessions.set(key, { header: { ...header, tlvs }, expires: Date.now() + this.o.sessionTtlMs });
  }

  /** Make room for one entry: expired sessions first, then the least recently used. */
  private evict(max: number): void {
    const now = Date.now();
    for (const [k, s] of this.sessions) if (s.expires <= now) this.sessions.delete(k);
    while (this.sessions.size >= max) {
      const oldest = this.sessions.keys().next();
      if (oldest.done === true) break;
      this.sessions.delete(oldest.value);
    }
  }

  private lookup(peer: ProxiedPeer): Session | undefined {
    const key = peer.address + '|' + peer.port;
    const s = this.sessions.get(key);
    if (s === undefined) return undefined;
    const now = Date.now();
    this.sessions.delete(key);
    if (s.expires <= now) return undefined;
    // Each matching datagram refreshes the session (CoreDNS re-adds it).
    s.expires = now + this.o.sessionTtlMs;
    this.sessions.set(key, s);
    return s;
  }

  /** Tracked sessions (tests). */
  sessionCount(): number { return this.sessions.size; }
}
