// The expressions of CoreDNS's view plugin: the part of expr-lang
// (github.com/expr-lang/expr v1.17) those expressions use, over the variables
// and functions of CoreDNS's plugin/pkg/expression (DefaultEnv).
//
// Supported: literals (integers, floats, 'strings' and "strings" with Go's
// escapes, `raw strings`, true, false, nil, [arrays]), parentheses, calls of
// the DefaultEnv functions, `or`/`||`, `and`/`&&`, `not`/`!`, `==`, `!=`, `<`,
// `<=`, `>`, `>=`, `in`, `matches` (Go regexps), `contains`, `startsWith`,
// `endsWith` (each also after `not`), `+`, `-`, `*`, `/`, `%` and unary
// `-`/`+`, chained comparisons (`1 < size() < 512`) and `cond ? a : b`. Compilation checks types as expr's checker does and fails with
// expr's messages and position snippet (`unknown name foo (1:1)\n | foo()\n | ^`);
// syntax expr-lang has but this subset does not (member access, builtins,
// ranges, ternaries, pipes, closures, ...) fails with an UnsupportedExpression.
// Evaluating walks the tree without allocating for the usual expressions
// (constant arrays, CIDRs and regexps are prepared at compile time).

import type { Request } from '../../core/request.ts';
import { classToString, typeToString } from '../../wire/constants.ts';
import { cidrContains, parseCidr, parseIP, type Cidr } from '../../wire/ip.ts';
import { GoRegexp, GoRegexpError } from './regexp.ts';

/** A value an expression computes. */
export type ExprValue = string | number | boolean | null | readonly ExprValue[];

/** A compile error as expr-lang prints it: message, `(line:column)` and the snippet with a caret. */
export class ExpressionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExpressionError';
  }
}

/** Valid expr-lang syntax outside the subset nodens implements. */
export class UnsupportedExpression extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsupportedExpression';
  }
}

// ---- types (the names expr's checker prints) ----

type T = 'string' | 'int' | 'float64' | 'bool' | 'nil' | '[]interface {}' | 'interface {}';

interface FnDef {
  readonly params: readonly T[];
  readonly ret: T;
}

const FUNCS: ReadonlyMap<string, FnDef> = new Map<string, FnDef>([
  ['incidr', { params: ['string', 'string'], ret: 'bool' }],
  ['metadata', { params: ['string'], ret: 'string' }],
  ['type', { params: [], ret: 'string' }],
  ['name', { params: [], ret: 'string' }],
  ['class', { params: [], ret: 'string' }],
  ['proto', { params: [], ret: 'string' }],
  ['size', { params: [], ret: 'int' }],
  ['client_ip', { params: [], ret: 'string' }],
  ['port', { params: [], ret: 'string' }],
  ['id', { params: [], ret: 'int' }],
  ['opcode', { params: [], ret: 'int' }],
  ['do', { params: [], ret: 'bool' }],
  ['bufsize', { params: [], ret: 'int' }],
  ['server_ip', { params: [], ret: 'string' }],
  ['server_port', { params: [], ret: 'string' }],
]);

/** The names an expression may call (CoreDNS's expression.DefaultEnv). */
export const expressionFunctions: readonly string[] = [...FUNCS.keys()];

// Function numbers for the evaluator's switch.
const F_INCIDR = 0, F_METADATA = 1, F_TYPE = 2, F_NAME = 3, F_CLASS = 4, F_PROTO = 5, F_SIZE = 6, F_CLIENT_IP = 7,
  F_PORT = 8, F_ID = 9, F_OPCODE = 10, F_DO = 11, F_BUFSIZE = 12, F_SERVER_IP = 13, F_SERVER_PORT = 14;
const FN_NUMBER = new Map(expressionFunctions.map((n, i) => [n, i]));

// ---- lexer ----

type Kind = 'Identifier' | 'Number' | 'String' | 'Operator' | 'Bracket' | 'EOF';

