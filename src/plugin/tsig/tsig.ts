// The tsig handler (CoreDNS plugin/tsig/tsig.go). In CoreDNS, miekg/dns verifies the TSIG of every
// signed query in the server and signs every reply that carries a TSIG record; the plugin acts on the
// verification status and adds the TSIG record to the replies. Here the plugin verifies (pkg/tsig.ts,
// over the query as received) and registers a signer on the request, which the server's writer calls.

import type { Handler, HandlerResult, ResponseWriter, ServerLogger } from '../plugin.ts';
import { PluginError, isClientErrorRcode } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Message } from '../../wire/types.ts';
import { Rcode, RRType, typeToString } from '../../wire/constants.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { replyTo } from '../../wire/message.ts';
import { isSubdomain } from '../../wire/name.ts';
import { findTsigRecord } from '../../wire/scan.ts';
import { normalizeName } from '../../corefile/address.ts';
import { noNextPluginError } from '../pkg/next.ts';
import { TsigSigner, VALIDATED_KEY_NAME, tsigRecord, verifyTsig, type TsigKey, type TsigVerification } from '../pkg/tsig.ts';
import type { TsigOptions } from './setup.ts';

export { VALIDATED_KEY_NAME };

const EMPTY = new Uint8Array(0);

/** Go's dns.TypeToString[t]: the mnemonic, '' for a type without one. */
function goTypeName(t: number): string {
  const s = typeToString(t);
  return /^TYPE[0-9]/.test(s) ? '' : s;
}

function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}

export class Tsig implements Handler {
  readonly name = 'tsig';
  next: Handler | undefined;
  readonly zones: readonly string[];
  private readonly keys: ReadonlyMap<string, TsigKey>;
  private readonly types: ReadonlySet<number>;
  private readonly allTypes: boolean;
  private readonly opcodes: ReadonlySet<number>;
  private readonly allOpcodes: boolean;
  private readonly log: ServerLogger;
  /** The EDNS options a plugin of the server handles (copied into a reply's OPT). */
  private readonly ednsSupported: ReadonlySet<number>;
  /** Unix seconds (a test may pin it). */
  clock: () => number = unixNow;

  constructor(o: TsigOptions, keys: ReadonlyMap<string, TsigKey>, log: ServerLogger, ednsSupported: ReadonlySet<number>) {
    this.zones = o.zones;
    this.keys = keys;
    this.types = o.types;
    this.allTypes = o.allTypes;
    this.opcodes = o.opcodes;
    this.allOpcodes = o.allOpcodes;
    this.log = log;
    this.ednsSupported = ednsSupported;
  }

  private required(qtype: number, opcode: number): boolean {
    return this.allTypes || this.types.has(qtype) || this.allOpcodes || this.opcodes.has(opcode);
  }

  private inZones(name: string): boolean {
    const z = this.zones;
    for (let i = 0; i < z.length; i++) if (isSubdomain(name, z[i]!)) return true;
    return false;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const msg = req.msg;
    const ar = msg.additional;
    let at = -1;
    for (let i = 0; i < ar.length; i++) {
      if (ar[i]!.type !== RRType.TSIG) continue;
      // A TSIG record must be the last additional record (the OPT counts: miekg keeps it in Extra). The
      // bytes as received: a plugin before tsig (bufsize) may have derived a request with another OPT.
      at = findTsigRecord(req.receivedWire);
      if (at === -3) return this.reject(req, w, Rcode.FORMERR);
      break;
    }
    if (at < 0 && !this.required(req.qtype, msg.opcode)) return this.pass(req, w);
    if (!this.inZones(req.name)) return this.pass(req, w);
    if (at < 0) {
      this.log.debug(`rejecting '${goTypeName(req.qtype)}' request without TSIG`);
      return this.reject(req, w, Rcode.REFUSED);
    }
    return this.signed(req, w, at);
  }

  private pass(req: Request, w: ResponseWriter): HandlerResult {
    if (this.next === undefined) throw noNextPluginError(this.name);
    return this.next.serveDNS(req, w);
  }

  /** An unsigned reply with `rcode` (CoreDNS writes it and returns NOERROR). */
  private reject(req: Request, w: ResponseWriter, rcode: number): number {
    const r = replyTo(req.msg);
    r.rcode = rcode;
    w.writeMsg(r);
    return Rcode.NOERROR;
  }

