// dns64: AAAA synthesis from A records (RFC 6147) for AAAA queries whose reply has no
// AAAA records, with the IPv4 addresses embedded in an RFC 6052 prefix. CoreDNS plugin/dns64.

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { AData, Message, ResourceRecord } from '../../wire/types.ts';
import type { Cidr } from '../../wire/ip.ts';
import { formatIPv6, parseIPv4 } from '../../wire/ip.ts';
import { embedIPv4 } from '../pkg/rfc6052.ts';
import { replyTo } from '../../wire/message.ts';
import { Rcode, RRClass, RRType } from '../../wire/constants.ts';
import { nextOrFailure, replaceReply } from '../pkg/next.ts';
import { ResponseType, typify } from '../pkg/response.ts';
import type { CounterChild } from '../pkg/vec.ts';
import { dns64Metrics } from './metrics.ts';
import type { CounterVec } from '../pkg/vec.ts';

/** What the handler needs of the options (see setup.ts Dns64Options). */
export interface Dns64Config {
  prefix: Cidr;
  translateAll: boolean;
  allowIPv4: boolean;
}

export class Dns64 implements Handler {
  readonly name = 'dns64';
  private readonly next: Handler | undefined;
  private readonly prefix: Cidr;
  private readonly translateAll: boolean;
  private readonly allowIPv4: boolean;
  private readonly bound = new Map<string, CounterChild>();

  private readonly translated: CounterVec;

  constructor(next: Handler | undefined, o: Dns64Config, translated: CounterVec = dns64Metrics()) {
    this.translated = translated;
    this.next = next;
    this.prefix = o.prefix;
    this.translateAll = o.translateAll;
    this.allowIPv4 = o.allowIPv4;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    // Only AAAA/IN, and only for IPv6 clients unless allow_ipv4.
    if ((!this.allowIPv4 && req.family === 1) || req.qtype !== RRType.AAAA || req.qclass !== RRClass.IN) {
      return nextOrFailure(this.name, this.next, req, w);
    }
    const next = this.next;
    // CoreDNS calls its next handler unconditionally here: without one it is a nil dereference (a recovered panic).
    if (next === undefined) throw new Error('runtime error: invalid memory address or nil pointer dereference');
    return replaceReply(this.name, next, req, w, (m) => this.shouldTranslate(m), (m) => this.translate(req, w, m));
  }


  /** RFC 6147 5.1.1/5.1.2: not for NXDOMAIN; otherwise when no AAAA was found (or always with translate_all). */
  private shouldTranslate(m: Message): boolean {
    if (typify(m) === ResponseType.NameError) return false;
    if (this.translateAll) return true;
    const ans = m.answer;
    for (let i = 0; i < ans.length; i++) if (ans[i].type === RRType.AAAA) return false;
    return true;
  }

  private async translate(req: Request, w: ResponseWriter, orig: Message): Promise<number> {
    let resp: Message | undefined;
    try {
      resp = await req.lookup(req.name, RRType.A);
    } catch (e) {
      throw new PluginError(Rcode.SERVFAIL, e instanceof Error ? e.message : String(e), { cause: e });
    }
    if (resp === undefined) throw new PluginError(Rcode.SERVFAIL, 'dns64: upstream returned no response');
    const out = this.synthesize(req.msg, orig, resp);
    let c = this.bound.get(req.server);
    if (c === undefined) {
      c = this.translated.child(req.server);
      this.bound.set(req.server, c);
    }
    c.inc();
    w.writeMsg(out);
    return Rcode.NOERROR;
  }

  /** The reply to the AAAA query from the A reply: its rcode, TC, authority and additional; A records made AAAA. */
  synthesize(query: Message, orig: Message, resp: Message): Message {
    const ret = replyTo(query);
    ret.rcode = resp.rcode;
    ret.tc = resp.tc;
    ret.additional = resp.additional;
    ret.edns = resp.edns;
    ret.authority = resp.authority;
    // RFC 6147 5.1.7: TTL no more than the SOA's of the AAAA reply, or 600 without one.
    let soaTtl = 600;
    for (const rr of orig.authority) if (rr.type === RRType.SOA) soaTtl = rr.ttl;
    const answer: ResourceRecord[] = [];
    for (const rr of resp.answer) {
      if (rr.type !== RRType.A) {
        answer.push(rr);
        continue;
      }
      const v4 = parseIPv4((rr.data as AData).address);
      const v6 = embedIPv4(this.prefix, v4 < 0 ? 0 : v4);
      answer.push({
        name: rr.name, type: RRType.AAAA, class: rr.class, ttl: Math.min(rr.ttl, soaTtl),
        data: { address: formatIPv6(v6, 0) },
      });
    }
    ret.answer = answer;
    return ret;
  }
}