interface Token {
  readonly kind: Kind;
  readonly value: string;
  /** Rune offset in the source. */
  readonly pos: number;
}

const OPERATORS = [
  '==', '!=', '<=', '>=', '&&', '||', '??', '?.', '**', '..', '<', '>', '!', '+', '-', '*', '/', '%', '^', ',',
  '.', '?', ':', '|', '#', ';', '=',
];
const KEYWORD_OPERATORS = new Set(['and', 'or', 'not', 'in', 'matches', 'contains', 'startsWith', 'endsWith']);

function isDigit(c: string): boolean { return c >= '0' && c <= '9'; }
function isIdentStart(c: string): boolean { return c === '_' || c === '$' || /\p{L}/u.test(c); }
function isIdentPart(c: string): boolean { return isIdentStart(c) || /\p{Nd}/u.test(c); }

function lex(runes: readonly string[], fail: (msg: string, pos: number) => never): Token[] {
  const out: Token[] = [];
  let i = 0;
  const n = runes.length;
  while (i < n) {
    const c = runes[i]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') { i++; continue; }
    const start = i;
    if (isDigit(c) || (c === '.' && i + 1 < n && isDigit(runes[i + 1]!))) {
      i = lexNumber(runes, i);
      out.push({ kind: 'Number', value: runes.slice(start, i).join(''), pos: start });
      continue;
    }
    if (c === '\'' || c === '"') {
      let j = i + 1;
      while (j < n && runes[j] !== c) {
        if (runes[j] === '\n') break;
        j += runes[j] === '\\' ? 2 : 1;
      }
      if (j >= n || runes[j] !== c) fail('literal not terminated', Math.min(j, n));
      out.push({ kind: 'String', value: unescape(runes.slice(i + 1, j), start, fail), pos: start });
      i = j + 1;
      continue;
    }
    if (c === '`') {
      let j = i + 1;
      while (j < n && runes[j] !== '`') j++;
      if (j >= n) fail('literal not terminated', n);
      out.push({ kind: 'String', value: runes.slice(i + 1, j).join(''), pos: start });
      i = j + 1;
      continue;
    }
    if (isIdentStart(c)) {
      while (i < n && isIdentPart(runes[i]!)) i++;
      const word = runes.slice(start, i).join('');
      out.push({ kind: KEYWORD_OPERATORS.has(word) ? 'Operator' : 'Identifier', value: word, pos: start });
      continue;
    }
    if ('()[]{}'.includes(c)) {
      out.push({ kind: 'Bracket', value: c, pos: start });
      i++;
      continue;
    }
    const two = c + (runes[i + 1] ?? '');
    const op = OPERATORS.find((o) => o.length === 2 ? o === two : o === c);
    if (op === undefined) {
      const cp = c.codePointAt(0)!;
      fail(`unrecognized character: U+${cp.toString(16).toUpperCase().padStart(4, '0')} '${c}'`, start);
    }
    out.push({ kind: 'Operator', value: op, pos: start });
    i += op.length;
  }
  out.push({ kind: 'EOF', value: '', pos: n > 0 ? n - 1 : 0 });
  return out;
}

function lexNumber(runes: readonly string[], i: number): number {
  const n = runes.length;
  if (runes[i] === '0' && (runes[i + 1] === 'x' || runes[i + 1] === 'X')) {
    i += 2;
    while (i < n && /[0-9a-fA-F_]/.test(runes[i]!)) i++;
    return i;
  }
  while (i < n && (isDigit(runes[i]!) || runes[i] === '_')) i++;
  // `1..2` is a range, not a float.
  if (runes[i] === '.' && runes[i + 1] !== '.') {
    i++;
    while (i < n && (isDigit(runes[i]!) || runes[i] === '_')) i++;
  }
  if (runes[i] === 'e' || runes[i] === 'E') {
    i++;
    if (runes[i] === '+' || runes[i] === '-') i++;
    while (i < n && isDigit(runes[i]!)) i++;
  }
  return i;
}

