// The rewrite rules (CoreDNS plugin/rewrite: name.go, name_metadata.go,
// class.go, type.go, ttl.go, rcode.go, edns0.go, cname_target.go) and the
// response rules they hand to the reverter.
//
// A rule reads and changes a `Draft` of the question and OPT record, as
// CoreDNS's rules change the request in place; the handler turns the draft
// into a derived request for the rest of the chain.

import type { Request } from '../../core/request.ts';
import type { Edns, EdnsOption, Message, ResourceRecord } from '../../wire/types.ts';
import { asciiLower } from '../../wire/name.ts';
import { parseIP } from '../../wire/ip.ts';
import { EdnsOption as OptionCode, RRType } from '../../wire/constants.ts';
import type { GoRegexp } from '../pkg/regexp.ts';

export type Mode = 'stop' | 'continue';

/** The question and OPT record as the rules so far left them (CoreDNS's request, changed in place). */
export class Draft {
  req!: Request;
  /** The question name as set (case kept). */
  qname = '.';
  qtype = 0;
  qclass = 0;
  /** The OPT record; a copy of the request's once a rule touched it. */
  edns: Edns | undefined;
  /** A rule created or changed the OPT record (`edns` is then a copy of the request's). */
  ednsTouched = false;

  reset(req: Request): void {
    this.req = req;
    const q = req.msg.question[0];
    this.qname = q?.name ?? '.';
    this.qtype = q?.type ?? 0;
    this.qclass = q?.class ?? 0;
    this.edns = req.msg.edns;
    this.ednsTouched = false;
  }

  /** CoreDNS's state.Name(): the question name lower-cased. */
  name(): string { return this.qname === this.req.msg.question[0]?.name ? this.req.name : asciiLower(this.qname); }

  /** setupEdns0Opt: the OPT record to change, created (4096, no DO) when the query has none. */
  opt(): Edns {
    if (!this.ednsTouched) {
      const e = this.edns;
      this.edns = e === undefined
        ? { udpSize: 4096, version: 0, do: false, z: 0, options: [] }
        : { ...e, options: e.options.slice() };
      this.ednsTouched = true;
    }
    return this.edns!;
  }
}

/** The record a response rule looks at: a real record, or the reply's OPT record seen as one (`opt`). */
export interface ResponseRule {
  /** A message-level rule (rcode): applied once when the reply has no records at all. */
  readonly msgLevel: boolean;
  /** Reverts the request's OPT options too (edns0 ... revert). */
  readonly requestRevert: boolean;
  /** Rewrite `rr` of `res` (rr undefined: the message itself, or the OPT record when `opt` is set). */
  apply(res: Message, rr: ResourceRecord | undefined, opt: OptView | undefined): void;
}

/** The reply's OPT record as miekg sees it among the additional records: its TTL field is flags. */
export interface OptView {
  name: string;
  ttl: number;
}

/** A rule of the Corefile. */
export interface Rule {
  readonly field: 'name' | 'class' | 'type' | 'edns0' | 'ttl' | 'rcode' | 'cname';
  readonly mode: Mode;
  /** undefined: not applied (RewriteIgnored); otherwise the response rules it asks for (RewriteDone). */
  rewrite(d: Draft): readonly ResponseRule[] | undefined;
}

const NONE: readonly ResponseRule[] = [];

// ---------------------------------------------------------------------------
// String rewriters (answer name/value and the auto reverts)

export interface StringRewriter {
  rewriteString(src: string): string;
}

/** `{0}`..`{n}` in `template` replaced, one group after the other, by the groups (as CoreDNS does, literally). */
export function expandBraces(template: string, groups: readonly string[]): string {
  let s = template;
  for (let i = 0; i < groups.length; i++) {
    const key = '{' + String(i) + '}';
    if (s.includes(key)) s = s.split(key).join(groups[i]!);
  }
  return s;
}

export class RegexStringRewriter implements StringRewriter {
  readonly pattern: GoRegexp;
  readonly replacement: string;
  constructor(pattern: GoRegexp, replacement: string) {
    this.pattern = pattern;
    this.replacement = replacement;
  }
  rewriteString(src: string): string {
    const g = this.pattern.findSubmatch(src);
    return g === undefined ? src : expandBraces(this.replacement, g);
  }
}

