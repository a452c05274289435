// The expressions of CoreDNS's view plugin: the part of expr-lang
// (github.com/expr-lang/expr v1.17) those expressions use, over the variables
// and functions of CoreDNS's plugin/pkg/expression (DefaultEnv).
//
// Supported: literals (integers, floats, 'strings' and "strings" with Go's
// escapes, `raw strings`, true, false, nil, [arrays]), parentheses, calls of
// the DefaultEnv functions, `or`/`||`, `and`/`&&`, `not`/`!`, `==`, `!=`, `<`,
// `<=`, `>`, `>=`, `in`, `matches` (Go regexps), `contains`, `startsWith`,
// `endsWith` (each also after `not`), `+`, `-`, `*`, `/`, `%` and unary
// `-`/`+`, chained comparisons (`1 < size() < 512`) and `cond ? a : b`; the
// builtins len, int, float, string, upper, lower, trim, trimPrefix,
// trimSuffix, replace, split, join, indexOf, lastIndexOf, hasPrefix,
// hasSuffix, and the predicates any, all, none, one and count with `#` for
// the element. A scope (template's `var`/`expr`) adds named variables and
// the `group()` function. Compilation checks types as expr's checker does and
// fails with expr's messages and position snippet
// (`unknown name foo (1:1)\n | foo()\n | ^`); syntax expr-lang has but this
// subset does not (member access, slices, the other builtins, ranges,
// pipes, closures, ...) fails with an UnsupportedExpression. Arrays index
// with `x[i]` (negative from the end).
// Evaluating walks the tree without allocating for the usual expressions
// (constant arrays, CIDRs and regexps are prepared at compile time).

import type { Request } from '../../core/request.ts';
import { classToString, typeToString } from '../../wire/constants.ts';
import { cidrContains, parseCidr, parseIP, type Cidr } from '../../wire/ip.ts';
import { GoRegexp, GoRegexpError } from './regexp.ts';
import { formatFloatG } from './gotemplate.ts';

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

// `*interface {}` is a template variable whose expression has no static type (CoreDNS declares it as new(any)).
type T = 'string' | 'int' | 'float64' | 'bool' | 'nil' | '[]interface {}' | '[]string' | 'interface {}' | '*interface {}';

/** The static type of an expression, as expr's checker names it. */
export type ExprType = T;

/** What an expression may name beyond DefaultEnv (CoreDNS's template varEnv). */
export interface ExprScope {
  /** Variables declared so far, in order: a variable's slot is its position. */
  readonly vars: readonly { readonly name: string; readonly type: T }[];
  /** template's `group(name or index)`. */
  readonly group: boolean;
}

/** The per-query values a scoped expression reads. */
export interface ExprEnv {
  /** The variables' values, by slot. */
  readonly vars: readonly ExprValue[];
  /** The capture group named `key`, or numbered `key`; '' when there is none. */
  group(key: string): string;
}

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
  '==', '!=', '<=', '>=', '&&', '||', '??', '?.', '**', '..', '##', '<', '>', '!', '+', '-', '*', '/', '%', '^', ',',
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
  | { readonly k: 'arr'; readonly items: readonly Node[]; readonly pos: number; constant?: readonly ExprValue[]; elem?: T; last?: Node }
  | { readonly k: 'idx'; readonly x: Node; readonly i: Node; readonly pos: number; elemNode?: Node }
  | { readonly k: 'call'; readonly fn: string; readonly args: readonly Node[]; readonly pos: number; f?: number; cidr?: Cidr }
  | { readonly k: 'un'; readonly op: string; readonly x: Node; readonly pos: number }
  | { readonly k: 'bin'; readonly op: string; readonly not: boolean; readonly l: Node; readonly r: Node; readonly pos: number; re?: GoRegexp }
  | { readonly k: 'cond'; readonly c: Node; readonly a: Node; readonly b: Node; readonly pos: number }
  | { readonly k: 'var'; readonly slot: number; readonly t: T; readonly pos: number }
  | { readonly k: 'ptr'; readonly pos: number }
  | { readonly k: 'group'; readonly args: readonly Node[]; readonly pos: number; argType?: T }
  | { readonly k: 'builtin'; readonly fn: string; readonly args: readonly Node[]; readonly pos: number; sig?: number; argT?: T }
  | { readonly k: 'pred'; readonly fn: string; readonly args: readonly Node[]; readonly pos: number };

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
/** expr-lang's builtin functions (builtin.Index of v1.17.8). */
const BUILTINS = new Set([
  'all', 'none', 'any', 'one', 'filter', 'map', 'find', 'findIndex', 'findLast', 'findLastIndex', 'count', 'sum',
  'groupBy', 'sortBy', 'reduce', 'len', 'type', 'abs', 'ceil', 'floor', 'round', 'int', 'float', 'string', 'trim',
  'trimPrefix', 'trimSuffix', 'upper', 'lower', 'split', 'splitAfter', 'replace', 'repeat', 'join', 'indexOf',
  'lastIndexOf', 'hasPrefix', 'hasSuffix', 'max', 'min', 'mean', 'median', 'toJSON', 'fromJSON', 'toBase64',
  'fromBase64', 'now', 'duration', 'date', 'timezone', 'first', 'last', 'get', 'take', 'keys', 'values', 'toPairs',
  'fromPairs', 'reverse', 'uniq', 'concat', 'flatten', 'sort', 'bitand', 'bitor', 'bitxor', 'bitnand', 'bitshl',
  'bitshr', 'bitushr', 'bitnot',
]);
/** expr's predicate builtins (parsed with a closure argument); the subset has the first five. */
const PREDICATES = new Set(['any', 'all', 'none', 'one', 'count', 'filter', 'map', 'sum', 'find', 'findIndex', 'findLast',
  'findLastIndex', 'groupBy', 'sortBy', 'reduce']);