/** Go's strconv.Unquote escapes, as expr's lexer applies them. */
function unescape(r: readonly string[], pos: number, fail: (msg: string, pos: number) => never): string {
  let out = '';
  for (let i = 0; i < r.length; i++) {
    const c = r[i]!;
    if (c !== '\\') { out += c; continue; }
    const e = r[++i];
    switch (e) {
      case 'a': out += '\x07'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case '\\': case '\'': case '"': out += e; break;
      case 'x': case 'u': case 'U': {
        const len = e === 'x' ? 2 : e === 'u' ? 4 : 8;
        const hex = r.slice(i + 1, i + 1 + len).join('');
        if (hex.length !== len || !/^[0-9a-fA-F]+$/.test(hex)) fail('invalid char escape', pos);
        out += String.fromCodePoint(parseInt(hex, 16));
        i += len;
        break;
      }
      default: {
        const oct = r.slice(i, i + 3).join('');
        if (!/^[0-7]{3}$/.test(oct)) fail('invalid char escape', pos);
        out += String.fromCharCode(parseInt(oct, 8));
        i += 2;
      }
    }
  }
  return out;
}

// ---- syntax tree ----

type Node =
  | { readonly k: 'lit'; readonly v: ExprValue; readonly t: T; readonly pos: number }
  | { readonly k: 'arr'; readonly items: readonly Node[]; readonly pos: number; constant?: readonly ExprValue[] }
  | { readonly k: 'call'; readonly fn: string; readonly args: readonly Node[]; readonly pos: number; f?: number; cidr?: Cidr }
  | { readonly k: 'un'; readonly op: string; readonly x: Node; readonly pos: number }
  | { readonly k: 'bin'; readonly op: string; readonly not: boolean; readonly l: Node; readonly r: Node; readonly pos: number; re?: GoRegexp }
  | { readonly k: 'cond'; readonly c: Node; readonly a: Node; readonly b: Node; readonly pos: number };

const BINARY: ReadonlyMap<string, number> = new Map([
  ['or', 10], ['||', 10], ['and', 15], ['&&', 15],
  ['==', 20], ['!=', 20], ['<', 20], ['>', 20], ['<=', 20], ['>=', 20],
  ['in', 20], ['matches', 20], ['contains', 20], ['startsWith', 20], ['endsWith', 20],
  ['+', 30], ['-', 30], ['*', 60], ['/', 60], ['%', 60],
]);
/** expr-lang operators outside the subset, when met where a binary operator goes. */
const UNSUPPORTED_BINARY = new Set(['..', '??', '**', '^', '|', '?.', '.']);
/** expr's chained comparisons: `a < b < c` is `a < b && b < c`. */
const CHAINED = new Set(['<', '>', '<=', '>=']);
/** expr-lang's builtin functions (`type` is disabled by CoreDNS): none is in the subset. */
const BUILTINS = new Set([
  'all', 'none', 'any', 'one', 'filter', 'map', 'find', 'findIndex', 'findLast', 'findLastIndex', 'count', 'sum',
  'groupBy', 'sortBy', 'reduce', 'len', 'abs', 'ceil', 'floor', 'round', 'int', 'float', 'string', 'trim',
  'trimPrefix', 'trimSuffix', 'upper', 'lower', 'split', 'splitAfter', 'replace', 'repeat', 'join', 'indexOf',
  'lastIndexOf', 'hasPrefix', 'hasSuffix', 'max', 'min', 'mean', 'median', 'toJSON', 'fromJSON', 'toBase64',
  'fromBase64', 'now', 'duration', 'date', 'timezone', 'first', 'last', 'get', 'keys', 'values', 'toPairs',
  'fromPairs', 'sort', 'concat', 'flatten', 'uniq', 'bitand', 'bitor', 'bitxor', 'bitnand', 'bitnot', 'bitshl',
  'bitshr', 'bitushr',
]);
const NEGATABLE = new Set(['in', 'matches', 'contains', 'startsWith', 'endsWith']);