/** The auto revert of exact/prefix/substring/regex rules: the name itself or a subdomain of it. */
export class RemapStringRewriter implements StringRewriter {
  readonly orig: string;
  readonly replacement: string;
  constructor(orig: string, replacement: string) {
    this.orig = orig;
    this.replacement = replacement;
  }
  rewriteString(src: string): string {
    const o = this.orig;
    if (src === o) return this.replacement;
    const i = src.length - o.length;
    if (i > 0 && src.charCodeAt(i - 1) === 0x2e && src.endsWith(o)) return src.slice(0, i) + this.replacement;
    return src;
  }
}

/** The auto revert of suffix rules. */
export class SuffixStringRewriter implements StringRewriter {
  readonly suffix: string;
  readonly replacement: string;
  constructor(suffix: string, replacement: string) {
    this.suffix = suffix;
    this.replacement = replacement;
  }
  rewriteString(src: string): string {
    return src.endsWith(this.suffix) ? src.slice(0, src.length - this.suffix.length) + this.replacement : src;
  }
}

/** `answer name`: owner names. */
export class NameResponseRule implements ResponseRule {
  readonly msgLevel = false;
  readonly requestRevert = false;
  readonly rewriter: StringRewriter;
  constructor(rewriter: StringRewriter) { this.rewriter = rewriter; }
  apply(_res: Message, rr: ResourceRecord | undefined, opt: OptView | undefined): void {
    if (rr !== undefined) rr.name = this.rewriter.rewriteString(rr.name);
    else if (opt !== undefined) opt.name = this.rewriter.rewriteString(opt.name);
  }
}

/** `answer value`: the name in the data of SRV, MX, CNAME, NS, DNAME, NAPTR, SOA (mname) and PTR records. */
export class ValueResponseRule implements ResponseRule {
  readonly msgLevel = false;
  readonly requestRevert = false;
  readonly rewriter: StringRewriter;
  constructor(rewriter: StringRewriter) { this.rewriter = rewriter; }
  apply(_res: Message, rr: ResourceRecord | undefined): void {
    if (rr === undefined) return;
    const key = valueKey(rr.type);
    if (key === undefined) return;
    const data = rr.data as unknown as Record<string, string>;
    const value = data[key]!;
    if (value === '') return;
    const next = this.rewriter.rewriteString(value);
    if (next !== value) rr.data = { ...rr.data, [key]: next };
  }
}

/** Where getRecordValueForRewrite finds the name, per type. */
function valueKey(type: number): string | undefined {
  switch (type) {
    case RRType.SRV: return 'target';
    case RRType.MX: return 'exchange';
    case RRType.CNAME: case RRType.NS: case RRType.DNAME: case RRType.PTR: return 'target';
    case RRType.NAPTR: return 'replacement';
    case RRType.SOA: return 'mname';
    default: return undefined;
  }
}

// ---------------------------------------------------------------------------
// name

export type MatchType = 'exact' | 'prefix' | 'suffix' | 'substring' | 'regex';

/** One part of a `metadata` replacement: a literal, a capture group, or a metadata label. */
export interface ReplacementPart {
  literal: string;
  label: string;
  /** -1 for literals and labels. */
  group: number;
}

export class NameRule implements Rule {
  readonly field = 'name';
  readonly mode: Mode;
  readonly match: MatchType;
  /** exact/prefix/suffix/substring: the normalised string matched; regex: the pattern as written. */
  readonly from: string;
  /** The replacement (normalised). */
  readonly to: string;
  readonly pattern: GoRegexp | undefined;
  /** Revert owner names and values automatically (answer auto; always for exact). */
  readonly auto: boolean;
  /** The response rules that do not depend on the query (answer name/value; the suffix auto revert). */
  readonly responses: readonly ResponseRule[];
  /** `metadata`: the replacement compiled with its `{label}` parts. */
  readonly parts: readonly ReplacementPart[] | undefined;

  constructor(mode: Mode, match: MatchType, from: string, to: string, pattern: GoRegexp | undefined,
    auto: boolean, responses: readonly ResponseRule[], parts?: readonly ReplacementPart[]) {
    this.mode = mode;
    this.match = match;
    this.from = from;
    this.to = to;
    this.pattern = pattern;
    this.auto = auto;
    this.responses = responses;
    this.parts = parts;
  }

