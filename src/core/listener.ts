// One plain-DNS listen address: a UDP socket and a TCP listener on the same
// host:port, both with SO_REUSEPORT as in CoreDNS. The routing table is a field
// that a reload swaps, so sockets outlive configurations and no query is lost.
// A `tls://` address (DNS over TLS, RFC 7858) is the TCP half alone, its
// connections inside TLS when the blocks have a `tls` certificate (CoreDNS's
// ServerTLS: without one it serves plain DNS over TCP).

import type dgram from 'node:dgram';
import type { LookupOneOptions } from 'node:dns';
import net from 'node:net';
import type tls from 'node:tls';
import { serveMessage, type ReplySink, type ServeTable } from './serve.ts';
import type { ProxiedPeer, ProxyProtocol, ServerTlsConfig, UdpSocket, UdpWriter } from '../plugin/plugin.ts';
import { clientAllowed, serverTlsOptions } from './tls.ts';
import { plainAddress } from '../wire/ip.ts';
import { NativeUdp, udpAddon, udpPath, type NativeReplySink } from './udp-native.ts';

/** The UDP listener's requested receive buffer (SO_RCVBUF). */
export const UDP_RECV_BUFFER = 4 << 20;

/**
 * CoreDNS's TCP timeouts (core/dnsserver ReadTimeout / IdleTimeout, applied by miekg's readTCP):
 * the first query must have arrived whole within 3 s of the connection, each later one within
 * 10 s of the previous reply. Each is a fixed deadline set when the read starts: bytes trickling
 * in do not extend it.
 * The `timeouts` plugin overrides the read and idle times per address (ServeTable's ConnectionLimits), and a
 * reply must be handed to the kernel within the write timeout (5 s).
 */
export const TCP_READ_TIMEOUT_MS = 3000;
export const TCP_IDLE_TIMEOUT_MS = 10000;
export const TCP_WRITE_TIMEOUT_MS = 5000;
/**
 * Bounds against hostile TCP clients (nodens; CoreDNS has no cap on plain-DNS connections and lets Go read
 * one message at a time). Connections beyond the cap are closed at accept, so idle floods cost at most that
 * many sockets until the read deadline reaps them; UDP never shares the budget. A connection's reading
 * pauses while more than one largest message waits behind the query being answered, or while more than that
 * of replies waits for a client that does not read, so a pipelining client holds at most ~128 KiB of the
 * server's memory (the kernel's buffers then push back on it).
 */
export const TCP_MAX_CONNECTIONS = 10000;
export const TCP_MAX_BUFFERED_BYTES = 65537;
/** How long a stopping listener waits for queries in flight (CoreDNS: 5 s). */
export const GRACEFUL_STOP_MS = 5000;

export interface ListenerOptions {
  /** Deadline for the first query on a TCP connection, from the accept (default TCP_READ_TIMEOUT_MS). */
  tcpReadTimeoutMs?: number;
  /** Deadline for each later query, from the previous reply (default TCP_IDLE_TIMEOUT_MS). */
  tcpIdleTimeoutMs?: number;
  /** `tls`: DNS over TLS (TCP only); default `dns`, UDP and TCP. */
  transport?: 'dns' | 'tls';
  /** The certificate of a `tls` listener; undefined: its TCP connections are not encrypted. */
  tls?: ServerTlsConfig;
  /** Open TCP connections beyond which new ones are closed at accept (default TCP_MAX_CONNECTIONS). */
  tcpMaxConnections?: number;
}

/** What the instance needs of any listener (plain DNS, DNS over TLS, DNS over HTTPS). */
export interface ServerListener {
  /** Configured host: '' is the wildcard. */
  readonly host: string;
  /** Port actually bound. */
  port: number;
  /** `dns`, `tls`, `https` or `grpc`. */
  readonly transport: string;
  table: ServeTable;
  /** The certificate of a `tls://` or `https://` listener; undefined: not encrypted. */
  readonly tlsConfig: ServerTlsConfig | undefined;
  listen(): Promise<void>;
  close(graceMs?: number): Promise<void>;
}

