// One DNS-over-HTTPS listen address (RFC 8484), as CoreDNS's ServerHTTPS: `/dns-query` by GET (`?dns=`,
// base64url without padding) or POST (the message as the body), HTTP/2 and HTTP/1.1 over TLS (ALPN h2,
// http/1.1), plain HTTP/1.1 when the blocks have no `tls` certificate. Bad paths are 404, requests that do
// not carry a DNS query 400, a chain that wrote nothing 500; a reply is 200 with
// `Cache-Control: max-age=` its smallest TTL (CoreDNS's dnsutil.MinimalTTLWithMaximum).

import { channel } from 'node:diagnostics_channel';
import type http from 'node:http';
import type net from 'node:net';
import tls from 'node:tls';
import { serveHttpsMessage, type ReplySink, type ServeTable } from './serve.ts';
import { serverTlsOptions } from './tls.ts';
import { Inflight, listenTcp, listenWildcard, watchTlsServer } from './http-listen.ts';
import { GRACEFUL_STOP_MS, TCP_IDLE_TIMEOUT_MS, TCP_READ_TIMEOUT_MS, type ServerListener } from './listener.ts';
import { ServeChannels, type HttpsResponseEvent, type ServerTlsConfig } from '../plugin/plugin.ts';
import { skipName } from '../wire/scan.ts';
import { Opcode, Rcode, RRType } from '../wire/constants.ts';
import { H2Connection, type H2Stream } from './h2.ts';
import { socketEndpoints, type Endpoints } from './endpoints.ts';
import { HPACK_INDEX, HpackBlock } from './hpack.ts';

export { DEFAULT_HTTPS_MAX_CONNECTIONS, DEFAULT_HTTPS_MAX_STREAMS } from './tls.ts';
/** doh.Path, doh.MimeType. */
const PATH = '/dns-query';
const MIME = 'application/dns-message';
/** doh's maxDNSQuerySize and the longest base64 text of such a query. */
const MAX_QUERY = 65536;
const MAX_BASE64 = Math.floor((MAX_QUERY * 8 + 5) / 6);

export interface HttpsListenerOptions {
  /** The blocks' certificate; undefined: plain HTTP/1.1. */
  tls: ServerTlsConfig | undefined;
  /** `https { max_connections }` (0: unlimited); default 200. */
  maxConnections: number;
  /** `https { max_streams }` (0: the HTTP/2 default); default 250. */
  maxStreams: number;
}

const httpsChannel = channel(ServeChannels.https);

export class DohListener implements ServerListener {
  readonly host: string;
  port: number;
  readonly transport = 'https';
  table: ServeTable;
  tlsConfig: ServerTlsConfig | undefined;
  private server: http.Server | tls.Server | undefined;
  /** HTTP/1.1 over TLS: the connections of the TLS server that did not negotiate h2. */
  private h1: http.Server | undefined;
  private opts: HttpsListenerOptions;
  private readonly sockets = new Set<net.Socket>();
  private readonly inflight = new Inflight();
  /** The open HTTP/2 connections (a graceful stop closes each). */
  private readonly conns = new Set<H2Connection>();

  constructor(host: string, port: number, table: ServeTable, opts: HttpsListenerOptions) {
    this.host = host;
    this.port = port;
    this.table = table;
    this.tlsConfig = opts.tls;
    this.opts = opts;
  }

  listen(): Promise<void> {
    return listenWildcard(this.host, (wildcard) => this.bind(wildcard));
  }

