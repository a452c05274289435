// chaos: answers CH-class TXT queries for version.bind, version.server,
// authors.bind, hostname.bind and id.server.

import { hostname } from 'node:os';
import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { ResourceRecord } from '../../wire/types.ts';
import { replyTo } from '../../wire/message.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { RRClass, RRType } from '../../wire/constants.ts';

const enc = new TextEncoder();

/** A character-string holds at most 255 octets: longer text is cut (CoreDNS trims at 255 too). */
export function trimText(s: string): Uint8Array {
  const b = enc.encode(s);
  return b.length < 256 ? b : b.subarray(0, 255);
}

export class Chaos implements Handler {
  readonly name = 'chaos';
  readonly next: Handler | undefined;
  readonly version: Uint8Array;
  readonly authors: Uint8Array[];

  constructor(next: Handler | undefined, version: string, authors: readonly string[]) {
    this.next = next;
    this.version = trimText(version);
    this.authors = authors.map(trimText);
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    if (req.qclass !== RRClass.CH || req.qtype !== RRType.TXT) return nextOrFailure(this.name, this.next, req, w);
    const qname = req.qname;
    let answer: ResourceRecord[];
    switch (req.name) {
      case 'authors.bind.': {
        const order = shuffled(this.authors.length);
        answer = new Array<ResourceRecord>(order.length);
        for (let i = 0; i < order.length; i++) answer[i] = txt(qname, this.authors[order[i]]);
        break;
      }
      case 'version.bind.':
      case 'version.server.':
        answer = [txt(qname, this.version)];
        break;
      case 'hostname.bind.':
      case 'id.server.':
        answer = [txt(qname, trimText(currentHostname()))];
        break;
      default:
        return nextOrFailure(this.name, this.next, req, w);
    }
    const reply = replyTo(req.msg);
    reply.answer = answer;
    w.writeMsg(reply);
    return 0;
  }
}

function txt(name: string, s: Uint8Array): ResourceRecord {
  return { name, type: RRType.TXT, class: RRClass.CH, ttl: 0, data: { strings: [s] } };
}

function currentHostname(): string {
  try {
    const h = hostname();
    return h === '' ? 'localhost' : h;
  } catch {
    return 'localhost';
  }
}

/** A random permutation of 0..n-1. */
function shuffled(n: number): number[] {
  const p = new Array<number>(n);
  for (let i = 0; i < n; i++) p[i] = i;
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    const t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
  return p;
}