export class DnsListener implements ServerListener {
  /** Configured host: '' is the wildcard. */
  readonly host: string;
  /** Port actually bound (differs from the configured one only for port 0). */
  port: number;
  private tableRef: ServeTable;
  /** The UDP socket: the batched native one (native/udp.c) where the addon loaded, else node:dgram's. */
  private udp: dgram.Socket | NativeUdp | undefined;
  /** The UDP socket's local address and port, as the requests on it report them. */
  private udpLocalAddress = '';
  private udpLocalPort = 0;
  /** The UDP write discipline of `udpWriterTable` (a table with `udpWriter`) on `udpWriterSock`. */
  private udpWriter: UdpWriter | undefined;
  private udpWriterTable: ServeTable | undefined;
  private udpWriterSock: UdpSocket | undefined;
  private tcp: net.Server | undefined;
  private readonly conns = new Set<TcpConnection>();
  private inflight = 0;
  private idleWaiters: Array<() => void> = [];
  /** The configuration asked for port 0: the kernel picks, and UDP and TCP must agree. */
  private requestedPortZero = false;
  readonly tcpReadTimeoutMs: number;
  readonly tcpIdleTimeoutMs: number;
  readonly tcpMaxConnections: number;
  readonly transport: 'dns' | 'tls';
  tlsConfig: ServerTlsConfig | undefined;
  /**
   * PROXY protocol (proxyproto), fixed when the sockets open. As in CoreDNS, where caddy hands a reload the old
   * sockets only when they are not wrapped: a reload changes (or drops) the policy of a listener that had one,
   * and cannot add one to a listener opened without it.
   */
  proxy: ProxyProtocol | undefined;
  /** The client a PROXY header names (scratch for the UDP path: one datagram at a time). */
  private readonly peer: ProxiedPeer = { address: '', port: 0, proto: 'udp', tlv: undefined };

  constructor(host: string, port: number, table: ServeTable, opts: ListenerOptions = {}) {
    this.host = host;
    this.port = port;
    this.tableRef = table;
    this.tcpReadTimeoutMs = opts.tcpReadTimeoutMs ?? TCP_READ_TIMEOUT_MS;
    this.tcpIdleTimeoutMs = opts.tcpIdleTimeoutMs ?? TCP_IDLE_TIMEOUT_MS;
    this.tcpMaxConnections = opts.tcpMaxConnections ?? TCP_MAX_CONNECTIONS;
    this.transport = opts.transport ?? 'dns';
    this.tlsConfig = opts.tls;
    this.proxy = table.proxy;
  }

  /** The routing table in force; a reload replaces it (the UDP write discipline of the new one is made at once). */
  get table(): ServeTable { return this.tableRef; }
  set table(t: ServeTable) {
    this.tableRef = t;
    if (this.proxy !== undefined) this.proxy = t.proxy;
    const sock = this.udp;
    if (t.udpWriter !== undefined && sock !== undefined) this.writerFor(t, sock, this.udpLocalAddress, this.udpLocalPort);
  }

  /** Address for socket calls: the wildcard is dual-stack `::` where IPv6 exists. */
  private bindHost(family: 4 | 6): string {
    if (this.host !== '') return this.host;
    return family === 6 ? '::' : '0.0.0.0';
  }