  private async bind(wildcard: string): Promise<void> {
    const t = this.table;
    const readMs = t.readTimeoutMs ?? TCP_READ_TIMEOUT_MS;
    const idleMs = t.idleTimeoutMs ?? TCP_IDLE_TIMEOUT_MS;
    const cfg = this.tlsConfig;
    let server: http.Server | tls.Server;
    if (cfg === undefined) {
      server = this.http1Server(readMs, idleMs);
    } else {
      // TLS with ALPN h2 and http/1.1: h2 connections are served by h2.ts, the others (http/1.1, or no ALPN) by
      // node:http with Go's ReadTimeout and IdleTimeout, made at the first of them (node:http is not loaded
      // during the start of a server that only sees HTTP/2).
      const s = tls.createServer(serverTlsOptions(cfg, readMs, ['h2', 'http/1.1']));
      watchTlsServer(s, () => this.tlsConfig, cfg);
      s.on('secureConnection', (socket: tls.TLSSocket) => {
        if (socket.destroyed) return; // refused by the client_auth policy
        if (socket.alpnProtocol === 'h2') this.startH2(socket, idleMs);
        else (this.h1 ??= this.http1Server(readMs, idleMs)).emit('connection', socket);
      });
      server = s;
    }
    if (this.opts.maxConnections > 0) server.maxConnections = this.opts.maxConnections;
    server.on('connection', (socket: net.Socket) => {
      // As Go's listeners (TCP_NODELAY): with Nagle a small reply waits for the ACK of the previous segment,
      // which a client holding back its delayed ACK makes a 40 ms stall per query.
      socket.setNoDelay(true);
      this.sockets.add(socket);
      socket.once('close', () => { this.sockets.delete(socket); });
    });
    this.server = server;
    this.port = await listenTcp(server, this.host, this.port, wildcard);
  }

  private http1Server(readMs: number, idleMs: number): http.Server {
    const { createServer } = process.getBuiltinModule('node:http');
    return createServer({ requestTimeout: readMs, headersTimeout: readMs, keepAliveTimeout: idleMs }, this.onRequest);
  }

  private startH2(socket: tls.TLSSocket, idleMs: number): void {
    const c = new H2Connection(socket, { maxStreams: this.opts.maxStreams, idleMs, onStream: this.onStream });
    this.conns.add(c);
    c.onClosed(() => { this.conns.delete(c); });
  }

