// template: answers queries from Go templates (CoreDNS plugin/template).
//
// Each `template` line is tried in order: its zones, class and type, then its
// regexps against the lower-cased query name. A match renders the answer,
// additional and authority templates with Go's text/template
// (pkg/gotemplate.ts) and parses each result as a zone-file record, as
// miekg's dns.NewRR does (origin `.`, TTL 3600, class IN). CNAME answers to A
// and AAAA queries are followed through the server itself (req.lookup).

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Message, NameData, ResourceRecord } from '../../wire/types.ts';
import { replyTo } from '../../wire/message.ts';
import { parseRecord } from '../../wire/text.ts';
import { EdnsOption, Rcode, RRClass, RRType, classToString, typeToString } from '../../wire/constants.ts';
import { nextOrFailure } from '../pkg/next.ts';
import type { Fall } from '../pkg/fall.ts';
import { zonesMatches } from '../pkg/zones.ts';
import type { GoRegexp } from '../pkg/regexp.ts';
import { GoCallError, GoExecError, GoMap, GoNum, GoSlice, GoTemplate, type GoFunc } from '../pkg/gotemplate.ts';
import type { CounterChild } from '../pkg/vec.ts';
import { RUN_ERROR, type ExprEnv, type ExprType, type ExprValue, type Expression } from '../pkg/expression.ts';
import { TemplateData } from './data.ts';
import { templateMetrics, type TemplateMetrics } from './metrics.ts';

/** One `template` line. */
export interface TemplateSpec {
  qclass: number;
  qtype: number;
  zones: string[];
  /** `match` regexps (`.*` when none). */
  regex: GoRegexp[];
  answer: GoTemplate[];
  additional: GoTemplate[];
  authority: GoTemplate[];
  rcode: number;
  /** `ederror CODE [REASON]`: an Extended DNS Error in the reply's OPT. */
  ederror: { code: number; reason: string } | undefined;
  fall: Fall;
  /** The default `.*` added when there is no `match` (matched without running it). */
  matchAll?: GoRegexp;
  /** `var NAME EXPR`, in order: each sees the ones before it. */
  vars: TemplateVar[];
  /** `expr EXPR`: all must be true for the template to match. */
  exprs: Expression[];
}

/** One `var`: its name, the static type CoreDNS declares it with, and its expression. */
export interface TemplateVar {
  name: string;
  type: ExprType;
  expr: Expression;
}

/** An expression value as the Go value text/template sees in `.Var` (`type` is the static one). */
function goValue(v: ExprValue, type: ExprType): unknown {
  if (typeof v === 'number') {
    if (type === 'float64' || (type !== 'int' && !Number.isInteger(v))) return new GoNum('float64', v);
    return v;
  }
  if (Array.isArray(v)) {
    const items = v as readonly ExprValue[];
    if (type === '[]string') return new GoSlice('[]string', items);
    return new GoSlice('[]interface {}', items.map((x) => goValue(x, 'interface {}')));
  }
  return v;
}

/** The per-query env of a template's expressions: the variables so far and the matching regexp's groups. */
class VarEnv implements ExprEnv {
  readonly vars: ExprValue[] = [];
  private readonly groups: ReadonlyMap<string, string>;
  constructor(groups: ReadonlyMap<string, string>) { this.groups = groups; }
  group(key: string): string { return this.groups.get(key) ?? ''; }
}

const MAX_UINT64 = 0xffffffffffffffffn;

/**
 * Go's strconv.ParseUint(s, base, bitSize): the value, or the error text
 * (`strconv.ParseUint: parsing "x": invalid syntax`).
 */