  async listen(): Promise<void> {
    const isV6 = this.host.includes(':') || this.host === '';
    let lastErr: unknown;
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        if (this.transport === 'dns') await this.bindUdp(isV6 ? 6 : 4);
        await this.bindTcp(isV6 ? 6 : 4);
        return;
      } catch (e) {
        lastErr = e;
        await this.closeSockets();
        const code = (e as NodeJS.ErrnoException).code;
        // The wildcard falls back to IPv4 on hosts without IPv6.
        if (this.host === '' && isV6 && (code === 'EAFNOSUPPORT' || code === 'EADDRNOTAVAIL')) {
          if (this.transport === 'dns') await this.bindUdp(4);
          await this.bindTcp(4);
          return;
        }
        // Port 0: UDP got a port TCP could not take; try another.
        if (this.requestedPortZero && code === 'EADDRINUSE') { this.port = 0; continue; }
        break;
      }
    }
    throw lastErr;
  }

  private async bindUdp(family: 4 | 6): Promise<void> {
    if (this.port === 0) {
      this.requestedPortZero = true;
      try {
        this.port = await exclusiveUdpPort(this.bindHost(family), family);
      } catch (e) {
        throw listenError('ListenPacket', 'udp', this.host, 0, e as Error);
      }
    }
    // The addon binds IP literals only (anything else, which the listen addresses never are, goes to dgram).
    // The wildcards are literals without asking net.isIP: its IPv6 pattern costs ~6 ms of start to compile.
    const bound = this.bindHost(family).split('%')[0]!;
    const addon = bound === '::' || bound === '0.0.0.0' || net.isIP(bound) !== 0 ? udpAddon() : undefined;
    // Which UDP path serves (CoreDNS prints nothing at start: a debug line only, with the `debug` plugin).
    this.table.log.debug(`udp ${this.bindHost(family)}:${this.port}: ${addon !== undefined || udpAddon() === undefined ? udpPath() : 'node:dgram (not an IP literal)'}`);
    if (addon !== undefined) {
      const host = this.bindHost(family);
      let sock: NativeUdp;
      try {
        sock = NativeUdp.open(addon, host, this.port, UDP_RECV_BUFFER, this.onNativeQuery);
      } catch (e) {
        throw listenError('ListenPacket', 'udp', this.host, this.port, e as Error);
      }
      this.udp = sock;
      this.port = sock.port;
      // What dgram's address() would say: the bound literal ('::' for the wildcard).
      this.udpLocalAddress = plainAddress(host);
      this.udpLocalPort = sock.port;
      if (this.table.udpWriter !== undefined) this.writerFor(this.table, sock, this.udpLocalAddress, this.udpLocalPort);
      return;
    }
    // A receive buffer of up to UDP_RECV_BUFFER (the kernel caps it at net.core.rmem_max): one event
    // loop stalls for a GC pause or a busy CPU, and at thousands of queries a second the default
    // 208 KiB fills within that stall and the kernel drops queries (the soak drill measured it).
    // node:dgram is loaded only where the native path is not taken (start-up cost otherwise).
    const sock = process.getBuiltinModule('node:dgram').createSocket({ type: family === 6 ? 'udp6' : 'udp4', reuseAddr: true, reusePort: true, lookup: literalLookup, recvBufferSize: UDP_RECV_BUFFER });
    this.udp = sock;
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => { reject(listenError('ListenPacket', 'udp', this.host, this.port, err)); };
      sock.once('error', onError);
      sock.bind(this.port, this.bindHost(family), () => {
        sock.removeListener('error', onError);
        sock.on('error', () => { /* ICMP errors on send: nothing to do */ });
        this.port = sock.address().port;
        const local = sock.address();
        const localAddress = plainAddress(local.address);
        const localPort = local.port;
        this.udpLocalAddress = localAddress;
        this.udpLocalPort = localPort;
        if (this.table.udpWriter !== undefined) this.writerFor(this.table, sock, localAddress, localPort);
        sock.on('message', (buf, rinfo) => {
          const table = this.table;
          // With a write discipline (shed), replies go through the socket's writer for this configuration.
          const out = table.udpWriter === undefined ? sock : this.writerFor(table, sock, localAddress, localPort);
          const sink = new UdpSink(out, rinfo.address, rinfo.port);
          const remote = plainAddress(rinfo.address);
          if (this.proxy !== undefined) { this.proxied(table, buf, remote, rinfo.port, localAddress, localPort, sink); return; }
          this.track(serveMessage(table, buf, 'udp', remote, rinfo.port, localAddress, localPort, sink));
        });
        resolve();
      });
    });
  }

  /** One datagram of a native batch (`wire` stays valid while referenced: the addon never reuses its bytes). */
  private readonly onNativeQuery = (wire: Buffer, remote: string, remotePort: number, sink: NativeReplySink): void => {
    const table = this.table;
    const sock = this.udp;
    // With a write discipline (shed), replies go through the socket's writer for this configuration.
    if (table.udpWriter !== undefined && sock !== undefined) sink.writer = this.writerFor(table, sock, this.udpLocalAddress, this.udpLocalPort);
    if (this.proxy !== undefined) { this.proxied(table, wire, remote, remotePort, this.udpLocalAddress, this.udpLocalPort, sink); return; }
    this.track(serveMessage(table, wire, 'udp', remote, remotePort, this.udpLocalAddress, this.udpLocalPort, sink));
  };

  /** A datagram on an address with PROXY protocol: the header is stripped, the client it names is the remote. */
  private proxied(table: ServeTable, wire: Buffer, remote: string, remotePort: number, localAddress: string, localPort: number, sink: ReplySink): void {
    const peer = this.peer;
    peer.address = remote;
    peer.port = remotePort;
    peer.proto = 'udp';
    peer.tlv = undefined;
    const off = this.proxy!.datagram(wire, peer);
    if (off < 0) return;
    // The reply still goes to the datagram's sender (the sink keeps it): only the request sees the client.
    this.track(serveMessage(table, off === 0 ? wire : wire.subarray(off), peer.proto, peer.address, peer.port, localAddress, localPort, sink, peer.tlv));
  }

  private async bindTcp(family: 4 | 6): Promise<void> {
    if (this.port === 0) this.requestedPortZero = true;
    const cfg = this.tlsConfig;
    let server: net.Server;
    if (cfg === undefined) {
      server = net.createServer({ noDelay: true });
    } else {
      // node:tls is loaded only here: loading it costs a plain DNS server a noticeable share of its start. Not by
      // import(), which takes a builtin through the ES module loader (0.4 ms more).
      const { createServer } = process.getBuiltinModule('node:tls');
      // The handshake belongs to the first read (Go: the handshake runs inside it): the read timeout bounds it.
      server = createServer({ noDelay: true, ...serverTlsOptions(cfg, this.table.readTimeoutMs ?? this.tcpReadTimeoutMs) });
      server.on('keylog', (line: Buffer) => { this.tlsConfig?.keyLog?.(line); });
      server.on('tlsClientError', () => { /* failed handshake: the socket is closed */ });
    }
    server.maxConnections = this.tcpMaxConnections;
    this.tcp = server;
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => { reject(listenError('Listen', 'tcp', this.host, this.port, err)); };
      server.once('error', onError);
      // The IPv6 wildcard as no host at all: Node then binds `::` (dual-stack; `0.0.0.0` where the host has no
      // IPv6), as with host '::', without the dns.lookup of '::' whose net.isIP compiles the IPv6 pattern at start.
      const where = this.host === '' && family === 6 ? {} : { host: this.bindHost(family) };
      server.listen({ port: this.port, ...where, reusePort: true, ipv6Only: false }, () => {
        server.removeListener('error', onError);
        server.on('error', () => { /* accept errors: keep serving */ });
        if (this.port === 0 || this.transport === 'tls') this.port = (server.address() as net.AddressInfo).port;
        const accept = (socket: net.Socket): void => {
          const conn = new TcpConnection(this, socket);
          this.conns.add(conn);
          socket.once('close', () => { this.conns.delete(conn); });
        };
        if (cfg === undefined) {
          server.on('connection', accept);
        } else {
          server.on('secureConnection', (socket: tls.TLSSocket) => {
            if (!clientAllowed(this.tlsConfig ?? cfg, socket)) { socket.destroy(); return; }
            accept(socket);
          });
        }
        resolve();
      });
    });
  }

  /**
   * The UDP writer of `table` (which has a `udpWriter` factory) on `sock`: made once per configuration and
   * socket, when the socket is bound or the configuration replaced (CoreDNS: when the server starts serving).
   */
  private writerFor(table: ServeTable, sock: UdpSocket, localAddress: string, localPort: number): UdpWriter {
    if (this.udpWriterTable !== table || this.udpWriterSock !== sock || this.udpWriter === undefined) {
      this.udpWriterTable = table;
      this.udpWriterSock = sock;
      this.udpWriter = table.udpWriter!(sock, table.name, localAddress, localPort);
    }
    return this.udpWriter;
  }

  /** A reload: the new configuration's table and certificate (the socket stays; new handshakes use the new one). */
  reconfigure(table: ServeTable, cfg: ServerTlsConfig): void {
    this.table = table;
    this.tlsConfig = cfg;
    const server = this.tcp;
    // Only a listener made with a certificate has a TLS server (its kind never changes: see Instance.start).
    if (server !== undefined && 'setSecureContext' in server) (server as tls.Server).setSecureContext(serverTlsOptions(cfg, table.readTimeoutMs ?? this.tcpReadTimeoutMs));
  }

  /** Count queries in flight so a graceful stop can wait for them. */
  track(p: void | Promise<void>): void {
    if (p === undefined) return;
    this.inflight++;
    p.then(() => { this.done(); }, () => { this.done(); });
  }

  private done(): void {
    if (--this.inflight === 0 && this.idleWaiters.length > 0) {
      const w = this.idleWaiters;
      this.idleWaiters = [];
      for (const f of w) f();
    }
  }

  /**
   * Graceful stop: no new TCP connections; UDP keeps being answered while
   * queries are in flight (at most `graceMs`), because a socket that stays open
   * but stops reading would swallow what the kernel still steers to it; then
   * everything closes, and other SO_REUSEPORT members take the traffic.
   */
  async close(graceMs = GRACEFUL_STOP_MS): Promise<void> {
    const udp = this.udp, tcp = this.tcp;
    this.udp = undefined;
    this.tcp = undefined;
    const deadline = Date.now() + graceMs;
    if (tcp) tcp.close();
    if (this.inflight > 0) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, graceMs);
        this.idleWaiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
    for (const c of this.conns) c.destroy();
    if (udp instanceof NativeUdp) {
      await nativeSendsDone(udp, this.udpWriter, deadline);
      await udp.close();
    } else if (udp) {
      await udpSendsDone(udp, this.udpWriter, deadline);
      await new Promise<void>((resolve) => { udp.close(() => { resolve(); }); });
    }
  }

  private async closeSockets(): Promise<void> {
    const udp = this.udp, tcp = this.tcp;
    this.udp = undefined;
    this.tcp = undefined;
    if (udp instanceof NativeUdp) await udp.close();
    else if (udp) await new Promise<void>((r) => { try { udp.close(() => { r(); }); } catch { r(); } });
    if (tcp) await new Promise<void>((r) => { tcp.close(() => { r(); }); });
  }
}