const SUPPORTED_PREDICATES = new Set(['any', 'all', 'none', 'one', 'count']);

interface Sig { readonly params: readonly T[]; readonly ret: T }
const sig = (ret: T, ...params: T[]): Sig => ({ params, ret });
/** Builtins checked against Go signatures (expr's `Types`): the first that fits wins, else the last error. */
const SIG_BUILTINS: ReadonlyMap<string, readonly Sig[]> = new Map<string, readonly Sig[]>([
  ['string', [sig('string', 'interface {}')]],
  ['upper', [sig('string', 'string')]],
  ['lower', [sig('string', 'string')]],
  ['trim', [sig('string', 'string'), sig('string', 'string', 'string')]],
  ['trimPrefix', [sig('string', 'string', 'string'), sig('string', 'string')]],
  ['trimSuffix', [sig('string', 'string', 'string'), sig('string', 'string')]],
  ['replace', [sig('string', 'string', 'string', 'string', 'int'), sig('string', 'string', 'string', 'string')]],
  ['split', [sig('[]string', 'string', 'string'), sig('[]string', 'string', 'string', 'int')]],
  ['join', [sig('string', '[]string', 'string'), sig('string', '[]interface {}', 'string'), sig('string', '[]interface {}'),
    sig('string', '[]string', 'string'), sig('string', '[]string')]],
  ['indexOf', [sig('int', 'string', 'string')]],
  ['lastIndexOf', [sig('int', 'string', 'string')]],
  ['hasPrefix', [sig('bool', 'string', 'string')]],
  ['hasSuffix', [sig('bool', 'string', 'string')]],
]);
/** Builtins with expr's own Validate: one argument of these kinds. */
const CONVERSIONS: ReadonlyMap<string, { readonly ret: T; readonly accepts: ReadonlySet<T> }> = new Map([
  ['len', { ret: 'int' as T, accepts: new Set<T>(['string', '[]interface {}', '[]string', 'interface {}', '*interface {}']) }],
  ['int', { ret: 'int' as T, accepts: new Set<T>(['int', 'float64', 'string', 'interface {}', '*interface {}']) }],
  ['float', { ret: 'float64' as T, accepts: new Set<T>(['int', 'float64', 'string', 'interface {}', '*interface {}']) }],
]);
/** Words a variable cannot be named: the literals and keyword operators of expr's lexer. */
const KEYWORDS = new Set(['true', 'false', 'nil', 'and', 'or', 'not', 'in', 'matches', 'contains', 'startsWith', 'endsWith',
  'let', 'if', 'else']);

/**
 * CoreDNS's template refuses a `var` NAME that is already in its env (DefaultEnv, `group`, an
 * earlier variable), an expr builtin, or not an identifier to expr's parser.
 */
export function reservedName(name: string, scope: ExprScope): boolean {
  return FUNCS.has(name) || (scope.group && name === 'group') || scope.vars.some((v) => v.name === name) ||
    BUILTINS.has(name) || KEYWORDS.has(name);
}
const NEGATABLE = new Set(['in', 'matches', 'contains', 'startsWith', 'endsWith']);