class Parser {
  private readonly toks: Token[];
  private i = 0;
  private readonly fail: (msg: string, pos: number) => never;
  private readonly unsupported: (what: string, pos: number) => never;

  constructor(toks: Token[], fail: (msg: string, pos: number) => never, unsupported: (what: string, pos: number) => never) {
    this.toks = toks;
    this.fail = fail;
    this.unsupported = unsupported;
  }

  private get cur(): Token { return this.toks[this.i]!; }

  private at(kind: Kind, value: string): boolean {
    const t = this.toks[this.i]!;
    return t.kind === kind && t.value === value;
  }

  private unexpected(t: Token): never {
    if (t.kind === 'EOF') this.fail('unexpected token EOF', t.pos);
    this.fail(`unexpected token ${t.kind}(${JSON.stringify(t.value)})`, t.pos);
  }

  private expect(kind: Kind, value: string): void {
    const t = this.cur;
    if (t.kind !== kind || t.value !== value) this.unexpected(t);
    this.i++;
  }

  parse(): Node {
    const n = this.expr(0);
    if (this.cur.kind !== 'EOF') {
      const t = this.cur;
      if (t.kind === 'Operator' && UNSUPPORTED_BINARY.has(t.value)) this.unsupported(`the operator ${JSON.stringify(t.value)}`, t.pos);
      this.unexpected(t);
    }
    return n;
  }

  private expr(minPrec: number): Node {
    const n = this.binary(minPrec);
    return minPrec === 0 ? this.conditional(n) : n;
  }

  /** `cond ? a : b` (expr's parseConditional; its `?:` short form is not in the subset). */
  private conditional(n: Node): Node {
    while (this.at('Operator', '?')) {
      const q = this.cur;
      this.i++;
      if (this.at('Operator', ':')) this.unsupported('the operator "?:"', q.pos);
      const a = this.expr(0);
      this.expect('Operator', ':');
      const b = this.expr(0);
      n = { k: 'cond', c: n, a, b, pos: q.pos };
    }
    return n;
  }

  private binary(minPrec: number): Node {
    let left = this.unary();
    for (;;) {
      const t = this.cur;
      if (t.kind !== 'Operator') break;
      let op = t.value;
      let not = false;
      let next = 1;
      if (op === 'not') {
        const after = this.toks[this.i + 1]!;
        if (after.kind !== 'Operator' || !NEGATABLE.has(after.value)) break;
        op = after.value;
        not = true;
        next = 2;
      }
      const prec = BINARY.get(op);
      if (prec === undefined) {
        if (UNSUPPORTED_BINARY.has(op)) this.unsupported(`the operator ${JSON.stringify(op)}`, t.pos);
        break;
      }
      if (prec < minPrec) break;
      this.i += next;
      if (!not && CHAINED.has(op)) {
        left = this.comparison(left, t, prec);
        continue;
      }
      const right = this.expr(prec + 1);
      left = { k: 'bin', op, not, l: left, r: right, pos: t.pos };
    }
    return left;
  }

  /** expr's parseComparison: `a < b < c` becomes `(a < b) && (b < c)`. */
  private comparison(left: Node, t: Token, prec: number): Node {
    let root: Node | undefined;
    for (;;) {
      const cmp: Node = { k: 'bin', op: t.value, not: false, l: left, r: this.expr(prec + 1), pos: t.pos };
      root = root === undefined ? cmp : { k: 'bin', op: '&&', not: false, l: root, r: cmp, pos: t.pos };
      left = cmp.r;
      t = this.cur;
      if (!(t.kind === 'Operator' && CHAINED.has(t.value))) break;
      this.i++;
    }
    return root;
  }

