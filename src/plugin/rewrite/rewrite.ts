// The rewrite handler (CoreDNS plugin/rewrite rewrite.go) and its
// ResponseReverter (reverter.go).
//
// The rules run in Corefile order on a draft of the question and OPT record;
// the rest of the chain gets a request derived in place with the result (as
// CoreDNS edits the *dns.Msg: the server then echoes the rewritten OPT and fits
// the reply to it, and the plugins before this one see the rewritten type,
// class and OPT once the chain ran). The reply comes back through a Reverter:
// the original question restored and the response rules applied to every
// record (in reverse rule order).

import type { Handler, HandlerResult, PluginLogger, ResponseWriter } from '../plugin.ts';
import { PluginError, isClientErrorRcode } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Edns, Message, Question, ResourceRecord } from '../../wire/types.ts';
import { Rcode, RRType } from '../../wire/constants.ts';
import { isDomainName } from '../../wire/name.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { replyTo } from '../../wire/message.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { CnameResponseRule, Draft, type OptView, type ResponseRule, type Rule } from './rules.ts';

export class Rewrite implements Handler {
  readonly name = 'rewrite';
  readonly rules: readonly Rule[];
  /** EDNS0 option codes copied from a query to an OPT-less reply (CoreDNS's edns.SupportedOption). */
  readonly supported: ReadonlySet<number>;
  next: Handler | undefined;
  private readonly log: PluginLogger;
  /** Scratch state of the rule pass: it never spans an await, so one per handler serves every query. */
  private readonly draft = new Draft();

  constructor(rules: readonly Rule[], supported: ReadonlySet<number>, next: Handler | undefined, log: PluginLogger) {
    this.rules = rules;
    this.supported = supported;
    this.next = next;
    this.log = log;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const d = this.draft;
    d.reset(req);
    const origName = d.qname;
    let responses: ResponseRule[] | undefined;
    let stopped = false;
    const rules = this.rules;
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!;
      const rr = rule.rewrite(d);
      if (rr === undefined) continue;
      if (d.qname !== origName && !isDomainName(d.qname)) {
        throw new PluginError(Rcode.SERVFAIL, `invalid name after rewrite: ${d.qname}`);
      }
      if (rr.length > 0) {
        if (responses === undefined) responses = rr.slice();
        else for (const r of rr) responses.push(r);
      }
      if (rule.mode === 'stop') {
        stopped = true;
        break;
      }
    }
    const q = req.msg.question[0];
    const changed = d.ednsTouched || q === undefined || d.qname !== q.name || d.qtype !== q.type || d.qclass !== q.class;
    const revert = stopped || responses !== undefined;
    if (!changed && !revert) return nextOrFailure(this.name, this.next, req, w);

    let sub = req;
    if (changed) {
      const msg: Message | undefined = d.ednsTouched ? { ...req.msg, edns: d.edns } : undefined;
      // In place, as CoreDNS's rules edit the query: the reply is fitted to the rewritten OPT, and the
      // plugins before this one (log, prometheus) see its type, class and OPT once the chain ran.
      sub = req.derive({ msg, name: d.qname, type: d.qtype, class: d.qclass, inPlace: true });
    }
    const rw = new Reverter(w, q, revert, responses, sub, this.supported, this.log);
    let rcode: HandlerResult;
    try {
      rcode = nextOrFailure(this.name, this.next, sub, rw);
    } catch (e) {
      return this.afterError(rw, sub, e);
    }
    if (typeof rcode === 'number' && rw.pending === undefined) return this.after(rw, sub, rcode);
    return this.settle(rw, sub, rcode);
  }

  private async settle(rw: Reverter, sub: Request, result: HandlerResult): Promise<number> {
    let rcode: number;
    try {
      rcode = await result;
    } catch (e) {
      await rw.pending;
      return this.afterError(rw, sub, e);
    }
    await rw.pending;
    return this.after(rw, sub, rcode);
  }

  /**
   * serveWithResponseReverter: when the rest of the chain wrote nothing, the
   * error reply is written here, through the reverter (so response rules
   * apply), and success is returned so the server writes no second reply.
   */
  private after(rw: Reverter, sub: Request, rcode: number): HandlerResult {
    if (!isClientErrorRcode(rcode) || rw.written) return rcode;
    rw.writeError(sub, rcode);
    if (rw.pending !== undefined) return rw.pending.then(() => Rcode.NOERROR);
    return Rcode.NOERROR;
  }

  /** A PluginError (Go's `return rcode, err`) ends the same way, its error still reported. */
  private afterError(rw: Reverter, sub: Request, e: unknown): HandlerResult {
    if (!(e instanceof PluginError) || !isClientErrorRcode(e.rcode) || rw.written) throw e;
    rw.writeError(sub, e.rcode);
    const err = new PluginError(Rcode.NOERROR, e.message, { cause: e });
    if (rw.pending !== undefined) return rw.pending.then(() => { throw err; });
    throw err;
  }
}

