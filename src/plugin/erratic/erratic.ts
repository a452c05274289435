// erratic: a static answer to every query, some of them dropped, delayed or truncated, for testing
// clients. CoreDNS plugin/erratic.

import type { Handler, HandlerResult, Readiness, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { AutoPather } from '../pkg/autopath.ts';
import type { Message, ResourceRecord } from '../../wire/types.ts';
import { replyTo } from '../../wire/message.ts';
import { Rcode, RRClass, RRType } from '../../wire/constants.ts';
import { toMillis } from '../pkg/duration.ts';

/** What the handler needs of the options (see setup.ts ErraticOptions). */
export interface ErraticConfig {
  drop: number;
  delay: number;
  duration: bigint;
  truncate: number;
  large: boolean;
}

const SEARCH_PATH = ['a.example.org.', 'b.example.org.', ''];

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => { setTimeout(resolve, ms); });
}

/** The small zone an AXFR for `name` gets; without the closing SOA when truncated. */
export function transferRecords(name: string, truncate: boolean): ResourceRecord[] {
  const soa: ResourceRecord = {
    name, type: RRType.SOA, class: RRClass.IN, ttl: 0,
    data: { mname: 'sns.dns.icann.org.', rname: 'noc.dns.icann.org.', serial: 2018050825, refresh: 7200, retry: 3600, expire: 1209600, minimum: 3600 },
  };
  const rrs: ResourceRecord[] = [
    soa,
    { name, type: RRType.NS, class: RRClass.IN, ttl: 0, data: { target: 'b.' + name } },
    { name, type: RRType.NS, class: RRClass.IN, ttl: 0, data: { target: 'a.' + name } },
    { name: 'a.' + name, type: RRType.AAAA, class: RRClass.IN, ttl: 0, data: { address: '2001:bd8::53' } },
    { name: 'b.' + name, type: RRType.AAAA, class: RRClass.IN, ttl: 0, data: { address: '2001:500::54' } },
  ];
  if (!truncate) rrs.push(soa);
  return rrs;
}

export class Erratic implements Handler, Readiness, AutoPather {
  readonly name = 'erratic';
  private readonly drop: number;
  private readonly delay: number;
  private readonly delayMs: number;
  private readonly truncate: number;
  private readonly large: boolean;
  /** Queries seen so far (CoreDNS's counter: the first query is number 0). */
  private q = 0;

  constructor(o: ErraticConfig) {
    this.drop = o.drop;
    this.delay = o.delay;
    this.delayMs = toMillis(o.duration);
    this.truncate = o.truncate;
    this.large = o.large;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const n = this.q++;
    const drop = this.drop > 0 && n % this.drop === 0;
    const delay = this.delay > 0 && n % this.delay === 0 && this.delayMs > 0;
    // CoreDNS tests `queryNr & truncate` (a bitwise AND, not a modulo): reproduced as is.
    const trunc = this.truncate > 0 && (n & this.truncate) === 0;

    const qtype = req.qtype;
    let m: Message;
    if (qtype === RRType.A || qtype === RRType.AAAA) {
      m = replyTo(req.msg);
      m.aa = true;
      m.tc = trunc;
      const name = req.msg.question[0].name;
      const rr: ResourceRecord = qtype === RRType.A
        ? { name, type: RRType.A, class: RRClass.IN, ttl: 0, data: { address: '192.0.2.53' } }
        : { name, type: RRType.AAAA, class: RRClass.IN, ttl: 0, data: { address: '2001:db8::53' } };
      m.answer.push(rr);
      if (this.large && qtype === RRType.A) for (let i = 0; i < 29; i++) m.answer.push(rr);
    } else if (qtype === RRType.AXFR) {
      m = replyTo(req.msg);
      m.aa = true;
      m.answer = transferRecords(req.msg.question[0].name, trunc);
    } else {
      if (drop) return Rcode.NOERROR;
      if (delay) return sleep(this.delayMs).then(() => Rcode.SERVFAIL);
      return Rcode.SERVFAIL;
    }
    if (drop) return Rcode.NOERROR;
    if (delay) return sleep(this.delayMs).then(() => { w.writeMsg(m); return Rcode.NOERROR; });
    w.writeMsg(m);
    return Rcode.NOERROR;
  }

  /** Ready while 3 or 4 queries have been seen (it flips, to test the ready plugin). */
  ready(): boolean {
    return this.q >= 3 && this.q < 5;
  }

  /** CoreDNS's AutoPath: a fixed search path. */
  autoPath(_req: Request): string[] {
    return SEARCH_PATH;
  }
}
