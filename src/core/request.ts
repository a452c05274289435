// Per-query state handed through the plugin chain. Derived values (lower-cased
// name, buffer size, DO bit) are computed on first use and remembered, so a
// chain that never asks pays nothing.
//
// A request is immutable as far as plugins are concerned: a plugin that wants
// the rest of the chain to see another question, other flags or another
// transport makes a *derived* request (`req.derive(...)`), as CoreDNS plugins
// hand a copied dns.Msg to the next handler. A derived request shares what
// CoreDNS keeps in the query's context: metadata, the Extended DNS Errors for
// the client and the name of the plugin at work. `req.lookup(name, type)` is
// CoreDNS's upstream package: a sub-query through the server's own zones.

import type { Edns, EdnsOption, Message, ResourceRecord } from '../wire/types.ts';
import { decodeMessage, type ScannedQuery } from '../wire/decode.ts';
import { skipName } from '../wire/scan.ts';
import { asciiLower, fqdn } from '../wire/name.ts';
import { encodeMessage } from '../wire/encode.ts';
import { RRClass } from '../wire/constants.ts';

export type Transport = 'udp' | 'tcp';

const MIN_UDP_SIZE = 512;
const TCP_SIZE = 65535;
/** Nested internal lookups allowed before one is refused (a CNAME that leads back to itself). */
export const MAX_LOOKUP_DEPTH = 8;

/**
 * Routes a request through the zones of the listener it arrived on and
 * captures the reply instead of sending it (the server core provides it).
 */
export interface SubQueryRouter {
  exchange(req: Request): Promise<Message | undefined>;
}

/**
 * Signs the replies to one query (the tsig plugin, RFC 8945; miekg/dns signs in its ResponseWriter). The
 * server's writer calls it for a reply whose last additional record is a TSIG record, with the reply encoded
 * without that record (never truncated: miekg does not truncate a reply carrying a TSIG). A signer may be
 * called again for later messages of the same exchange (a zone transfer's stream), chaining each MAC to the
 * previous one (RFC 8945 5.3.1).
 */
export interface ReplySigner {
  /**
   * `wire`: the reply without its TSIG record (the caller hands the buffer over); `tsig`: that record as
   * the chain wrote it. Returns the message to send, the completed TSIG record appended, or undefined when
   * it cannot be signed (no key of that name: nothing is sent, as miekg's WriteMsg fails).
   */
  sign(wire: Uint8Array, tsig: ResourceRecord): Uint8Array | undefined;
}

/** What a derived request changes; everything else is the original's. */
export interface DeriveOptions {
  /** A whole new message (its question decides name, type and class). */
  msg?: Message;
  /** Replace the question's name (FQDN, case kept). Applied after `msg`. */
  name?: string;
  /** Replace the question's type. */
  type?: number;
  /** Replace the question's class. */
  class?: number;
  /** Pretend the query came over this transport (e.g. `tcp` for a buffer of 65535). */
  proto?: Transport;
  /**
   * A deadline (`Date.now()` milliseconds) after which the query is abandoned by
   * the plugins that honour it (CoreDNS's context deadline, set by `cancel`). A
   * request keeps the earlier of its own and this one, as a Go context does.
   */
  deadline?: number;
  /**
   * The change stands for a CoreDNS plugin editing the query itself (header's
   * query rules, rewrite): the replies the server makes on its own (SERVFAIL, REFUSED…
   * after the chain) are built from this request's message, as CoreDNS builds
   * them from the edited query; the reply is fitted to its EDNS buffer size; and
   * the original request's type, class, DO bit, size and length read the edited
   * query's (what plugins earlier in the chain, log and prometheus, see once the
   * rest of the chain ran).
   */
  inPlace?: boolean;
}

/**
 * A tracing span open for a query (CoreDNS's opentracing span in the query's context), set by the trace plugin
 * and shared by derived requests and internal lookups. `pkg/next.ts` opens a child span, named after the plugin,
 * around each plugin it calls while one is set, as CoreDNS's `plugin.NextOrFailure` does.
 */