/**
 * A UDP port nobody holds, for a listener asked for port 0. The kernel's own pick for a socket with SO_REUSEADDR and
 * SO_REUSEPORT (which the listeners need for -workers and multisocket) may be a port that another such socket of
 * the same user holds: the new socket then joins that one's group and takes a share of its queries (seen in the
 * test suite as one server answering another's query). A plain socket's pick is a port nobody holds: take it, let
 * it go, and bind the listener to it.
 */
function exclusiveUdpPort(host: string, family: 4 | 6): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = process.getBuiltinModule('node:dgram').createSocket({ type: family === 6 ? 'udp6' : 'udp4', lookup: literalLookup });
    probe.once('error', reject);
    probe.bind(0, host, () => {
      const port = probe.address().port;
      probe.close(() => { resolve(port); });
    });
  });
}

/**
 * The UDP server socket's address lookup. Replies go to the address their query came from, an IP literal:
 * Node's default (dns.lookup) would match it against its IPv6 regular expression and defer the send to a
 * process.nextTick for nothing (about 5% of a cache hit's CPU, profiled). A literal is handed back at once
 * (anything else, which no server path sends to, still goes through dns.lookup).
 */
function literalLookup(address: string, options: LookupOneOptions | number, cb: (err: NodeJS.ErrnoException | null, address: string, family: number) => void): void {
  // Host names never contain ':'.
  if (address.includes(':')) { cb(null, address, 6); return; }
  if (net.isIPv4(address)) { cb(null, address, 4); return; }
  process.getBuiltinModule('node:dns').lookup(address, typeof options === 'number' ? { family: options } : options, cb);
}