  rewrite(d: Draft): readonly ResponseRule[] | undefined {
    const name = d.name();
    let next: string;
    switch (this.match) {
      case 'exact':
        if (name !== this.from) return undefined;
        next = this.to;
        break;
      case 'prefix':
        if (!name.startsWith(this.from)) return undefined;
        next = this.to + name.slice(this.from.length);
        break;
      case 'suffix':
        if (!name.endsWith(this.from)) return undefined;
        next = name.slice(0, name.length - this.from.length) + this.to;
        break;
      case 'substring':
        if (!name.includes(this.from)) return undefined;
        next = name.split(this.from).join(this.to);
        break;
      case 'regex': {
        const g = this.pattern!.findSubmatch(name);
        if (g === undefined) return undefined;
        if (this.parts === undefined) {
          next = expandBraces(this.to, g);
        } else {
          const built = this.expandParts(d.req, g);
          if (built === undefined) return undefined;
          next = built;
        }
        break;
      }
    }
    d.qname = next;
    if (!this.auto) return this.responses;
    const rewriter = new RemapStringRewriter(next, name);
    return [new NameResponseRule(rewriter), new ValueResponseRule(rewriter), ...this.responses];
  }

  private expandParts(req: Request, groups: readonly string[]): string | undefined {
    let out = '';
    for (const p of this.parts!) {
      if (p.group >= 0) out += groups[p.group] ?? '';
      else if (p.label !== '') {
        const v = req.metadata(p.label);
        if (v === undefined || v === '') return undefined;
        out += v.toLowerCase();
      } else out += p.literal;
    }
    return out;
  }
}

// ---------------------------------------------------------------------------
// class and type

/** `class FROM TO` and `type FROM TO`: the question's class or type becomes TO when it is FROM. */
export class QuestionFieldRule implements Rule {
  readonly field: 'class' | 'type';
  readonly mode: Mode;
  readonly from: number;
  readonly to: number;
  constructor(field: 'class' | 'type', mode: Mode, from: number, to: number) {
    this.field = field;
    this.mode = mode;
    this.from = from;
    this.to = to;
  }
  rewrite(d: Draft): readonly ResponseRule[] | undefined {
    if (this.from <= 0 || this.to <= 0) return undefined;
    if (this.field === 'class') {
      if (d.qclass !== this.from) return undefined;
      d.qclass = this.to;
    } else {
      if (d.qtype !== this.from) return undefined;
      d.qtype = this.to;
    }
    return NONE;
  }
}

// ---------------------------------------------------------------------------
// ttl and rcode: a name match that adds a response rule

/** How ttl and rcode rules match the query name. */
export class NameMatcher {
  readonly match: MatchType;
  readonly value: string;
  readonly pattern: GoRegexp | undefined;
  constructor(match: MatchType, value: string, pattern: GoRegexp | undefined) {
    this.match = match;
    this.value = value;
    this.pattern = pattern;
  }
  matches(name: string): boolean {
    switch (this.match) {
      case 'exact': return name === this.value;
      case 'prefix': return name.startsWith(this.value);
      case 'suffix': return name.endsWith(this.value);
      case 'substring': return name.includes(this.value);
      case 'regex': return this.pattern!.findSubmatch(name) !== undefined;
    }
  }
}

export class TtlResponseRule implements ResponseRule {
  readonly msgLevel = false;
  readonly requestRevert = false;
  readonly min: number;
  readonly max: number;
  constructor(min: number, max: number) {
    this.min = min;
    this.max = max;
  }
  apply(_res: Message, rr: ResourceRecord | undefined, opt: OptView | undefined): void {
    const h = rr ?? opt;
    if (h === undefined) return;
    if (h.ttl < this.min) h.ttl = this.min;
    else if (h.ttl > this.max) h.ttl = this.max;
  }
}

export class TtlRule implements Rule {
  readonly field = 'ttl';
  readonly mode: Mode;
  readonly matcher: NameMatcher;
  readonly response: readonly ResponseRule[];
  constructor(mode: Mode, matcher: NameMatcher, min: number, max: number) {
    this.mode = mode;
    this.matcher = matcher;
    this.response = [new TtlResponseRule(min, max)];
  }
  get min(): number { return (this.response[0] as TtlResponseRule).min; }
  get max(): number { return (this.response[0] as TtlResponseRule).max; }
  rewrite(d: Draft): readonly ResponseRule[] | undefined {
    return this.matcher.matches(d.name()) ? this.response : undefined;
  }
}