export interface QuerySpan {
  /** Starts a child span of this one. */
  startChild(name: string): QuerySpan;
  /** Ends the span (it is reported once, when it ends). */
  finish(): void;
}

export class Request {
  /** The decoded query; undefined until asked for when the request was made from a scan (`scanned`). */
  private msgValue: Message | undefined;
  /**
   * The query as the server scanned it (question, OPT) when it did not decode it: the Message is decoded from
   * the bytes only when something asks for `msg`. Undefined for a request made from a Message.
   */
  private readonly scanned: ScannedQuery | undefined;
  readonly proto: Transport;
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly localAddress: string;
  readonly localPort: number;
  /** Listener name as in CoreDNS's `server` metric label, e.g. `dns://:53`. */
  readonly server: string;
  /** The zone of the server block that matched (set by the server before the chain runs). */
  zone = '.';
  /** The view of the server block that matched ('' when it has none): CoreDNS's ViewKey, the metrics' `view` label. */
  view = '';
  /** process.hrtime.bigint() at arrival. */
  readonly start: bigint;
  /**
   * When the query is to be given up (`Date.now()` milliseconds; Infinity: never).
   * Set through `derive({ deadline })` (the cancel plugin); kept by derived requests
   * and internal lookups, as CoreDNS's context deadline is.
   */
  readonly deadline: number = Infinity;
  private wireBytes: Uint8Array | undefined;
  /**
   * The request this one was derived from, or itself: it holds what derived
   * requests share (CoreDNS's context values), so the common case allocates nothing extra.
   */
  private readonly root: Request;
  private pluginName = '';
  /** Set on the root by the trace plugin: the query's active span (undefined: not traced, the common case). */
  private activeSpan: QuerySpan | undefined;
  private ede: EdnsOption[] | undefined;
  /** The metadata of the query: undefined until the metadata plugin's collection began it (CoreDNS's md in the context). */
  private meta: Map<string, string | (() => string)> | undefined;
  /** Set on the root by `derive({ inPlace: true })`: the query as the chain last edited it. */
  private edited: Message | undefined;
  /** The edited message `editedLength` was measured from. */
  private editedOf: Message | undefined;
  private editedLength = 0;
  /** Bytes of EDNS options the server left out of the OPT it echoed (see `dropUnechoedOptions`). */
  private droppedOptionBytes = 0;
  /** Set on the root by `limitUdpSize` (bufsize): 0 when the query's own EDNS size stands. */
  private udpLimit = 0;
  /** Values plugins hand each other whether or not the metadata plugin runs (CoreDNS's other context values). */
  private values: Map<string, string> | undefined;
  /** Set on the root by `setReplySigner` (the tsig plugin): signs replies carrying a TSIG record. */
  private signer: ReplySigner | undefined;
  private readonly router: SubQueryRouter | undefined;
  /** How many internal lookups this request is nested in. */
  private readonly depth: number;
  /** The question name `lowerName` was computed from (compared by value, so any rename recomputes). */
  private lowerOf: string | undefined;
  private lowerName = '';

  /**
   * `msg` undefined: `scanned` (with `wire`, the bytes it was read from) stands for the query until a
   * plugin asks for the Message.
   */
  constructor(
    msg: Message | undefined, wire: Uint8Array | undefined, proto: Transport,
    remoteAddress: string, remotePort: number, localAddress: string, localPort: number,
    server: string, start: bigint, router?: SubQueryRouter, scanned?: ScannedQuery,
  ) {
    if (msg === undefined && (scanned === undefined || wire === undefined)) throw new Error('a request needs a message or a scanned query');
    this.msgValue = msg;
    this.scanned = scanned;
    this.wireBytes = wire;
    this.proto = proto;
    this.remoteAddress = remoteAddress;
    this.remotePort = remotePort;
    this.localAddress = localAddress;
    this.localPort = localPort;
    this.server = server;
    this.start = start;
    this.root = this;
    this.router = router;
    this.depth = 0;
  }