  private unary(): Node {
    const t = this.cur;
    if (t.kind === 'Operator' && (t.value === 'not' || t.value === '!')) {
      this.i++;
      return { k: 'un', op: t.value, x: this.expr(50), pos: t.pos };
    }
    if (t.kind === 'Operator' && (t.value === '-' || t.value === '+')) {
      this.i++;
      return { k: 'un', op: t.value, x: this.expr(90), pos: t.pos };
    }
    return this.postfix(this.primary());
  }

  private postfix(n: Node): Node {
    const t = this.cur;
    if ((t.kind === 'Operator' && (t.value === '.' || t.value === '?.')) || (t.kind === 'Bracket' && t.value === '[')) {
      this.unsupported('member access and indexing', t.pos);
    }
    return n;
  }

  private primary(): Node {
    const t = this.cur;
    switch (t.kind) {
      case 'Number': {
        this.i++;
        // expr reports a bad literal where its parser stands: at the next token.
        return numberLiteral(t, this.cur.pos, this.fail);
      }
      case 'String':
        this.i++;
        return { k: 'lit', v: t.value, t: 'string', pos: t.pos };
      case 'Identifier': {
        this.i++;
        if (t.value === 'true' || t.value === 'false') return { k: 'lit', v: t.value === 'true', t: 'bool', pos: t.pos };
        if (t.value === 'nil') return { k: 'lit', v: null, t: 'nil', pos: t.pos };
        if (this.cur.kind === 'Bracket' && this.cur.value === '(') {
          this.i++;
          const args: Node[] = [];
          while (!this.at('Bracket', ')')) {
            if (args.length > 0) this.expect('Operator', ',');
            if (this.at('Bracket', ')')) break;
            args.push(this.expr(0));
          }
          this.i++;
          if (!FUNCS.has(t.value) && BUILTINS.has(t.value)) this.unsupported(`the builtin ${t.value}()`, t.pos);
          return { k: 'call', fn: t.value, args, pos: t.pos };
        }
        if (FUNCS.has(t.value)) this.unsupported(`${t.value} without a call`, t.pos);
        if (t.value === 'let' || t.value === 'if') this.unsupported(`"${t.value}"`, t.pos);
        this.fail(`unknown name ${t.value}`, t.pos);
        break;
      }
      case 'Bracket':
        if (t.value === '(') {
          this.i++;
          const n = this.expr(0);
          this.expect('Bracket', ')');
          return n;
        }
        if (t.value === '[') {
          this.i++;
          const items: Node[] = [];
          while (!this.at('Bracket', ']')) {
            if (items.length > 0) this.expect('Operator', ',');
            if (this.at('Bracket', ']')) break;
            items.push(this.expr(0));
          }
          this.i++;
          return { k: 'arr', items, pos: t.pos };
        }
        if (t.value === '{') this.unsupported('maps', t.pos);
        break;
      case 'Operator':
        if (t.value === '#' || t.value === '.') this.unsupported('predicates', t.pos);
        break;
      default:
        break;
    }
    return this.unexpected(t);
  }
}

function numberLiteral(t: Token, errPos: number, fail: (msg: string, pos: number) => never): Node {
  const s = t.value.replaceAll('_', '');
  if (/^0[xX]/.test(s)) {
    const v = parseInt(s.slice(2), 16);
    if (Number.isNaN(v)) fail(`invalid integer literal: strconv.ParseInt: parsing ${JSON.stringify(t.value)}: invalid syntax`, errPos);
    return { k: 'lit', v, t: 'int', pos: t.pos };
  }
  if (/[.eE]/.test(s)) {
    const v = /[eE][+-]?$/.test(s) ? NaN : Number(s);
    if (Number.isNaN(v)) fail(`invalid float literal: strconv.ParseFloat: parsing ${JSON.stringify(t.value)}: invalid syntax`, errPos);
    return { k: 'lit', v, t: 'float64', pos: t.pos };
  }
  const v = Number(s);
  // Go's int is 64 bits: larger literals are errors there; numbers above 2^53 lose precision here.
  if (BigInt(s) > 9223372036854775807n) fail(`invalid integer literal: strconv.ParseInt: parsing ${JSON.stringify(t.value)}: value out of range`, errPos);
  return { k: 'lit', v, t: 'int', pos: t.pos };
}

