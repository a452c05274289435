// The autopath handler (CoreDNS plugin/autopath/autopath.go, cname.go): server-side
// search-path completion. A query whose name lies in (or is) the first element of the
// client's search path is taken for a search-path expansion of a shorter name: the
// rest of the chain is asked for that name with each search element appended in
// turn (the last element, "", being the name itself), and the first reply that is not
// NXDOMAIN goes to the client with a CNAME from the asked name to the found one.
// When every expansion is NXDOMAIN the reply to the first one goes out as it was.

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { NonWriter } from '../pkg/recorder.ts';
import { Rcode, RRClass, RRType } from '../../wire/constants.ts';
import { asciiLower, isSubdomain } from '../../wire/name.ts';
import { trimZone } from '../pkg/zones.ts';
import type { Message, ResourceRecord } from '../../wire/types.ts';
import { autopathMetrics } from './metrics.ts';
import type { CounterVec } from '../pkg/vec.ts';
import type { CounterChild } from '../pkg/vec.ts';

/** The search path of a query; undefined (or empty) means no autopathing. */
export type SearchFunc = (req: Request) => string[] | undefined;

/** plugin.ClientWrite: the handler wrote the reply itself. */
function clientWrite(rcode: number): boolean {
  return rcode !== Rcode.SERVFAIL && rcode !== Rcode.REFUSED && rcode !== Rcode.FORMERR && rcode !== Rcode.NOTIMP;
}

/** The name is the first search element or below it. */
export function firstInSearchPath(name: string, searchpath: readonly string[]): boolean {
  const first = searchpath[0]!;
  return name === first || isSubdomain(name, first);
}

/**
 * cnamer: a copy of `m` whose question is `original` and whose answer starts with a CNAME from
 * `original` to the owner of the first record owned by another name (with that record's TTL).
 */
export function cnamer(m: Message, original: string): Message {
  const out: Message = { ...m, question: m.question.map((q) => ({ ...q })), answer: m.answer };
  const lower = asciiLower(original);
  for (const a of m.answer) {
    if (asciiLower(a.name) === lower) continue;
    const cname: ResourceRecord = { name: original, type: RRType.CNAME, class: RRClass.IN, ttl: a.ttl, data: { target: a.name } };
    out.answer = [cname, ...m.answer];
    break;
  }
  if (out.question.length > 0) out.question[0]!.name = original;
  return out;
}

export class AutoPath implements Handler {
  readonly name = 'autopath';
  next: Handler | undefined;
  readonly zones: readonly string[];
  /** The search path of a resolv.conf (ending with ""), or empty with `@plugin`. */
  readonly search: readonly string[];
  /** `@plugin`: the provider's search path, found at startup (it takes precedence). */
  searchFunc: SearchFunc | undefined;
  private lastServer = '';
  private lastChild: CounterChild | undefined;

  private readonly successes: CounterVec;

  constructor(zones: readonly string[], search: readonly string[], successes: CounterVec = autopathMetrics()) {
    this.zones = zones;
    this.search = search;
    this.successes = successes;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const name = req.name;
    let inZone = false;
    for (let i = 0; i < this.zones.length; i++) {
      if (isSubdomain(name, this.zones[i]!)) {
        inZone = true;
        break;
      }
    }
    if (!inZone) return nextOrFailure(this.name, this.next, req, w);
    const searchpath = this.searchFunc !== undefined ? this.searchFunc(req) : this.search;
    if (searchpath === undefined || searchpath.length === 0 || !firstInSearchPath(name, searchpath)) {
      return nextOrFailure(this.name, this.next, req, w);
    }
    const orig = req.qname;
    const base = trimZone(orig, searchpath[0]!);
    if (base === undefined) {
      throw new PluginError(Rcode.SERVFAIL, 'trimzone: overshot qname: ' + orig + 'for zone ' + searchpath[0]!);
    }
    return new Walk(this, req, w, searchpath, base, orig).step(0);
  }

  /** Count a query answered from an expansion, per server (the child cached for the usual single server). */
  count(server: string): void {
    if (this.lastChild === undefined || this.lastServer !== server) {
      this.lastServer = server;
      this.lastChild = this.successes.child(server);
    }
    this.lastChild.inc();
  }
}

/** One query's walk along the search path; synchronous while the chain answers synchronously. */
class Walk {
  private readonly a: AutoPath;
  private readonly req: Request;
  private readonly w: ResponseWriter;
  private readonly searchpath: readonly string[];
  private readonly base: string;
  private readonly orig: string;
  private firstReply: Message | undefined;
  private firstRcode = 0;

  constructor(a: AutoPath, req: Request, w: ResponseWriter, searchpath: readonly string[], base: string, orig: string) {
    this.a = a;
    this.req = req;
    this.w = w;
    this.searchpath = searchpath;
    this.base = base;
    this.orig = orig;
  }

  step(i: number): HandlerResult {
    for (; i < this.searchpath.length; i++) {
      const nw = new NonWriter();
      const sub = this.req.derive({ name: this.base + '.' + this.searchpath[i]! });
      // An error of the chain (a PluginError, or "no next plugin found") ends the walk at once, as in CoreDNS.
      const r = nextOrFailure(this.a.name, this.a.next, sub, nw);
      if (typeof r !== 'number') {
        const at = i;
        return r.then((rc) => {
          const done = this.settle(at, rc, nw);
          return done !== undefined ? done : this.step(at + 1);
        });
      }
      const done = this.settle(i, r, nw);
      if (done !== undefined) return done;
    }
    return this.fail();
  }

  /** The rcode to return when expansion `i` answered, or undefined to try the next one. */
  private settle(i: number, rc: number, nw: NonWriter): number | undefined {
    if (i === 0) {
      this.firstReply = nw.msg;
      this.firstRcode = rc;
    }
    const m = nw.msg;
    if (!clientWrite(rc) || m === undefined || m.rcode === Rcode.NXDOMAIN) return undefined;
    this.w.writeMsg(cnamer(m, this.orig));
    this.a.count(this.req.server);
    return rc;
  }

  /** Every expansion failed: the first reply goes out as it was. */
  private fail(): number {
    if (clientWrite(this.firstRcode) && this.firstReply !== undefined) this.w.writeMsg(this.firstReply);
    return this.firstRcode;
  }
}