/**
 * Until the UDP replies already written have left: Node may hand a datagram to the socket only after
 * a tick (a send issued before the socket is bound waits for the bind) and queues it in libuv while the socket
 * buffer is full — closing the socket before either drops the reply (the one to the query that
 * finished last, typically). Nothing is counted per send: one setImmediate lets every pending
 * lookup callback run, then libuv's own queue count, and what a write discipline (shed) still holds,
 * say what is still waiting (polled only when something is, until `deadline`).
 */
async function udpSendsDone(udp: dgram.Socket, writer: UdpWriter | undefined, deadline: number): Promise<void> {
  await new Promise<void>((resolve) => { setImmediate(resolve); });
  while ((udp.getSendQueueCount() > 0 || (writer !== undefined && writer.pending() > 0)) && Date.now() < deadline) {
    await new Promise<void>((resolve) => { setTimeout(resolve, 1); });
  }
}

/** Until the native socket's replies have left (queued in JavaScript, or kept by the addon after EAGAIN). */
async function nativeSendsDone(udp: NativeUdp, writer: UdpWriter | undefined, deadline: number): Promise<void> {
  await new Promise<void>((resolve) => { setImmediate(resolve); });
  udp.flushNow();
  while ((udp.pendingCount() > 0 || (writer !== undefined && writer.pending() > 0)) && Date.now() < deadline) {
    await new Promise<void>((resolve) => { setTimeout(resolve, 1); });
  }
}

