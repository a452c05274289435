// cancel: gives every query a deadline (CoreDNS: context.WithTimeout around the
// rest of the chain). The plugins after it read `req.deadline` and stop working
// on a query whose deadline has passed (forward stops trying upstreams).

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import { nextOrFailure } from '../pkg/next.ts';

export class Cancel implements Handler {
  readonly name = 'cancel';
  readonly timeoutMs: number;
  private readonly next: Handler | undefined;

  constructor(timeoutMs: number, next: Handler | undefined) {
    this.timeoutMs = timeoutMs;
    this.next = next;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    return nextOrFailure(this.name, this.next, req.derive({ deadline: Date.now() + this.timeoutMs }), w);
  }
}
