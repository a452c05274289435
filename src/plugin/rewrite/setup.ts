// rewrite's Corefile syntax (CoreDNS plugin/rewrite: setup.go, rewrite.go
// newRule, and each rule's constructor). Its errors carry no file:line, as in
// CoreDNS: `plugin/rewrite: <message>`.

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { GoRegexp, GoRegexpError } from '../pkg/regexp.ts';
import { stringToClass, stringToRcode, stringToType, classToString, typeToString } from '../../wire/constants.ts';
import { fqdn } from '../../wire/name.ts';
import {
  CnameRule, EDNS_VARIABLES, EdnsLocalRule, EdnsNsidRule, EdnsSubnetRule, EdnsVariableRule,
  NameMatcher, NameResponseRule, NameRule, RcodeRule, RegexStringRewriter, SuffixStringRewriter, TtlRule,
  QuestionFieldRule, ValueResponseRule,
  type EdnsAction, type MatchType, type Mode, type ReplacementPart, type ResponseRule, type Rule,
} from './rules.ts';
import { Rewrite } from './rewrite.ts';

/** What the `rewrite` lines of a block configure. */
export interface RewriteOptions {
  /** The rules, in Corefile order. */
  rules: Rule[];
  /** EDNS0 local option codes the rules use: CoreDNS then copies them from the query to an OPT-less reply. */
  localCodes: number[];
}

/** Hard limit on a regexp's length, as CoreDNS's maxRegexpLen. */
const MAX_REGEXP_LEN = 10000;

/** Reads every `rewrite` line of the block (one rule each; `rewrite [MODE] { ... }` joins the block's tokens). */
export function parse(c: SetupContext): RewriteOptions {
  const d = c.dispenser;
  const rules: Rule[] = [];
  const localCodes: number[] = [];
  while (d.next()) {
    const args = d.remainingArgs();
    if (args.length < 2) {
      while (d.nextBlock()) args.push(d.val());
    }
    const rule = newRule(args);
    if ((rule instanceof EdnsLocalRule || rule instanceof EdnsVariableRule) && !localCodes.includes(rule.code)) {
      localCodes.push(rule.code);
    }
    rules.push(rule);
  }
  return { rules, localCodes };
}

/** Go's plugin.Name(s).Normalize(): lower-cased and fully qualified. */
function normalize(s: string): string {
  return fqdn(s).toLowerCase();
}

/** rewrite.go newRule. */
export function newRule(args: readonly string[]): Rule {
  if (args.length === 0) throw new Error('no rule type specified for rewrite');
  const arg0 = args[0]!.toLowerCase();
  let mode: Mode = 'stop';
  let ruleType: string;
  let expectNumArgs: number;
  let start: number;
  if (arg0 === 'continue' || arg0 === 'stop') {
    if (args.length < 2) throw new Error(`${arg0} rule must begin with a rule type`);
    if (arg0 === 'continue') mode = 'continue';
    ruleType = args[1]!.toLowerCase();
    expectNumArgs = args.length - 1;
    start = 2;
  } else {
    ruleType = arg0;
    expectNumArgs = args.length;
    start = 1;
  }
  const rest = args.slice(start);
  switch (ruleType) {
    case 'answer':
      throw new Error('response rewrites must begin with a name rule');
    case 'name':
      return newNameRule(mode, rest);
    case 'class': {
      if (expectNumArgs !== 3) throw new Error(`${ruleType} rules must have exactly two arguments`);
      const from = mnemonic(rest[0]!, stringToClass, classToString);
      if (from === undefined) throw new Error(`invalid class ${goQuote(rest[0]!.toUpperCase())}`);
      const to = mnemonic(rest[1]!, stringToClass, classToString);
      if (to === undefined) throw new Error(`invalid class ${goQuote(rest[1]!.toUpperCase())}`);
      return new QuestionFieldRule('class', mode, from, to);
    }
    case 'type': {
      if (expectNumArgs !== 3) throw new Error(`${ruleType} rules must have exactly two arguments`);
      const from = mnemonic(rest[0]!, stringToType, typeToString);
      if (from === undefined) throw new Error(`invalid type ${goQuote(rest[0]!.toUpperCase())}`);
      const to = mnemonic(rest[1]!, stringToType, typeToString);
      if (to === undefined) throw new Error(`invalid type ${goQuote(rest[1]!.toUpperCase())}`);
      return new QuestionFieldRule('type', mode, from, to);
    }
    case 'edns0':
      return newEdnsRule(mode, rest);
    case 'ttl':
      return newTtlRule(mode, rest);
    case 'cname':
      return newCnameRule(mode, rest);
    case 'rcode':
      return newRcodeRule(mode, rest);
    default:
      throw new Error(`invalid rule type ${goQuote(args[0]!)}`);
  }
}

