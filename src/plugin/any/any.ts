// any: answers qtype ANY with a single HINFO record (RFC 8482).

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import { replyTo } from '../../wire/message.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { RRClass, RRType } from '../../wire/constants.ts';

const CPU = new TextEncoder().encode('ANY obsoleted');
const OS = new TextEncoder().encode('See RFC 8482');

export class Any implements Handler {
  readonly name = 'any';
  readonly next: Handler | undefined;

  constructor(next: Handler | undefined) {
    this.next = next;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    if (req.qtype !== RRType.ANY) return nextOrFailure(this.name, this.next, req, w);
    const reply = replyTo(req.msg);
    reply.answer = [{ name: req.qname, type: RRType.HINFO, class: RRClass.IN, ttl: 8482, data: { cpu: CPU, os: OS } }];
    w.writeMsg(reply);
    return 0;
  }
}