  /** HTTP/1.1 requests (over TLS, and the plain-HTTP server). */
  private readonly onRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const answer = new H1Exchange(res);
    const wire = requestWire(req.method, req.url ?? '');
    if (typeof wire === 'number') {
      this.respond(answer, wire);
      return;
    }
    const serve = (w: Buffer): void => { this.serve(w, socketEndpoints(req.socket), answer); };
    if (wire !== undefined) {
      serve(wire);
      return;
    }
    readBody(req, (body) => {
      if (body === undefined) this.respond(answer, 400);
      else serve(body);
    });
  };

  /** HTTP/2 requests (h2.ts), once their header block is complete. */
  private readonly onStream = (c: H2Connection, stream: H2Stream): void => {
    const answer = new H2Exchange(c, stream);
    const wire = requestWire(stream.method, stream.path);
    if (typeof wire === 'number') {
      this.respond(answer, wire);
      return;
    }
    if (wire !== undefined) {
      this.serve(wire, c.endpoints, answer);
      return;
    }
    // Go sends the interim 100 when the handler starts reading a body that is still to come; any other
    // expectation is ignored over HTTP/2 (no 417).
    if (!stream.remoteEnded && stream.expect !== '' && CONTINUE.test(stream.expect)) c.interim(stream, CONTINUE_BLOCK);
    const body = new BodyCollector();
    // a copy of each chunk: the frame's bytes belong to the connection's read buffer
    c.readBody(stream, (chunk) => { body.add(chunk, true); }, () => {
      const wire = body.result();
      if (wire === undefined) this.respond(answer, 400);
      else this.serve(wire, c.endpoints, answer);
    });
  };

  /** One DNS message through the chain; its reply (or 400 / 500) to `answer`. */
  private serve(wire: Buffer, ends: Endpoints, answer: Exchange): void {
    const p = serveHttpsMessage(this.table, wire, ends, answer);
    if (p === false) {
      this.respond(answer, 400);
      return;
    }
    if (p === undefined) {
      this.respond(answer, 200, answer.wire);
      return;
    }
    this.inflight.begin();
    const after = (): void => { this.inflight.end(); this.respond(answer, 200, answer.wire); };
    p.then(after, after);
  }

  /** A 200 with the chain's reply (500 when it wrote none), or an error status; counted for the metric. */
  private respond(answer: Exchange, status: number, wire?: Uint8Array): void {
    if (status === 200 && wire === undefined) status = 500;
    this.count(status);
    answer.answer(status, wire);
  }

  /** coredns_dns_https_responses_total, for the prometheus plugin (free when nobody listens). */
  private count(status: number): void {
    if (!httpsChannel.hasSubscribers) return;
    const ev: HttpsResponseEvent = { lineage: this.table.lineage, server: this.table.name, status };
    httpsChannel.publish(ev);
  }

  /** Take a new configuration's certificate and limits (a reload keeps the socket). */
  reconfigure(table: ServeTable, opts: HttpsListenerOptions): void {
    this.table = table;
    this.tlsConfig = opts.tls;
    const s = this.server;
    if (s === undefined) return;
    if (opts.tls !== undefined && 'setSecureContext' in s) {
      s.setSecureContext(serverTlsOptions(opts.tls, table.readTimeoutMs ?? TCP_READ_TIMEOUT_MS, ['h2', 'http/1.1']));
    }
    this.opts = opts; // new connections advertise its max_streams
    s.maxConnections = opts.maxConnections > 0 ? opts.maxConnections : Infinity;
  }

  /** Graceful stop: no new connections; requests in flight get their answers (at most `graceMs`). */
  async close(graceMs = GRACEFUL_STOP_MS): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (s === undefined) return;
    const closed = new Promise<void>((resolve) => { s.close(() => { resolve(); }); });
    if ('closeIdleConnections' in s) s.closeIdleConnections();
    this.h1?.closeIdleConnections();
    const deadline = Date.now() + graceMs;
    // HTTP/2: GOAWAY, and each connection closes once its open streams are answered. Their replies leave in a
    // later turn than the one that wrote them (and at most one per turn), so destroying the sockets as soon as
    // nothing is in flight would drop them, as Go's Shutdown does not.
    const sessionsClosed = Promise.all([...this.conns].map((c) => new Promise<void>((resolve) => {
      c.onClosed(resolve);
      c.close();
    })));
    await this.inflight.drained(graceMs);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([sessionsClosed, new Promise<void>((resolve) => { timer = setTimeout(resolve, Math.max(0, deadline - Date.now())); })]);
    clearTimeout(timer);
    for (const sock of this.sockets) sock.destroy();
    await closed;
  }
}

/**
 * One request: the reply the chain wrote (the first one, as CoreDNS's DoHWriter keeps one message), and the
 * HTTP answer it becomes. One object per request for both.
 */
abstract class Exchange implements ReplySink {
  wire: Uint8Array | undefined;
  send(wire: Uint8Array): void { this.wire ??= wire; }
  /** Writes the request's answer: a status, with the DNS reply when it is 200. */
  abstract answer(status: number, wire: Uint8Array | undefined): void;
}

class H1Exchange extends Exchange {
  private readonly res: http.ServerResponse;
  constructor(res: http.ServerResponse) {
    super();
    this.res = res;
  }

  answer(status: number, wire: Uint8Array | undefined): void { answer1(this.res, status, wire); }
}

class H2Exchange extends Exchange {
  private readonly c: H2Connection;
  private readonly stream: H2Stream;
  constructor(c: H2Connection, stream: H2Stream) {
    super();
    this.c = c;
    this.stream = stream;
  }

  answer(status: number, wire: Uint8Array | undefined): void { answer2(this.c, this.stream, status, wire); }
}

/** Go's httpguts.HeaderValuesContainsToken(Expect, "100-continue"). */
const CONTINUE = /(?:^|,)[ \t]*100-continue[ \t]*(?:,|$)/i;

