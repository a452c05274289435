// What happens to one received message, from bytes to the plugin chain and
// back: the library-level checks of miekg/dns, CoreDNS's ServeDNS (class check,
// EDNS version, zone routing with the DS rule, panic recovery) and the writer
// that fits every reply to the client (SizeAndDo + Scrub).

import { channel } from 'node:diagnostics_channel';
import type { Endpoints } from './endpoints.ts';
import type {
  DroppedEvent, Handler, Lineage, MetadataCollector, PanicEvent, ResponseWriter, RouteFilter, ServerLogger, UdpWriterFactory, ProxyProtocol,
} from '../plugin/plugin.ts';
import { PluginError, ServeChannels, isClientErrorRcode } from '../plugin/plugin.ts';
import type { Edns, EdnsOption, Message, OpaqueData } from '../wire/types.ts';
import { findOptRecord } from '../wire/scan.ts';
import { nextLabel } from '../wire/name.ts';
import { decodeMessage, scanQuery, WireError } from '../wire/decode.ts';
import { encodeMessage } from '../wire/encode.ts';
import { encodeWithin } from '../wire/truncate.ts';
import { replyTo } from '../wire/message.ts';
import { Opcode, Rcode, RRClass, RRType } from '../wire/constants.ts';
import { Request, type ReplySigner, type SubQueryRouter, type Transport } from './request.ts';

/** One server block as the router sees it, for one of its zones. */
export interface RoutedBlock {
  readonly zone: string;
  /** undefined: the block has no plugins at all, so queries routed to it are REFUSED. */
  readonly chain: Handler | undefined;
  /** The view's filters (all must pass for the block to serve a query); empty without a view. */
  readonly filters: readonly RouteFilter[];
  /** The view's name, '' without one. */
  readonly view: string;
  /** The metadata plugin's collector, run before the filters; undefined without the metadata plugin. */
  readonly collect: MetadataCollector | undefined;
  /** Opcodes beyond QUERY and NOTIFY the block accepts (BlockConfig.allowOpcode); absent or undefined: none. */
  readonly opcodes?: ReadonlySet<number> | undefined;
  /** The next block for the same zone on this address, in Corefile order (views share zones). */
  readonly next: RoutedBlock | undefined;
}

/**
 * The `timeouts` plugin's values for one listen address (the last block that
 * sets each wins); unset: the listener's defaults (CoreDNS's 3 s read, 5 s write,
 * 10 s idle, unlimited queries per connection).
 */
export interface ConnectionLimits {
  readTimeoutMs?: number;
  writeTimeoutMs?: number;
  idleTimeoutMs?: number;
  /** -1: unlimited. */
  maxTcpQueries?: number;
}

/** Everything routing needs for one listen address; replaced as a whole on reload. */
export interface ServeTable extends ConnectionLimits {
  /** CoreDNS's server name, e.g. `dns://:53`, `dns://127.0.0.1:1053`. */
  readonly name: string;
  readonly zones: ReadonlyMap<string, RoutedBlock>;
  /** Lengths of the zone names: a suffix of another length cannot match, so it is never built. */
  readonly zoneLengths: ReadonlySet<number>;
  /**
   * Some block on this address has a view or the metadata plugin: routing walks each zone's blocks, collects
   * metadata and runs filters (CoreDNS's loop). False: one block per zone, nothing to run before the chain.
   */
  readonly filtered?: boolean;
  /** Some block on this address loaded chaos, forward or proxy: non-IN classes pass. */
  readonly classChaos: boolean;
  /** The debug plugin is on: exceptions are not recovered (the process crashes). */
  readonly debug: boolean;
  /** errors { stacktrace }: a recovered exception logs its stack. */
  readonly stacktrace: boolean;
  /** The server's logger ("Recovered from panic" lines). */
  readonly log: ServerLogger;
  /** The server this table belongs to, named in diagnostics-channel events. */
  readonly lineage: Lineage;
  /**
   * EDNS0 option codes a plugin of this server said it handles (InstanceServices.supportEdnsOption):
   * the only ones copied from a query into a reply without an OPT of its own. Live: it only grows.
   */
  readonly ednsSupported: ReadonlySet<number>;
  /** A block's UDP write discipline (BlockConfig.setUdpWriter, e.g. shed); undefined: replies go straight to the socket. */
  readonly udpWriter?: UdpWriterFactory;
  /** PROXY protocol on this address (BlockConfig.setProxyProtocol, proxyproto); undefined: none is parsed. */
  readonly proxy?: ProxyProtocol;
  /**
   * Opcodes beyond QUERY and NOTIFY that some block of this address allows (CoreDNS's Server.allowedOpcodes):
   * the header check accepts them with one question and any section counts; undefined: none.
   */
  readonly opcodes?: ReadonlySet<number> | undefined;
  /** Sub-queries (req.lookup) of requests that arrived on this address; made by `subQueryRouter(table)`. */
  router?: SubQueryRouter;
}