export class RcodeResponseRule implements ResponseRule {
  readonly msgLevel = true;
  readonly requestRevert = false;
  readonly from: number;
  readonly to: number;
  constructor(from: number, to: number) {
    this.from = from;
    this.to = to;
  }
  apply(res: Message): void {
    if (res.rcode === this.from) res.rcode = this.to;
  }
}

export class RcodeRule implements Rule {
  readonly field = 'rcode';
  readonly mode: Mode;
  readonly matcher: NameMatcher;
  readonly response: readonly ResponseRule[];
  constructor(mode: Mode, matcher: NameMatcher, from: number, to: number) {
    this.mode = mode;
    this.matcher = matcher;
    this.response = [new RcodeResponseRule(from, to)];
  }
  get from(): number { return (this.response[0] as RcodeResponseRule).from; }
  get to(): number { return (this.response[0] as RcodeResponseRule).to; }
  rewrite(d: Draft): readonly ResponseRule[] | undefined {
    return this.matcher.matches(d.name()) ? this.response : undefined;
  }
}

// ---------------------------------------------------------------------------
// edns0

export type EdnsAction = 'set' | 'replace' | 'append' | 'unset';

/** Reverts an added option: removes the first option with the code (from the reply's and the request's OPT). */
export class EdnsRemoveResponseRule implements ResponseRule {
  readonly msgLevel = false;
  readonly requestRevert = true;
  readonly code: number;
  constructor(code: number) { this.code = code; }
  apply(res: Message): void {
    const o = res.edns;
    if (o === undefined) return;
    const i = o.options.findIndex((x) => x.code === this.code);
    if (i >= 0) o.options.splice(i, 1);
  }
}

/** Reverts a replaced option: puts the original back in place of the first option with the code. */
export class EdnsRestoreResponseRule implements ResponseRule {
  readonly msgLevel = false;
  readonly requestRevert = true;
  readonly source: EdnsOption;
  constructor(source: EdnsOption) { this.source = source; }
  apply(res: Message): void {
    const o = res.edns;
    if (o === undefined) return;
    const i = o.options.findIndex((x) => x.code === this.source.code);
    if (i >= 0) o.options[i] = this.source;
  }
}

function unsetOption(opt: Edns, code: number): void {
  opt.options = opt.options.filter((o) => o.code !== code);
}

const EMPTY = new Uint8Array(0);

/** `edns0 nsid ACTION [revert]` */
export class EdnsNsidRule implements Rule {
  readonly field = 'edns0';
  readonly mode: Mode;
  readonly type = 'nsid';
  readonly action: EdnsAction;
  readonly revert: boolean;
  constructor(mode: Mode, action: EdnsAction, revert: boolean) {
    this.mode = mode;
    this.action = action;
    this.revert = revert;
  }
  rewrite(d: Draft): readonly ResponseRule[] | undefined {
    const o = d.opt();
    if (this.action === 'unset') {
      unsetOption(o, OptionCode.NSID);
      return NONE;
    }
    const setting = this.action === 'replace' || this.action === 'set';
    if (setting) {
      for (let i = 0; i < o.options.length; i++) {
        const e = o.options[i]!;
        if (e.code !== OptionCode.NSID) continue;
        o.options[i] = { code: e.code, data: EMPTY };
        return this.revert ? [new EdnsRestoreResponseRule(e)] : NONE;
      }
    }
    if (this.action === 'append' || this.action === 'set') {
      o.options.push({ code: OptionCode.NSID, data: EMPTY });
      return this.revert ? [new EdnsRemoveResponseRule(OptionCode.NSID)] : NONE;
    }
    return undefined;
  }
}

/** `edns0 local ACTION CODE DATA [revert]`, DATA a string or 0x-hex. */
export class EdnsLocalRule implements Rule {
  readonly field = 'edns0';
  readonly mode: Mode;
  readonly type = 'local';
  readonly action: EdnsAction;
  readonly code: number;
  readonly data: Uint8Array;
  readonly revert: boolean;
  constructor(mode: Mode, action: EdnsAction, code: number, data: Uint8Array, revert: boolean) {
    this.mode = mode;
    this.action = action;
    this.code = code;
    this.data = data;
    this.revert = revert;
  }
  rewrite(d: Draft): readonly ResponseRule[] | undefined {
    const o = d.opt();
    if (this.action === 'unset') {
      unsetOption(o, this.code);
      return NONE;
    }
    if (this.action === 'replace' || this.action === 'set') {
      for (let i = 0; i < o.options.length; i++) {
        const e = o.options[i]!;
        if (e.code !== this.code) continue;
        o.options[i] = { code: e.code, data: this.data };
        return this.revert ? [new EdnsRestoreResponseRule(e)] : NONE;
      }
    }
    if (this.action === 'append' || this.action === 'set') {
      o.options.push({ code: this.code, data: this.data });
      return this.revert ? [new EdnsRemoveResponseRule(this.code)] : NONE;
    }
    return undefined;
  }
}