/** CoreDNS's ResponseReverter, with the query's OPT echoed as the server's SizeAndDo does with a rewritten query. */
export class Reverter implements ResponseWriter {
  private readonly w: ResponseWriter;
  private readonly question: Question | undefined;
  private readonly restore: boolean;
  private readonly rules: readonly ResponseRule[] | undefined;
  private readonly req: Request;
  private readonly supported: ReadonlySet<number>;
  private readonly log: PluginLogger;
  written = false;
  /** A write waiting for cname lookups. */
  pending: Promise<void> | undefined;

  constructor(w: ResponseWriter, question: Question | undefined, restore: boolean, rules: readonly ResponseRule[] | undefined,
    req: Request, supported: ReadonlySet<number>, log: PluginLogger) {
    this.w = w;
    this.question = question;
    this.restore = restore;
    this.rules = rules;
    this.req = req;
    this.supported = supported;
    this.log = log;
  }

  writeWire(reply: Uint8Array): void {
    this.writeMsg(decodeMessage(reply));
  }

  writeMsg(reply: Message): void {
    this.written = true;
    const rules = this.rules;
    if (rules === undefined) {
      this.finish(this.restore ? this.withQuestion({ ...reply }) : reply);
      return;
    }
    const res = this.withQuestion(copyMessage(reply));
    if (hasCname(rules)) {
      const p = this.applyAsync(res, rules).then(() => { this.finish(res); });
      this.pending = this.pending === undefined ? p : this.pending.then(() => p);
      return;
    }
    applyRules(res, rules);
    this.finish(res);
  }

  /** The error reply CoreDNS's rewrite writes itself: SetRcode on the rewritten query, its OPT added first. */
  writeError(sub: Request, rcode: number): void {
    const res = replyTo(sub.msg);
    res.rcode = rcode;
    const q = sub.msg.edns;
    if (q !== undefined) res.edns = this.echoedOpt(q, q.options);
    this.writeMsg(res);
  }

  private withQuestion(res: Message): Message {
    if (!this.restore || this.question === undefined) return res;
    res.question = res.question.length <= 1 ? [this.question] : [this.question, ...res.question.slice(1)];
    return res;
  }

  private finish(res: Message): void {
    const rules = this.rules;
    const q = this.req.replyBase.edns;
    if (rules === undefined || q === undefined || !rules.some((r) => r.requestRevert)) {
      this.w.writeMsg(res);
      return;
    }
    // writeWithRevertedRequestExtra: the query's OPT with the edns0 ... revert rules undone while the
    // reply is written (the server echoes that OPT), then the edited query again.
    const edited = this.req.replyBase;
    const tmp: Message = { ...edited, edns: { ...q, options: q.options.slice() } };
    // One pass per additional record of the query, the OPT included.
    const passes = edited.additional.length + 1;
    for (let p = 0; p < passes; p++) {
      for (let i = rules.length - 1; i >= 0; i--) {
        const r = rules[i]!;
        if (r.requestRevert) r.apply(tmp, undefined, undefined);
      }
    }
    this.req.derive({ msg: tmp, inPlace: true });
    try {
      this.w.writeMsg(res);
    } finally {
      this.req.derive({ msg: edited, inPlace: true });
    }
  }

  private echoedOpt(q: Edns, options: Edns['options']): Edns {
    return {
      name: '.', udpSize: q.udpSize, version: 0, do: q.do, z: q.z & 0x7f00,
      options: options.filter((o) => this.supported.has(o.code)),
    };
  }