  /**
   * The query in wire form: the bytes as received, or for a derived request
   * whose message differs, the message encoded on first use.
   */
  /** The request was made from a scan (one question) and its Message has not been needed yet. */
  get scannedQuestion(): boolean { return this.msgValue === undefined; }

  /** The decoded query. Never changed in place: derive a request instead. */
  get msg(): Message {
    let m = this.msgValue;
    if (m === undefined) {
      // scanQuery vouches that these bytes decode; the OPT object is the one already handed out.
      m = decodeMessage(this.wireBytes!, this.scanned);
      m.edns = this.scanned!.edns;
      this.msgValue = m;
    }
    return m;
  }

  get wire(): Uint8Array {
    return this.wireBytes ??= encodeMessage(this.msg);
  }

  /**
   * The query's wire form is already at hand (received, or encoded before), so reading `wire` costs no
   * encoding: a plugin that can answer from the query's bytes does so only then (a derived request with
   * another message would be encoded just for that).
   */
  get hasWire(): boolean { return this.wireBytes !== undefined; }

  /**
   * The query's bytes as they arrived (the original request's wire, whatever plugins derived since): what
   * a TSIG signature covers (CoreDNS verifies it in the server, before any plugin).
   */
  get receivedWire(): Uint8Array { return this.root.wire; }

  /** Query name as sent (case preserved). */
  get qname(): string {
    const m = this.msgValue;
    if (m === undefined) return this.scanned!.qname;
    return m.question[0]?.name ?? '.';
  }

  /** Query name lower-cased (ASCII), as CoreDNS's state.Name(). */
  get name(): string {
    const q = this.qname;
    if (this.lowerOf !== q) {
      this.lowerName = asciiLower(q);
      this.lowerOf = q;
    }
    return this.lowerName;
  }

  /**
   * The message as the chain has left it: for the request a listener made (the root), the query
   * as a plugin last edited it in place (`derive({ inPlace: true })`), as CoreDNS's plugins that
   * hold the *dns.Msg see it once the rest of the chain ran; for a derived request, its own.
   * The name is not taken from it: CoreDNS's plugins read (and keep) the name before the chain runs.
   */
  private get current(): Message { return this.root === this ? (this.edited ?? this.msg) : this.msg; }

  /**
   * The scan stands for `current`: nothing decoded, nothing edited (a scanned request is a root, or the copy
   * `withAdBit` made of one, whose scan is the same).
   */
  private get scanCurrent(): ScannedQuery | undefined {
    return this.msgValue === undefined && this.edited === undefined ? this.scanned : undefined;
  }

  get qtype(): number {
    const s = this.scanCurrent;
    return s !== undefined ? s.qtype : this.current.question[0]?.type ?? 0;
  }
  get qclass(): number {
    const s = this.scanCurrent;
    return s !== undefined ? s.qclass : this.current.question[0]?.class ?? 0;
  }

  /** The OPT of the query as the chain has left it (see `current`). */
  private get currentEdns(): Edns | undefined {
    const s = this.scanCurrent;
    return s !== undefined ? s.edns : this.current.edns;
  }

  /** The DO bit of the query's OPT record. */
  get do(): boolean { return this.currentEdns?.do ?? false; }

  /** This request's own query's OPT (`msg.edns`), without decoding a scanned query. */
  get edns(): Edns | undefined {
    const m = this.msgValue;
    return m === undefined ? this.scanned!.edns : m.edns;
  }

  /** This request's own query's ID (`msg.id`), without decoding a scanned query. */
  get id(): number {
    const m = this.msgValue;
    if (m !== undefined) return m.id;
    const b = this.wireBytes!;
    return (b[0]! << 8) | b[1]!;
  }

