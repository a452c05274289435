// siit: A synthesis from AAAA records (RFC 6052 algorithmic translation, RFC 7757 explicit address
// mappings) for A queries whose reply has no A records. CoreDNS plugin/siit.

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { AData, Message, ResourceRecord } from '../../wire/types.ts';
import type { Cidr } from '../../wire/ip.ts';
import { cidrContains, formatIPv4, formatIPv6Go, isIPv4Mapped, parseIPv6Into } from '../../wire/ip.ts';
import { extractIPv4 } from '../pkg/rfc6052.ts';
import { replyTo } from '../../wire/message.ts';
import { Rcode, RRClass, RRType } from '../../wire/constants.ts';
import { nextOrFailure, replaceReply } from '../pkg/next.ts';
import { ResponseType, typify } from '../pkg/response.ts';
import type { CounterChild } from '../pkg/vec.ts';
import { siitMetrics } from './metrics.ts';
import type { CounterVec } from '../pkg/vec.ts';

/**
 * The request value that marks a translation plugin's own sub-query (CoreDNS's synthesis context
 * key): such a query, and every lookup made while serving it, passes siit untouched.
 */
export const SYNTHESIS_LOOKUP = 'siit/synthesis';

/** What the handler needs of the options (see setup.ts SiitOptions). */
export interface SiitConfig {
  prefix: Cidr;
  eam: Map<string, string>;
}

export class Siit implements Handler {
  readonly name = 'siit';
  private readonly next: Handler | undefined;
  private readonly prefix: Cidr;
  /** An IPv4-mapped prefix contains no address siit translates (Go compares it as IPv4). */
  private readonly prefixUsable: boolean;
  private readonly eam: Map<string, string>;
  private readonly bound = new Map<string, CounterChild>();
  /** Scratch for parsing AAAA addresses (handlers run one at a time between awaits). */
  private readonly buf = new Uint8Array(16);

  private readonly translated: CounterVec;

  constructor(next: Handler | undefined, o: SiitConfig, translated: CounterVec = siitMetrics()) {
    this.translated = translated;
    this.next = next;
    this.prefix = o.prefix;
    this.prefixUsable = !isIPv4Mapped(o.prefix.bytes, 0);
    this.eam = o.eam;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    // A sub-query of a synthesis in flight, and any A/IN question but one: the rest of the chain.
    if (req.qtype !== RRType.A || req.qclass !== RRClass.IN || req.value(SYNTHESIS_LOOKUP) !== undefined) {
      return nextOrFailure(this.name, this.next, req, w);
    }
    const next = this.next;
    // CoreDNS calls its next handler unconditionally here: without one it is a nil dereference (a recovered panic).
    if (next === undefined) throw new Error('runtime error: invalid memory address or nil pointer dereference');
    return replaceReply(this.name, next, req, w, shouldTranslate, (m) => this.translate(req, w, m));
  }

  private async translate(req: Request, w: ResponseWriter, orig: Message): Promise<number> {
    req.setValue(SYNTHESIS_LOOKUP, '1');
    let resp: Message | undefined;
    try {
      resp = await req.lookup(req.name, RRType.AAAA);
    } catch (e) {
      throw new PluginError(Rcode.SERVFAIL, e instanceof Error ? e.message : String(e), { cause: e });
    }
    if (resp === undefined) throw new PluginError(Rcode.SERVFAIL, 'siit: upstream lookup returned no response');
    let out: Message | undefined;
    if (resp.rcode !== Rcode.NOERROR) {
      out = errorReply(req.msg, resp);
    } else {
      out = this.synthesize(req.msg, orig, resp);
      if (out === undefined) {
        out = orig;
      } else {
        let c = this.bound.get(req.server);
        if (c === undefined) {
          c = this.translated.child(req.server);
          this.bound.set(req.server, c);
        }
        c.inc();
      }
    }
    w.writeMsg(out);
    return out.rcode;
  }

  /**
   * The reply to the A query from the AAAA reply: its AA, RA, TC, authority and additional; AAAA
   * records in the prefix or the mappings made A, others dropped. Undefined when none was.
   */
  synthesize(query: Message, orig: Message, resp: Message): Message | undefined {
    // RFC 6147 5.1.7: TTL no more than the SOA's of the A reply, or 600 without one.
    let soaTtl = 600;
    const ns = orig.authority;
    for (let i = 0; i < ns.length; i++) if (ns[i].type === RRType.SOA) soaTtl = ns[i].ttl;
    const answer: ResourceRecord[] = [];
    let mapped = false;
    const ans = resp.answer;
    for (let i = 0; i < ans.length; i++) {
      const rr = ans[i];
      if (rr.type !== RRType.AAAA) {
        answer.push(rr);
        continue;
      }
      const v4 = this.to4((rr.data as AData).address);
      if (v4 === undefined) continue;
      mapped = true;
      answer.push({ name: rr.name, type: RRType.A, class: rr.class, ttl: Math.min(rr.ttl, soaTtl), data: { address: v4 } });
    }
    if (!mapped) return undefined;
    const ret = replyTo(query);
    ret.aa = resp.aa;
    ret.ra = resp.ra;
    ret.ad = false;
    ret.tc = resp.tc;
    ret.additional = resp.additional;
    ret.edns = resp.edns;
    ret.authority = resp.authority;
    ret.answer = answer;
    return ret;
  }

  /** The IPv4 address (dotted) an AAAA address translates to: a mapping first, else the prefix; undefined for none. */
  private to4(address: string): string | undefined {
    const b = this.buf;
    if (!parseIPv6Into(address, b, 0) || isIPv4Mapped(b, 0)) return undefined;
    if (this.eam.size > 0) {
      const v4 = this.eam.get(formatIPv6Go(b, 0));
      if (v4 !== undefined) return v4;
    }
    // The "u" octet of a translatable address is zero (RFC 6052 2.2).
    if (!this.prefixUsable || !cidrContains(this.prefix, b) || b[8] !== 0) return undefined;
    return formatIPv4(extractIPv4(b, this.prefix.bits), 0);
  }
}

/** RFC 6147 5.1: not for a truncated reply, nor NXDOMAIN; otherwise when no A was found. */
function shouldTranslate(m: Message): boolean {
  if (m.tc) return false;
  if (typify(m) === ResponseType.NameError) return false;
  const ans = m.answer;
  for (let i = 0; i < ans.length; i++) if (ans[i].type === RRType.A) return false;
  return true;
}

/** A failed AAAA lookup answered as the reply to the A query: its rcode, AA, RA, TC and sections. */
function errorReply(query: Message, resp: Message): Message {
  const ret = replyTo(query);
  ret.rcode = resp.rcode;
  ret.aa = resp.aa;
  ret.ra = resp.ra;
  ret.tc = resp.tc;
  ret.answer = resp.answer;
  ret.authority = resp.authority;
  ret.additional = resp.additional;
  ret.edns = resp.edns;
  return ret;
}
