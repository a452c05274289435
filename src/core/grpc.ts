// One DNS-over-gRPC listen address, as CoreDNS's ServergRPC: the unary rpc `/coredns.dns.DnsService/Query`
// (pb/dns.proto: `message DnsPacket { bytes msg = 1; }` both ways), served by node:http2 over TLS (ALPN h2
// only, the `tls` plugin's certificate) or, without `tls`, over cleartext HTTP/2 with prior knowledge (h2c,
// as grpc-go serves a listener with no TLS). One DNS message per call; the request takes the same path as
// DoH's (proto `tcp`, as CoreDNS's peer is a TCPAddr). When the chain writes nothing the request itself is
// sent back, as CoreDNS's gRPCresponse does (it starts out holding the request).
//
// Errors are grpc-go's: the status code, the HTTP status and the message text of each case were taken from
// CoreDNS 1.15.0 answering malformed calls (the test suite compares them). Error replies are trailers-only
// (one HEADERS frame with END_STREAM), successes HEADERS, one DATA, trailers `grpc-status: 0` and an empty
// `grpc-message`.

import http2 from 'node:http2';
import net from 'node:net';
import { serveHttpsMessage, type ReplySink, type ServeTable } from './serve.ts';
import { serverTlsOptions } from './tls.ts';
import { Inflight, listenTcp, listenWildcard, watchTlsServer } from './http-listen.ts';
import { GRACEFUL_STOP_MS, type ServerListener } from './listener.ts';
import type { ServerTlsConfig } from '../plugin/plugin.ts';
import { NO_ENDPOINTS, socketEndpoints, type Endpoints } from './endpoints.ts';
import { decodeMessage } from '../wire/decode.ts';
import { Opcode } from '../wire/constants.ts';
import { decodeDnsPacket, encodeGrpcMessage, grpcFrame, GRPC_PATH, MAX_PAYLOAD } from '../wire/grpc.ts';

export { DEFAULT_GRPC_MAX_CONNECTIONS, DEFAULT_GRPC_MAX_STREAMS } from './tls.ts';

const MAX_DNS = 65535;
const SERVICE = 'coredns.dns.DnsService';
/**
 * grpc-go's default ConnectionTimeout (120 s): the TLS handshake and the client's HTTP/2 preface must be done
 * within it. A field, not a constant, so that a test can wait less than two minutes for it.
 */
export const grpcServerTimeouts = { handshakeMs: 120_000 };
/** Connections waiting for a slot under max_connections, at most (Linux's default somaxconn). */
const MAX_WAITING = 4096;

/** gRPC status codes used here. */
const Code = { UNKNOWN: 2, INVALID_ARGUMENT: 3, RESOURCE_EXHAUSTED: 8, UNIMPLEMENTED: 12, INTERNAL: 13 } as const;

export interface GrpcListenerOptions {
  /** The blocks' certificate; undefined: cleartext HTTP/2 (h2c). */
  tls: ServerTlsConfig | undefined;
  /** `grpc_server { max_connections }` (0: unlimited); default 200. */
  maxConnections: number;
  /** `grpc_server { max_streams }` (0: unlimited); default 256. */
  maxStreams: number;
}

export class GrpcListener implements ServerListener {
  readonly host: string;
  port: number;
  readonly transport = 'grpc';
  table: ServeTable;
  tlsConfig: ServerTlsConfig | undefined;
  /** The listening socket: connections are handed to `server` within the connection limit. */
  private front: net.Server | undefined;
  private server: http2.Http2Server | http2.Http2SecureServer | undefined;
  /** Connections being served (counted against max_connections) and those waiting for a slot. */
  private active = 0;
  private readonly waiting: net.Socket[] = [];
  private opts: GrpcListenerOptions;
  private readonly sockets = new Set<net.Socket>();
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  private readonly inflight = new Inflight();

  constructor(host: string, port: number, table: ServeTable, opts: GrpcListenerOptions) {
    this.host = host;
    this.port = port;
    this.table = table;
    this.tlsConfig = opts.tls;
    this.opts = opts;
  }

  listen(): Promise<void> {
    return listenWildcard(this.host, (wildcard) => this.bind(wildcard));
  }

  private settings(): http2.Settings {
    // grpc-go's MaxConcurrentStreams, not set when 0 (unbounded).
    return this.opts.maxStreams > 0 ? { maxConcurrentStreams: this.opts.maxStreams } : {};
  }