  /**
   * This request's own query's header flags as on the wire (QR, opcode, AA, TC, RD, RA, Z, AD, CD and the
   * low 4 bits of the rcode), without decoding a scanned query.
   */
  get flags(): number {
    const m = this.msgValue;
    if (m === undefined) {
      const b = this.wireBytes!;
      return (b[2]! << 8) | b[3]!;
    }
    return (m.qr ? 0x8000 : 0) | ((m.opcode & 0xf) << 11) | (m.aa ? 0x400 : 0) | (m.tc ? 0x200 : 0) | (m.rd ? 0x100 : 0) |
      (m.ra ? 0x80 : 0) | (m.z ? 0x40 : 0) | (m.ad ? 0x20 : 0) | (m.cd ? 0x10 : 0) | (m.rcode & 0xf);
  }

  /** 1 for IPv4 clients, 2 for IPv6 (CoreDNS's `family` label). */
  get family(): 1 | 2 { return this.remoteAddress.includes(':') ? 2 : 1; }

  /**
   * The query the server's own replies (errors after the chain) are made from:
   * the message as received, or as a plugin last edited it (`derive({ inPlace: true })`).
   */
  get replyBase(): Message { return this.root.edited ?? this.msg; }

  /** `replyBase.edns`, without decoding a scanned query. */
  get replyEdns(): Edns | undefined {
    const e = this.root.edited;
    return e !== undefined ? e.edns : this.edns;
  }

  /**
   * The EDNS buffer size of the query (undefined without EDNS), lowered to the
   * limit of `limitUdpSize` when one was set on this query or one it derives from.
   */
  get udpSize(): number | undefined {
    const e = this.currentEdns;
    if (e === undefined) return undefined;
    const limit = this.root.udpLimit;
    return limit !== 0 && limit < e.udpSize ? limit : e.udpSize;
  }

  /** The reply size limit the client can take: EDNS size (≥512) over UDP, 65535 over TCP. */
  get size(): number {
    if (this.proto === 'tcp') return TCP_SIZE;
    const advertised = this.udpSize ?? 0;
    return advertised < MIN_UDP_SIZE ? MIN_UDP_SIZE : advertised;
  }

  /**
   * CoreDNS's bufsize: the query's EDNS buffer size becomes at most `max` for
   * everyone who sees this query — the rest of the chain (through a derived
   * request whose OPT says so: see the bufsize plugin), and the server's writer,
   * which advertises it in the reply's OPT and truncates the reply to it, as
   * CoreDNS does because bufsize rewrites the query's OPT in place.
   */
  limitUdpSize(max: number): void {
    const root = this.root;
    if (root.udpLimit === 0 || max < root.udpLimit) root.udpLimit = max;
  }

  /** Offset just past the question in `wire` (-1 if it cannot be walked): lets a plugin reuse the client's question bytes. */
  get questionEnd(): number {
    const s = this.scanned;
    if (s !== undefined) return s.questionEnd;
    const end = skipName(this.wire, 12);
    return end < 0 ? -1 : end + 4;
  }

  /**
   * Request length in bytes (as received, or as encoded for a derived request). For the original request
   * of a query a plugin edited in place (`derive({ inPlace: true })`), the edited query's length: CoreDNS's
   * plugins measure the shared *dns.Msg after the chain, when e.g. tsig has stripped its TSIG record.
   */
  get length(): number {
    const e = this.root === this ? this.edited : undefined;
    const dropped = this.root === this ? this.droppedOptionBytes : 0;
    if (e === undefined) return this.wire.length - dropped;
    const m = this.msg;
    // Flags edited (header): the sections are the same arrays, so the length is the same.
    if (e === m || (e.question === m.question && e.answer === m.answer && e.authority === m.authority
      && e.additional === m.additional && e.edns === m.edns)) return this.wire.length - dropped;
    if (this.editedOf !== e) {
      this.editedLength = encodeMessage(e).length;
      this.editedOf = e;
    }
    return this.editedLength - dropped;
  }

  /**
   * The server echoed the query's OPT into a reply that had none, without the options no plugin declared
   * (`bytes` of them). CoreDNS does that by removing them from the request's own OPT record, so whatever
   * measures the request afterwards (log's `{size}`) counts the query without them: `length` does too.
   */
  dropUnechoedOptions(bytes: number): void {
    this.root.droppedOptionBytes = bytes;
  }