export function parseUint(s: string, base: number, bitSize: number): bigint | string {
  const q = JSON.stringify(s);
  const err = (m: string): string => `strconv.ParseUint: parsing ${q}: ${m}`;
  if (s === '') return err('invalid syntax');
  let body = s;
  let b = base;
  let base0 = false;
  if (b === 0) {
    base0 = true;
    b = 10;
    if (body[0] === '0') {
      const p = body[1]?.toLowerCase();
      if (body.length >= 3 && p === 'b') { b = 2; body = body.slice(2); } else if (body.length >= 3 && p === 'o') { b = 8; body = body.slice(2); } else if (body.length >= 3 && p === 'x') { b = 16; body = body.slice(2); } else { b = 8; body = body.slice(1); }
    }
  } else if (b < 2 || b > 36) {
    return err(`invalid base ${base}`);
  }
  let bits = bitSize;
  if (bits === 0) bits = 64;
  else if (bits < 0 || bits > 64) return err(`invalid bit size ${bitSize}`);
  const maxVal = (1n << BigInt(bits)) - 1n;
  let n = 0n;
  let underscores = false;
  let any = false;
  for (const ch of body) {
    if (ch === '_' && base0) { underscores = true; continue; }
    const c = ch.toLowerCase();
    let d: number;
    if (c >= '0' && c <= '9') d = c.charCodeAt(0) - 48;
    else if (c >= 'a' && c <= 'z') d = c.charCodeAt(0) - 87;
    else return err('invalid syntax');
    if (d >= b) return err('invalid syntax');
    any = true;
    n = n * BigInt(b) + BigInt(d);
    if (n > MAX_UINT64 || n > maxVal) return err('value out of range');
  }
  if (!any && !(base0 && s === '0')) {
    if (!(base0 && s.length > 0 && s[0] === '0' && body === '')) return err('invalid syntax');
  }
  if (underscores && !goUnderscoreOK(s)) return err('invalid syntax');
  return n;
}

/** Go's strconv underscoreOK for base-0 literals. */
function goUnderscoreOK(s: string): boolean {
  let saw = '^';
  let i = 0;
  let hex = false;
  if (s.length >= 2 && s[0] === '0') {
    const p = s[1]!.toLowerCase();
    if (p === 'b' || p === 'o' || p === 'x') {
      hex = p === 'x';
      i = 2;
      saw = '0';
    }
  }
  for (; i < s.length; i++) {
    const c = s[i]!;
    if ((c >= '0' && c <= '9') || (hex && /[a-fA-F]/.test(c))) { saw = '0'; continue; }
    if (c === '_') {
      if (saw !== '0') return false;
      saw = '_';
      continue;
    }
    if (saw === '_') return false;
    saw = '!';
  }
  return saw !== '_';
}

/** The functions CoreDNS registers for its templates. */
const FUNCS: ReadonlyMap<string, GoFunc> = new Map<string, GoFunc>([
  ['parseInt', {
    params: ['string', 'int', 'int'],
    fn: (s: unknown, base: unknown, bits: unknown): bigint => {
      const r = parseUint(s as string, base as number, bits as number);
      if (typeof r === 'string') throw new GoCallError(r);
      return r;
    },
  }],
]);

/** CoreDNS's newTemplate: a Go template named after its section, with parseInt. */
export function newTemplate(section: string, text: string): GoTemplate {
  return GoTemplate.parse(section, text, FUNCS);
}

/** miekg's ClassToString/TypeToString maps: '' for a number without a mnemonic. */
function className(n: number): string {
  const s = classToString(n);
  return s.startsWith('CLASS') ? '' : s;
}

function typeName(n: number): string {
  const s = typeToString(n);
  return s.startsWith('TYPE') ? '' : s;
}

/** Rendered texts remembered per handler before the cache starts over. */
const RECORD_CACHE_SIZE = 4096;

const NO_MATCH_FALL = 1;
const NO_MATCH_FAIL = 2;

interface Section { name: 'answer' | 'additional' | 'authority'; key: 'answer' | 'additional' | 'authority' }
const ANSWER: Section = { name: 'answer', key: 'answer' };
const ADDITIONAL: Section = { name: 'additional', key: 'additional' };
const AUTHORITY: Section = { name: 'authority', key: 'authority' };

export class Template implements Handler {
  readonly name = 'template';
  readonly next: Handler | undefined;
  readonly zones: string[];
  readonly templates: TemplateSpec[];
  view = '';
  private readonly matchCounters = new Map<string, CounterChild>();
  /** The counter of the previous match: the same labels again are found without building a key. */
  private lastMatch: { server: string; zone: string; cls: string; type: string; child: CounterChild } | undefined;
  /**
   * Records parsed from rendered texts: most templates render the same few texts
   * again and again, and parsing is the dearest step. Each reply gets its own
   * copy of the record (the rdata, never changed in place, is shared).
   */
  private readonly records = new Map<string, ResourceRecord>();