/** miekg's StringToType / StringToClass maps: mnemonics only (no TYPE123 / CLASS3 forms). */
function mnemonic(s: string, parseFn: (s: string) => number | undefined, back: (n: number) => string): number | undefined {
  const n = parseFn(s);
  if (n === undefined || back(n) !== s.toUpperCase()) return undefined;
  return n;
}

/** Go's %q for the ASCII texts of a Corefile. */
function goQuote(s: string): string {
  return JSON.stringify(s);
}

// --- name ---------------------------------------------------------------

const MATCH_TYPES: readonly string[] = ['exact', 'prefix', 'suffix', 'substring', 'regex'];

function newNameRule(mode: Mode, args: readonly string[]): Rule {
  if (args.length < 2) throw new Error('too few arguments for a name rule');
  let matchType = 'exact';
  let from = '';
  let to = '';
  if (args.length === 2) {
    from = normalize(args[0]!);
    to = normalize(args[1]!);
  } else {
    matchType = args[0]!.toLowerCase();
    if (matchType === 'regex') {
      from = args[1]!;
      to = args[2]!;
    } else {
      from = normalize(args[1]!);
      to = normalize(args[2]!);
    }
  }
  if (matchType === 'exact' || matchType === 'suffix') {
    if (!from.endsWith('.')) from += '.';
    if (!to.endsWith('.')) to += '.';
  }
  let answers: ResponseRule[] = [];
  let auto = false;
  let answerStart = 3;
  const withMetadata = args.length > 3 && args[3] === 'metadata';
  if (withMetadata) {
    if (matchType !== 'regex') throw new Error('metadata is only supported for regex name rules');
    answerStart++;
  }
  if (args.length > answerStart) {
    ({ auto, answers } = parseAnswerRules(matchType, args.slice(answerStart)));
  }
  switch (matchType) {
    case 'exact':
      compileChecked(to, from);
      return new NameRule(mode, 'exact', from, to, undefined, true, answers);
    case 'prefix':
      return new NameRule(mode, 'prefix', from, to, undefined, auto, answers);
    case 'suffix': {
      const responses: ResponseRule[] = [];
      if (auto) {
        const r = new SuffixStringRewriter(to, from);
        responses.push(new NameResponseRule(r), new ValueResponseRule(r));
      }
      return new NameRule(mode, 'suffix', from, to, undefined, false, [...responses, ...answers]);
    }
    case 'substring':
      return new NameRule(mode, 'substring', from, to, undefined, auto, answers);
    case 'regex': {
      if (withMetadata) {
        const pattern = compileChecked(from, '');
        const parts = parseNameReplacement(fqdn(to), pattern.groupCount);
        return new NameRule(mode, 'regex', from, '', pattern, auto, answers, parts);
      }
      const pattern = compileChecked(from, to);
      return new NameRule(mode, 'regex', from, normalize(args[2]!), pattern, auto, answers);
    }
    default:
      throw new Error(`name rule supports only exact, prefix, suffix, substring, and regex name matching, received: ${matchType}`);
  }
}

function parseAnswerRules(name: string, args: readonly string[]): { auto: boolean; answers: ResponseRule[] } {
  let auto = false;
  const answers: ResponseRule[] = [];
  let arg = 0;
  let nameRules = 0;
  let last = '';
  if (args.length < 2) throw new Error(`invalid arguments for ${name} rule`);
  while (arg < args.length) {
    if (last === '' && args[arg] !== 'answer') {
      throw new Error(`exceeded the number of arguments for a non-answer rule argument for ${name} rule`);
    }
    if (args[arg] === 'answer') arg++;
    if (args.length - arg === 0) throw new Error(`type missing for answer rule for ${name} rule`);
    last = args[arg]!;
    arg++;
    switch (last) {
      case 'auto':
        auto = true;
        continue;
      case 'name':
      case 'value': {
        if (args.length - arg < 2) throw new Error(`${last} answer rule for ${name} rule: 2 arguments required`);
        let pattern: GoRegexp;
        try {
          pattern = compileChecked(args[arg]!, args[arg + 1]!);
        } catch (e) {
          throw new Error(`${last} answer rule for ${name} rule: ${(e as Error).message}`);
        }
        const rewriter = new RegexStringRewriter(pattern, normalize(args[arg + 1]!));
        answers.push(last === 'name' ? new NameResponseRule(rewriter) : new ValueResponseRule(rewriter));
        arg += 2;
        if (last === 'name') nameRules++;
        break;
      }
      default:
        throw new Error(`invalid type ${goQuote(last)} for answer rule for ${name} rule`);
    }
  }
  if (auto && nameRules > 0) throw new Error('auto name answer rule cannot be combined with explicit name anwer rules');
  return { auto, answers };
}

