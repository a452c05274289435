// Per-query state handed through the plugin chain. Derived values (lower-cased
// name, buffer size, DO bit) are computed on first use and remembered, so a
// chain that never asks pays nothing.

import type { EdnsOption, Message } from '../wire/types.ts';
import { skipName } from '../wire/scan.ts';
import { asciiLower } from '../wire/name.ts';

export type Transport = 'udp' | 'tcp';

const MIN_UDP_SIZE = 512;
const TCP_SIZE = 65535;

export class Request {
  /** The decoded query. Plugins that change it (rewrite) replace fields, the server reads it afresh. */
  msg: Message;
  /** The query exactly as received. */
  readonly wire: Uint8Array;
  readonly proto: Transport;
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly localAddress: string;
  readonly localPort: number;
  /** Listener name as in CoreDNS's `server` metric label, e.g. `dns://:53`. */
  readonly server: string;
  /** The zone of the server block that matched (set by the server before the chain runs). */
  zone = '.';
  /** Name of the plugin currently handling the query; the final writer records who replied. */
  plugin = '';
  /** process.hrtime.bigint() at arrival. */
  readonly start: bigint;
  /**
   * Extended DNS Errors (RFC 8914) for the client, attached by any plugin; the
   * final writer adds them to the reply of an EDNS client even when a plugin
   * in between (e.g. cache) dropped the reply's own OPT.
   */
  extendedErrors: EdnsOption[] | undefined;
  /** Plugin metadata (CoreDNS's metadata plugin); created on first use. */
  private meta: Map<string, string | (() => string)> | undefined;
  private lowerName: string | undefined;

  constructor(
    msg: Message, wire: Uint8Array, proto: Transport,
    remoteAddress: string, remotePort: number, localAddress: string, localPort: number,
    server: string, start: bigint,
  ) {
    this.msg = msg;
    this.wire = wire;
    this.proto = proto;
    this.remoteAddress = remoteAddress;
    this.remotePort = remotePort;
    this.localAddress = localAddress;
    this.localPort = localPort;
    this.server = server;
    this.start = start;
  }

  /** Query name as sent (case preserved). */
  get qname(): string { return this.msg.question[0]?.name ?? '.'; }

  /** Query name lower-cased (ASCII), as CoreDNS's state.Name(). */
  get name(): string {
    const q = this.qname;
    if (this.lowerName === undefined || this.lowerName.length !== q.length) this.lowerName = asciiLower(q);
    return this.lowerName;
  }

  get qtype(): number { return this.msg.question[0]?.type ?? 0; }
  get qclass(): number { return this.msg.question[0]?.class ?? 0; }

  /** The DO bit of the query's OPT record. */
  get do(): boolean { return this.msg.edns?.do ?? false; }

  /** 1 for IPv4 clients, 2 for IPv6 (CoreDNS's `family` label). */
  get family(): 1 | 2 { return this.remoteAddress.includes(':') ? 2 : 1; }

  /** The reply size limit the client can take: EDNS size (≥512) over UDP, 65535 over TCP. */
  get size(): number {
    if (this.proto === 'tcp') return TCP_SIZE;
    const advertised = this.msg.edns?.udpSize ?? 0;
    return advertised < MIN_UDP_SIZE ? MIN_UDP_SIZE : advertised;
  }

  /** Offset just past the question in `wire` (-1 if it cannot be walked): lets a plugin reuse the client's question bytes. */
  get questionEnd(): number {
    const end = skipName(this.wire, 12);
    return end < 0 ? -1 : end + 4;
  }

  /** Request length in bytes as received. */
  get length(): number { return this.wire.length; }

  /** Attach an Extended DNS Error option (code 15) for the client's reply. */
  addExtendedError(option: EdnsOption): void {
    (this.extendedErrors ??= []).push(option);
  }

  setMetadata(label: string, value: string | (() => string)): void {
    (this.meta ??= new Map()).set(label, value);
  }

  metadata(label: string): string | undefined {
    const v = this.meta?.get(label);
    return typeof v === 'function' ? v() : v;
  }
}