// ---- checker (expr's static types) ----

function isNum(t: T): boolean { return t === 'int' || t === 'float64'; }
function isAny(t: T): boolean { return t === 'interface {}'; }

function check(n: Node, fail: (msg: string, pos: number) => never): T {
  switch (n.k) {
    case 'lit':
      return n.t;
    case 'arr': {
      let constant = true;
      for (const it of n.items) {
        check(it, fail);
        if (it.k !== 'lit') constant = false;
      }
      if (constant) n.constant = n.items.map((it) => (it as { v: ExprValue }).v);
      return '[]interface {}';
    }
    case 'call': {
      const def = FUNCS.get(n.fn);
      if (def === undefined) fail(`unknown name ${n.fn}`, n.pos);
      if (n.args.length < def.params.length) fail(`not enough arguments to call ${n.fn}`, n.pos);
      if (n.args.length > def.params.length) fail(`too many arguments to call ${n.fn}`, n.pos);
      n.args.forEach((a, i) => {
        const at = check(a, fail);
        const want = def.params[i]!;
        // expr prints a space after the function name except for nil.
        if (at !== want && !isAny(at)) fail(`cannot use ${at} as argument (type ${want}) to call ${n.fn}${at === 'nil' ? '' : ' '}`, a.pos);
      });
      n.f = FN_NUMBER.get(n.fn)!;
      if (n.f === F_INCIDR) {
        const c = n.args[1]!;
        if (c.k === 'lit' && typeof c.v === 'string') n.cidr = parseCidr(c.v);
      }
      return def.ret;
    }
    case 'un': {
      const t = check(n.x, fail);
      if (n.op === '!' || n.op === 'not') {
        if (t !== 'bool' && !isAny(t)) fail(`invalid operation: ${n.op} (mismatched type ${t})`, n.pos);
        return 'bool';
      }
      if (!isNum(t) && !isAny(t)) fail(`invalid operation: ${n.op} (mismatched type ${t})`, n.pos);
      return t;
    }
    case 'cond': {
      const c = check(n.c, fail);
      if (c !== 'bool' && !isAny(c)) fail(`non-bool expression (type ${c}) used as condition`, n.c.pos);
      const a = check(n.a, fail);
      const b = check(n.b, fail);
      return a === b ? a : 'interface {}';
    }
    case 'bin': {
      const l = check(n.l, fail);
      const r = check(n.r, fail);
      const mismatch = (): never => fail(`invalid operation: ${n.op} (mismatched types ${l} and ${r})`, n.pos);
      const anyOf = isAny(l) || isAny(r);
      switch (n.op) {
        case 'or': case '||': case 'and': case '&&':
          if ((l !== 'bool' && !isAny(l)) || (r !== 'bool' && !isAny(r))) mismatch();
          return 'bool';
        case '==': case '!=':
          if (!anyOf && l !== 'nil' && r !== 'nil' && l !== r && !(isNum(l) && isNum(r))) mismatch();
          return 'bool';
        case '<': case '>': case '<=': case '>=':
          if (!anyOf && !(isNum(l) && isNum(r)) && !(l === 'string' && r === 'string')) mismatch();
          return 'bool';
        case 'in':
          if (r !== '[]interface {}' && !isAny(r)) mismatch();
          return 'bool';
        case 'matches':
          if ((l !== 'string' && !isAny(l)) || (r !== 'string' && !isAny(r))) mismatch();
          if (n.r.k === 'lit' && typeof n.r.v === 'string') {
            try {
              n.re = GoRegexp.compile(n.r.v);
            } catch (e) {
              if (e instanceof GoRegexpError) fail(e.message, n.pos);
              throw e;
            }
          }
          return 'bool';
        case 'contains': case 'startsWith': case 'endsWith':
          if ((l !== 'string' && !isAny(l)) || (r !== 'string' && !isAny(r))) mismatch();
          return 'bool';
        case '+':
          if (l === 'string' && r === 'string') return 'string';
          if (isNum(l) && isNum(r)) return l === 'int' && r === 'int' ? 'int' : 'float64';
          if (anyOf) return 'interface {}';
          return mismatch();
        case '-': case '*':
          if (isNum(l) && isNum(r)) return l === 'int' && r === 'int' ? 'int' : 'float64';
          if (anyOf) return 'interface {}';
          return mismatch();
        case '/':
          if ((isNum(l) || isAny(l)) && (isNum(r) || isAny(r))) return 'float64';
          return mismatch();
        default: // '%'
          if ((l === 'int' || isAny(l)) && (r === 'int' || isAny(r))) return 'int';
          return mismatch();
      }
    }
  }
}