  private signed(req: Request, w: ResponseWriter, at: number): HandlerResult {
    const msg = req.msg;
    const owner = msg.additional[msg.additional.length - 1]!.name;
    const now = this.clock();
    const v = verifyTsig(req.receivedWire, at, owner, this.keys, EMPTY, now);
    if (v === undefined) return this.reject(req, w, Rcode.FORMERR); // miekg cannot unpack the record
    // The TSIG record is stripped: the rest of the chain, and the replies, see the query without it.
    const stripped = req.derive({ msg: { ...msg, additional: msg.additional.slice(0, -1) }, inPlace: true });
    stripped.setReplySigner(new TsigSigner(this.keys, v.fields.mac, this.clock));
    const tw = new TsigWriter(w, stripped, v, this.clock, this.ednsSupported);
    if (v.error !== undefined) {
      this.log.debug(`TSIG validation failed: ${goTypeName(req.qtype)} ${v.error}`);
      const r = replyTo(stripped.msg);
      r.rcode = Rcode.NOTAUTH;
      tw.writeMsg(r);
      return Rcode.NOERROR;
    }
    stripped.setValue(VALIDATED_KEY_NAME, normalizeName(owner));
    let result: HandlerResult;
    try {
      result = this.pass(stripped, tw);
    } catch (e) {
      return this.after(stripped, tw, 0, e);
    }
    if (typeof result === 'number') return this.after(stripped, tw, result, undefined);
    return result.then((rc) => this.after(stripped, tw, rc, undefined), (e: unknown) => this.after(stripped, tw, 0, e));
  }

  /**
   * After the chain: its error is logged; an rcode the server would have answered (SERVFAIL, REFUSED,
   * FORMERR, NOTIMP) is answered here, signed, as CoreDNS's server error replies would not be.
   */
  private after(req: Request, tw: TsigWriter, rcode: number, err: unknown): number {
    if (err !== undefined) {
      if (!(err instanceof PluginError)) throw err;
      this.log.error(`request handler returned an error: ${err.message}`);
      rcode = err.rcode;
    }
    if (isClientErrorRcode(rcode)) {
      const r = replyTo(req.replyBase);
      r.rcode = rcode;
      tw.writeMsg(r);
    }
    return Rcode.NOERROR;
  }
}

/**
 * CoreDNS's restoreTsigWriter: each reply without a TSIG record of its own gets one for the request's
 * key and algorithm, with the verification's error; BADTIME replies carry the client's time and, as
 * other data, the server's. The server's writer computes the MAC (the request's signer).
 */
export class TsigWriter implements ResponseWriter {
  private readonly w: ResponseWriter;
  private readonly req: Request;
  private readonly v: TsigVerification;
  private readonly clock: () => number;
  private readonly supported: ReadonlySet<number>;

  constructor(w: ResponseWriter, req: Request, v: TsigVerification, clock: () => number, supported: ReadonlySet<number>) {
    this.w = w;
    this.req = req;
    this.v = v;
    this.clock = clock;
    this.supported = supported;
  }

  writeMsg(reply: Message): void {
    const ar = reply.additional;
    if (ar.length === 0 || ar[ar.length - 1]!.type !== RRType.TSIG) {
      const v = this.v;
      const badTime = v.rcode === Rcode.BADTIME;
      let other = EMPTY;
      if (badTime) {
        const now = this.clock();
        other = new Uint8Array(6);
        const hi = Math.floor(now / 0x100000000);
        other[0] = (hi >> 8) & 0xff; other[1] = hi & 0xff;
        other[2] = (now >>> 24) & 0xff; other[3] = (now >>> 16) & 0xff; other[4] = (now >>> 8) & 0xff; other[5] = now & 0xff;
      }
      const stub = tsigRecord(v.owner, {
        // The request's MAC stands in until the server signs (CoreDNS's stub: what the log plugin measures).
        algorithm: v.fields.algorithm, timeSigned: badTime ? v.fields.timeSigned : 0, fudge: 0, mac: v.fields.mac,
        origId: reply.id, error: v.rcode, other,
      });
      // A copy: the plugin that wrote the reply may keep its sections (a reply built once and reused).
      const out: Message = { ...reply, additional: [...ar, stub] };
      this.sizeAndDo(out);
      this.w.writeMsg(out);
      return;
    }
    this.w.writeMsg(reply);
  }

  writeWire(reply: Uint8Array): void {
    this.writeMsg(decodeMessage(reply));
  }

  /**
   * CoreDNS's SizeAndDo, which restoreTsigWriter runs before adding the TSIG record (so that the OPT comes
   * first): the plugins before tsig (log's {rsize}, the size metrics) measure the reply with its OPT. The
   * server's writer applies the same rule again.
   */
  private sizeAndDo(reply: Message): void {
    const q = this.req.msg.edns;
    if (q === undefined) return;
    const udpSize = this.req.udpSize ?? q.udpSize;
    const r = reply.edns;
    if (r !== undefined) {
      r.name = '.';
      r.version = 0;
      r.udpSize = udpSize;
      r.z &= 0x7f00;
      if (q.do) r.do = true;
      return;
    }
    const supported = this.supported;
    reply.edns = {
      name: '.', udpSize, version: 0, do: q.do, z: q.z & 0x7f00,
      options: q.options.length === 0 || supported.size === 0 ? [] : q.options.filter((o) => supported.has(o.code)),
    };
  }
}
