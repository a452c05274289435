// minimal: strips the authority and additional sections from positive answers.

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Message } from '../../wire/types.ts';
import { Rcode } from '../../wire/constants.ts';
import { goQuote } from '../../corefile/address.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { NonWriter } from '../pkg/recorder.ts';
import { classify, ResponseClass, ResponseType, responseTypeToString, typify } from '../pkg/response.ts';

export class Minimal implements Handler {
  readonly name = 'minimal';
  readonly next: Handler | undefined;

  constructor(next: Handler | undefined) {
    this.next = next;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const nw = new NonWriter();
    const r = nextOrFailure(this.name, this.next, req, nw);
    if (typeof r === 'number') return this.finish(nw, w, r);
    return r.then((rc) => {
      req.plugin = this.name;
      return this.finish(nw, w, rc);
    });
  }

  private finish(nw: NonWriter, w: ResponseWriter, rcode: number): number {
    const m = nw.msg;
    if (m === undefined) {
      // Nothing written: the rcode goes back to the server (CoreDNS 1.15.0; 1.14.7 panicked here).
      return rcode;
    }
    const ty = typify(m);
    const cl = classify(ty);
    if (cl === ResponseClass.Denial || cl === ResponseClass.Error || ty === ResponseType.Delegation) {
      w.writeMsg(m);
      return 0;
    }
    if (ty !== ResponseType.NoError) {
      w.writeMsg(m);
      throw new PluginError(Rcode.NOERROR, `plugin/minimal: unhandled response type "${responseTypeToString(ty)}" for ${goQuote(m.question[0]?.name ?? '')}`);
    }
    const d: Message = {
      id: m.id, qr: m.qr, opcode: m.opcode, aa: m.aa, tc: m.tc, rd: m.rd, ra: m.ra, z: m.z, ad: m.ad, cd: m.cd,
      rcode: m.rcode, question: m.question, answer: m.answer, authority: [], additional: [], edns: undefined,
    };
    w.writeMsg(d);
    return 0;
  }
}