  private async bind(wildcard: string): Promise<void> {
    const cfg = this.tlsConfig;
    let server: http2.Http2Server | http2.Http2SecureServer;
    if (cfg === undefined) {
      server = http2.createServer({ settings: this.settings() });
    } else {
      // CoreDNS sets NextProtos to h2 alone: gRPC needs HTTP/2.
      const s = http2.createSecureServer({ ...serverTlsOptions(cfg, grpcServerTimeouts.handshakeMs, ['h2']), settings: this.settings() });
      watchTlsServer(s, () => this.tlsConfig, cfg);
      server = s;
    }
    server.on('error', () => { /* errors of one connection: it closes */ });
    server.on('session', (session: http2.ServerHttp2Session) => {
      this.sessions.add(session);
      // grpc-go's ConnectionTimeout covers the HTTP/2 handshake too: a connection whose client never sends its
      // preface and SETTINGS is closed after it, so silent connections do not hold max_connections' slots.
      const preface = setTimeout(() => { session.destroy(); }, grpcServerTimeouts.handshakeMs);
      session.once('remoteSettings', () => { clearTimeout(preface); });
      session.once('close', () => { clearTimeout(preface); });
      session.on('error', () => { /* a broken connection: its streams are gone */ });
      session.once('close', () => { this.sessions.delete(session); });
    });
    server.on('sessionError', () => { /* protocol errors of one connection: that connection closes */ });
    server.on('stream', this.onStream);
    this.server = server;
    // CoreDNS wraps its listener in netutil.LimitListener: past max_connections a new connection is not
    // refused, it waits (accepted, unread) until one closes. The same here: the listening socket is ours, and
    // a connection reaches the HTTP/2 server only when it has a slot.
    const front = net.createServer({ pauseOnConnect: true, noDelay: true }, (socket) => { this.accept(socket); });
    this.front = front;
    this.port = await listenTcp(front, this.host, this.port, wildcard);
  }

  private accept(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('error', () => { /* reset by the peer: 'close' follows */ });
    socket.once('close', () => {
      this.sockets.delete(socket);
      const i = this.waiting.indexOf(socket);
      if (i >= 0) this.waiting.splice(i, 1);
    });
    const max = this.opts.maxConnections;
    if (max === 0 || this.active < max) {
      this.serve(socket);
      return;
    }
    // Bounded as a kernel backlog would be: beyond it, connections are dropped.
    if (this.waiting.length >= MAX_WAITING) {
      socket.destroy();
      return;
    }
    this.waiting.push(socket);
  }

  private serve(socket: net.Socket): void {
    const server = this.server;
    if (server === undefined) {
      socket.destroy();
      return;
    }
    this.active++;
    socket.once('close', () => {
      this.active--;
      this.admit();
    });
    server.emit('connection', socket);
    socket.resume();
  }

  /** Serve waiting connections while there are slots. */
  private admit(): void {
    const max = this.opts.maxConnections;
    while (this.waiting.length > 0 && (max === 0 || this.active < max)) this.serve(this.waiting.shift()!);
  }

  private readonly onStream = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void => {
    stream.on('error', () => { /* the client reset the stream: nothing to answer */ });
    const ct = headers['content-type'] ?? '';
    const replyType = grpcContentType(ct);
    if (replyType === undefined) {
      fail(stream, 415, 'application/grpc', Code.INVALID_ARGUMENT, `invalid gRPC request content-type ${goQuote(ct)}`);
      return;
    }
    const method = headers[':method'] ?? '';
    if (method !== 'POST') {
      fail(stream, 405, replyType, Code.INTERNAL, `Received a HEADERS frame with :method ${goQuote(method)} which should be POST`);
      return;
    }
    const path = headers[':path'] ?? '';
    if (path !== GRPC_PATH) {
      fail(stream, 200, replyType, Code.UNIMPLEMENTED, unknownMethod(path));
      return;
    }
    const enc = headers['grpc-encoding'];
    if (enc !== undefined && enc !== '' && enc !== 'identity') {
      fail(stream, 200, replyType, Code.UNIMPLEMENTED, `grpc: Decompressor is not installed for grpc-encoding ${goQuote(String(enc))}`);
      return;
    }
    new CallReader(this, stream, replyType);
  };

