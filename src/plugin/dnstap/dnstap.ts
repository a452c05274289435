// dnstap: logs every client query and response as dnstap messages (CoreDNS
// plugin/dnstap handler.go and writer.go), and offers itself as a Tapper to
// plugins that log their own messages (forward's FORWARDER_QUERY/RESPONSE).

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Message } from '../../wire/types.ts';
import { Rcode } from '../../wire/constants.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { encodeWithin } from '../../wire/truncate.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { findOptRecord } from '../../wire/scan.ts';
import { replyTo } from '../../wire/message.ts';
import { nextOrFailure } from '../pkg/next.ts';
import type { CompiledFormat } from '../pkg/replacer.ts';
import { TapType, tapNow, type TapMessage, type Tapper } from '../pkg/dnstap.ts';
import { FrameEncoder, type Envelope } from './encode.ts';

/** Where the frames go: the output of io.ts, or a collector in tests. */
export interface FrameSink {
  readonly accepting: boolean;
  drop(): void;
  send(frame: Buffer): void;
}

export class Dnstap implements Tapper {
  readonly name = 'dnstap';
  next: Handler | undefined;
  readonly tapFull: boolean;
  private readonly env: Envelope;
  private readonly extra: CompiledFormat | undefined;
  private readonly sink: FrameSink;
  private readonly enc = new FrameEncoder();

  constructor(sink: FrameSink, full: boolean, identity: string, version: string, extra: CompiledFormat | undefined) {
    this.sink = sink;
    this.tapFull = full;
    this.env = { identity: Buffer.from(identity), version: Buffer.from(version) };
    this.extra = extra;
  }

  tapMessage(m: TapMessage, req: Request): void {
    const sink = this.sink;
    if (!sink.accepting) {
      sink.drop();
      return;
    }
    const extra = this.extra === undefined ? undefined : Buffer.from(this.extra.format(req, undefined));
    sink.send(this.enc.frame(this.env, extra, m));
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const queryTime = tapNow();
    this.tapQuery(req, queryTime);
    const tw = new TapWriter(this, req, w, queryTime);
    let r: HandlerResult;
    try {
      r = nextOrFailure(this.name, this.next, req, tw);
    } catch (e) {
      tw.failed(e);
      throw e;
    }
    if (typeof r === 'number') {
      tw.done(r);
      return r;
    }
    return r.then((rc) => { tw.done(rc); return rc; }, (e: unknown) => { tw.failed(e); throw e; });
  }

  private tapQuery(req: Request, queryTime: number): void {
    const m: TapMessage = {
      type: TapType.CLIENT_QUERY, proto: req.proto,
      queryAddress: req.remoteAddress, queryPort: req.remotePort, queryTime,
    };
    if (this.tapFull) m.queryMessage = queryWire(req);
    this.tapMessage(m, req);
  }

  /** CLIENT_RESPONSE for `reply` (the wire form the client got, with `full`). */
  tapResponse(req: Request, queryTime: number, wire: Uint8Array | undefined): void {
    const m: TapMessage = {
      type: TapType.CLIENT_RESPONSE, proto: req.proto,
      queryAddress: req.remoteAddress, queryPort: req.remotePort, queryTime, responseTime: tapNow(),
    };
    if (wire !== undefined) m.responseMessage = wire;
    this.tapMessage(m, req);
  }
}

/** rcodes the server answers itself when a plugin returns them without writing (CoreDNS ClientWrite false). */
function serverWrites(rcode: number): boolean {
  return rcode === Rcode.SERVFAIL || rcode === Rcode.REFUSED || rcode === Rcode.FORMERR || rcode === Rcode.NOTIMP;
}

/** The writer the rest of the chain sees: passes replies on, then taps them (CoreDNS's dnstap ResponseWriter). */
class TapWriter implements ResponseWriter {
  private readonly tap: Dnstap;
  private readonly req: Request;
  private readonly inner: ResponseWriter;
  private readonly queryTime: number;
  private written = false;

  constructor(tap: Dnstap, req: Request, inner: ResponseWriter, queryTime: number) {
    this.tap = tap;
    this.req = req;
    this.inner = inner;
    this.queryTime = queryTime;
  }

  writeMsg(reply: Message): void {
    this.inner.writeMsg(reply);
    this.written = true;
    // The writer further out fitted `reply` to the client in place (OPT, truncation): encode it as sent.
    this.tap.tapResponse(this.req, this.queryTime, this.tap.tapFull ? clientWire(this.req, reply) : undefined);
  }

  writeWire(reply: Uint8Array): void {
    if (!this.tap.tapFull) {
      this.inner.writeWire(reply);
      this.written = true;
      this.tap.tapResponse(this.req, this.queryTime, undefined);
      return;
    }
    // With `full`, the message is decoded once so that what is tapped is what the client gets.
    let m: Message;
    try {
      m = decodeMessage(reply);
    } catch {
      this.inner.writeWire(reply);
      this.written = true;
      this.tap.tapResponse(this.req, this.queryTime, reply);
      return;
    }
    this.writeMsg(m);
  }

  /** The chain returned `rcode`: a reply the server writes itself is tapped as CoreDNS does (SetRcode). */
  done(rcode: number): void {
    if (this.written || !serverWrites(rcode)) return;
    this.tapDeferred(rcode);
  }

  failed(e: unknown): void {
    if (this.written || !(e instanceof PluginError) || !serverWrites(e.rcode)) return;
    this.tapDeferred(e.rcode);
  }

  private tapDeferred(rcode: number): void {
    let wire: Uint8Array | undefined;
    if (this.tap.tapFull) {
      const m = replyTo(this.req.msg);
      m.rcode = rcode;
      wire = encodeMessage(m, { compress: false });
    }
    this.tap.tapResponse(this.req, this.queryTime, wire);
  }
}

/**
 * The query as CoreDNS packs it here: bufsize (before dnstap in plugin.cfg) lowered the OPT's UDP size
 * in place there; nodens keeps that limit beside the message (`req.udpSize`), so it is patched in.
 */
function queryWire(req: Request): Buffer {
  const wire = encodeMessage(req.msg, { compress: false });
  const e = req.msg.edns;
  const size = req.udpSize;
  if (e !== undefined && size !== undefined && size !== e.udpSize) {
    const at = findOptRecord(wire);
    if (at >= 0 && wire[at] === 0) wire.writeUInt16BE(size, at + 3);
  }
  return wire;
}

/** The reply as the client's writer encodes it (CoreDNS packs the message the scrubbing writer changed). */
function clientWire(req: Request, reply: Message): Uint8Array {
  const limit = req.proto !== 'udp' ? undefined : req.family === 1 ? 1480 : 1220;
  return encodeWithin(reply, req.size, limit === undefined ? {} : { compressAbove: limit }).wire;
}