function ignore(): void { /* nothing to do */ }

/** What a request asks for: the GET query's message, undefined for a POST (its body is the message), or the error status. */
function requestWire(method: string | undefined, url: string): Buffer | number | undefined {
  const q = url.indexOf('?');
  if (urlPath(q < 0 ? url : url.slice(0, q)) !== PATH) return 404;
  if (method === 'GET') return (q < 0 ? undefined : getQuery(url.slice(q + 1))) ?? 400;
  return method === 'POST' ? undefined : 400;
}

/** A POST body as it arrives, kept up to MAX_QUERY bytes (doh's maxDNSQuerySize); a longer one is dropped. */
class BodyCollector {
  private chunks: Buffer[] = [];
  private size = 0;

  add(chunk: Buffer, copy: boolean): void {
    if (this.size > MAX_QUERY) return;
    this.size += chunk.length;
    if (this.size > MAX_QUERY) this.chunks = [];
    else this.chunks.push(copy ? Buffer.from(chunk) : chunk);
  }

  /** The whole body; undefined when it was longer than MAX_QUERY. */
  result(): Buffer | undefined {
    if (this.size > MAX_QUERY) return undefined;
    return this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
  }
}

/** An HTTP/1.1 POST body (node:http's stream: its chunks are the body's own). */
function readBody(req: NodeJS.ReadableStream, done: (wire: Buffer | undefined) => void): void {
  const body = new BodyCollector();
  req.on('data', (chunk: Buffer) => { body.add(chunk, false); });
  req.on('end', () => { done(body.result()); });
  req.on('error', ignore);
}

/** http.Error's bodies: the text and a newline. */
const ERROR_BODIES = new Map<number, Buffer>([[404, Buffer.from('\n')], [400, Buffer.from('invalid request\n')], [500, Buffer.from('No response\n')]]);

function errorBody(status: number): Buffer {
  return ERROR_BODIES.get(status)!;
}

/** HTTP/1.1: a reply with Go's headers in Go's order (sorted), or Go's http.Error (the text and a newline). */
function answer1(res: http.ServerResponse, status: number, wire: Uint8Array | undefined): void {
  if (wire !== undefined) {
    send1(res, 200, [['Cache-Control', `max-age=${maxAge(wire, Math.floor(Date.now() / 1000))}`], ['Content-Length', wire.length], ['Content-Type', MIME]], wire);
    return;
  }
  const body = errorBody(status);
  send1(res, status, [['Content-Length', body.length], ['Content-Type', 'text/plain; charset=utf-8'], ['X-Content-Type-Options', 'nosniff']], body);
}

/** HTTP/1.1, without the Connection and Keep-Alive headers Go does not send on a kept-alive connection. */
function send1(res: http.ServerResponse, status: number, headers: Array<[string, string | number]>, body: Uint8Array): void {
  if (res.destroyed || res.headersSent) return;
  try {
    for (const [k, v] of headers) res.setHeader(k, v);
    // A connection that stays open says nothing (Go); one that closes says `Connection: close` (both).
    if (res.shouldKeepAlive) {
      res.removeHeader('Connection');
      res.removeHeader('Keep-Alive');
    }
    res.statusCode = status;
    res.end(body);
  } catch {
    // The connection went away while the reply was being written: nothing to answer.
  }
}

/** The header block of an interim 100 (Continue). */
const CONTINUE_BLOCK = new HpackBlock().withName(HPACK_INDEX.status, '100');
/** Each HTTP/2 reply's header block is built here (H2Connection.reply copies it). */
const REPLY_BLOCK = new HpackBlock();
const MIME_TEXT = 'text/plain; charset=utf-8';