/** The variables `edns0 local` accepts in place of DATA. */
export const EDNS_VARIABLES = ['{qname}', '{qtype}', '{client_ip}', '{client_port}', '{protocol}', '{server_ip}', '{server_port}'] as const;

/** `edns0 local ACTION CODE {VARIABLE} [revert]` */
export class EdnsVariableRule implements Rule {
  readonly field = 'edns0';
  readonly mode: Mode;
  readonly type = 'local';
  readonly action: EdnsAction;
  readonly code: number;
  readonly variable: string;
  readonly revert: boolean;
  constructor(mode: Mode, action: EdnsAction, code: number, variable: string, revert: boolean) {
    this.mode = mode;
    this.action = action;
    this.code = code;
    this.variable = variable;
    this.revert = revert;
  }

  private data(d: Draft): Uint8Array | undefined {
    const req = d.req;
    switch (this.variable) {
      case '{qname}': return Buffer.from(d.qname, 'utf8');
      case '{qtype}': return u16(d.qtype);
      case '{client_ip}': return ipBytes(req.family, req.remoteAddress);
      case '{server_ip}': return ipBytes(req.family, req.localAddress);
      case '{client_port}': return u16(req.remotePort);
      case '{server_port}': return u16(req.localPort);
      case '{protocol}': return Buffer.from(req.proto, 'utf8');
    }
    const v = req.metadata(this.variable.slice(1, -1));
    return v === undefined || v === '' ? undefined : Buffer.from(v, 'utf8');
  }

  rewrite(d: Draft): readonly ResponseRule[] | undefined {
    const data = this.data(d);
    if (data === undefined) return undefined;
    const o = d.opt();
    for (let i = 0; i < o.options.length; i++) {
      const e = o.options[i]!;
      if (e.code !== this.code) continue;
      if (this.action === 'replace' || this.action === 'set') {
        o.options[i] = { code: e.code, data };
        return this.revert ? [new EdnsRestoreResponseRule(e)] : NONE;
      }
      return undefined;
    }
    if (this.action === 'append' || this.action === 'set') {
      o.options.push({ code: this.code, data });
      return this.revert ? [new EdnsRemoveResponseRule(this.code)] : NONE;
    }
    return undefined;
  }
}

function u16(n: number): Uint8Array {
  const b = new Uint8Array(2);
  b[0] = (n >> 8) & 0xff;
  b[1] = n & 0xff;
  return b;
}

/** ipToWire: 4 bytes for family 1, 16 for family 2 (Go's To4/To16; nothing when the address does not fit). */
function ipBytes(family: 1 | 2, address: string): Uint8Array | undefined {
  const ip = parseIP(address.startsWith('[') ? address.slice(1, -1) : address.replace(/%.*$/, ''));
  if (ip === undefined) return undefined;
  if (family === 2) return ip;
  return v4Of(ip);
}

function v4Of(ip: Uint8Array): Uint8Array | undefined {
  if (ip.length === 4) return ip;
  for (let i = 0; i < 10; i++) if (ip[i] !== 0) return undefined;
  if (ip[10] !== 0xff || ip[11] !== 0xff) return undefined;
  return ip.subarray(12);
}

/** `edns0 subnet ACTION V4LEN V6LEN [revert]`: the client's address, masked. */
export class EdnsSubnetRule implements Rule {
  readonly field = 'edns0';
  readonly mode: Mode;
  readonly type = 'subnet';
  readonly action: EdnsAction;
  readonly v4: number;
  readonly v6: number;
  readonly revert: boolean;
  constructor(mode: Mode, action: EdnsAction, v4: number, v6: number, revert: boolean) {
    this.mode = mode;
    this.action = action;
    this.v4 = v4;
    this.v6 = v6;
    this.revert = revert;
  }