/** Where a UDP reply goes: the socket the query came in on, back to its sender. */
class UdpSink implements ReplySink {
  /** The socket, or the write discipline installed on it. */
  private readonly sock: UdpSocket | UdpWriter;
  private readonly address: string;
  private readonly port: number;
  constructor(sock: UdpSocket | UdpWriter, address: string, port: number) {
    this.sock = sock;
    this.address = address;
    this.port = port;
  }
  send(wire: Uint8Array): void {
    try {
      this.sock.send(wire, this.port, this.address);
    } catch {
      // The socket closed after the stop grace: the reply has nowhere to go (CoreDNS ignores the write error).
    }
  }
}

/**
 * One DNS-over-TCP connection: length-framed messages served strictly one at a time, in order.
 * Like miekg's serveTCPConn + readTCP, each message read has a fixed deadline from the moment the
 * read starts (the accept for the first, the previous reply for the others); none applies while a
 * query is being answered.
 */
class TcpConnection implements ReplySink {
  private readonly listener: DnsListener;
  private readonly socket: net.Socket;
  private pending: Buffer | undefined;
  private busy = false;
  /** A message is being read: the deadline applies (false while one is being answered). */
  private reading = true;
  /** The deadline of the current read; re-armed with refresh(), replaced only when its length changes. */
  private timer: NodeJS.Timeout;
  private timerMs: number;
  private remoteAddress: string;
  private remotePort: number;
  /** `tcp`, or what a PROXY header's transport makes the request report. */
  private proto: 'udp' | 'tcp' = 'tcp';
  /** The PROXY header's TLVs in hex, for every query of the connection (proxyproto's tlv_metadata). */
  private proxyTlv: string | undefined;
  /** PROXY protocol: the connection's header is not decided yet (its first bytes wait in `pending`). */
  private proxyHead: boolean;
  private readonly localAddress: string;
  private readonly localPort: number;
  /** Queries read from this connection (for `timeouts { maxtcpqueries }`). */
  private served = 0;
  private ended = false;
  /** Armed while a reply waits in user space longer than the write timeout allows. */
  private writeTimer: NodeJS.Timeout | undefined;
  /** Reading is paused (TCP_MAX_BUFFERED_BYTES reached, in or out). */
  private paused = false;