/** How many of `{0}`..`{100}` appear in `s` (getSubExprUsage). */
function subExprUsage(s: string): number {
  let n = 0;
  for (let i = 0; i <= 100; i++) if (s.includes('{' + String(i) + '}')) n++;
  return n;
}

/** isValidRegexPattern: compile `from`, and check `to` uses no more groups than it has. */
function compileChecked(from: string, to: string): GoRegexp {
  if (from.length > MAX_REGEXP_LEN) throw new Error(`regex pattern too long: ${from.length} > ${MAX_REGEXP_LEN}`);
  let pattern: GoRegexp;
  try {
    pattern = GoRegexp.compile(from);
  } catch {
    throw new Error(`invalid regex matching pattern: ${from}`);
  }
  if (subExprUsage(to) > pattern.groupCount) {
    throw new Error(`the rewrite regex pattern (${to}) uses more subexpressions than its corresponding matching regex pattern (${from})`);
  }
  return pattern;
}

/** metadata.IsLabel: `namespace/name`, neither empty. */
function isLabel(label: string): boolean {
  const p = label.indexOf('/');
  return p > 0 && p < label.length - 1;
}

/** parseNameReplacement: literals (lower-cased), `{N}` groups and `{plugin/label}` metadata. */
function parseNameReplacement(replacement: string, groups: number): ReplacementPart[] {
  const parts: ReplacementPart[] = [];
  let rest = replacement;
  while (rest !== '') {
    const open = rest.indexOf('{');
    const before = open < 0 ? rest : rest.slice(0, open);
    if (before.includes('}')) throw new Error('unmatched closing brace in metadata name replacement');
    if (before !== '') parts.push({ literal: before.toLowerCase(), label: '', group: -1 });
    if (open < 0) break;
    const after = rest.slice(open + 1);
    const close = after.indexOf('}');
    if (close < 0) throw new Error('unclosed placeholder in metadata name replacement');
    const label = after.slice(0, close);
    const group = goAtoi(label);
    if (group !== undefined) {
      if (group < 0 || group > groups) throw new Error(`capture group ${label} does not exist in name matching pattern`);
      parts.push({ literal: '', label: '', group });
    } else {
      if (!isLabel(label) || label.includes('{') || label.includes('}')) {
        throw new Error(`invalid metadata label ${goQuote(label)} in name replacement`);
      }
      parts.push({ literal: '', label, group: -1 });
    }
    rest = after.slice(close + 1);
  }
  return parts;
}

/** strconv.Atoi. */
function goAtoi(s: string): number | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
}

// --- ttl and rcode ------------------------------------------------------

/** The name matcher of a ttl/rcode rule with a match type; `what` names the rule in errors. */
function matcher(what: string, match: string, value: string): NameMatcher {
  const m = match.toLowerCase();
  if (m === 'regex') {
    if (value.length > MAX_REGEXP_LEN) throw new Error(`regex pattern too long in a ${what} rule: ${value.length} > ${MAX_REGEXP_LEN}`);
    let pattern: GoRegexp;
    try {
      pattern = GoRegexp.compile(value);
    } catch {
      throw new Error(`invalid regex pattern in a ${what} rule: ${value}`);
    }
    return new NameMatcher('regex', value, pattern);
  }
  if (m === 'exact' || m === 'prefix' || m === 'suffix' || m === 'substring') return new NameMatcher(m, normalize(value), undefined);
  throw new Error(`${what} rule supports only exact, prefix, suffix, substring, and regex name matching`);
}

/** strconv.ParseUint(s, 10, bits). */
function parseUintDec(s: string, max: number): number | undefined {
  if (!/^[0-9]+$/.test(s)) return undefined;
  const n = Number(s);
  return n <= max ? n : undefined;
}

/** isValidTTL: `N`, `MIN-MAX`, `MIN-` or `-MAX`. */
function parseTtl(v: string): [number, number] | undefined {
  const s = v.split('-');
  const U32 = 0xffffffff;
  if (s.length === 1) {
    const n = parseUintDec(s[0]!, U32);
    return n === undefined ? undefined : [n, n];
  }
  if (s.length !== 2) return undefined;
  let min = 0;
  let max: number;
  if (s[0] !== '') {
    const n = parseUintDec(s[0]!, U32);
    if (n === undefined) return undefined;
    min = n;
  }
  if (s[1] === '') {
    if (s[0] === '') return undefined;
    max = 2147483647;
  } else {
    const n = parseUintDec(s[1]!, U32);
    if (n === undefined) return undefined;
    max = n;
  }
  return min > max ? undefined : [min, max];
}

