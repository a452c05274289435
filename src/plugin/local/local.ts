// local: answers the loopback names (localhost. and below, the reverse zones
// 0., 127. and 255.in-addr.arpa.) itself, as CoreDNS's local plugin does, so
// they never reach an upstream.

import type { Handler, HandlerResult, PluginLogger, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Message, ResourceRecord } from '../../wire/types.ts';
import { replyTo } from '../../wire/message.ts';
import { RRClass, RRType, Rcode, typeToString } from '../../wire/constants.ts';
import { goQuote } from '../../corefile/address.ts';
import { zonesMatches } from '../pkg/zones.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { localMetrics } from './metrics.ts';
import type { Counter } from 'prom-client';

/** The zones local answers for. */
export const LOCAL_ZONES: readonly string[] = ['localhost.', '0.in-addr.arpa.', '127.in-addr.arpa.', '255.in-addr.arpa.'];
/** TTL of every record local makes (one week). */
export const LOCAL_TTL = 604800;

const LOCALHOST = 'localhost.';
const LC = LOCALHOST.length;

function soa(owner: string): ResourceRecord[] {
  return [{
    name: owner, type: RRType.SOA, class: RRClass.IN, ttl: LOCAL_TTL,
    data: { mname: LOCALHOST, rname: 'root.localhost.', serial: 1, refresh: 0, retry: 0, expire: 0, minimum: LOCAL_TTL },
  }];
}

function loopback(owner: string, type: number): ResourceRecord[] {
  return [{ name: owner, type, class: RRClass.IN, ttl: LOCAL_TTL, data: { address: type === RRType.A ? '127.0.0.1' : '::1' } }];
}

export class Local implements Handler {
  readonly name = 'local';
  /** `localhost_prefix`: names starting with `localhost.` are answered as localhost. */
  readonly localhostPrefix: boolean;
  private readonly log: PluginLogger;
  private readonly next: Handler | undefined;

  private readonly localhostCount: Counter;

  constructor(localhostPrefix: boolean, log: PluginLogger, next: Handler | undefined, localhostCount: Counter = localMetrics()) {
    this.localhostCount = localhostCount;
    this.localhostPrefix = localhostPrefix;
    this.log = log;
    this.next = next;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const name = req.name;
    const qname = req.qname;
    if (name.length > LC && (name.endsWith('.localhost.') || (this.localhostPrefix && name.startsWith(LOCALHOST)))) {
      if (this.log.debugEnabled) {
        this.log.debug(`Intercepting localhost query for ${goQuote(name)} ${typeToString(req.qtype)}, from ${req.remoteAddress}`);
      }
      this.localhostCount.inc();
      const m = replyTo(req.msg);
      const t = req.qtype;
      if (t === RRType.A || t === RRType.AAAA) m.answer = loopback(qname, t);
      else m.authority = soa(qname);
      w.writeMsg(m);
      return 0;
    }
    const zone = zonesMatches(LOCAL_ZONES, qname);
    if (zone === '') return nextOrFailure(this.name, this.next, req, w);
    // The zone as the client spelled it.
    const origin = qname.slice(qname.length - zone.length);
    const m: Message = replyTo(req.msg);
    const t = req.qtype;
    if (name === zone) {
      if (t === RRType.A || t === RRType.AAAA) {
        if (name === LOCALHOST) m.answer = loopback(qname, t);
        else m.authority = soa(qname);
      } else if (t === RRType.SOA) {
        m.answer = soa(qname);
      } else if (t === RRType.NS) {
        m.answer = [{ name: qname, type: RRType.NS, class: RRClass.IN, ttl: LOCAL_TTL, data: { target: LOCALHOST } }];
      } else {
        m.authority = soa(qname);
      }
    } else if (name === '1.0.0.127.in-addr.arpa.') {
      if (t === RRType.PTR) m.answer = [{ name: qname, type: RRType.PTR, class: RRClass.IN, ttl: LOCAL_TTL, data: { target: LOCALHOST } }];
      else m.authority = soa(origin);
    } else {
      m.authority = soa(origin);
      m.rcode = Rcode.NXDOMAIN;
    }
    w.writeMsg(m);
    return 0;
  }
}