  constructor(listener: DnsListener, socket: net.Socket) {
    this.listener = listener;
    this.socket = socket;
    this.remoteAddress = plainAddress(socket.remoteAddress ?? '');
    this.remotePort = socket.remotePort ?? 0;
    this.localAddress = plainAddress(socket.localAddress ?? '');
    this.localPort = socket.localPort ?? 0;
    this.proxyHead = listener.proxy !== undefined;
    this.timerMs = listener.table.readTimeoutMs ?? listener.tcpReadTimeoutMs;
    this.timer = setTimeout(this.onDeadline, this.timerMs).unref();
    socket.on('error', () => { /* reset by peer etc.: the close event cleans up */ });
    socket.on('close', () => { clearTimeout(this.timer); if (this.writeTimer !== undefined) clearTimeout(this.writeTimer); });
    socket.on('data', (chunk) => { this.onData(chunk); });
    socket.on('drain', () => { this.throttle(); });
  }

  /** Pause reading while too much waits behind the query in flight or in front of a client that does not read. */
  private throttle(): void {
    const sock = this.socket;
    const hold = (this.busy && (this.pending?.length ?? 0) > TCP_MAX_BUFFERED_BYTES) || sock.writableLength > TCP_MAX_BUFFERED_BYTES;
    if (hold && !this.paused) { this.paused = true; sock.pause(); } else if (!hold && this.paused) { this.paused = false; sock.resume(); }
  }

  /** The read did not complete in time: close quietly (miekg: the read fails, the connection ends). */
  private readonly onDeadline = (): void => {
    if (this.reading) this.socket.destroy();
  };

  /** The idle time before a later query must have arrived: the `timeouts` plugin's, else the listener's. */
  private idleMs(): number { return this.listener.table.idleTimeoutMs ?? this.listener.tcpIdleTimeoutMs; }

  /** Start reading the next message: it must be complete within `ms` from now. */
  private startRead(ms: number): void {
    this.reading = true;
    if (ms === this.timerMs) {
      this.timer.refresh();
      return;
    }
    clearTimeout(this.timer);
    this.timerMs = ms;
    this.timer = setTimeout(this.onDeadline, ms).unref();
  }

  send(wire: Uint8Array): void {
    if (this.socket.destroyed || wire.length > 65535) return;
    const framed = Buffer.allocUnsafe(wire.length + 2);
    framed.writeUInt16BE(wire.length, 0);
    framed.set(wire, 2);
    this.socket.write(framed);
    // Write deadline: replies queued in user space (the kernel's buffers are full: the client does
    // not read) that make no progress for the write timeout close the connection, as a Go write
    // deadline ends a blocked write. Armed only when something stays queued (checked after a corked batch).
    if (this.socket.writableCorked === 0) this.checkWriteQueue();
  }

  private checkWriteQueue(): void {
    if (this.socket.writableLength > 0 && this.writeTimer === undefined) this.armWriteTimer();
  }

  private armWriteTimer(): void {
    const sock = this.socket;
    const handed = sock.bytesWritten - sock.writableLength;
    this.writeTimer = setTimeout(() => {
      this.writeTimer = undefined;
      if (sock.destroyed || sock.writableLength === 0) return;
      if (sock.bytesWritten - sock.writableLength === handed) sock.destroy();
      else this.armWriteTimer();
    }, this.listener.table.writeTimeoutMs ?? TCP_WRITE_TIMEOUT_MS);
    this.writeTimer.unref();
  }