// ---- evaluation ----

class RunError extends Error {}

function equal(a: ExprValue, b: ExprValue): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) {
    const x = a as readonly ExprValue[], y = b as readonly ExprValue[];
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (!equal(x[i]!, y[i]!)) return false;
    return true;
  }
  return false;
}

function str(v: ExprValue): string {
  if (typeof v !== 'string') throw new RunError('not a string');
  return v;
}

function num(v: ExprValue): number {
  if (typeof v !== 'number') throw new RunError('not a number');
  return v;
}

function call(n: Extract<Node, { k: 'call' }>, req: Request): ExprValue {
  switch (n.f) {
    case F_INCIDR: {
      const ip = parseIP(str(evaluate(n.args[0]!, req)));
      if (ip === undefined) throw new RunError('first argument is not an IP address');
      const cidr = n.cidr ?? parseCidr(str(evaluate(n.args[1]!, req)));
      if (cidr === undefined) throw new RunError('invalid CIDR address');
      return cidrContains(cidr, ip);
    }
    case F_METADATA: return req.metadata(str(evaluate(n.args[0]!, req))) ?? '';
    case F_TYPE: return typeToString(req.qtype);
    case F_NAME: return req.name;
    case F_CLASS: return classToString(req.qclass);
    case F_PROTO: return req.proto;
    case F_SIZE: return req.length;
    case F_CLIENT_IP: return req.remoteAddress;
    case F_PORT: return String(req.remotePort);
    case F_ID: return req.msg.id;
    case F_OPCODE: return req.msg.opcode;
    case F_DO: return req.do;
    case F_BUFSIZE: return req.size;
    case F_SERVER_IP: return req.localAddress;
    case F_SERVER_PORT: return String(req.localPort);
    default: throw new RunError(`unknown function ${n.fn}`);
  }
}