function newTtlRule(mode: Mode, args: readonly string[]): Rule {
  if (args.length < 2) throw new Error(`too few (${args.length}) arguments for a ttl rule`);
  const s = args.length === 2 ? args[1]! : args.length === 3 ? args[2]! : '';
  const ttl = parseTtl(s);
  if (ttl === undefined) throw new Error(`invalid TTL '${s}' for a ttl rule`);
  if (args.length === 3) return new TtlRule(mode, matcher('ttl', args[0]!, args[1]!), ttl[0], ttl[1]);
  return new TtlRule(mode, new NameMatcher('exact', normalize(args[0]!), undefined), ttl[0], ttl[1]);
}

/** isValidRCode: 0..23, or a mnemonic of miekg's StringToRcode. */
function parseRcode(v: string): number | undefined {
  const n = parseUintDec(v, 0xffffffff);
  if (n !== undefined && n <= 23) return n;
  const u = v.toUpperCase();
  if (u === 'BADVERS' || u.startsWith('RCODE')) return undefined;
  return stringToRcode(u);
}

function newRcodeRule(mode: Mode, args: readonly string[]): Rule {
  if (args.length < 3) throw new Error(`too few (${args.length}) arguments for a rcode rule`);
  let oldStr = '';
  let newStr = '';
  if (args.length === 3) [, oldStr, newStr] = args as [string, string, string];
  if (args.length === 4) [, , oldStr, newStr] = args as [string, string, string, string];
  const from = parseRcode(oldStr);
  if (from === undefined) throw new Error(`invalid matching RCODE '${oldStr}' for a rcode rule`);
  const to = parseRcode(newStr);
  if (to === undefined) throw new Error(`invalid replacement RCODE '${newStr}' for a rcode rule`);
  if (args.length === 4) return new RcodeRule(mode, matcher('rcode', args[0]!, args[1]!), from, to);
  return new RcodeRule(mode, new NameMatcher('exact', normalize(args[0]!), undefined), from, to);
}

// --- cname --------------------------------------------------------------

function newCnameRule(mode: Mode, args: readonly string[]): Rule {
  let match: string;
  let from: string;
  let to: string;
  if (args.length === 3) {
    match = args[0]!.toLowerCase();
    if (!MATCH_TYPES.includes(match)) throw new Error(`unknown cname rewrite type: ${match}`);
    from = args[1]!.toLowerCase();
    to = args[2]!.toLowerCase();
  } else if (args.length === 2) {
    match = 'exact';
    from = args[0]!.toLowerCase();
    to = args[1]!.toLowerCase();
  } else {
    throw new Error(`too few (${args.length}) arguments for a cname rule`);
  }
  if (match === 'exact') {
    from = normalize(from);
    to = normalize(to);
  }
  let pattern: GoRegexp | undefined;
  if (match === 'regex') {
    if (from.length > MAX_REGEXP_LEN) throw new Error(`regex pattern too long in a cname rule: ${from.length} > ${MAX_REGEXP_LEN}`);
    try {
      pattern = GoRegexp.compile(from);
    } catch (e) {
      throw new Error(`invalid cname rewrite regex pattern: ${e instanceof GoRegexpError ? e.message : String(e)}`);
    }
  }
  return new CnameRule(mode, match as MatchType, from, to, pattern);
}

// --- edns0 --------------------------------------------------------------

/** strconv.ParseUint(s, 0, 16) with Go's error text. */
function parseCode(s: string): number {
  const fail = (why: string): never => { throw new Error(`strconv.ParseUint: parsing ${goQuote(s)}: ${why}`); };
  let body = s;
  let base = 10;
  if (/^0[xX]/.test(s)) { base = 16; body = s.slice(2); } else if (/^0[bB]/.test(s)) { base = 2; body = s.slice(2); } else if (/^0[oO]/.test(s)) { base = 8; body = s.slice(2); } else if (s.length > 1 && s[0] === '0') { base = 8; body = s.slice(1); }
  if (base !== 10 && body.includes('_')) body = body.replace(/^_/, '').replaceAll('_', '');
  const digits = base === 16 ? /^[0-9a-fA-F]+$/ : base === 8 ? /^[0-7]+$/ : base === 2 ? /^[01]+$/ : /^[0-9]+$/;
  if (!digits.test(body)) fail('invalid syntax');
  const n = parseInt(body, base);
  if (n > 0xffff) fail('value out of range');
  return n;
}

