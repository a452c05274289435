import { Opcode, RRClass } from './constants.ts';
import { fqdn } from './name.ts';
import type { Message } from './types.ts';

/** An empty message: every flag false, every number 0, every section empty, no EDNS. */
export function newMessage(): Message {
  return {
    id: 0, qr: false, opcode: 0, aa: false, tc: false, rd: false, ra: false, z: false, ad: false, cd: false,
    rcode: 0, question: [], answer: [], authority: [], additional: [], edns: undefined,
  };
}

/**
 * miekg/dns `SetReply`: same id and opcode; RD and CD copied for QUERY; the question copied (first question only, as
 * miekg copies `request.Question[0]`); QR set; rcode NOERROR; no EDNS.
 */
export function replyTo(req: Message): Message {
  const m = newMessage();
  m.id = req.id;
  m.qr = true;
  m.opcode = req.opcode;
  if (req.opcode === Opcode.QUERY) {
    m.rd = req.rd;
    m.cd = req.cd;
  }
  if (req.question.length > 0) {
    const q = req.question[0];
    m.question.push({ name: q.name, type: q.type, class: q.class });
  }
  return m;
}

let nextId = (Math.random() * 0x10000) | 0;

/** A query with RD set and a (per-process sequential, randomly started) id. */
export function newQuery(name: string, type: number, cls: number = RRClass.IN): Message {
  const m = newMessage();
  nextId = (nextId + 1) & 0xffff;
  m.id = nextId;
  m.rd = true;
  m.question.push({ name: fqdn(name), type, class: cls });
  return m;
}