class Parser {
  private readonly toks: Token[];
  private i = 0;
  private readonly fail: (msg: string, pos: number) => never;
  private readonly unsupported: (what: string, pos: number) => never;

  private readonly scope: ExprScope;
  /** Predicate nesting: `#` is the element inside one. */
  private depth = 0;

  constructor(toks: Token[], scope: ExprScope, fail: (msg: string, pos: number) => never, unsupported: (what: string, pos: number) => never) {
    this.toks = toks;
    this.scope = scope;
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
    return this.primary();
  }

  /** expr's parseArguments: `(a, b,)`. */
  private callArgs(): Node[] {
    this.expect('Bracket', '(');
    const args: Node[] = [];
    while (!this.at('Bracket', ')')) {
      if (args.length > 0) this.expect('Operator', ',');
      if (this.at('Bracket', ')')) break;
      args.push(this.expr(0));
    }
    this.i++;
    return args;
  }

  /** expr's parseCall for a predicate builtin: an array expression, then a closure (optional for count). */
  private predicateCall(t: Token): Node {
    this.expect('Bracket', '(');
    const optionalPredicate = t.value === 'count';
    const args: Node[] = [];
    for (let i = 0; i < 2; i++) {
      if (this.at('Bracket', ')')) {
        if (i === 1 && optionalPredicate) break;
        this.fail('expected at least 2 arguments', this.cur.pos);
      }
      if (i > 0) this.expect('Operator', ',');
      if (i === 0) {
        args.push(this.expr(0));
        continue;
      }
      const braces = this.at('Bracket', '{');
      if (braces) this.i++;
      this.depth++;
      const body = this.expr(0);
      this.depth--;
      if (this.at('Operator', ';')) {
        if (!braces) this.fail('wrap predicate with brackets { and }', this.cur.pos);
        this.unsupported('sequences', this.cur.pos);
      }
      if (braces) this.expect('Bracket', '}');
      args.push(body);
    }
    if (this.at('Operator', ',')) this.i++;
    this.expect('Bracket', ')');
    return { k: 'pred', fn: t.value, args, pos: t.pos };
  }