const droppedChannel = channel(ServeChannels.dropped);
const panicChannel = channel(ServeChannels.panic);

/** Sends one reply on the connection or socket a query came from. */
export interface ReplySink {
  send(wire: Uint8Array): void;
}

const HEADER_LEN = 12;

/**
 * Serve one message. Returns a promise only when the chain went asynchronous,
 * so a TCP connection knows when it may read the next query.
 */
export function serveMessage(
  table: ServeTable, wire: Buffer, proto: Transport,
  remoteAddress: string, remotePort: number, localAddress: string, localPort: number,
  sink: ReplySink, proxyTlv?: string,
): void | Promise<void> {
  if (wire.length < HEADER_LEN) return; // too short to even answer
  const flagsHi = wire[2]!;
  if (flagsHi & 0x80) return; // a response: ignore
  const opcode = (flagsHi >> 3) & 0xf;
  if (opcode !== Opcode.QUERY && opcode !== Opcode.NOTIFY) {
    // CoreDNS's acceptMessage: an opcode a block of this address allowed (dynupdate's UPDATE) needs one
    // question, and its sections may hold any number of records; any other is NOTIMP.
    if (table.opcodes === undefined || !table.opcodes.has(opcode)) {
      sink.send(headerReply(wire, Rcode.NOTIMP, true));
      return;
    }
    if (wire.readUInt16BE(4) !== 1) {
      sink.send(headerReply(wire, Rcode.FORMERR, false));
      return;
    }
    return serveDecoded(table, wire, proto, remoteAddress, remotePort, localAddress, localPort, sink, proxyTlv);
  }
  const qd = wire.readUInt16BE(4), an = wire.readUInt16BE(6), ns = wire.readUInt16BE(8), ar = wire.readUInt16BE(10);
  if (qd !== 1 || an > 1 || ns > 1 || ar > 2) {
    sink.send(headerReply(wire, Rcode.FORMERR, false));
    return;
  }
  // The usual query (one question, at most an OPT without options) is only scanned: its Message is decoded
  // if a plugin asks for it, which a cache hit or a hosts answer does not.
  const scanned = scanQuery(wire);
  if (scanned !== undefined) {
    const req = new Request(undefined, wire, proto, remoteAddress, remotePort, localAddress, localPort,
      table.name, process.hrtime.bigint(), table.router, scanned);
    // PROXY protocol TLVs (proxyproto's tlv_metadata): only requests that carry them pay for the value.
    if (proxyTlv !== undefined) req.setValue(PROXY_TLV_VALUE, proxyTlv);
    return serveRequest(table, req, sink);
  }
  return serveDecoded(table, wire, proto, remoteAddress, remotePort, localAddress, localPort, sink, proxyTlv);
}