  /** The query's active tracing span (see QuerySpan); undefined unless the trace plugin traces this query. */
  get span(): QuerySpan | undefined { return this.root.activeSpan; }
  set span(s: QuerySpan | undefined) { this.root.activeSpan = s; }

  /** Name of the plugin currently handling the query; the final writer records who replied. */
  get plugin(): string { return this.root.pluginName; }
  set plugin(name: string) { this.root.pluginName = name; }

  /**
   * Extended DNS Errors (RFC 8914) for the client, attached by any plugin; the
   * final writer adds them to the reply of an EDNS client even when a plugin
   * in between (e.g. cache) dropped the reply's own OPT.
   */
  get extendedErrors(): readonly EdnsOption[] | undefined { return this.root.ede; }

  /** Attach an Extended DNS Error option (code 15) for the client's reply. */
  addExtendedError(option: EdnsOption): void {
    (this.root.ede ??= []).push(option);
  }

  /**
   * Start this query's metadata afresh (CoreDNS's metadata.ContextWithMetadata): called by the metadata
   * plugin's collector at routing time. Until then, and in blocks without the metadata plugin, metadata
   * labels cannot be set.
   */
  beginMetadata(): void {
    this.root.meta = new Map();
  }

  /**
   * Set a metadata label (CoreDNS's metadata.SetValueFunc); a function is evaluated when read. Like
   * SetValueFunc, it does nothing (and returns false) where the metadata plugin did not begin the metadata.
   */
  setMetadata(label: string, value: string | (() => string)): boolean {
    const m = this.root.meta;
    if (m === undefined) return false;
    m.set(label, value);
    return true;
  }

  /** A metadata label's value, or undefined when no plugin set it. */
  metadata(label: string): string | undefined {
    const v = this.root.meta?.get(label);
    return typeof v === 'function' ? v() : v;
  }

  /** Every metadata label set so far, sorted (for the metadata and log plugins). */
  metadataLabels(): string[] {
    const m = this.root.meta;
    return m === undefined ? [] : [...m.keys()].sort();
  }

  /**
   * Set a value for other plugins of this query that does not depend on the metadata plugin (what
   * CoreDNS keeps in the context under a key of its own), e.g. the upstream forward used, for loop's guard.
   */
  setValue(key: string, value: string): void {
    (this.root.values ??= new Map()).set(key, value);
  }

  /** A value set with `setValue`, or undefined. */
  value(key: string): string | undefined {
    return this.root.values?.get(key);
  }

  /**
   * The signer of this query's replies (CoreDNS: miekg's ResponseWriter with the server's TSIG secrets):
   * set by the tsig plugin for a signed query; shared with derived requests, not with internal lookups.
   */
  get replySigner(): ReplySigner | undefined { return this.root.signer; }

  /** Register the signer the server's writer calls for a reply whose last additional record is a TSIG. */
  setReplySigner(signer: ReplySigner | undefined): void {
    this.root.signer = signer;
  }

  /**
   * A request for the rest of the chain that differs in message, question or
   * transport. It shares metadata, Extended DNS Errors and the plugin in
   * charge with this one; its lazily computed values are its own.
   */
  derive(o: DeriveOptions): Request {
    let msg = o.msg ?? this.msg;
    if (o.name !== undefined || o.type !== undefined || o.class !== undefined) {
      const q = msg.question[0];
      const question = {
        name: o.name ?? q?.name ?? '.',
        type: o.type ?? q?.type ?? 0,
        class: o.class ?? q?.class ?? RRClass.IN,
      };
      msg = { ...msg, question: [question, ...msg.question.slice(1)] };
    }
    const r = this.copy(msg, o.proto ?? this.proto, this.root, this.depth);
    if (o.deadline !== undefined && o.deadline < r.deadline) (r as { deadline: number }).deadline = o.deadline;
    if (o.inPlace === true) this.root.edited = msg;
    return r;
  }