  /** expr's parsePostfixExpression: `x[i]` (slices `x[a:b]` and members `x.f` are outside the subset). */
  private postfix(n: Node): Node {
    for (;;) {
      const t = this.cur;
      if (t.kind === 'Operator' && (t.value === '.' || t.value === '?.')) this.unsupported('member access', t.pos);
      if (!(t.kind === 'Bracket' && t.value === '[')) return n;
      this.i++;
      if (this.at('Operator', ':')) this.unsupported('slices', t.pos);
      const i = this.expr(0);
      if (this.at('Operator', ':')) this.unsupported('slices', t.pos);
      this.expect('Bracket', ']');
      n = { k: 'idx', x: n, i, pos: t.pos };
    }
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
        return this.postfix({ k: 'lit', v: t.value, t: 'string', pos: t.pos });
      case 'Identifier': {
        this.i++;
        if (t.value === 'true' || t.value === 'false') return { k: 'lit', v: t.value === 'true', t: 'bool', pos: t.pos };
        if (t.value === 'nil') return { k: 'lit', v: null, t: 'nil', pos: t.pos };
        if (this.cur.kind === 'Bracket' && this.cur.value === '(') {
          // expr's parseCall: predicates, then builtins (`type` is disabled: the env's), then the env's functions.
          if (PREDICATES.has(t.value)) {
            if (!SUPPORTED_PREDICATES.has(t.value)) this.unsupported(`the builtin ${t.value}()`, t.pos);
            return this.postfix(this.predicateCall(t));
          }
          const args = this.callArgs();
          if (t.value !== 'type' && BUILTINS.has(t.value)) {
            if (!SIG_BUILTINS.has(t.value) && !CONVERSIONS.has(t.value)) this.unsupported(`the builtin ${t.value}()`, t.pos);
            return this.postfix({ k: 'builtin', fn: t.value, args, pos: t.pos });
          }
          if (this.scope.group && t.value === 'group') return this.postfix({ k: 'group', args, pos: t.pos });
          return this.postfix({ k: 'call', fn: t.value, args, pos: t.pos });
        }
        const slot = this.scope.vars.findIndex((v) => v.name === t.value);
        if (slot >= 0) return this.postfix({ k: 'var', slot, t: this.scope.vars[slot]!.type, pos: t.pos });
        if (FUNCS.has(t.value) || (this.scope.group && t.value === 'group')) this.unsupported(`${t.value} without a call`, t.pos);
        if (t.value === 'let' || t.value === 'if') this.unsupported(`"${t.value}"`, t.pos);
        this.fail(`unknown name ${t.value}`, t.pos);
        break;
      }
      case 'Bracket':
        if (t.value === '(') {
          this.i++;
          const n = this.expr(0);
          this.expect('Bracket', ')');
          return this.postfix(n);
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
          return this.postfix({ k: 'arr', items, pos: t.pos });
        }
        if (t.value === '{') this.unsupported('maps', t.pos);
        break;
      case 'Operator':
        if (this.depth > 0 && t.value === '#') {
          this.i++;
          // Only map, reduce and the like name their pointers (#index, #acc): none is in the subset.
          if (this.cur.kind === 'Identifier') this.fail(`unknown pointer #${this.cur.value}`, t.pos);
          return this.postfix({ k: 'ptr', pos: t.pos });
        }
        if (this.depth > 0 && t.value === '.') this.unsupported('member access of the element', t.pos);
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
function isAny(t: T): boolean { return t === 'interface {}' || t === '*interface {}'; }

type Fail = (msg: string, pos: number) => never;

/** reflect.Kind, as far as expr's checker compares kinds. */
function kindOf(t: T): string { return t === '[]interface {}' || t === '[]string' ? 'slice' : t; }

/** The element type of an array-typed node: a literal's common element type, a []string's string, else unknown. */
function elemOf(n: Node, t: T): T {
  if (t === '[]string') return 'string';
  if (n.k === 'arr' && n.elem !== undefined) return n.elem;
  // An element of a literal array of arrays: that array's own element type.
  if (n.k === 'idx' && n.elemNode !== undefined) return elemOf(n.elemNode, t);
  return 'interface {}';
}

/** expr's checkArguments for one Go signature: the error and its position, or undefined when the arguments fit. */
function argsError(name: string, params: readonly T[], args: readonly Node[], pos: number, typeOf: (i: number) => T): [string, number] | undefined {
  if (args.length !== params.length) {
    for (let i = 0; i < args.length; i++) typeOf(i);
    return [`${args.length > params.length ? 'too many' : 'not enough'} arguments to call ${name}`, pos];
  }
  for (let i = 0; i < args.length; i++) {
    const at = typeOf(i);
    const want = params[i]!;
    if (at === want || want === 'interface {}' || at === 'interface {}' || (want === 'float64' && at === 'int')) continue;
    // expr prints a space after the function name except for nil.
    if (at === 'nil') return [`cannot use nil as argument (type ${want}) to call ${name}`, args[i]!.pos];
    return [`cannot use ${at} as argument (type ${want}) to call ${name} `, args[i]!.pos];
  }
  return undefined;
}

function check(n: Node, fail: Fail, elem?: T): T {
  switch (n.k) {
    case 'lit':
      return n.t;
    case 'var':
      return n.t;
    case 'ptr':
      return elem ?? 'interface {}';
    case 'idx': {
      // expr's memberNode for an integer property.
      const bt = check(n.x, fail, elem);
      const it = check(n.i, fail, elem);
      if (bt === 'interface {}') return 'interface {}';
      const shown = (t: T): string => t === 'nil' ? 'unknown' : t;
      if (bt === '[]interface {}' || bt === '[]string') {
        if (it !== 'int' && it !== 'interface {}' && it !== '*interface {}') {
          fail(`array elements can only be selected using an integer (got ${shown(it)})`, n.i.pos);
        }
        if (n.x.k === 'arr' && n.x.last !== undefined) n.elemNode = n.x.last;
        return elemOf(n.x, bt);
      }
      return fail(`type ${bt === '*interface {}' ? 'interface {}' : bt}[${shown(it)}] is undefined`, n.pos);
    }
    case 'group': {
      const err = argsError('group', ['interface {}'], n.args, n.pos, (i) => check(n.args[i]!, fail, elem));
      if (err !== undefined) fail(err[0], err[1]);
      n.argType = check(n.args[0]!, fail, elem);
      return 'string';
    }
    case 'builtin': {
      const conv = CONVERSIONS.get(n.fn);
      if (conv !== undefined) {
        const types = n.args.map((a) => check(a, fail, elem));
        if (types.length !== 1) fail(`invalid number of arguments (expected 1, got ${types.length})`, n.pos);
        // A nil argument has no reflect.Type: Go prints it as %!s(<nil>).
        if (!conv.accepts.has(types[0]!)) fail(`invalid argument for ${n.fn} (type ${types[0] === 'nil' ? '%!s(<nil>)' : types[0]})`, n.pos);
        return conv.ret;
      }
      const sigs = SIG_BUILTINS.get(n.fn)!;
      const cache: T[] = [];
      const typeOf = (i: number): T => cache[i] ??= check(n.args[i]!, fail, elem);
      let last: [string, number] | undefined;
      for (let k = 0; k < sigs.length; k++) {
        last = argsError(n.fn, sigs[k]!.params, n.args, n.pos, typeOf);
        if (last === undefined) {
          n.sig = k;
          if (n.args.length > 0) n.argT = typeOf(0);
          return sigs[k]!.ret;
        }
      }
      return fail(last![0], last![1]);
    }
    case 'pred': {
      const coll = check(n.args[0]!, fail, elem);
      if (coll !== '[]interface {}' && coll !== '[]string' && !isAny(coll)) {
        fail(`builtin ${n.fn} takes only array (got ${coll})`, n.args[0]!.pos);
      }
      if (n.args.length === 1) return 'int';
      const out = check(n.args[1]!, fail, elemOf(n.args[0]!, coll));
      if (out !== 'bool' && !isAny(out)) fail(`predicate should return boolean (got ${out})`, n.args[1]!.pos);
      return n.fn === 'count' ? 'int' : 'bool';
    }
    case 'arr': {
      let constant = true;
      // expr's arrayNode: the elements' type when all are of one kind (printed []interface {} still).
      let same = true;
      let prev: T | undefined;
      for (const it of n.items) {
        const t = check(it, fail, elem);
        if (prev !== undefined && kindOf(t) !== kindOf(prev)) same = false;
        prev = t;
        if (it.k !== 'lit') constant = false;
      }
      if (same && prev !== undefined && prev !== 'nil') {
        n.elem = prev;
        n.last = n.items[n.items.length - 1];
      }
      if (constant) n.constant = n.items.map((it) => (it as { v: ExprValue }).v);
      return '[]interface {}';
    }
    case 'call': {
      const def = FUNCS.get(n.fn);
      if (def === undefined) fail(`unknown name ${n.fn}`, n.pos);
      const err = argsError(n.fn, def.params, n.args, n.pos, (i) => check(n.args[i]!, fail, elem));
      if (err !== undefined) fail(err[0], err[1]);
      n.f = FN_NUMBER.get(n.fn)!;
      if (n.f === F_INCIDR) {
        const c = n.args[1]!;
        if (c.k === 'lit' && typeof c.v === 'string') n.cidr = parseCidr(c.v);
      }
      return def.ret;
    }
    case 'un': {
      const t = check(n.x, fail, elem);
      if (n.op === '!' || n.op === 'not') {
        if (t !== 'bool' && !isAny(t)) fail(`invalid operation: ${n.op} (mismatched type ${t})`, n.pos);
        return 'bool';
      }
      if (!isNum(t) && !isAny(t)) fail(`invalid operation: ${n.op} (mismatched type ${t})`, n.pos);
      return t;
    }
    case 'cond': {
      const c = check(n.c, fail, elem);
      if (c !== 'bool' && !isAny(c)) fail(`non-bool expression (type ${c}) used as condition`, n.c.pos);
      const a = check(n.a, fail, elem);
      const b = check(n.b, fail, elem);
      return a === b ? a : 'interface {}';
    }
    case 'bin': {
      const l = check(n.l, fail, elem);
      const r = check(n.r, fail, elem);
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
        case 'in': {
          if (r === '[]interface {}' || r === '[]string') {
            const re = elemOf(n.r, r);
            const comparable = isAny(l) || isAny(re) || l === 'nil' || re === 'nil' || (isNum(l) && isNum(re)) ||
              (kindOf(l) === 'slice' && kindOf(re) === 'slice') || l === re;
            if (!comparable) fail(`cannot use ${l} as type ${re} in array`, n.pos);
            return 'bool';
          }
          if (isAny(r) || (isAny(l) && r === 'string')) return 'bool';
          return mismatch();
        }
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

/** Go's strings.Split/SplitN (n < 0: all; 0: none; an empty separator splits into characters). */
function goSplit(s: string, sep: string, n: number): string[] {
  if (n === 0) return [];
  let parts: string[];
  if (sep === '') parts = Array.from(s);
  else parts = s.split(sep);
  if (n > 0 && parts.length > n) {
    if (sep === '') parts = [...parts.slice(0, n - 1), parts.slice(n - 1).join('')];
    else parts = [...parts.slice(0, n - 1), parts.slice(n - 1).join(sep)];
  }
  return parts;
}

/** Go's strings.Trim: strip the characters of `cutset` from both ends. */
function goTrim(s: string, cutset: string): string {
  const cut = new Set(Array.from(cutset));
  const r = Array.from(s);
  let i = 0, j = r.length;
  while (i < j && cut.has(r[i]!)) i++;
  while (j > i && cut.has(r[j - 1]!)) j--;
  return r.slice(i, j).join('');
}

/** Go's unicode.IsSpace set, as strings.TrimSpace uses it. */
const GO_SPACE = '\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000';

/**
 * Go's fmt `%v` of an expression value (expr's string()): `float` when the value is statically a
 * float64 (a whole float64 prints as `2`, a large one as `1e+06`); in arrays, whole numbers are ints.
 */
function goFormat(v: ExprValue, float: boolean): string {
  if (v === null) return '<nil>';
  if (Array.isArray(v)) return '[' + (v as readonly ExprValue[]).map((x) => goFormat(x, false)).join(' ') + ']';
  if (typeof v === 'number' && (float || !Number.isInteger(v))) return formatFloatG(v, -1);
  return String(v);
}

/** Go's strconv.Atoi for expr's int(): decimal with an optional sign, within 64 bits. */
function goAtoi(s: string): number {
  if (!/^[+-]?[0-9]+$/.test(s)) throw new RunError(`invalid operation: int(${s})`);
  const n = BigInt(s);
  if (n > 9223372036854775807n || n < -9223372036854775808n) throw new RunError(`invalid operation: int(${s})`);
  return Number(n);
}

function builtin(n: Extract<Node, { k: 'builtin' }>, req: Request, env: ExprEnv | undefined, elem: ExprValue): ExprValue {
  const a = n.args;
  const arg = (i: number): ExprValue => evaluate(a[i]!, req, env, elem);
  switch (n.fn) {
    case 'len': {
      const v = arg(0);
      if (typeof v === 'string') return Array.from(v).length;
      if (Array.isArray(v)) return v.length;
      throw new RunError('invalid argument for len');
    }
    case 'int': {
      const v = arg(0);
      if (typeof v === 'number') return Math.trunc(v);
      if (typeof v === 'string') return goAtoi(v);
      throw new RunError('invalid argument for int');
    }
    case 'float': {
      const v = arg(0);
      if (typeof v === 'number') return v;
      if (typeof v === 'string') {
        const t = v.replaceAll('_', '');
        const f = /^[+-]?(inf(inity)?|nan)$/i.test(t) ? NaN : Number(t);
        if (t.trim() !== t || t === '' || Number.isNaN(f)) throw new RunError(`invalid operation: float(${v})`);
        return f;
      }
      throw new RunError('invalid argument for float');
    }
    case 'string': return goFormat(arg(0), n.argT === 'float64');
    case 'upper': return goCase(str(arg(0)), true);
    case 'lower': return goCase(str(arg(0)), false);
    case 'trim': return a.length === 1 ? goTrim(str(arg(0)), GO_SPACE) : goTrim(str(arg(0)), str(arg(1)));
    case 'trimPrefix': {
      const s = str(arg(0)), p = a.length === 2 ? str(arg(1)) : ' ';
      return s.startsWith(p) ? s.slice(p.length) : s;
    }
    case 'trimSuffix': {
      const s = str(arg(0)), p = a.length === 2 ? str(arg(1)) : ' ';
      return p !== '' && s.endsWith(p) ? s.slice(0, s.length - p.length) : s;
    }
    case 'replace': {
      const s = str(arg(0)), o = str(arg(1)), w = str(arg(2));
      let count = a.length === 4 ? num(arg(3)) : -1;
      if (count < 0) return o === '' ? goSplit(s, '', -1).reduce((acc, c) => acc + c + w, w) : s.split(o).join(w);
      let out = '', rest = s;
      while (count-- > 0) {
        if (o === '') {
          const c = Array.from(rest)[0];
          out += c === undefined ? w : w + c;
          if (c === undefined) { rest = ''; break; }
          rest = rest.slice(c.length);
          continue;
        }
        const i = rest.indexOf(o);
        if (i < 0) break;
        out += rest.slice(0, i) + w;
        rest = rest.slice(i + o.length);
      }
      return out + rest;
    }
    case 'split': return goSplit(str(arg(0)), str(arg(1)), a.length === 3 ? num(arg(2)) : -1);
    case 'join': {
      const v = arg(0);
      if (!Array.isArray(v)) throw new RunError('invalid argument for join');
      return (v as readonly ExprValue[]).map(str).join(a.length === 2 ? str(arg(1)) : '');
    }
    case 'indexOf': return utf8Index(str(arg(0)), str(arg(1)), false);
    case 'lastIndexOf': return utf8Index(str(arg(0)), str(arg(1)), true);
    case 'hasPrefix': return str(arg(0)).startsWith(str(arg(1)));
    default: return str(arg(0)).endsWith(str(arg(1)));
  }
}

/** Go's strings.ToUpper/ToLower: unicode's one-to-one mapping of each character (no 'ß' to 'SS'). */
function goCase(s: string, upper: boolean): string {
  if (/^[\x00-\x7f]*$/.test(s)) return upper ? s.toUpperCase() : s.toLowerCase();
  let out = '';
  for (const c of s) {
    if (!upper && c === '\u0130') { out += 'i'; continue; }
    const m = upper ? c.toUpperCase() : c.toLowerCase();
    out += m.length === c.length ? m : c;
  }
  return out;
}

/** Go's strings.Index/LastIndex: a byte offset. */
function utf8Index(s: string, sub: string, last: boolean): number {
  const i = last ? s.lastIndexOf(sub) : s.indexOf(sub);
  return i < 0 ? -1 : Buffer.byteLength(s.slice(0, i));
}

function predicate(n: Extract<Node, { k: 'pred' }>, req: Request, env: ExprEnv | undefined, elem: ExprValue): ExprValue {
  const coll = evaluate(n.args[0]!, req, env, elem);
  if (!Array.isArray(coll)) throw new RunError(`cannot use ${coll === null ? 'nil' : typeof coll} as array`);
  const items = coll as readonly ExprValue[];
  if (n.args.length === 1) {
    // count(array): the true elements.
    let c = 0;
    for (const it of items) {
      if (typeof it !== 'boolean') throw new RunError('not a bool');
      if (it) c++;
    }
    return c;
  }
  const body = n.args[1]!;
  let hits = 0;
  for (const it of items) {
    const v = evaluate(body, req, env, it);
    if (typeof v !== 'boolean') throw new RunError('not a bool');
    if (v) {
      hits++;
      if (n.fn === 'any') return true;
      if (n.fn === 'none') return false;
      if (n.fn === 'one' && hits > 1) return false;
    } else if (n.fn === 'all') {
      return false;
    }
  }
  switch (n.fn) {
    case 'any': return false;
    case 'all': case 'none': return true;
    case 'one': return hits === 1;
    default: return hits;
  }
}

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

function call(n: Extract<Node, { k: 'call' }>, req: Request, env: ExprEnv | undefined, elem: ExprValue): ExprValue {
  switch (n.f) {
    case F_INCIDR: {
      const ip = parseIP(str(evaluate(n.args[0]!, req, env, elem)));
      if (ip === undefined) throw new RunError('first argument is not an IP address');
      const cidr = n.cidr ?? parseCidr(str(evaluate(n.args[1]!, req, env, elem)));
      if (cidr === undefined) throw new RunError('invalid CIDR address');
      return cidrContains(cidr, ip);
    }
    case F_METADATA: return req.metadata(str(evaluate(n.args[0]!, req, env, elem))) ?? '';
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

function evaluate(n: Node, req: Request, env: ExprEnv | undefined, elem: ExprValue): ExprValue {
  switch (n.k) {
    case 'lit': return n.v;
    case 'var': return env!.vars[n.slot]!;
    case 'ptr': return elem;
    case 'idx': {
      const a = evaluate(n.x, req, env, elem);
      const i = evaluate(n.i, req, env, elem);
      if (!Array.isArray(a) || typeof i !== 'number') throw new RunError('cannot fetch');
      const items = a as readonly ExprValue[];
      const at = i < 0 ? items.length + i : i;
      if (!Number.isInteger(at) || at < 0 || at >= items.length) throw new RunError(`index out of range: ${at} (array length is ${items.length})`);
      return items[at]!;
    }
    case 'group': {
      // CoreDNS's group(): an int is an index, a string a name; anything else (a float) finds nothing.
      const v = evaluate(n.args[0]!, req, env, elem);
      if (typeof v === 'string') return env!.group(v);
      if (typeof v === 'number' && n.argType !== 'float64' && Number.isInteger(v)) return env!.group(String(v));
      return '';
    }
    case 'builtin': return builtin(n, req, env, elem);
    case 'pred': return predicate(n, req, env, elem);
    case 'arr': return n.constant ?? n.items.map((it) => evaluate(it, req, env, elem));
    case 'call': return call(n, req, env, elem);
    case 'cond': {
      const c = evaluate(n.c, req, env, elem);
      if (typeof c !== 'boolean') throw new RunError('not a bool');
      return evaluate(c ? n.a : n.b, req, env, elem);
    }
    case 'un': {
      const v = evaluate(n.x, req, env, elem);
      if (n.op === '!' || n.op === 'not') {
        if (typeof v !== 'boolean') throw new RunError('not a bool');
        return !v;
      }
      return n.op === '-' ? -num(v) : num(v);
    }
    case 'bin': {
      const op = n.op;
      if (op === 'and' || op === '&&' || op === 'or' || op === '||') {
        const l = evaluate(n.l, req, env, elem);
        if (typeof l !== 'boolean') throw new RunError('not a bool');
        const and = op === 'and' || op === '&&';
        if (and ? !l : l) return l;
        const r = evaluate(n.r, req, env, elem);
        if (typeof r !== 'boolean') throw new RunError('not a bool');
        return r;
      }
      const l = evaluate(n.l, req, env, elem);
      const r = evaluate(n.r, req, env, elem);
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

/** Expression.value's result for a run-time error. */
export const RUN_ERROR: unique symbol = Symbol('expression run-time error');

const NO_SCOPE: ExprScope = { vars: [], group: false };

/** A compiled expression. */
export class Expression {
  /** The source as compiled. */
  readonly source: string;
  /** The static type expr's checker gives the expression. */
  readonly type: ExprType;
  private readonly root: Node;

  private constructor(source: string, root: Node, type: ExprType) {
    this.source = source;
    this.root = root;
    this.type = type;
  }

  /**
   * Compile `source` as CoreDNS does (expr.Compile with DefaultEnv, `type` the env's; with `scope`,
   * also template's variables and `group`): throws ExpressionError with expr's message and snippet,
   * or UnsupportedExpression for expr-lang syntax outside the subset.
   */
  static compile(source: string, scope: ExprScope = NO_SCOPE): Expression {
    const runes = Array.from(source);
    const fail = (msg: string, pos: number): never => { throw new ExpressionError(formatError(runes, msg, pos)); };
    const unsupported = (what: string, pos: number): never => {
      throw new UnsupportedExpression(`${what} is expr-lang syntax nodens does not implement (column ${pos + 1} of ${JSON.stringify(source)})`);
    };
    const root = new Parser(lex(runes, fail), scope, fail, unsupported).parse();
    const type = check(root, fail);
    return new Expression(source, root, type);
  }

  /** The value for `req` (and `env`, for a scoped expression); throws on a run-time error (a bad address for incidr, a bad dynamic regexp). */
  run(req: Request, env?: ExprEnv): ExprValue {
    try {
      return evaluate(this.root, req, env, null);
    } catch (e) {
      if (e instanceof RunError) throw new Error(e.message);
      throw e;
    }
  }

  /** The value for `req` and `env`, or RUN_ERROR when evaluating fails (what expr.Run returns as an error). */
  value(req: Request, env?: ExprEnv): ExprValue | typeof RUN_ERROR {
    try {
      return evaluate(this.root, req, env, null);
    } catch (e) {
      if (e instanceof RunError) return RUN_ERROR;
      throw e;
    }
  }

  /** True only when the expression evaluates to boolean true; errors and other values are false (view's Filter). */
  test(req: Request, env?: ExprEnv): boolean {
    try {
      return evaluate(this.root, req, env, null) === true;
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