/** A message that is not a plain query: decoded in full (FORMERR when it does not decode), then served. */
function serveDecoded(
  table: ServeTable, wire: Buffer, proto: Transport,
  remoteAddress: string, remotePort: number, localAddress: string, localPort: number,
  sink: ReplySink, proxyTlv: string | undefined,
): void | Promise<void> {
  let msg: Message;
  try {
    msg = decodeMessage(wire);
  } catch (e) {
    sink.send(formErrReply(wire, e));
    return;
  }

  const req = new Request(msg, wire, proto, remoteAddress, remotePort, localAddress, localPort,
    table.name, process.hrtime.bigint(), table.router);
  if (proxyTlv !== undefined) req.setValue(PROXY_TLV_VALUE, proxyTlv);
  return serveRequest(table, req, sink);
}

/** The request value (`Request.value`) holding a PROXY header's TLV vector in hex (ProxiedPeer.tlv). */
export const PROXY_TLV_VALUE = 'proxyproto/tlv';

/**
 * One DNS-over-HTTPS message (CoreDNS's doh.RequestToMsgWire → dnsutil.UnpackRequest): what miekg's accept
 * policy would not accept, or what does not decode, is not served at all — false, the HTTP reply is 400 —
 * everything else is served as a TCP query from the HTTP client's address (CoreDNS's DoHWriter has a TCP
 * remote address, so plugins see `tcp`).
 */
export function serveHttpsMessage(table: ServeTable, wire: Buffer, ends: Endpoints, sink: ReplySink): false | void | Promise<void> {
  if (wire.length < HEADER_LEN) return false;
  const flagsHi = wire[2]!;
  if (flagsHi & 0x80) return false;
  const opcode = (flagsHi >> 3) & 0xf;
  if (opcode !== Opcode.QUERY && opcode !== Opcode.NOTIFY) return false;
  if (wire.readUInt16BE(4) !== 1 || wire.readUInt16BE(6) > 1 || wire.readUInt16BE(8) > 1 || wire.readUInt16BE(10) > 2) return false;
  // The usual query is only scanned, as on the other transports (scanQuery's facts imply that it decodes); any
  // other is decoded now.
  const scanned = scanQuery(wire);
  let msg: Message | undefined;
  if (scanned === undefined) {
    try {
      msg = decodeMessage(wire);
    } catch {
      return false;
    }
  }
  const req = new Request(msg, wire, 'tcp', ends.remoteAddress, ends.remotePort, ends.localAddress, ends.localPort,
    table.name, process.hrtime.bigint(), table.router, scanned);
  return serveRequest(table, req, sink);
}

/**
 * CoreDNS's Server.ServeDNS for a decoded request: the question, class and
 * EDNS-version checks, zone routing, the chain, and the server-written error
 * replies. Used for client queries and for internal sub-queries alike.
 */
function serveRequest(table: ServeTable, req: Request, sink: ReplySink): void | Promise<void> {
  // A scanned request (req.scannedQuestion) has its one question; a decoded one is looked at.
  if (!req.scannedQuestion && req.msg.question.length === 0) {
    writeServerError(table, req, sink, Rcode.SERVFAIL, true);
    return;
  }
  // A request that reaches here was just made (not edited): its qclass and OPT are its message's.
  if (!table.classChaos && req.qclass !== RRClass.IN) {
    writeServerError(table, req, sink, Rcode.REFUSED, true);
    return;
  }
  const edns = req.edns;
  if (edns !== undefined && edns.version !== 0) {
    sink.send(encodeMessage(badVersReply(req.msg)));
    return;
  }

  const w = new ClientWriter(req, sink, table.log, table.ednsSupported);
  const block = table.filtered === true ? routeFiltered(table, req) : route(table, req);
  if (block === undefined) {
    writeServerError(table, req, sink, Rcode.REFUSED, true);
    return;
  }
  if (block.chain === undefined) {
    writeServerError(table, req, sink, Rcode.REFUSED, true);
    return;
  }
  // An opcode only some blocks of this address allowed: the others answer NOTIMP (CoreDNS's acceptsOpcode).
  const opcode = (req.flags >> 11) & 0xf;
  if (opcode !== Opcode.QUERY && opcode !== Opcode.NOTIFY && (block.opcodes === undefined || !block.opcodes.has(opcode))) {
    writeServerError(table, req, sink, Rcode.NOTIMP, true);
    return;
  }
  req.zone = block.zone;
  // CoreDNS sets its ViewKey only for a block with a view (a sub-query keeps its parent's otherwise).
  if (block.view !== '') req.view = block.view;
  return runChain(table, block.chain, req, w, sink);
}