  /** applyRules with the cname rule's lookups awaited where they happen. */
  private async applyAsync(res: Message, rules: readonly ResponseRule[]): Promise<void> {
    const sections = [res.authority, res.answer, res.additional];
    let records = 0;
    for (const list of sections) {
      records += list.length;
      for (const rr of list) {
        for (let i = rules.length - 1; i >= 0; i--) {
          const r = rules[i]!;
          if (r instanceof CnameResponseRule) await this.cname(res, rr, r);
          else r.apply(res, rr, undefined);
        }
      }
    }
    if (res.edns !== undefined) {
      records++;
      const view = optView(res.edns);
      for (let i = rules.length - 1; i >= 0; i--) {
        const r = rules[i]!;
        if (!(r instanceof CnameResponseRule)) r.apply(res, undefined, view);
      }
      setOpt(res.edns, view);
    }
    if (records === 0) applyMsgRules(res, rules);
  }

  /** cnameTargetRuleWithReqState.RewriteResponse. */
  private async cname(res: Message, rr: ResourceRecord, r: CnameResponseRule): Promise<void> {
    if (rr.type !== RRType.CNAME) return;
    const target = (rr.data as { target: string }).target;
    const [from, to] = r.rule.targets(target);
    if (target !== from) return;
    let up: Message | undefined;
    try {
      up = await this.req.lookup(to, this.req.qtype);
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      // CoreDNS stops rewriting silently past its depth limit.
      if (!msg.startsWith('internal lookups nested')) this.log.error(`upstream lookup failed: ${msg}`);
      return;
    }
    if (up === undefined) {
      this.log.error('upstream lookup returned nil');
      return;
    }
    const answer: ResourceRecord[] = [];
    for (const a of res.answer) {
      if (a.type !== RRType.CNAME) continue;
      answer.push(a);
      if ((a.data as { target: string }).target === from) {
        a.data = { ...a.data, target: to };
        break;
      }
    }
    for (const a of up.answer) answer.push(a);
    res.answer = answer;
    res.tc = up.tc;
  }
}

function hasCname(rules: readonly ResponseRule[]): boolean {
  for (let i = 0; i < rules.length; i++) if (rules[i] instanceof CnameResponseRule) return true;
  return false;
}

/** res1.Copy(): the message and its records, so a rule never changes what another holder (cache) keeps. */
function copyMessage(m: Message): Message {
  return {
    ...m,
    question: m.question,
    answer: m.answer.map(copyRecord),
    authority: m.authority.map(copyRecord),
    additional: m.additional.map(copyRecord),
    edns: m.edns === undefined ? undefined : { ...m.edns, options: m.edns.options.slice() },
  };
}

function copyRecord(rr: ResourceRecord): ResourceRecord {
  return { name: rr.name, type: rr.type, class: rr.class, ttl: rr.ttl, data: rr.data };
}

/** The reply's OPT record as a record: its TTL field holds DO and the Z bits (extended rcode and version are reset by SizeAndDo). */
function optView(e: Edns): OptView {
  return { name: e.name ?? '.', ttl: (e.do ? 0x8000 : 0) | (e.z & 0x7fff) };
}

function setOpt(e: Edns, v: OptView): void {
  e.name = v.name;
  e.do = (v.ttl & 0x8000) !== 0;
  e.z = v.ttl & 0x7fff;
}

/** Every response rule, last rule first, on every record (authority, answer, additional, then the OPT). */
export function applyRules(res: Message, rules: readonly ResponseRule[]): void {
  applySection(res, res.authority, rules);
  applySection(res, res.answer, rules);
  applySection(res, res.additional, rules);
  let records = res.authority.length + res.answer.length + res.additional.length;
  if (res.edns !== undefined) {
    records++;
    const view = optView(res.edns);
    for (let i = rules.length - 1; i >= 0; i--) rules[i]!.apply(res, undefined, view);
    setOpt(res.edns, view);
  }
  // A reply without records: the message-level rules (rcode) once.
  if (records === 0) applyMsgRules(res, rules);
}

function applySection(res: Message, list: readonly ResourceRecord[], rules: readonly ResponseRule[]): void {
  for (let j = 0; j < list.length; j++) {
    const rr = list[j]!;
    for (let i = rules.length - 1; i >= 0; i--) rules[i]!.apply(res, rr, undefined);
  }
}

function applyMsgRules(res: Message, rules: readonly ResponseRule[]): void {
  for (let i = rules.length - 1; i >= 0; i--) {
    const r = rules[i]!;
    if (r.msgLevel) r.apply(res, undefined, undefined);
  }
}
