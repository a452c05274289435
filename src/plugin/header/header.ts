// header: sets or clears the AA, RA and RD flags of the query (for the rest of
// the chain) and of the reply (through a writer), as CoreDNS's header plugin.

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Message } from '../../wire/types.ts';
import { nextOrFailure } from '../pkg/next.ts';

/** The flags header can change. */
export type Flag = 'aa' | 'ra' | 'rd';

/** Set (`state` true) or clear one flag. */
export interface Rule {
  flag: Flag;
  state: boolean;
}

/** Apply `rules` in order to a message's header flags. */
export function applyRules(m: Message, rules: readonly Rule[]): void {
  for (let i = 0; i < rules.length; i++) {
    const r = rules[i]!;
    if (r.flag === 'aa') m.aa = r.state;
    else if (r.flag === 'ra') m.ra = r.state;
    else m.rd = r.state;
  }
}

/** Apply `rules` in order to the flag bytes of a message in wire form (bytes 2 and 3). */
export function applyRulesWire(b: Uint8Array, rules: readonly Rule[]): void {
  if (b.length < 4) return;
  for (let i = 0; i < rules.length; i++) {
    const r = rules[i]!;
    if (r.flag === 'aa') b[2] = r.state ? b[2]! | 0x04 : b[2]! & ~0x04;
    else if (r.flag === 'rd') b[2] = r.state ? b[2]! | 0x01 : b[2]! & ~0x01;
    else b[3] = r.state ? b[3]! | 0x80 : b[3]! & ~0x80;
  }
}

export class Header implements Handler {
  readonly name = 'header';
  readonly queryRules: readonly Rule[];
  readonly responseRules: readonly Rule[];
  private readonly next: Handler | undefined;

  constructor(queryRules: readonly Rule[], responseRules: readonly Rule[], next: Handler | undefined) {
    this.queryRules = queryRules;
    this.responseRules = responseRules;
    this.next = next;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    let r = req;
    if (this.queryRules.length > 0) {
      // CoreDNS changes the query in place: the rest of the chain, and the server's own error replies, see the new flags.
      const msg: Message = { ...req.msg };
      applyRules(msg, this.queryRules);
      r = req.derive({ msg, inPlace: true });
    }
    const out = this.responseRules.length > 0 ? new ResponseHeaderWriter(w, this.responseRules) : w;
    return nextOrFailure(this.name, this.next, r, out);
  }
}

/** Applies the response rules to every reply written through it. */
export class ResponseHeaderWriter implements ResponseWriter {
  private readonly w: ResponseWriter;
  private readonly rules: readonly Rule[];

  constructor(w: ResponseWriter, rules: readonly Rule[]) {
    this.w = w;
    this.rules = rules;
  }

  writeMsg(reply: Message): void {
    applyRules(reply, this.rules);
    this.w.writeMsg(reply);
  }

  /**
   * A ready-made reply (a cache hit, a forwarded answer: CoreDNS writes those as
   * messages, so its rules apply) gets its flag bits patched in place.
   */
  writeWire(reply: Uint8Array): void {
    applyRulesWire(reply, this.rules);
    this.w.writeWire(reply);
  }
}
