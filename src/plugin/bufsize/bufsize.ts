// bufsize: lowers the EDNS buffer size a query advertises before the rest of the chain sees it.

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Message } from '../../wire/types.ts';
import { nextOrFailure } from '../pkg/next.ts';

export class Bufsize implements Handler {
  readonly name = 'bufsize';
  readonly size: number;
  private readonly next: Handler | undefined;

  constructor(size: number, next: Handler | undefined) {
    this.size = size;
    this.next = next;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const e = req.msg.edns;
    // A query without EDNS is left alone; a smaller buffer is never raised.
    if (e === undefined || e.udpSize <= this.size) return nextOrFailure(this.name, this.next, req, w);
    // CoreDNS rewrites the query's OPT in place: the plugins after this one (forward sends it upstream)
    // see the new size, and so does the server's writer (the reply's OPT and its truncation).
    req.limitUdpSize(this.size);
    const msg: Message = { ...req.msg, edns: { ...e, udpSize: this.size } };
    return nextOrFailure(this.name, this.next, req.derive({ msg }), w);
  }
}