  /** A complete request body: check it as grpc-go and CoreDNS's Query do, then serve the DNS message. */
  handle(stream: http2.ServerHttp2Stream, replyType: string, msg: Buffer): void {
    const peer = this.peerOf(stream.session);
    const sink = new CaptureSink();
    // serveHttpsMessage makes CoreDNS's checks (and decodes the message once); only a refused message is looked
    // at again, for the error text.
    const p = msg.length > MAX_DNS ? false : serveHttpsMessage(this.table, msg, peer, sink);
    if (p === false) {
      fail(stream, 200, replyType, Code.UNKNOWN, dnsRequestError(msg) ?? 'dns request rejected');
      return;
    }
    if (p === undefined) {
      respond(stream, replyType, sink.wire ?? msg);
      return;
    }
    this.inflight.begin();
    const done = (): void => { this.done(); respond(stream, replyType, sink.wire ?? msg); };
    p.then(done, done);
  }

  /** The connection's addresses, read once per connection (session.socket is a proxy: each read costs). */
  private peerOf(session: http2.Http2Session | undefined): Endpoints {
    if (session === undefined) return NO_ENDPOINTS;
    let p = peers.get(session);
    if (p === undefined) {
      p = socketEndpoints(session.socket);
      peers.set(session, p);
    }
    return p;
  }

  private done(): void {
    this.inflight.end();
  }

  /** Take a new configuration's certificate and limits (a reload keeps the socket). */
  reconfigure(table: ServeTable, opts: GrpcListenerOptions): void {
    this.table = table;
    this.tlsConfig = opts.tls;
    this.opts = opts;
    const s = this.server;
    if (s === undefined) return;
    if (opts.tls !== undefined && 'setSecureContext' in s) s.setSecureContext(serverTlsOptions(opts.tls, grpcServerTimeouts.handshakeMs, ['h2']));
    for (const session of this.sessions) {
      if (!session.destroyed && !session.closed) session.settings(this.settings());
    }
    this.admit();
  }

  /**
   * Graceful stop (grpc-go's GracefulStop): no new connections, a GOAWAY on every connection, calls in flight
   * answered (at most `graceMs`), then whatever is left is closed.
   */
  async close(graceMs = GRACEFUL_STOP_MS): Promise<void> {
    const s = this.server;
    const front = this.front;
    this.server = undefined;
    this.front = undefined;
    if (s === undefined || front === undefined) return;
    const closed = new Promise<void>((resolve) => { front.close(() => { resolve(); }); });
    for (const w of this.waiting.splice(0)) w.destroy();
    for (const session of this.sessions) {
      try { session.close(); } catch { /* already closing */ }
    }
    await this.inflight.drained(graceMs);
    for (const sock of this.sockets) sock.destroy();
    await closed;
  }
}

/**
 * Reads one call's body: the 5-octet gRPC prefix (flags, big-endian length) and the message, at most
 * MAX_PAYLOAD octets (checked on the declared length, before the message is read, as grpc-go does), then
 * END_STREAM. Buffers at most one message and the next prefix: whatever follows cannot change the answer.
 */
class CallReader {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private msgLen = -1;
  private decided = false;

  private readonly listener: GrpcListener;
  private readonly stream: http2.ServerHttp2Stream;
  private readonly replyType: string;

  constructor(listener: GrpcListener, stream: http2.ServerHttp2Stream, replyType: string) {
    this.listener = listener;
    this.stream = stream;
    this.replyType = replyType;
    stream.on('data', this.onData);
    stream.once('end', this.onEnd);
  }

  private readonly onData = (chunk: Buffer): void => {
    if (this.decided) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.msgLen < 0 && this.size >= 5) {
      const head = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
      this.msgLen = head.readUInt32BE(1);
      if (this.msgLen > MAX_PAYLOAD) {
        this.finish(Code.RESOURCE_EXHAUSTED, `grpc: received message larger than max (${this.msgLen} vs. ${MAX_PAYLOAD})`);
        return;
      }
    }
    // A second message's prefix: a unary call carries one.
    if (this.msgLen >= 0 && this.size >= 5 + this.msgLen + 5) {
      this.finish(Code.INTERNAL, 'cardinality violation: received multiple request messages for non-client-streaming RPC');
    }
  };

  private readonly onEnd = (): void => {
    if (this.decided) return;
    this.decided = true;
    if (this.size === 0) {
      fail(this.stream, 200, this.replyType, Code.INTERNAL, 'cardinality violation: received no request message from non-client-streaming RPC');
      return;
    }
    if (this.msgLen < 0 || this.size !== 5 + this.msgLen) {
      fail(this.stream, 200, this.replyType, Code.INTERNAL, 'unexpected EOF');
      return;
    }
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
    const flags = body[0]!;
    if (flags === 1) {
      fail(this.stream, 200, this.replyType, Code.INTERNAL, 'grpc: compressed flag set with identity or empty encoding');
      return;
    }
    if (flags !== 0) {
      fail(this.stream, 200, this.replyType, Code.INTERNAL, `grpc: received unexpected payload format ${flags}`);
      return;
    }
    const msg = decodeDnsPacket(body, 5, body.length);
    if (msg === undefined) {
      fail(this.stream, 200, this.replyType, Code.INTERNAL, 'grpc: failed to unmarshal the received message: proto:\u00a0cannot parse invalid wire-format data');
      return;
    }
    this.listener.handle(this.stream, this.replyType, msg);
  };

  private finish(code: number, message: string): void {
    this.decided = true;
    this.chunks.length = 0;
    fail(this.stream, 200, this.replyType, code, message);
  }
}

