// nsid: puts the server's identifier (RFC 5001) into the reply of a query that asks for it.

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { EdnsOption, Message } from '../../wire/types.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { EdnsOption as EdnsCode } from '../../wire/constants.ts';
import { nextOrFailure } from '../pkg/next.ts';

export class Nsid implements Handler {
  readonly name = 'nsid';
  /** The identifier as given in the Corefile. */
  readonly data: string;
  /** Its bytes, the option's payload (what miekg shows hex-encoded). */
  readonly payload: Uint8Array;
  private readonly next: Handler | undefined;

  constructor(data: string, next: Handler | undefined) {
    this.data = data;
    this.payload = new TextEncoder().encode(data);
    this.next = next;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const e = req.msg.edns;
    if (e !== undefined) {
      const opts = e.options;
      for (let i = 0; i < opts.length; i++) {
        if (opts[i]!.code === EdnsCode.NSID) {
          return nextOrFailure(this.name, this.next, req, new NsidWriter(w, req, this.payload));
        }
      }
    }
    return nextOrFailure(this.name, this.next, req, w);
  }
}

/** Adds (or overwrites) the NSID option of every reply written through it. */
export class NsidWriter implements ResponseWriter {
  private readonly w: ResponseWriter;
  private readonly req: Request;
  private readonly payload: Uint8Array;

  constructor(w: ResponseWriter, req: Request, payload: Uint8Array) {
    this.w = w;
    this.req = req;
    this.payload = payload;
  }

  writeMsg(reply: Message): void {
    const q = this.req.msg.edns;
    // As miekg's SetEdns0(size, true): a reply without OPT gets one, with the DO bit set.
    if (q !== undefined && reply.edns === undefined) {
      reply.edns = { name: '.', udpSize: this.req.udpSize ?? q.udpSize, version: 0, do: true, z: 0, options: [] };
    }
    const r = reply.edns;
    if (r !== undefined) {
      // A new list: the reply's may be shared with the query or a cached message.
      const opts: EdnsOption[] = [];
      let found = false;
      for (const o of r.options) {
        if (o.code === EdnsCode.NSID) {
          opts.push({ code: EdnsCode.NSID, data: this.payload });
          found = true;
        } else {
          opts.push(o);
        }
      }
      if (!found) opts.push({ code: EdnsCode.NSID, data: this.payload });
      r.options = opts;
    }
    this.w.writeMsg(reply);
  }

  /** CoreDNS's plugins write messages, never bytes: a ready-made reply is decoded so the option is added all the same. */
  writeWire(reply: Uint8Array): void {
    this.writeMsg(decodeMessage(reply));
  }
}