function evaluate(n: Node, req: Request): ExprValue {
  switch (n.k) {
    case 'lit': return n.v;
    case 'arr': return n.constant ?? n.items.map((it) => evaluate(it, req));
    case 'call': return call(n, req);
    case 'cond': {
      const c = evaluate(n.c, req);
      if (typeof c !== 'boolean') throw new RunError('not a bool');
      return evaluate(c ? n.a : n.b, req);
    }
    case 'un': {
      const v = evaluate(n.x, req);
      if (n.op === '!' || n.op === 'not') {
        if (typeof v !== 'boolean') throw new RunError('not a bool');
        return !v;
      }
      return n.op === '-' ? -num(v) : num(v);
    }
    case 'bin': {
      const op = n.op;
      if (op === 'and' || op === '&&' || op === 'or' || op === '||') {
        const l = evaluate(n.l, req);
        if (typeof l !== 'boolean') throw new RunError('not a bool');
        const and = op === 'and' || op === '&&';
        if (and ? !l : l) return l;
        const r = evaluate(n.r, req);
        if (typeof r !== 'boolean') throw new RunError('not a bool');
        return r;
      }
      const l = evaluate(n.l, req);
      const r = evaluate(n.r, req);
      let out: boolean;
      switch (op) {
        case '==': return equal(l, r);
        case '!=': return !equal(l, r);
        case '<': case '>': case '<=': case '>=': {
          if (typeof l !== typeof r || (typeof l !== 'number' && typeof l !== 'string')) throw new RunError('cannot compare');
          const a = l as number | string, b = r as number | string;
          return op === '<' ? a < b : op === '>' ? a > b : op === '<=' ? a <= b : a >= b;
        }
        case 'in': {
          if (!Array.isArray(r)) throw new RunError('not an array');
          out = false;
          for (const x of r as readonly ExprValue[]) if (equal(l, x)) { out = true; break; }
          break;
        }
        case 'matches': {
          let re = n.re;
          if (re === undefined) {
            try {
              re = GoRegexp.compile(str(r));
            } catch (e) {
              throw new RunError(e instanceof Error ? e.message : String(e));
            }
          }
          out = re.test(str(l));
          break;
        }
        case 'contains': out = str(l).includes(str(r)); break;
        case 'startsWith': out = str(l).startsWith(str(r)); break;
        case 'endsWith': out = str(l).endsWith(str(r)); break;
        case '+':
          if (typeof l === 'string' && typeof r === 'string') return l + r;
          return num(l) + num(r);
        case '-': return num(l) - num(r);
        case '*': return num(l) * num(r);
        case '/': return num(l) / num(r);
        default: {
          const d = num(r);
          if (d === 0) throw new RunError('integer divide by zero');
          return num(l) % d;
        }
      }
      return n.not ? !out : out;
    }
  }
}

/** A compiled expression. */
export class Expression {
  /** The source as compiled. */
  readonly source: string;
  private readonly root: Node;

  private constructor(source: string, root: Node) {
    this.source = source;
    this.root = root;
  }

  /**
   * Compile `source` as CoreDNS's view does (expr.Compile with DefaultEnv, `type` the env's): throws
   * ExpressionError with expr's message and snippet, or UnsupportedExpression for expr-lang syntax
   * outside the subset.
   */
  static compile(source: string): Expression {
    const runes = Array.from(source);
    const fail = (msg: string, pos: number): never => { throw new ExpressionError(formatError(runes, msg, pos)); };
    const unsupported = (what: string, pos: number): never => {
      throw new UnsupportedExpression(`${what} is expr-lang syntax nodens does not implement (column ${pos + 1} of ${JSON.stringify(source)})`);
    };
    const root = new Parser(lex(runes, fail), fail, unsupported).parse();
    check(root, fail);
    return new Expression(source, root);
  }

  /** The value for `req`; throws on a run-time error (a bad address for incidr, a bad dynamic regexp). */
  run(req: Request): ExprValue {
    try {
      return evaluate(this.root, req);
    } catch (e) {
      if (e instanceof RunError) throw new Error(e.message);
      throw e;
    }
  }

  /** True only when the expression evaluates to boolean true; errors and other values are false (view's Filter). */
  test(req: Request): boolean {
    try {
      return evaluate(this.root, req) === true;
    } catch (e) {
      if (e instanceof RunError) return false;
      throw e;
    }
  }
}

/** expr's file.Error: `message (line:column)`, then the source line and a caret under the column. */
function formatError(runes: readonly string[], msg: string, pos: number): string {
  let line = 1, col = 0, lineStart = 0;
  for (let i = 0; i < pos && i < runes.length; i++) {
    if (runes[i] === '\n') { line++; col = 0; lineStart = i + 1; } else col++;
  }
  let lineEnd = runes.indexOf('\n', lineStart);
  if (lineEnd < 0) lineEnd = runes.length;
  if (lineStart === lineEnd) return msg;
  const text = runes.slice(lineStart, lineEnd).join('').replaceAll('\t', ' ');
  return `${msg} (${line}:${col + 1})\n | ${text}\n | ${'.'.repeat(col)}^`;
}