  destroy(): void {
    if (this.writeTimer !== undefined) clearTimeout(this.writeTimer);
    this.socket.destroy();
  }

  /** `timeouts { maxtcpqueries }` reached: no more queries are read; the connection closes after the last reply. */
  private limitReached(): boolean {
    const max = this.listener.table.maxTcpQueries ?? -1;
    if (max <= 0 || this.served < max) return false;
    this.pending = undefined;
    this.ended = true;
    this.socket.end();
    return true;
  }

  private onData(chunk: Buffer): void {
    if (this.ended) return;
    this.pending = this.pending === undefined ? chunk : Buffer.concat([this.pending, chunk]);
    if (this.proxyHead && !this.proxyHeader()) return;
    if (!this.busy) this.drain();
    this.throttle();
  }

  /**
   * Decide the PROXY header from the connection's first bytes (go-proxyproto's Conn, on the first read): false
   * while more bytes are needed or once the connection is closed, true when the DNS stream may be read.
   */
  private proxyHeader(): boolean {
    const proxy = this.listener.proxy;
    if (proxy === undefined) { this.proxyHead = false; return true; }
    const peer: ProxiedPeer = { address: this.remoteAddress, port: this.remotePort, proto: 'tcp', tlv: undefined };
    const n = proxy.stream(this.pending!, peer);
    if (n === -2) return false;
    if (n === -1) {
      // go-proxyproto fails the read; miekg closes the connection without a word.
      this.ended = true;
      this.pending = undefined;
      this.socket.destroy();
      return false;
    }
    this.proxyHead = false;
    this.remoteAddress = peer.address;
    this.remotePort = peer.port;
    this.proto = peer.proto;
    this.proxyTlv = peer.tlv;
    if (n > 0) this.pending = this.pending!.length === n ? undefined : this.pending!.subarray(n);
    return true;
  }

  private drain(): void {
    // Replies to the queries already received leave together (one write; over TLS, one record).
    const sock = this.socket;
    sock.cork();
    try {
      this.drainCorked();
    } finally {
      sock.uncork();
      if (!sock.destroyed) this.checkWriteQueue();
    }
  }

  private drainCorked(): void {
    let served = false;
    for (;;) {
      const pending = this.pending;
      if (pending === undefined || pending.length < 2) break;
      const len = pending.readUInt16BE(0);
      if (pending.length < len + 2) break; // the read goes on, under the deadline it started with
      const frame = pending.subarray(2, len + 2);
      this.pending = pending.length === len + 2 ? undefined : pending.subarray(len + 2);
      // No read deadline while a query is being answered; the next read's starts after the reply.
      this.reading = false;
      this.served++;
      const l = this.listener;
      const p = serveMessage(l.table, frame, this.proto, this.remoteAddress, this.remotePort,
        this.localAddress, this.localPort, this, this.proxyTlv);
      if (p !== undefined) {
        this.busy = true;
        l.track(p);
        p.then(() => { this.resume(); }, () => { this.resume(); });
        return;
      }
      served = true;
      if (this.limitReached()) return;
    }
    if (served) this.startRead(this.idleMs());
  }

  private resume(): void {
    this.busy = false;
    if (this.socket.destroyed || this.limitReached()) return;
    this.startRead(this.idleMs());
    this.drain();
    this.throttle();
  }
}

export function listenError(op: string, proto: string, host: string, port: number, err: Error): Error {
  const h = host.includes(':') ? `[${host}]` : host;
  const code = (err as NodeJS.ErrnoException).code;
  const reason = code === 'EADDRINUSE' ? 'bind: address already in use'
    : code === 'EACCES' ? 'bind: permission denied'
      : code === 'EADDRNOTAVAIL' ? 'bind: cannot assign requested address'
        : err.message;
  // Keep the errno code: the port-0 retry and callers decide on it.
  return Object.assign(new Error(`${op}: listen ${proto} ${h}:${port}: ${reason}`), { code });
}