  /**
   * Resolve `name`/`type` through this server's own zones and chains (CoreDNS's
   * upstream.Lookup): the query is a copy of this one (flags and EDNS kept) with
   * the new question, routed as if it had just arrived on the same listener;
   * the reply comes back instead of going to the client. Undefined when no
   * plugin wrote a reply. Rejects when there is no running server (a request
   * built by hand) or when lookups nest deeper than MAX_LOOKUP_DEPTH.
   */
  lookup(name: string, type: number): Promise<Message | undefined> {
    const router = this.router;
    if (router === undefined) return Promise.reject(new Error('no full server is running'));
    if (this.depth >= MAX_LOOKUP_DEPTH) {
      return Promise.reject(new Error(`internal lookups nested more than ${MAX_LOOKUP_DEPTH} deep at ${name}`));
    }
    const m = this.msg;
    const msg: Message = {
      ...m,
      question: [{ name: fqdn(name), type, class: RRClass.IN }],
      answer: [...m.answer],
      authority: [...m.authority],
      additional: [...m.additional],
      edns: m.edns === undefined ? undefined : { ...m.edns, udpSize: this.udpSize ?? m.edns.udpSize, options: [...m.edns.options] },
    };
    // A sub-query is a query of its own (its own root, one level deeper) served with the same context in
    // CoreDNS: it starts with this query's metadata, until a block's metadata collection begins its own.
    const sub = this.copy(msg, this.proto, undefined, this.depth + 1);
    sub.meta = this.root.meta;
    // CoreDNS's context values reach the sub-query too (a copy: what it sets does not come back).
    if (this.root.values !== undefined) sub.values = new Map(this.root.values);
    // So is the tracing span: the sub-query's plugins are traced as children of the plugin that asked.
    sub.activeSpan = this.root.activeSpan;
    return router.exchange(sub);
  }

  /** A request like this one with another message/transport; `root` undefined makes it a root of its own. */
  /**
   * This query with the AD bit set (the cache asks the rest of the chain so, as CoreDNS does). A scanned query
   * nobody edited gets a copy of its bytes with the bit set, still scanned and undecoded; any other is derived
   * with an edited message.
   */
  withAdBit(): Request {
    if ((this.flags & 0x20) !== 0) return this;
    const s = this.scanned;
    if (s === undefined || this.msgValue !== undefined || this.root.edited !== undefined) return this.derive({ msg: { ...this.msg, ad: true } });
    const wire = Buffer.from(this.wireBytes!);
    wire[3] = wire[3]! | 0x20;
    const r = new Request(undefined, wire, this.proto, this.remoteAddress, this.remotePort, this.localAddress, this.localPort,
      this.server, this.start, this.router, s);
    r.zone = this.zone;
    r.view = this.view;
    const w = r as unknown as { root: Request; depth: number; deadline: number };
    w.deadline = this.deadline;
    w.root = this.root;
    w.depth = this.depth;
    return r;
  }

  /**
   * The query's bytes are exactly what encoding its message would give, so they can be sent on as they are: a
   * scanned query (one plain question, at most an OPT without options) whose counts tell the truth, with nothing
   * after its last record and no extended rcode bits in its OPT.
   */
  get canonicalWire(): boolean {
    const s = this.scanned;
    const b = this.wireBytes;
    if (s === undefined || b === undefined) return false;
    const q = s.questionEnd;
    return s.edns === undefined ? b[11] === 0 && b.length === q : b.length === q + 11 && b[q + 5] === 0;
  }

  private copy(msg: Message, proto: Transport, root: Request | undefined, depth: number): Request {
    const r = new Request(msg, msg === this.msg ? this.wireBytes : undefined, proto,
      this.remoteAddress, this.remotePort, this.localAddress, this.localPort, this.server, this.start, this.router);
    r.zone = this.zone;
    r.view = this.view;
    // Set once here, readonly everywhere else.
    const w = r as unknown as { root: Request; depth: number; deadline: number };
    w.deadline = this.deadline;
    if (root !== undefined) w.root = root;
    w.depth = depth;
    return r;
  }
}