const peers = new WeakMap<http2.Http2Session, Endpoints>();

/** The reply the chain wrote (the first one, as CoreDNS's writer keeps one message). */
class CaptureSink implements ReplySink {
  wire: Uint8Array | undefined;
  send(wire: Uint8Array): void { this.wire ??= wire; }
}

/**
 * CoreDNS's checks before serving (Query, dnsutil.UnpackRequest, miekg's DefaultMsgAcceptFunc): the size, the
 * header, a query that is not a response, opcode QUERY or NOTIFY, one question, at most one answer, one
 * authority and two additional records, a message that unpacks. The error text, or undefined.
 */
export function dnsRequestError(msg: Buffer): string | undefined {
  if (msg.length > MAX_DNS) return `dns message exceeds size limit: ${msg.length}`;
  if (msg.length < 12) return 'dns: buffer size too small';
  const opcode = (msg[2]! >> 3) & 0xf;
  if ((msg[2]! & 0x80) !== 0 || (opcode !== Opcode.QUERY && opcode !== Opcode.NOTIFY)
    || msg.readUInt16BE(4) !== 1 || msg.readUInt16BE(6) > 1 || msg.readUInt16BE(8) > 1 || msg.readUInt16BE(10) > 2) {
    return 'dns request rejected';
  }
  try {
    decodeMessage(msg);
  } catch (e) {
    // miekg's unpack errors name the part that failed; nodens's decoder words them its own way.
    return e instanceof Error ? e.message : String(e);
  }
  return undefined;
}

/** grpc-go's content-type check: `application/grpc`, or with `+SUBTYPE`/`;SUBTYPE`; the reply's type, or undefined. */
function grpcContentType(ct: string): string | undefined {
  if (ct === 'application/grpc') return ct;
  if (ct.length > 16 && ct.startsWith('application/grpc') && (ct[16] === '+' || ct[16] === ';')) return 'application/grpc+' + ct.slice(17);
  return undefined;
}

function unknownMethod(path: string): string {
  const sm = path.startsWith('/') ? path.slice(1) : path;
  const pos = sm.lastIndexOf('/');
  if (pos < 0) return `malformed method name: ${goQuote(path)}`;
  const service = sm.slice(0, pos);
  if (service === SERVICE) return `unknown method ${sm.slice(pos + 1)} for service ${service}`;
  return `unknown service ${service}`;
}

/** Go's %q of printable ASCII (the texts here): quotes, backslashes escaped. */
function goQuote(s: string): string {
  return JSON.stringify(s);
}

/** A trailers-only error reply, then the stream is reset with NO_ERROR if the client is still sending (grpc-go). */
function fail(stream: http2.ServerHttp2Stream, httpStatus: number, contentType: string, code: number, message: string): void {
  if (stream.destroyed || stream.headersSent) return;
  try {
    stream.respond({
      ':status': httpStatus, 'content-type': contentType, 'grpc-status': String(code), 'grpc-message': encodeGrpcMessage(message),
    }, { endStream: true });
  } catch {
    return; // the stream or its session closed meanwhile
  }
  if (!stream.readableEnded) {
    // Nothing more is read: stop the client's upload once the reply is out.
    stream.removeAllListeners('data');
    stream.resume();
    setImmediate(() => { if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_NO_ERROR); });
  }
}

const OK_TRAILERS = { 'grpc-status': '0', 'grpc-message': '' };

function respond(stream: http2.ServerHttp2Stream, contentType: string, wire: Uint8Array): void {
  if (stream.destroyed || stream.headersSent) return;
  try {
    stream.respond({ ':status': 200, 'content-type': contentType }, { waitForTrailers: true });
    stream.once('wantTrailers', () => {
      try { stream.sendTrailers(OK_TRAILERS); } catch { /* the stream closed meanwhile */ }
    });
    stream.end(grpcFrame(wire));
  } catch {
    // The stream or its session closed meanwhile: nothing to answer.
  }
}