/** HTTP/2: the same, in Go's HTTP/2 order (`:status`, the handler's headers sorted, Content-Length, Date). */
function answer2(c: H2Connection, stream: H2Stream, status: number, wire: Uint8Array | undefined): void {
  const h = REPLY_BLOCK.reset();
  if (wire !== undefined) {
    h.indexed(HPACK_INDEX.status200)
      .withName(HPACK_INDEX.cacheControl, maxAgeText(maxAge(wire, Math.floor(Date.now() / 1000))))
      .withName(HPACK_INDEX.contentType, MIME)
      .withName(HPACK_INDEX.contentLength, String(wire.length))
      .withName(HPACK_INDEX.date, httpDate());
    c.reply(stream, h, wire);
    return;
  }
  const body = errorBody(status);
  if (status === 400) h.indexed(HPACK_INDEX.status400);
  else if (status === 404) h.indexed(HPACK_INDEX.status404);
  else if (status === 500) h.indexed(HPACK_INDEX.status500);
  else h.withName(HPACK_INDEX.status, String(status));
  h.withName(HPACK_INDEX.contentType, MIME_TEXT)
    .literal('x-content-type-options', 'nosniff')
    .withName(HPACK_INDEX.contentLength, String(body.length))
    .withName(HPACK_INDEX.date, httpDate());
  c.reply(stream, h, body);
}

/** `max-age=N` for each N seen (at most MAX_DEFAULT_TTL + 1 of them), made once. */
const MAX_AGE_TEXT: string[] = [];

function maxAgeText(seconds: number): string {
  return MAX_AGE_TEXT[seconds] ??= `max-age=${seconds}`;
}

let dateSecond = -1;
let dateText = '';

/** The Date header (RFC 9110 IMF-fixdate), formatted once per second. */
function httpDate(): string {
  const now = Date.now();
  const sec = Math.floor(now / 1000);
  if (sec !== dateSecond) {
    dateSecond = sec;
    dateText = new Date(sec * 1000).toUTCString();
  }
  return dateText;
}

/** Go's URL.Path: the percent-decoded path (an undecodable one matches nothing). */
function urlPath(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return '';
  }
}

/**
 * The `dns` parameter of a query string as Go's url.ParseQuery and doh's requestToMsgGet read it: exactly one
 * value, at most the base64 length of a 64 KiB message, decoded as unpadded base64url; undefined otherwise.
 */
function getQuery(query: string): Buffer | undefined {
  let value: string | undefined;
  let count = 0;
  let start = 0;
  while (start <= query.length) {
    let end = query.indexOf('&', start);
    if (end < 0) end = query.length;
    const pair = query.slice(start, end);
    start = end + 1;
    if (pair === '' || pair.includes(';')) continue;
    const eq = pair.indexOf('=');
    const key = queryUnescape(eq < 0 ? pair : pair.slice(0, eq));
    if (key !== 'dns') continue;
    const v = queryUnescape(eq < 0 ? '' : pair.slice(eq + 1));
    if (v === undefined) continue;
    value = v;
    count++;
  }
  if (count !== 1 || value === undefined || value.length > MAX_BASE64) return undefined;
  return base64UrlDecode(value);
}