  private readonly m: TemplateMetrics;

  constructor(zones: string[], templates: TemplateSpec[], next: Handler | undefined, metrics: TemplateMetrics = templateMetrics()) {
    this.m = metrics;
    this.zones = zones;
    this.templates = templates;
    this.next = next;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const qname = req.name;
    if (zonesMatches(this.zones, qname) === '') return nextOrFailure(this.name, this.next, req, w);
    for (const t of this.templates) {
      const data = this.match(t, req);
      if (data === NO_MATCH_FAIL) return Rcode.SERVFAIL;
      if (data === NO_MATCH_FALL) continue;
      this.matched(req, data).inc();
      if (t.rcode === Rcode.SERVFAIL) return Rcode.SERVFAIL;
      const msg = replyTo(req.msg);
      msg.aa = true;
      msg.rcode = t.rcode;
      const follow = req.qtype === RRType.A || req.qtype === RRType.AAAA;
      for (let i = 0; i < t.answer.length; i++) {
        const rr = this.render(req, ANSWER, t.answer[i]!, data);
        msg.answer.push(rr);
        if (follow && rr.type === RRType.CNAME) return this.finishAsync(req, w, t, data, msg, i, rr);
      }
      return this.finish(w, t, data, msg, req);
    }
    return nextOrFailure(this.name, this.next, req, w);
  }

  /** The rest of a reply once a CNAME answer needs a lookup: lookups in order, then the other sections. */
  private async finishAsync(
    req: Request, w: ResponseWriter, t: TemplateSpec, data: TemplateData, msg: Message, at: number, first: ResourceRecord,
  ): Promise<number> {
    await this.follow(req, msg, first);
    for (let i = at + 1; i < t.answer.length; i++) {
      const rr = this.render(req, ANSWER, t.answer[i]!, data);
      msg.answer.push(rr);
      if (rr.type === RRType.CNAME) await this.follow(req, msg, rr);
    }
    return this.finish(w, t, data, msg, req);
  }

  private async follow(req: Request, msg: Message, rr: ResourceRecord): Promise<void> {
    let up: Message | undefined;
    try {
      up = await req.lookup((rr.data as NameData).target, req.qtype);
    } catch {
      return;
    }
    if (up === undefined) return;
    msg.tc = up.tc;
    for (const a of up.answer) msg.answer.push(a);
  }

  private finish(w: ResponseWriter, t: TemplateSpec, data: TemplateData, msg: Message, req: Request): number {
    for (const tmpl of t.additional) msg.additional.push(this.render(req, ADDITIONAL, tmpl, data));
    for (const tmpl of t.authority) msg.authority.push(this.render(req, AUTHORITY, tmpl, data));
    if (t.ederror !== undefined) {
      const reason = Buffer.from(t.ederror.reason, 'utf8');
      const opt = new Uint8Array(2 + reason.length);
      opt[0] = t.ederror.code >> 8;
      opt[1] = t.ederror.code & 0xff;
      opt.set(reason, 2);
      msg.edns = { name: '.', udpSize: 4096, version: 0, do: true, z: 0, options: [{ code: EdnsOption.EDE, data: opt }] };
    }
    w.writeMsg(msg);
    return t.rcode;
  }

  private matched(req: Request, d: TemplateData): CounterChild {
    const l = this.lastMatch;
    if (l !== undefined && l.server === req.server && l.zone === d.zone && l.cls === d.cls && l.type === d.type) return l.child;
    const key = req.server + '\u0000' + d.zone + '\u0000' + d.cls + '\u0000' + d.type;
    let c = this.matchCounters.get(key);
    if (c === undefined) {
      c = this.m.templateMatches.child(req.server, d.zone, this.view, d.cls, d.type);
      this.matchCounters.set(key, c);
    }
    this.lastMatch = { server: req.server, zone: d.zone, cls: d.cls, type: d.type, child: c };
    return c;
  }