/** A sink that keeps the one reply a sub-query produced. */
class CaptureSink implements ReplySink {
  wire: Uint8Array | undefined;
  send(wire: Uint8Array): void { this.wire ??= wire; }
}

/**
 * The internal exchange of one listen address (CoreDNS's upstream.Lookup): the
 * sub-query runs through serveRequest like a client query on this address, and
 * its reply, fitted to the request's buffer as a client's would be, is decoded
 * and returned instead of being sent.
 */
export function subQueryRouter(table: ServeTable): SubQueryRouter {
  return {
    async exchange(req: Request): Promise<Message | undefined> {
      const sink = new CaptureSink();
      await serveRequest(table, req, sink);
      return sink.wire === undefined ? undefined : decodeMessage(sink.wire);
    },
  };
}

/** Longest-suffix zone match on the lower-cased name; DS goes to the shallowest match; `.` last. */
function route(table: ServeTable, req: Request): RoutedBlock | undefined {
  const zones = table.zones;
  const lengths = table.zoneLengths;
  // Only the root zone on this listener (the usual cluster DNS): nothing to walk.
  if (lengths.size === 1 && lengths.has(1)) {
    const root = zones.get('.');
    return root !== undefined && root.chain !== undefined ? root : undefined;
  }
  const q = req.name;
  // CoreDNS 1.15.0 applies the DS rule to QUERY only: a NOTIFY for a DS goes to the longest zone like any other.
  const isDS = req.qtype === RRType.DS && ((req.flags >> 11) & 0xf) === Opcode.QUERY;
  let dsBlock: RoutedBlock | undefined;
  let off = 0;
  while (off < q.length - 1) {
    const block = lengths.has(q.length - off) ? zones.get(off === 0 ? q : q.slice(off)) : undefined;
    if (block !== undefined) {
      // A zone with no plugins answers REFUSED at once, even for DS.
      if (block.chain === undefined || !isDS) return block;
      dsBlock = block;
    }
    off = nextLabel(q, off);
  }
  if (dsBlock !== undefined) return dsBlock;
  const root = zones.get('.');
  if (root !== undefined && root.chain !== undefined) return root;
  return undefined;
}

/** The block serves the request: its metadata is collected, then every filter of its view passes. */
function admits(block: RoutedBlock, req: Request): boolean {
  if (block.collect !== undefined) block.collect(req);
  const filters = block.filters;
  for (let i = 0; i < filters.length; i++) if (!filters[i]!(req)) return false;
  return true;
}

/**
 * CoreDNS's routing where blocks have views or the metadata plugin: for each zone from the longest, the
 * blocks of that zone in Corefile order; the first whose filters pass serves (a block without plugins
 * refuses at once); a DS query keeps the last passing block and goes on to shallower zones; `.` last.
 */
function routeFiltered(table: ServeTable, req: Request): RoutedBlock | undefined {
  const zones = table.zones;
  const lengths = table.zoneLengths;
  const q = req.name;
  const isDS = req.qtype === RRType.DS && ((req.flags >> 11) & 0xf) === Opcode.QUERY;
  let dsBlock: RoutedBlock | undefined;
  let off = 0;
  while (off < q.length - 1) {
    let b = lengths.has(q.length - off) ? zones.get(off === 0 ? q : q.slice(off)) : undefined;
    for (; b !== undefined; b = b.next) {
      if (b.chain === undefined) return b;
      if (admits(b, req)) {
        if (!isDS) return b;
        dsBlock = b;
      }
    }
    off = nextLabel(q, off);
  }
  if (dsBlock !== undefined) return dsBlock;
  for (let b = zones.get('.'); b !== undefined; b = b.next) {
    if (b.chain === undefined) continue;
    if (admits(b, req)) return b;
  }
  return undefined;
}