/** hex.DecodeString with Go's error texts. */
function decodeHex(s: string): Uint8Array {
  const isHex = (c: string): boolean => /^[0-9a-fA-F]$/.test(c);
  for (let i = 0; i + 1 < s.length; i += 2) {
    for (const c of [s[i]!, s[i + 1]!]) {
      if (!isHex(c)) {
        const cp = c.codePointAt(0)!;
        throw new Error(`encoding/hex: invalid byte: U+${cp.toString(16).toUpperCase().padStart(4, '0')} ${goQuoteRune(c)}`);
      }
    }
  }
  if (s.length % 2 === 1) {
    const c = s[s.length - 1]!;
    if (!isHex(c)) throw new Error(`encoding/hex: invalid byte: U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')} ${goQuoteRune(c)}`);
    throw new Error('encoding/hex: odd length hex string');
  }
  return Buffer.from(s, 'hex');
}

function goQuoteRune(c: string): string {
  if (c === "'") return "'\\''";
  if (c === '\\') return "'\\\\'";
  return `'${c}'`;
}

function newEdnsRule(mode: Mode, argsIn: readonly string[]): Rule {
  let args = argsIn;
  if (args.length < 2) throw new Error('too few arguments for an EDNS0 rule');
  const ruleType = args[0]!.toLowerCase();
  const action = args[1]!.toLowerCase();
  if (action === 'unset') {
    switch (ruleType) {
      case 'local':
        if (args.length !== 3) throw new Error('local unset action requires exactly two arguments');
        return new EdnsLocalRule(mode, 'unset', parseCode(args[2]!), new Uint8Array(0), false);
      case 'nsid':
        if (args.length !== 2) throw new Error('nsid unset action requires exactly one argument');
        return new EdnsNsidRule(mode, 'unset', false);
      case 'subnet':
        if (args.length !== 2) throw new Error('subnet unset action requires exactly one argument');
        return new EdnsSubnetRule(mode, 'unset', 0, 0, false);
      default:
        throw new Error(`invalid rule type ${goQuote(ruleType)}`);
    }
  }
  if (action !== 'append' && action !== 'replace' && action !== 'set') throw new Error(`invalid action: ${goQuote(action)}`);
  const act: EdnsAction = action;
  let revert = false;
  if (args[args.length - 1] === 'revert') {
    revert = true;
    args = args.slice(0, -1);
  }
  switch (ruleType) {
    case 'local': {
      if (args.length !== 4) throw new Error('EDNS0 local rules require three or four args');
      const data = args[3]!;
      const code = parseCode(args[2]!);
      if (data.startsWith('{') && data.endsWith('}')) {
        if (!(EDNS_VARIABLES as readonly string[]).includes(data) && !isLabel(data.slice(1, -1))) {
          throw new Error(`unsupported variable name ${goQuote(data)}`);
        }
        return new EdnsVariableRule(mode, act, code, data, revert);
      }
      const bytes = data.startsWith('0x') ? decodeHex(data.slice(2)) : Buffer.from(data, 'utf8');
      return new EdnsLocalRule(mode, act, code, bytes, revert);
    }
    case 'nsid':
      if (args.length !== 2) throw new Error('EDNS0 NSID rules can accept no more than one arg');
      return new EdnsNsidRule(mode, act, revert);
    case 'subnet': {
      if (args.length !== 4) throw new Error('EDNS0 subnet rules require three or four args');
      const v4 = parseCode(args[2]!);
      if (v4 > 32) throw new Error(`invalid IPv4 bit mask length ${v4}`);
      const v6 = parseCode(args[3]!);
      if (v6 > 128) throw new Error(`invalid IPv6 bit mask length ${v6}`);
      return new EdnsSubnetRule(mode, act, v4, v6, revert);
    }
    default:
      throw new Error(`invalid rule type ${goQuote(ruleType)}`);
  }
}

export const plugin: PluginDefinition = {
  name: 'rewrite',
  setup(c) {
    const o = parse(c);
    // CoreDNS's edns.SetSupportedOption: the codes of every rewrite of the configuration are echoed.
    for (const code of o.localCodes) c.instance.supportEdnsOption(code);
    const supported = c.instance.ednsSupported;
    c.addPlugin((next) => new Rewrite(o.rules, supported, next, c.log));
  },
};