  /** Execute one template and parse its text as a record; failures count and become SERVFAIL with the error. */
  private render(req: Request, section: Section, tmpl: GoTemplate, data: TemplateData): ResourceRecord {
    let text: string;
    try {
      text = tmpl.execute(data);
    } catch (e) {
      if (e instanceof GoExecError) {
        this.m.templateFailures.child(req.server, data.zone, this.view, data.cls, data.type, section.name, tmpl.toString()).inc();
        throw new PluginError(Rcode.SERVFAIL, e.message);
      }
      throw e;
    }
    if (isBlankRecord(text)) {
      // dns.NewRR returns no record and no error: CoreDNS then dereferences nil and recovers from the panic.
      throw new Error('runtime error: invalid memory address or nil pointer dereference');
    }
    const cache = this.records;
    const hit = cache.get(text);
    if (hit !== undefined) return { name: hit.name, type: hit.type, class: hit.class, ttl: hit.ttl, data: hit.data };
    try {
      const rr = parseRecord(text, '.', 3600);
      if (cache.size >= RECORD_CACHE_SIZE) cache.clear();
      cache.set(text, rr);
      return { name: rr.name, type: rr.type, class: rr.class, ttl: rr.ttl, data: rr.data };
    } catch (e) {
      this.m.templateRRFailures.child(req.server, data.zone, this.view, data.cls, data.type, section.name, tmpl.toString()).inc();
      throw new PluginError(Rcode.SERVFAIL, e instanceof Error ? e.message : String(e));
    }
  }

  /** CoreDNS's template.match: the data for the first matching regexp, or why there is none. */
  private match(t: TemplateSpec, req: Request): TemplateData | typeof NO_MATCH_FALL | typeof NO_MATCH_FAIL {
    const qname = req.name;
    const zone = zonesMatches(t.zones, qname);
    if (zone === '') return NO_MATCH_FALL;
    const qclass = req.qclass;
    const qtype = req.qtype;
    if (t.qclass !== RRClass.ANY && qclass !== RRClass.ANY && qclass !== t.qclass) return NO_MATCH_FALL;
    if (t.qtype !== RRType.ANY && qtype !== RRType.ANY && qtype !== t.qtype) return NO_MATCH_FALL;
    const cls = qclass !== RRClass.ANY ? className(qclass) : className(t.qclass);
    const type = qtype !== RRType.ANY ? typeName(qtype) : typeName(t.qtype);
    for (const re of t.regex) {
      let m: string[];
      let group: Map<string, string>;
      if (re === t.matchAll) {
        // The default `.*`: the whole name, no groups (what the regexp would give, without running it).
        m = [qname];
        group = new Map([['0', qname]]);
      } else {
        const found = re.findSubmatch(qname);
        if (found === undefined) continue;
        m = found;
        group = new Map<string, string>();
        for (let i = 0; i < m.length; i++) group.set(String(i), m[i]!);
        const names = re.namedGroups();
        for (const name in names) {
          const idx = names[name]!;
          if (idx < m.length) group.set(name, m[idx]!);
        }
      }
      if (t.vars.length === 0 && t.exprs.length === 0) {
        return new TemplateData(req, zone, re.source, new GoSlice('[]string', m), new GoMap('map[string]string', group, ''), cls, type);
      }
      // CoreDNS's var/expr pass: a variable that fails to evaluate, or a condition that does, is SERVFAIL
      // (no fallthrough); a condition that is not true is a non-match, subject to fallthrough.
      const env = new VarEnv(group);
      const vars = new Map<string, unknown>();
      for (const v of t.vars) {
        const val = v.expr.value(req, env);
        if (val === RUN_ERROR) return NO_MATCH_FAIL;
        env.vars.push(val);
        vars.set(v.name, goValue(val, v.type));
      }
      for (const e of t.exprs) {
        const val = e.value(req, env);
        if (val === RUN_ERROR) return NO_MATCH_FAIL;
        if (val !== true) return t.fall.through(qname) ? NO_MATCH_FALL : NO_MATCH_FAIL;
      }
      return new TemplateData(req, zone, re.source, new GoSlice('[]string', m), new GoMap('map[string]string', group, ''), cls, type,
        new GoMap('map[string]interface {}', vars, null));
    }
    return t.fall.through(qname) ? NO_MATCH_FALL : NO_MATCH_FAIL;
  }
}

/** A rendered text with no record in it (blank or only a comment): dns.NewRR's nil result. */
function isBlankRecord(s: string): boolean {
  const t = s.trimStart();
  return t === '' || t.startsWith(';');
}