function runChain(table: ServeTable, chain: Handler, req: Request, w: ClientWriter, sink: ReplySink): void | Promise<void> {
  req.plugin = chain.name;
  let result: number | Promise<number>;
  try {
    result = chain.serveDNS(req, w);
  } catch (e) {
    afterChainError(table, req, sink, e);
    return;
  }
  if (typeof result === 'number') {
    if (!isClientErrorRcode(result)) return;
    writeServerError(table, req, sink, result, false);
    return;
  }
  return result.then(
    (rcode) => { if (isClientErrorRcode(rcode)) writeServerError(table, req, sink, rcode, false); },
    (e: unknown) => { afterChainError(table, req, sink, e); },
  );
}

function afterChainError(table: ServeTable, req: Request, sink: ReplySink, e: unknown): void {
  if (e instanceof PluginError) {
    // CoreDNS: (rcode, err) — the error was for the errors plugin; the rcode decides the reply.
    if (isClientErrorRcode(e.rcode)) writeServerError(table, req, sink, e.rcode, false);
    return;
  }
  if (table.debug) {
    // The debug plugin turns recovery off: crash like an unrecovered Go panic. The exception leaves the
    // serving code uncaught; the command line reports it as Go does and exits 2 (cli/panic.ts).
    process.nextTick(() => { throw e; });
    return;
  }
  const detail = e instanceof Error ? e.message : String(e);
  if (table.stacktrace && e instanceof Error && e.stack) {
    table.log.error(`Recovered from panic in server: ${JSON.stringify(table.name)} ${detail}\n${e.stack}`);
  } else {
    table.log.error(`Recovered from panic in server: ${JSON.stringify(table.name)} ${detail}`);
  }
  if (panicChannel.hasSubscribers) {
    const ev: PanicEvent = { lineage: table.lineage, server: table.name, error: e };
    panicChannel.publish(ev);
  }
  writeServerError(table, req, sink, Rcode.SERVFAIL, true);
}

/** CoreDNS's errorFunc / errorAndMetricsFunc: a bare reply with the rcode, OPT echoed. */
function writeServerError(table: ServeTable, req: Request, sink: ReplySink, rcode: number, dropped: boolean): void {
  // The query as a plugin may have edited it (CoreDNS answers from the edited *dns.Msg).
  const reply = replyTo(req.replyBase);
  reply.rcode = rcode;
  sizeAndDo(req, reply, table.ednsSupported);
  const wire = encodeWithin(reply, req.size, compressLimit(req)).wire;
  sink.send(wire);
  if (dropped && droppedChannel.hasSubscribers) {
    const ev: DroppedEvent = { lineage: table.lineage, req, rcode, replySize: wire.length };
    droppedChannel.publish(ev);
  }
}

function badVersReply(msg: Message): Message {
  const reply = replyTo(msg);
  reply.rcode = Rcode.BADVERS;
  reply.edns = { udpSize: 0, version: 0, do: false, z: 0, options: [] };
  return reply;
}

/** A reply made from the request header alone (miekg's MsgReject paths): no records, no question. */
function headerReply(wire: Buffer, rcode: number, keepOpcode: boolean): Buffer {
  const out = Buffer.alloc(HEADER_LEN);
  out[0] = wire[0]!;
  out[1] = wire[1]!;
  // QR on, AA off, opcode QUERY unless NOTIMP; TC and RD kept.
  let hi = (wire[2]! | 0x80) & ~0x04;
  if (!keepOpcode) hi &= ~0x78;
  out[2] = hi;
  // RA, AD, CD kept; Z cleared; rcode set.
  out[3] = (wire[3]! & 0xb0) | (rcode & 0x0f);
  return out;
}

/** FORMERR after a failed unpack: the question as far as it was parsed, nothing else. */
function formErrReply(wire: Buffer, e: unknown): Buffer {
  const partial = e instanceof WireError ? e.partial : undefined;
  if (partial === undefined) return headerReply(wire, Rcode.FORMERR, false);
  const reply: Message = {
    ...partial, qr: true, opcode: 0, aa: false, z: false, rcode: Rcode.FORMERR,
    answer: [], authority: [], additional: [], edns: undefined,
  };
  try {
    return Buffer.from(encodeMessage(reply));
  } catch {
    return headerReply(wire, Rcode.FORMERR, false);
  }
}

