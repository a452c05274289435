// loadbalance: reorders the records of NOERROR replies written by the rest of
// the chain (CoreDNS plugin/loadbalance).

import { questionEnd } from '../../wire/scan.ts';
import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Message } from '../../wire/types.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { roundRobin, roundRobinWire, reorderPreferred } from './shuffle.ts';
import type { Cidr } from '../../wire/ip.ts';
import type { WeightedRR } from './weighted.ts';
import { Rcode, RRType } from '../../wire/constants.ts';

export class LoadBalance implements Handler {
  readonly name = 'loadbalance';
  next: Handler | undefined;
  readonly weighted: WeightedRR | undefined;
  readonly prefer: Cidr[];

  constructor(weighted: WeightedRR | undefined, prefer: Cidr[]) {
    this.weighted = weighted;
    this.prefer = prefer;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    return nextOrFailure(this.name, this.next, req, new LoadBalanceWriter(this, w));
  }

  /** Reorder a decoded reply in place (the configured policy, then `prefer`). */
  shuffle(res: Message): void {
    const wr = this.weighted;
    if (wr !== undefined) {
      const qt = res.question[0]?.type;
      if (qt === RRType.A || qt === RRType.AAAA || qt === RRType.SRV) {
        res.answer = wr.order(res.answer);
        res.additional = wr.order(res.additional);
      }
    } else {
      res.answer = roundRobin(res.answer);
      res.authority = roundRobin(res.authority);
      res.additional = roundRobin(res.additional);
    }
    if (this.prefer.length > 0) {
      res.answer = reorderPreferred(res.answer, this.prefer);
      res.additional = reorderPreferred(res.additional, this.prefer);
    }
  }
}

function qtypeOfWire(b: Uint8Array): number {
  if (b.length < 12 || ((b[4]! << 8) | b[5]!) === 0) return -1;
  const p = questionEnd(b);
  return p < 0 ? -1 : (b[p - 4]! << 8) | b[p - 3]!;
}

export class LoadBalanceWriter implements ResponseWriter {
  private readonly lb: LoadBalance;
  private readonly inner: ResponseWriter;

  constructor(lb: LoadBalance, inner: ResponseWriter) {
    this.lb = lb;
    this.inner = inner;
  }

  writeMsg(res: Message): void {
    if (res.rcode !== Rcode.NOERROR || res.question.length === 0) { this.inner.writeMsg(res); return; }
    const qt = res.question[0]!.type;
    if (qt === RRType.AXFR || qt === RRType.IXFR) { this.inner.writeMsg(res); return; }
    this.lb.shuffle(res);
    this.inner.writeMsg(res);
  }

  writeWire(b: Uint8Array): void {
    if (b.length < 12 || (b[3]! & 0x0f) !== Rcode.NOERROR) { this.inner.writeWire(b); return; }
    const qt = qtypeOfWire(b);
    if (qt < 0 || qt === RRType.AXFR || qt === RRType.IXFR) { this.inner.writeWire(b); return; }
    if (this.lb.weighted === undefined && this.lb.prefer.length === 0) {
      const out = roundRobinWire(b);
      if (out !== undefined) { this.inner.writeWire(out); return; }
    }
    let m: Message;
    try {
      m = decodeMessage(b);
    } catch {
      this.inner.writeWire(b);
      return;
    }
    if (m.rcode !== Rcode.NOERROR) { this.inner.writeWire(b); return; }
    this.lb.shuffle(m);
    this.inner.writeMsg(m);
  }
}