  /** The ECS option data for the client (family, source prefix, scope 0, address masked, 4 or 16 bytes as CoreDNS packs it). */
  private ecs(req: Request): Uint8Array | undefined {
    const family = req.family;
    const ip = parseIP(req.remoteAddress.replace(/%.*$/, ''));
    if (ip === undefined) return undefined;
    const bits = family === 1 ? this.v4 : this.v6;
    const full = family === 1 ? v4Of(ip) : (ip.length === 16 ? ip : undefined);
    // Go's IP.Mask on an address that does not fit the mask gives nil: the option then has no address.
    const addr = full === undefined ? new Uint8Array(0) : mask(full, bits);
    // miekg packs only the bytes the source prefix covers.
    const needed = Math.ceil(bits / 8);
    const out = new Uint8Array(4 + Math.min(needed, addr.length));
    out[0] = 0;
    out[1] = family;
    out[2] = bits;
    out[3] = 0;
    out.set(addr.subarray(0, out.length - 4), 4);
    return out;
  }

  rewrite(d: Draft): readonly ResponseRule[] | undefined {
    const o = d.opt();
    if (this.action === 'unset') {
      unsetOption(o, OptionCode.CLIENT_SUBNET);
      return NONE;
    }
    for (let i = 0; i < o.options.length; i++) {
      const e = o.options[i]!;
      if (e.code !== OptionCode.CLIENT_SUBNET) continue;
      if (this.action === 'replace' || this.action === 'set') {
        const data = this.ecs(d.req);
        if (data !== undefined) {
          o.options[i] = { code: e.code, data };
          return this.revert ? [new EdnsRestoreResponseRule(e)] : NONE;
        }
      }
      return undefined;
    }
    if (this.action === 'append' || this.action === 'set') {
      const data = this.ecs(d.req);
      if (data !== undefined) {
        o.options.push({ code: OptionCode.CLIENT_SUBNET, data });
        return this.revert ? [new EdnsRemoveResponseRule(OptionCode.CLIENT_SUBNET)] : NONE;
      }
    }
    return undefined;
  }
}

function mask(ip: Uint8Array, bits: number): Uint8Array {
  const out = new Uint8Array(ip.length);
  for (let i = 0; i < ip.length; i++) {
    const left = bits - i * 8;
    out[i] = left >= 8 ? ip[i]! : left <= 0 ? 0 : ip[i]! & (0xff << (8 - left));
  }
  return out;
}

// ---------------------------------------------------------------------------
// cname

/** `cname [MATCH] FROM TO`: a CNAME whose target matches is pointed at TO, which is resolved again. */
export class CnameRule implements Rule {
  readonly field = 'cname';
  readonly mode: Mode;
  readonly match: MatchType;
  readonly from: string;
  readonly to: string;
  readonly pattern: GoRegexp | undefined;
  constructor(mode: Mode, match: MatchType, from: string, to: string, pattern: GoRegexp | undefined) {
    this.mode = mode;
    this.match = match;
    this.from = from;
    this.to = to;
    this.pattern = pattern;
  }

  /** getFromAndToTarget: the target to match and its replacement, or ['', ''] when it does not match. */
  targets(target: string): readonly [string, string] {
    switch (this.match) {
      case 'exact': return [this.from, this.to];
      case 'prefix':
        if (target.startsWith(this.from)) return [target, this.to + target.slice(this.from.length)];
        break;
      case 'suffix':
        if (target.endsWith(this.from)) return [target, target.slice(0, target.length - this.from.length) + this.to];
        break;
      case 'substring':
        if (target.includes(this.from)) return [target, target.split(this.from).join(this.to)];
        break;
      case 'regex': {
        const g = this.pattern!.findSubmatch(target);
        if (g !== undefined) return [target, expandBraces(this.to, g)];
        break;
      }
    }
    return NO_TARGETS;
  }

  /** The response rule, the same for every query (the lookups are made from the request the reverter holds). */
  readonly response: readonly ResponseRule[] = [new CnameResponseRule(this)];

  rewrite(): readonly ResponseRule[] | undefined {
    if (this.from.length > 0 && this.to.length > 0) return this.response;
    return undefined;
  }
}

const NO_TARGETS = ['', ''] as const;

/** The cname rule bound to one query: its lookups go through the server with the rewritten query. */
export class CnameResponseRule implements ResponseRule {
  readonly msgLevel = false;
  readonly requestRevert = false;
  readonly rule: CnameRule;
  constructor(rule: CnameRule) {
    this.rule = rule;
  }
  apply(): void {
    // Resolved asynchronously by the reverter (applyCname).
  }
}