/** UDP replies above these sizes are compressed even when they fit (fragmentation avoidance, as NSD). */
function compressLimit(req: Request): { compressAbove?: number } {
  if (req.proto !== 'udp') return NO_LIMIT;
  return req.family === 1 ? V4_LIMIT : V6_LIMIT;
}
const NO_LIMIT = {};
const MAX_REPLY = 65535;
const V4_LIMIT = { compressAbove: 1480 };
const V6_LIMIT = { compressAbove: 1220 };

/**
 * CoreDNS's SizeAndDo: when the query had an OPT, the reply gets one too — its
 * own, normalised, or the query's, with only the options a plugin of the server
 * declared (`supported`): since CoreDNS 1.15.0 unhandled options are not echoed.
 */
export function sizeAndDo(req: Request, reply: Message, supported: ReadonlySet<number>): void {
  // The query as the chain left it: a plugin that edits it in place (rewrite's edns0 rules) edits the OPT echoed.
  const q = req.replyEdns;
  if (q === undefined) return;
  // req.udpSize: the query's size as the chain left it (bufsize lowers it, as CoreDNS's in-place OPT rewrite).
  const udpSize = req.udpSize ?? q.udpSize;
  const r = reply.edns;
  if (r !== undefined) {
    r.name = '.';
    r.version = 0;
    r.udpSize = udpSize;
    r.z &= 0x7f00;
    if (q.do) r.do = true;
    return;
  }
  reply.edns = {
    name: '.', udpSize, version: 0, do: q.do, z: q.z & 0x7f00,
    options: q.options.length === 0 || supported.size === 0 ? [] : q.options.filter((o) => supported.has(o.code)),
  };
  if (q.options.length !== 0) req.dropUnechoedOptions(unechoedBytes(q, supported));
}

/** Bytes of the query's EDNS options that are not echoed (code and length headers included). */
function unechoedBytes(q: Edns, supported: ReadonlySet<number>): number {
  let n = 0;
  for (const o of q.options) if (!supported.has(o.code)) n += 4 + o.data.length;
  return n;
}

/** Add the request's Extended DNS Errors to a reply OPT, skipping any it already carries. */
function addExtendedErrors(edns: Edns, errors: readonly EdnsOption[]): void {
  for (const e of errors) {
    if (!edns.options.some((o) => o.code === e.code && Buffer.from(o.data).equals(e.data))) edns.options.push(e);
  }
}

/** A copy of `reply` with the request's OPT (echoed options only) added as the last additional record. */
function appendOpt(reply: Uint8Array, q: Edns, udpSize: number, supported: ReadonlySet<number>): Uint8Array {
  let optionsLen = 0;
  for (const o of q.options) if (supported.has(o.code)) optionsLen += 4 + o.data.length;
  const out = Buffer.allocUnsafe(reply.length + 11 + optionsLen);
  out.set(reply, 0);
  let p = reply.length;
  out[p++] = 0;                           // owner: root
  out[p++] = 0; out[p++] = 41;            // TYPE OPT
  out[p++] = udpSize >> 8; out[p++] = udpSize & 0xff;
  out[p++] = 0; out[p++] = 0;             // extended rcode, version 0
  out[p++] = (q.do ? 0x80 : 0) | ((q.z >> 8) & 0x7f);
  out[p++] = 0;
  out[p++] = optionsLen >> 8; out[p++] = optionsLen & 0xff;
  for (const o of q.options) {
    if (!supported.has(o.code)) continue;
    out[p++] = o.code >> 8; out[p++] = o.code & 0xff;
    out[p++] = o.data.length >> 8; out[p++] = o.data.length & 0xff;
    out.set(o.data, p);
    p += o.data.length;
  }
  const ar = ((out[10]! << 8) | out[11]!) + 1;
  out[10] = ar >> 8;
  out[11] = ar & 0xff;
  return out;
}