/** Go's url.QueryUnescape: `+` is a space, %XX a byte; undefined for a malformed escape. */
function queryUnescape(s: string): string | undefined {
  if (!s.includes('%') && !s.includes('+')) return s;
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

/** Go's base64.RawURLEncoding.DecodeString: no padding, line breaks skipped, anything else outside the alphabet fails. */
function base64UrlDecode(s: string): Buffer | undefined {
  if (s.includes('\r') || s.includes('\n')) s = s.replace(/[\r\n]/g, '');
  if (!/^[A-Za-z0-9_-]*$/.test(s) || s.length % 4 === 1) return undefined;
  return Buffer.from(s, 'base64url');
}

const YEAR68 = 2 ** 31;
/** dnsutil.MinimalDefaultTTL and MaximumDefaultTTL, in seconds. */
const MIN_DEFAULT_TTL = 5;
const MAX_DEFAULT_TTL = 3600;

/**
 * The Cache-Control max-age of a reply, from its wire form: CoreDNS's response.Typify decides the kind (only
 * NOERROR answers, NXDOMAIN and NODATA replies are cacheable), dnsutil.MinimalTTLWithMaximum the value: the
 * smallest TTL of the records other than the OPT, at most an hour; 5 s for other kinds and for replies with no
 * records at all.
 */
export function maxAge(b: Uint8Array, now: number): number {
  if (b.length < 12) return MIN_DEFAULT_TTL;
  const opcode = (b[2]! >> 3) & 0xf;
  if (opcode === Opcode.UPDATE || opcode === Opcode.NOTIFY) return MIN_DEFAULT_TTL;
  const qd = (b[4]! << 8) | b[5]!;
  const an = (b[6]! << 8) | b[7]!;
  const ns = (b[8]! << 8) | b[9]!;
  const ar = (b[10]! << 8) | b[11]!;
  let p = 12;
  for (let i = 0; i < qd; i++) {
    p = skipName(b, p);
    if (p < 0 || p + 4 > b.length) return MIN_DEFAULT_TTL;
    if (i === 0) {
      const qt = (b[p]! << 8) | b[p + 1]!;
      if (qt === RRType.AXFR || qt === RRType.IXFR) return MIN_DEFAULT_TTL;
    }
    p += 4;
  }
  let minTtl = MAX_DEFAULT_TTL;
  let soa = false;
  let delegation = false;
  let records = 0;
  let extRcode = 0;
  let dnssecOk = false;
  let expiredSig = false;
  const now32 = now;
  for (let i = 0; i < an + ns + ar; i++) {
    p = skipName(b, p);
    if (p < 0 || p + 10 > b.length) return MIN_DEFAULT_TTL;
    const type = (b[p]! << 8) | b[p + 1]!;
    const ttl = ((b[p + 4]! << 24) | (b[p + 5]! << 16) | (b[p + 6]! << 8) | b[p + 7]!) >>> 0;
    const rdlen = (b[p + 8]! << 8) | b[p + 9]!;
    const rd = p + 10;
    p = rd + rdlen;
    if (p > b.length) return MIN_DEFAULT_TTL;
    if (type === RRType.OPT) {
      extRcode = b[rd - 6]!;
      dnssecOk = (b[rd - 4]! & 0x80) !== 0;
      continue;
    }
    records++;
    if (ttl < minTtl) minTtl = ttl;
    if (i >= an && i < an + ns) {
      if (type === RRType.SOA) soa = true;
      else if (type === RRType.NS) delegation = true;
    }
    if (type === RRType.RRSIG && rdlen >= 16 && !expiredSig) {
      const exp = ((b[rd + 8]! << 24) | (b[rd + 9]! << 16) | (b[rd + 10]! << 8) | b[rd + 11]!) >>> 0;
      const inc = ((b[rd + 12]! << 24) | (b[rd + 13]! << 16) | (b[rd + 14]! << 8) | b[rd + 15]!) >>> 0;
      const ti = inc + Math.trunc((inc - now32) / YEAR68) * YEAR68;
      const te = exp + Math.trunc((exp - now32) / YEAR68) * YEAR68;
      if (!(ti <= now32 && now32 <= te)) expiredSig = true;
    }
  }
  if (dnssecOk && expiredSig) return MIN_DEFAULT_TTL;
  const rcode = (extRcode << 4) | (b[3]! & 0xf);
  let cacheable: boolean;
  if (an > 0 && rcode === Rcode.NOERROR) cacheable = true;
  else if (an > 0 && rcode === Rcode.NXDOMAIN) cacheable = false;
  else if (soa && rcode === Rcode.NOERROR) cacheable = true;
  else if (rcode === Rcode.NXDOMAIN) cacheable = true;
  else if (delegation && rcode === Rcode.NOERROR) cacheable = false;
  else cacheable = rcode === Rcode.NOERROR;
  if (!cacheable || records === 0) return MIN_DEFAULT_TTL;
  return minTtl;
}