/** The writer at the outside of every chain: fits the reply to the client and sends it. */
export class ClientWriter implements ResponseWriter {
  private readonly req: Request;
  private readonly sink: ReplySink;
  private readonly log: ServerLogger;
  private readonly supported: ReadonlySet<number>;

  constructor(req: Request, sink: ReplySink, log: ServerLogger, supported: ReadonlySet<number>) {
    this.req = req;
    this.sink = sink;
    this.log = log;
    this.supported = supported;
  }

  writeMsg(reply: Message): void {
    const req = this.req;
    sizeAndDo(req, reply, this.supported);
    if (req.extendedErrors !== undefined && reply.edns !== undefined) addExtendedErrors(reply.edns, req.extendedErrors);
    const signer = req.replySigner;
    if (signer !== undefined) {
      const ar = reply.additional;
      if (ar.length > 0 && ar[ar.length - 1]!.type === RRType.TSIG) { this.writeSigned(reply, signer); return; }
    }
    this.sink.send(encodeWithin(reply, req.size, compressLimit(req)).wire);
  }

  /**
   * miekg's WriteMsg for a reply with a TSIG record: never truncated (Scrub leaves it whole), encoded
   * without the TSIG record (OPT last), which the signer completes and appends. Nothing is sent when
   * it cannot be signed.
   */
  private writeSigned(reply: Message, signer: ReplySigner): void {
    const ar = reply.additional;
    const tsig = ar[ar.length - 1]!;
    const unsigned: Message = { ...reply, additional: ar.slice(0, -1) };
    // Scrub's fragmentation rule counts the TSIG record too (owner without escapes, type..rdlength, rdata).
    const limit = compressLimit(this.req);
    const above = limit.compressAbove;
    const rdata = (tsig.data as Partial<OpaqueData>).raw;
    const opts = above === undefined || rdata === undefined ? limit : { compressAbove: above - (tsig.name.length + 1 + 10 + rdata.length) };
    const out = signer.sign(encodeWithin(unsigned, MAX_REPLY, opts).wire, tsig);
    if (out !== undefined) this.sink.send(out);
  }

  /**
   * A ready-made reply (e.g. a cache hit): the OPT is patched or appended in
   * place as SizeAndDo would, and the bytes go out as they are when they fit.
   * Only a reply that needs truncating or compressing is decoded. The caller
   * hands the buffer over: it may be modified.
   */
  writeWire(reply: Uint8Array): void {
    const req = this.req;
    if (req.extendedErrors !== undefined || req.replySigner !== undefined) { this.writeDecoded(reply); return; }
    let out = reply;
    const q = req.replyEdns;
    if (q !== undefined) {
      const at = findOptRecord(reply);
      if (at === -2 || (at >= 0 && reply[at] !== 0)) { this.writeDecoded(reply); return; }
      if (at >= 0) {
        const p = at + 1; // type(2) class(2) ttl(4): ext-rcode, version, DO|Z-high, Z-low
        const udpSize = req.udpSize ?? q.udpSize;
        reply[p + 2] = udpSize >> 8;
        reply[p + 3] = udpSize & 0xff;
        reply[p + 5] = 0;
        if (q.do) reply[p + 6]! |= 0x80;
        reply[p + 7] = 0;
      } else {
        out = appendOpt(reply, q, req.udpSize ?? q.udpSize, this.supported);
        if (q.options.length !== 0) req.dropUnechoedOptions(unechoedBytes(q, this.supported));
      }
    }
    const limit = req.proto === 'udp' ? (req.family === 1 ? 1480 : 1220) : 65535;
    if (out.length > req.size || out.length > limit) { this.writeDecoded(out); return; }
    this.sink.send(out);
  }

  private writeDecoded(reply: Uint8Array): void {
    let msg: Message;
    try {
      msg = decodeMessage(reply);
    } catch (e) {
      this.log.error(`plugin/${this.req.plugin}: wrote a malformed reply: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }
    this.writeMsg(msg);
  }
}

