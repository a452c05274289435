// Go's text/template for Corefile-supplied templates (the template plugin's
// answer/additional/authority records; reusable by any plugin that takes Go
// templates). A parser that follows Go's text/template/parse (same lexer
// rules, same tree, same error texts: `template: NAME:LINE: ...`) and an
// executor that follows text/template's exec.go on a small model of Go
// values (below). Node.toString() reproduces Go's Node.String(), which
// CoreDNS uses as a metric label.
//
// Supported: text, comments, trim markers, actions with pipelines,
// parenthesised pipelines, fields, chains, variables (`$x :=`, `$x =`),
// if/else if/else/with/else with/range (slices, maps, integers; else,
// break, continue), define/template/block (one template set per text, as
// template.New(name).Parse), and all of Go's builtins: and, or, not, len,
// index, slice, eq, ne, lt, le, gt, ge, print, printf, println, html, js,
// urlquery, call (no value of this model is a function: it always fails as
// Go's does on a non-function), plus the functions a caller registers. Not
// supported, and a parse error so that it fails at setup: complex-number
// constants. A {{template}} recursion deeper than the JavaScript stack fails
// with Go's depth-limit error before Go's limit (100000).
//
// Go values in JavaScript: `undefined` is Go's invalid reflect.Value (a
// missing map key, printed `<no value>`), `null` a nil interface, a JS string
// a string, a JS number an `int` (a constant beyond 2^53: a GoNum 'int' with
// its exact value in `big`), a bigint a `uint64`, `true`/`false` bools,
// GoNum any other numeric type (uint16, float64, ...), GoSlice, GoMap and
// GoStruct the composite types.

/** A number of a Go type other than int (int is a plain JS number, uint64 a bigint). */
export class GoNum {
  readonly type: string;
  readonly v: number;
  /** The exact value of an integer beyond 2^53 (an int constant such as 9223372036854775807). */
  readonly big: bigint | undefined;
  constructor(type: string, v: number, big?: bigint) {
    this.type = type;
    this.v = v;
    this.big = big;
  }
}

/** A Go slice ([]T). */
export class GoSlice {
  readonly type: string;
  readonly items: readonly unknown[];
  constructor(type: string, items: readonly unknown[]) {
    this.type = type;
    this.items = items;
  }
}

/** A Go map with string keys (map[string]T); `nil` maps have `m` undefined. */
export class GoMap {
  readonly type: string;
  readonly m: ReadonlyMap<string, unknown> | undefined;
  /** The zero value of the element type (what `index` returns for a missing key). */
  readonly zero: unknown;
  constructor(type: string, m: ReadonlyMap<string, unknown> | undefined, zero: unknown) {
    this.type = type;
    this.m = m;
    this.zero = zero;
  }
}

/** A function callable from a template (a registered function or a method). */
export interface GoFunc {
  /** Parameter types: 'string', 'int', 'bool', 'any' (Go's interface{}). */
  readonly params: readonly string[];
  /** Type of the variadic parameter's elements, when the function is variadic. */
  readonly variadic?: string;
  /** The Go signature's error result: the function throws GoCallError. */
  readonly fn: (...args: unknown[]) => unknown;
}

/** An error a function returns (Go's `(T, error)`): the executor wraps it as `error calling NAME: ...`. */
export class GoCallError extends Error {}

/** A struct or a pointer to one. */
export abstract class GoStruct {
  /** Go's type name as reflect prints it, e.g. `*template.templateData`. */
  abstract readonly goType: string;
  /** A field's value, or NO_FIELD. */
  abstract field(name: string): unknown;
  /** A method by name (pointer receiver methods included). */
  method(name: string): GoFunc | undefined { void name; return undefined; }
  /** fmt's String() when the type is a Stringer; undefined otherwise. */
  goString(): string | undefined { return undefined; }
  /** String() through the value's address (a pointer-receiver Stringer reached by index or range). */
  addrString(): string | undefined { return undefined; }
  /** fmt's %v of the struct without a String method: its fields in order. */
  fieldValues(): unknown[] { return []; }
  /** The names of fieldValues' fields, which %+v prints. */
  fieldNames(): readonly string[] { return []; }
}

export const NO_FIELD: unique symbol = Symbol('no field');
/** What GoStruct.field returns for a field that exists but is not exported. */
export const UNEXPORTED: unique symbol = Symbol('unexported field');

/** A template parse error (Go's text texts: `template: NAME:LINE: ...`). */
export class GoTemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GoTemplateError';
  }
}

/** An execution error (Go's `template: NAME:LINE:COL: executing "NAME" at <NODE>: ...`). */
export class GoExecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GoExecError';
  }
}

// ---------------------------------------------------------------- lexer

const I = {
  error: 0, bool: 1, char: 2, charConstant: 3, comment: 4, complex: 5, assign: 6, declare: 7, eof: 8,
  field: 9, identifier: 10, leftDelim: 11, leftParen: 12, number: 13, pipe: 14, rawString: 15,
  rightDelim: 16, rightParen: 17, space: 18, string: 19, text: 20, variable: 21,
  keyword: 22, block: 23, break: 24, continue: 25, dot: 26, define: 27, else: 28, end: 29, if: 30,
  nil: 31, range: 32, template: 33, with: 34,
} as const;
type ItemType = (typeof I)[keyof typeof I];

const KEYWORDS: ReadonlyMap<string, ItemType> = new Map<string, ItemType>([
  ['.', I.dot], ['block', I.block], ['break', I.break], ['continue', I.continue], ['define', I.define],
  ['else', I.else], ['end', I.end], ['if', I.if], ['range', I.range], ['nil', I.nil],
  ['template', I.template], ['with', I.with],
]);

interface Item { typ: ItemType; pos: number; val: string; line: number }

function itemString(i: Item): string {
  if (i.typ === I.eof) return 'EOF';
  if (i.typ === I.error) return i.val;
  if (i.typ > I.keyword) return `<${i.val}>`;
  if ([...i.val].length > 10) return goQuote([...i.val].slice(0, 10).join('')) + '...';
  return goQuote(i.val);
}

const isSpace = (c: string | undefined): boolean => c === ' ' || c === '\t' || c === '\r' || c === '\n';
const isAlphaNumeric = (c: string | undefined): boolean =>
  c !== undefined && (c === '_' || /^[\p{L}\p{Nd}]$/u.test(c));

class Lexer {
  readonly input: string;
  pos = 0;
  start = 0;
  line = 1;
  startLine = 1;
  parenDepth = 0;
  items: Item[] = [];

  constructor(input: string) {
    this.input = input;
  }

  run(): Item[] {
    // One round per action: text up to it, then the action (a loop, not recursion, whatever the template's size).
    while (this.lexText()) { /* next action */ }
    return this.items;
  }

  emit(t: ItemType): void {
    this.items.push({ typ: t, pos: this.start, val: this.input.slice(this.start, this.pos), line: this.startLine });
    this.start = this.pos;
    this.startLine = this.line;
  }

  ignore(): void {
    this.line += count(this.input.slice(this.start, this.pos), '\n');
    this.start = this.pos;
    this.startLine = this.line;
  }

  next(): string | undefined {
    if (this.pos >= this.input.length) { this.pos = this.input.length + 1; return undefined; }
    const c = String.fromCodePoint(this.input.codePointAt(this.pos)!);
    this.pos += c.length;
    if (c === '\n') this.line++;
    return c;
  }

  backup(c: string | undefined): void {
    if (c === undefined) { this.pos = this.input.length; return; }
    this.pos -= c.length;
    if (c === '\n') this.line--;
  }

  peek(): string | undefined {
    if (this.pos >= this.input.length) return undefined;
    return String.fromCodePoint(this.input.codePointAt(this.pos)!);
  }

  error(msg: string): false {
    this.items.push({ typ: I.error, pos: this.start, val: msg, line: this.startLine });
    return false;
  }

  private lexText(): boolean {
    const x = this.input.indexOf('{{', this.pos);
    if (x >= 0) {
      let end = x;
      if (hasLeftTrimMarker(this.input, x + 2)) {
        while (end > this.pos && isSpace(this.input[end - 1])) end--;
      }
      this.pos = end;
      if (this.pos > this.start) {
        this.line += count(this.input.slice(this.start, this.pos), '\n');
        this.emit(I.text);
      }
      this.pos = x;
      this.ignore();
      return this.lexLeftDelim();
    }
    this.pos = this.input.length;
    if (this.pos > this.start) {
      this.line += count(this.input.slice(this.start, this.pos), '\n');
      this.emit(I.text);
    }
    this.emit(I.eof);
    return false;
  }

  private lexLeftDelim(): boolean {
    this.pos += 2;
    const trim = hasLeftTrimMarker(this.input, this.pos);
    const after = trim ? 2 : 0;
    if (this.input.startsWith('/*', this.pos + after)) {
      this.pos += after;
      this.ignore();
      return this.lexComment();
    }
    this.emit(I.leftDelim);
    this.pos += after;
    this.ignore();
    this.parenDepth = 0;
    return this.lexInsideAction();
  }

  private lexComment(): boolean {
    this.pos += 2;
    const x = this.input.indexOf('*/', this.pos);
    if (x < 0) return this.error('unclosed comment');
    this.pos = x + 2;
    const [delim, trim] = this.atRightDelim();
    if (!delim) return this.error('comment ends before closing delimiter');
    if (trim) this.pos += 2;
    this.pos += 2;
    if (trim) this.skipSpaceAfterTrim();
    this.ignore();
    return true;
  }

  private skipSpaceAfterTrim(): void {
    while (isSpace(this.input[this.pos])) this.pos++;
  }

  private atRightDelim(): [boolean, boolean] {
    if (hasRightTrimMarker(this.input, this.pos) && this.input.startsWith('}}', this.pos + 2)) return [true, true];
    if (this.input.startsWith('}}', this.pos)) return [true, false];
    return [false, false];
  }

  private lexRightDelim(trim: boolean): boolean {
    if (trim) {
      this.pos += 2;
      this.ignore();
    }
    this.pos += 2;
    this.emit(I.rightDelim);
    if (trim) {
      this.skipSpaceAfterTrim();
      this.ignore();
    }
    return true;
  }

  private lexInsideAction(): boolean {
    for (;;) {
      const [delim, trim] = this.atRightDelim();
      if (delim) {
        if (this.parenDepth === 0) return this.lexRightDelim(trim);
        return this.error('unclosed left paren');
      }
      const r = this.next();
      if (r === undefined) return this.error('unclosed action');
      if (isSpace(r)) {
        this.backup(r);
        this.lexSpace();
        continue;
      }
      switch (r) {
        case '=': this.emit(I.assign); continue;
        case ':':
          if (this.next() !== '=') return this.error('expected :=');
          this.emit(I.declare);
          continue;
        case '|': this.emit(I.pipe); continue;
        case '"': if (!this.lexQuote()) return false; continue;
        case '`': if (!this.lexRawQuote()) return false; continue;
        case '$': if (!this.lexFieldOrVariable(I.variable)) return false; continue;
        case '\'': if (!this.lexChar()) return false; continue;
        case '.':
          if (this.pos < this.input.length) {
            const c = this.input[this.pos]!;
            if (c >= '0' && c <= '9') {
              this.backup(r);
              if (!this.lexNumber()) return false;
              continue;
            }
          }
          if (!this.lexFieldOrVariable(I.field)) return false;
          continue;
        case '(':
          this.emit(I.leftParen);
          this.parenDepth++;
          continue;
        case ')':
          this.emit(I.rightParen);
          this.parenDepth--;
          if (this.parenDepth < 0) return this.error('unexpected right paren');
          continue;
      }
      if (r === '+' || r === '-' || (r >= '0' && r <= '9')) {
        this.backup(r);
        if (!this.lexNumber()) return false;
        continue;
      }
      if (isAlphaNumeric(r)) {
        this.backup(r);
        if (!this.lexIdentifier()) return false;
        continue;
      }
      const cp = r.codePointAt(0)!;
      if (cp <= 0x7f && cp >= 0x20 && cp !== 0x7f) {
        this.emit(I.char);
        continue;
      }
      return this.error(`unrecognized character in action: ${fmtU(cp)}`);
    }
  }

  private lexSpace(): void {
    let n = 0;
    while (isSpace(this.peek())) {
      this.next();
      n++;
    }
    if (hasRightTrimMarker(this.input, this.pos - 1) && this.input.startsWith('}}', this.pos - 1 + 2)) {
      this.backup(this.input[this.pos - 1]);
      if (n === 1) return;
    }
    this.emit(I.space);
  }

  private lexIdentifier(): boolean {
    for (;;) {
      const r = this.next();
      if (isAlphaNumeric(r)) continue;
      this.backup(r);
      const word = this.input.slice(this.start, this.pos);
      if (!this.atTerminator()) return this.error(`bad character ${fmtU(r!.codePointAt(0)!)}`);
      const kw = KEYWORDS.get(word);
      if (kw !== undefined && kw > I.keyword) this.emit(kw);
      else if (word[0] === '.') this.emit(I.field);
      else if (word === 'true' || word === 'false') this.emit(I.bool);
      else this.emit(I.identifier);
      return true;
    }
  }

  private lexFieldOrVariable(t: ItemType): boolean {
    if (this.atTerminator()) {
      this.emit(t === I.variable ? I.variable : I.dot);
      return true;
    }
    let r: string | undefined;
    for (;;) {
      r = this.next();
      if (!isAlphaNumeric(r)) {
        this.backup(r);
        break;
      }
    }
    if (!this.atTerminator()) return this.error(`bad character ${fmtU(r!.codePointAt(0)!)}`);
    this.emit(t);
    return true;
  }

  private atTerminator(): boolean {
    const r = this.peek();
    if (isSpace(r) || r === undefined) return true;
    if ('.,|:()'.includes(r)) return true;
    return this.input.startsWith('}}', this.pos);
  }

  private lexChar(): boolean {
    for (;;) {
      let r = this.next();
      if (r === '\\') {
        r = this.next();
        if (r !== undefined && r !== '\n') continue;
      }
      if (r === undefined || r === '\n') return this.error('unterminated character constant');
      if (r === '\'') break;
    }
    this.emit(I.charConstant);
    return true;
  }

  private lexNumber(): boolean {
    const bad = (): false => this.error(`bad number syntax: ${goQuote(this.input.slice(this.start, this.pos))}`);
    if (!this.scanNumber()) return bad();
    const sign = this.peek();
    if (sign === '+' || sign === '-') {
      // A complex constant (1+2i): a second number ending in i, with no blank.
      if (!this.scanNumber() || this.input[this.pos - 1] !== 'i') return bad();
      this.emit(I.complex);
      return true;
    }
    this.emit(I.number);
    return true;
  }

  private accept(valid: string): boolean {
    const c = this.peek();
    if (c !== undefined && valid.includes(c)) {
      this.next();
      return true;
    }
    return false;
  }

  private acceptRun(valid: string): void {
    while (this.accept(valid)) { /* consume */ }
  }

  private scanNumber(): boolean {
    this.accept('+-');
    let digits = '0123456789_';
    if (this.accept('0')) {
      if (this.accept('xX')) digits = '0123456789abcdefABCDEF_';
      else if (this.accept('oO')) digits = '01234567_';
      else if (this.accept('bB')) digits = '01_';
    }
    this.acceptRun(digits);
    if (this.accept('.')) this.acceptRun(digits);
    if (digits.length === 10 + 1 && this.accept('eE')) {
      this.accept('+-');
      this.acceptRun('0123456789_');
    }
    if (digits.length === 16 + 6 + 1 && this.accept('pP')) {
      this.accept('+-');
      this.acceptRun('0123456789_');
    }
    this.accept('i');
    if (isAlphaNumeric(this.peek())) {
      this.next();
      return false;
    }
    return true;
  }

  private lexQuote(): boolean {
    for (;;) {
      let r = this.next();
      if (r === '\\') {
        r = this.next();
        if (r !== undefined && r !== '\n') continue;
      }
      if (r === undefined || r === '\n') return this.error('unterminated quoted string');
      if (r === '"') break;
    }
    this.emit(I.string);
    return true;
  }

  private lexRawQuote(): boolean {
    for (;;) {
      const r = this.next();
      if (r === undefined) return this.error('unterminated raw quoted string');
      if (r === '`') break;
    }
    this.emit(I.rawString);
    return true;
  }
}

function hasLeftTrimMarker(s: string, at: number): boolean {
  return s[at] === '-' && isSpace(s[at + 1]);
}

function hasRightTrimMarker(s: string, at: number): boolean {
  return isSpace(s[at]) && s[at + 1] === '-';
}

function count(s: string, c: string): number {
  let n = 0;
  for (let i = s.indexOf(c); i >= 0; i = s.indexOf(c, i + 1)) n++;
  return n;
}

function fmtU(cp: number): string {
  const hex = cp.toString(16).toUpperCase().padStart(4, '0');
  const ch = String.fromCodePoint(cp);
  return cp >= 0x20 && cp !== 0x7f ? `U+${hex} '${ch}'` : `U+${hex}`;
}

// ---------------------------------------------------------------- nodes

export type Node =
  | TextNode | ActionNode | IfNode | RangeNode | WithNode | ListNode | BreakNode | ContinueNode
  | PipeNode | CommandNode | FieldNode | ChainNode | VariableNode | IdentifierNode | DotNode | NilNode
  | BoolNode | NumberNode | StringNode | TemplateNode | EndNode | ElseNode;

interface Base { pos: number }
export interface TextNode extends Base { kind: 'text'; text: string }
export interface ActionNode extends Base { kind: 'action'; pipe: PipeNode }
export interface ListNode extends Base { kind: 'list'; nodes: Node[] }
export interface IfNode extends Base { kind: 'if'; pipe: PipeNode; list: ListNode; elseList: ListNode | undefined }
export interface WithNode extends Base { kind: 'with'; pipe: PipeNode; list: ListNode; elseList: ListNode | undefined }
export interface RangeNode extends Base { kind: 'range'; pipe: PipeNode; list: ListNode; elseList: ListNode | undefined }
export interface BreakNode extends Base { kind: 'break' }
export interface ContinueNode extends Base { kind: 'continue' }
export interface PipeNode extends Base { kind: 'pipe'; isAssign: boolean; decl: VariableNode[]; cmds: CommandNode[] }
export interface CommandNode extends Base { kind: 'command'; args: Node[] }
export interface FieldNode extends Base { kind: 'field'; ident: string[] }
export interface ChainNode extends Base { kind: 'chain'; node: Node; fields: string[] }
export interface VariableNode extends Base { kind: 'variable'; ident: string[] }
export interface IdentifierNode extends Base { kind: 'identifier'; name: string }
export interface DotNode extends Base { kind: 'dot' }
export interface NilNode extends Base { kind: 'nil' }
export interface BoolNode extends Base { kind: 'bool'; value: boolean }
export interface NumberNode extends Base {
  kind: 'number'; text: string; isInt: boolean; isUint: boolean; isFloat: boolean;
  int: bigint; float: number;
}
export interface StringNode extends Base { kind: 'string'; quoted: string; text: string }
/** `{{template "NAME" PIPE}}` (also what a block leaves in its parent). */
export interface TemplateNode extends Base { kind: 'template'; name: string; pipe: PipeNode | undefined }
interface EndNode extends Base { kind: 'end' }
interface ElseNode extends Base { kind: 'else' }

/** Go's Node.String(). */
export function nodeString(n: Node): string {
  switch (n.kind) {
    case 'text': return n.text;
    case 'action': return `{{${nodeString(n.pipe)}}}`;
    case 'list': return n.nodes.map(nodeString).join('');
    case 'if': case 'with': case 'range': {
      let s = `{{${n.kind} ${nodeString(n.pipe)}}}${nodeString(n.list)}`;
      if (n.elseList !== undefined) s += `{{else}}${nodeString(n.elseList)}`;
      return s + '{{end}}';
    }
    case 'break': return '{{break}}';
    case 'continue': return '{{continue}}';
    case 'pipe': {
      let s = '';
      if (n.decl.length > 0) s = n.decl.map(nodeString).join(', ') + (n.isAssign ? ' = ' : ' := ');
      return s + n.cmds.map(nodeString).join(' | ');
    }
    case 'command':
      return n.args.map((a) => (a.kind === 'pipe' ? `(${nodeString(a)})` : nodeString(a))).join(' ');
    case 'field': return n.ident.map((f) => '.' + f).join('');
    case 'chain': {
      const inner = n.node.kind === 'pipe' ? `(${nodeString(n.node)})` : nodeString(n.node);
      return inner + n.fields.map((f) => '.' + f).join('');
    }
    case 'variable': return n.ident.join('.');
    case 'identifier': return n.name;
    case 'dot': return '.';
    case 'nil': return 'nil';
    case 'bool': return n.value ? 'true' : 'false';
    case 'number': return n.text;
    case 'string': return n.quoted;
    case 'template': return `{{template ${goQuote(n.name)}${n.pipe === undefined ? '' : ' ' + nodeString(n.pipe)}}}`;
    case 'end': return '{{end}}';
    case 'else': return '{{else}}';
  }
}

/** Go's parse.IsEmptyTree: only blank text (Unicode white space, as bytes.TrimSpace) and comments. */
function isEmptyTree(n: ListNode): boolean {
  return n.nodes.every((x) => x.kind === 'text' && GO_SPACE_ONLY.test(x.text));
}

/** unicode.IsSpace's runes (JS's \s adds U+FEFF and lacks U+0085). */
const GO_SPACE_ONLY = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;

// ---------------------------------------------------------------- parser

/** The builtins this engine implements (Go's names). */
const BUILTINS = new Set([
  'and', 'or', 'not', 'len', 'index', 'slice', 'eq', 'ne', 'lt', 'le', 'gt', 'ge',
  'print', 'printf', 'println', 'html', 'urlquery', 'js', 'call',
]);

class Parser {
  readonly name: string;
  readonly text: string;
  readonly funcs: ReadonlyMap<string, GoFunc>;
  items: Item[] = [];
  idx = 0;
  vars: string[] = ['$'];
  rangeDepth = 0;
  lastLine = 1;
  actionLine = 0;
  /** Go's treeSet: every template the text defines, by name (the main one under `name`). */
  readonly trees = new Map<string, ListNode>();

  constructor(name: string, text: string, funcs: ReadonlyMap<string, GoFunc>) {
    this.name = name;
    this.text = text;
    this.funcs = funcs;
  }

  errorf(msg: string): never {
    throw new GoTemplateError(`template: ${this.name}:${this.lastLine}: ${msg}`);
  }

  nextItem(): Item {
    const it = this.items[this.idx] ?? this.items[this.items.length - 1]!;
    if (this.idx < this.items.length) this.idx++;
    this.lastLine = it.line;
    return it;
  }

  backup(n = 1): void { this.idx -= n; }

  peek(): Item { return this.items[this.idx] ?? this.items[this.items.length - 1]!; }

  nextNonSpace(): Item {
    let t: Item;
    do t = this.nextItem(); while (t.typ === I.space);
    return t;
  }

  peekNonSpace(): Item {
    const t = this.nextNonSpace();
    this.backup();
    // Keep skipped spaces consumed (as Go's peekNonSpace does).
    return t;
  }

  unexpected(t: Item, context: string): never {
    if (t.typ === I.error) {
      let extra = '';
      if (this.actionLine !== 0 && this.actionLine !== t.line) {
        extra = ` in action started at ${this.name}:${this.actionLine}`;
        if (t.val.endsWith(' action')) extra = extra.slice(' in action'.length);
      }
      this.errorf(`${itemString(t)}${extra}`);
    }
    this.errorf(`unexpected ${itemString(t)} in ${context}`);
  }

  expect(typ: ItemType, context: string): Item {
    const t = this.nextNonSpace();
    if (t.typ !== typ) this.unexpected(t, context);
    return t;
  }

  /** Go's Tree.Parse: the main template and the ones it defines, into `trees`. */
  parse(): void {
    const lx = new Lexer(this.text);
    this.items = lx.run();
    const root: ListNode = { kind: 'list', pos: this.peek().pos, nodes: [] };
    while (this.peek().typ !== I.eof) {
      if (this.peek().typ === I.leftDelim) {
        const save = this.idx;
        this.nextItem();
        if (this.nextNonSpace().typ === I.define) {
          this.definition();
          continue;
        }
        this.idx = save;
      }
      const n = this.textOrAction();
      if (n.kind === 'end' || n.kind === 'else') this.errorf(`unexpected ${nodeString(n)}`);
      root.nodes.push(n);
    }
    this.add(this.name, root);
  }

  /** Go's Tree.add: a second non-empty definition of a name is an error; an empty one yields. */
  add(name: string, root: ListNode): void {
    const old = this.trees.get(name);
    if (old === undefined || isEmptyTree(old)) {
      this.trees.set(name, root);
      return;
    }
    if (!isEmptyTree(root)) this.errorf(`template: multiple definition of template ${goQuote(name)}`);
  }

  /**
   * A template body parsed as Go parses it in a tree of its own (define,
   * block): no variables but `$`, outside any range.
   */
  subTree(): [ListNode, Node] {
    const vars = this.vars;
    const depth = this.rangeDepth;
    this.vars = ['$'];
    this.rangeDepth = 0;
    try {
      return this.itemList();
    } finally {
      this.vars = vars;
      this.rangeDepth = depth;
    }
  }

  /** `{{define "NAME"}}...{{end}}` at the top level (Go's parseDefinition). */
  definition(): void {
    const context = 'define clause';
    const tok = this.nextNonSpace();
    if (tok.typ !== I.string && tok.typ !== I.rawString) this.unexpected(tok, context);
    const name = goUnquote(tok.val);
    if (name === undefined) this.errorf('invalid syntax');
    this.expect(I.rightDelim, context);
    const [list, end] = this.subTree();
    if (end.kind !== 'end') this.errorf(`unexpected ${nodeString(end)} in ${context}`);
    this.add(name, list);
  }

  templateName(tok: Item, context: string): string {
    if (tok.typ !== I.string && tok.typ !== I.rawString) this.unexpected(tok, context);
    const name = goUnquote(tok.val);
    if (name === undefined) this.errorf('invalid syntax');
    return name;
  }

  /** `{{template "NAME" [PIPELINE]}}`. */
  templateControl(): TemplateNode {
    const tok = this.nextNonSpace();
    const name = this.templateName(tok, 'template clause');
    let pipe: PipeNode | undefined;
    if (this.nextNonSpace().typ !== I.rightDelim) {
      this.backup();
      // Variables declared here persist until the enclosing end, as in Go.
      pipe = this.pipeline('template clause', I.rightDelim);
    }
    return { kind: 'template', pos: tok.pos, name, pipe };
  }

  /** `{{block "NAME" PIPELINE}}...{{end}}`: defines NAME and invokes it. */
  blockControl(): TemplateNode {
    const context = 'block clause';
    const tok = this.nextNonSpace();
    const name = this.templateName(tok, context);
    const pipe = this.pipeline(context, I.rightDelim);
    // Go reports the missing end with the line of the block's own last token.
    const line = this.lastLine;
    const [list, end] = this.subTree();
    if (end.kind !== 'end') {
      this.lastLine = line;
      this.errorf(`unexpected ${nodeString(end)} in ${context}`);
    }
    this.add(name, list);
    return { kind: 'template', pos: tok.pos, name, pipe };
  }

  textOrAction(): Node {
    const t = this.nextNonSpace();
    switch (t.typ) {
      case I.text: return { kind: 'text', pos: t.pos, text: t.val };
      case I.leftDelim: {
        this.actionLine = t.line;
        try {
          return this.action();
        } finally {
          this.actionLine = 0;
        }
      }
      default: this.unexpected(t, 'input');
    }
  }

  action(): Node {
    const t = this.nextNonSpace();
    switch (t.typ) {
      case I.block: return this.blockControl();
      case I.template: return this.templateControl();
      case I.break: return this.breakControl(t, 'break');
      case I.continue: return this.breakControl(t, 'continue');
      case I.else: return this.elseControl();
      case I.end: return { kind: 'end', pos: this.expect(I.rightDelim, 'end').pos };
      case I.if: return this.control('if');
      case I.range: return this.control('range');
      case I.with: return this.control('with');
    }
    this.backup();
    const tok = this.peek();
    return { kind: 'action', pos: tok.pos, pipe: this.pipeline('command', I.rightDelim) };
  }

  breakControl(t: Item, word: 'break' | 'continue'): Node {
    const n = this.nextNonSpace();
    if (n.typ !== I.rightDelim) this.unexpected(n, `{{${word}}}`);
    if (this.rangeDepth === 0) this.errorf(`{{${word}}} outside {{range}}`);
    return { kind: word, pos: t.pos };
  }

  elseControl(): Node {
    const p = this.peekNonSpace();
    if (p.typ === I.if || p.typ === I.with) return { kind: 'else', pos: p.pos };
    const t = this.expect(I.rightDelim, 'else');
    return { kind: 'else', pos: t.pos };
  }

  control(context: 'if' | 'range' | 'with'): Node {
    const mark = this.vars.length;
    const pipe = this.pipeline(context, I.rightDelim);
    if (context === 'range') this.rangeDepth++;
    const [list, first] = this.itemList();
    let next = first;
    if (context === 'range') this.rangeDepth--;
    let elseList: ListNode | undefined;
    if (next.kind === 'else') {
      if (context === 'if' && this.peek().typ === I.if) {
        this.nextItem();
        elseList = { kind: 'list', pos: next.pos, nodes: [this.control('if')] };
      } else if (context === 'with' && this.peek().typ === I.with) {
        this.nextItem();
        elseList = { kind: 'list', pos: next.pos, nodes: [this.control('with')] };
      } else {
        [elseList, next] = this.itemList();
        if (next.kind !== 'end') this.errorf(`expected end; found ${nodeString(next)}`);
      }
    }
    this.vars.length = mark;
    return { kind: context, pos: pipe.pos, pipe, list, elseList };
  }

  itemList(): [ListNode, Node] {
    const list: ListNode = { kind: 'list', pos: this.peekNonSpace().pos, nodes: [] };
    while (this.peekNonSpace().typ !== I.eof) {
      const n = this.textOrAction();
      if (n.kind === 'end' || n.kind === 'else') return [list, n];
      list.nodes.push(n);
    }
    this.errorf('unexpected EOF');
  }

  pipeline(context: string, end: ItemType): PipeNode {
    const tok = this.peekNonSpace();
    const pipe: PipeNode = { kind: 'pipe', pos: tok.pos, isAssign: false, decl: [], cmds: [] };
    decls: for (;;) {
      const v = this.peekNonSpace();
      if (v.typ !== I.variable) break;
      const vIdx = this.idx;
      this.nextItem();
      const nx = this.peekNonSpace();
      if (nx.typ === I.assign || nx.typ === I.declare) {
        pipe.isAssign = nx.typ === I.assign;
        this.nextNonSpace();
        pipe.decl.push({ kind: 'variable', pos: v.pos, ident: v.val.split('.') });
        this.vars.push(v.val);
      } else if (nx.typ === I.char && nx.val === ',') {
        this.nextNonSpace();
        pipe.decl.push({ kind: 'variable', pos: v.pos, ident: v.val.split('.') });
        this.vars.push(v.val);
        if (context === 'range' && pipe.decl.length < 2) {
          const p = this.peekNonSpace().typ;
          if (p === I.variable || p === I.rightDelim || p === I.rightParen) continue decls;
          this.errorf('range can only initialize variables');
        }
        this.errorf(`too many declarations in ${context}`);
      } else {
        this.idx = vIdx;
      }
      break;
    }
    for (;;) {
      const t = this.nextNonSpace();
      if (t.typ === end) {
        if (pipe.cmds.length === 0) this.errorf(`missing value for ${context}`);
        for (let i = 1; i < pipe.cmds.length; i++) {
          const k = pipe.cmds[i]!.args[0]!.kind;
          if (k === 'bool' || k === 'dot' || k === 'nil' || k === 'number' || k === 'string') {
            this.errorf(`non executable command in pipeline stage ${i + 1}`);
          }
        }
        return pipe;
      }
      switch (t.typ) {
        case I.bool: case I.charConstant: case I.complex: case I.dot: case I.field: case I.identifier:
        case I.number: case I.nil: case I.rawString: case I.string: case I.variable: case I.leftParen:
          this.backup();
          pipe.cmds.push(this.command());
          break;
        default:
          this.unexpected(t, context);
      }
    }
  }

  command(): CommandNode {
    const cmd: CommandNode = { kind: 'command', pos: this.peekNonSpace().pos, args: [] };
    for (;;) {
      this.peekNonSpace();
      const op = this.operand();
      if (op !== undefined) cmd.args.push(op);
      const t = this.nextItem();
      if (t.typ === I.space) continue;
      if (t.typ === I.rightDelim || t.typ === I.rightParen) this.backup();
      else if (t.typ !== I.pipe) this.unexpected(t, 'operand');
      break;
    }
    if (cmd.args.length === 0) this.errorf('empty command');
    return cmd;
  }

  operand(): Node | undefined {
    let node = this.term();
    if (node === undefined) return undefined;
    if (this.peek().typ === I.field) {
      const pos = this.peek().pos;
      const fields: string[] = [];
      while (this.peek().typ === I.field) fields.push(this.nextItem().val.slice(1));
      switch (node.kind) {
        case 'field':
          node = { kind: 'field', pos, ident: [...node.ident, ...fields] };
          break;
        case 'variable':
          node = { kind: 'variable', pos, ident: [...node.ident, ...fields] };
          break;
        case 'bool': case 'string': case 'number': case 'nil': case 'dot':
          this.errorf(`unexpected . after term ${goQuote(nodeString(node))}`);
          break;
        default:
          node = { kind: 'chain', pos, node, fields };
      }
    }
    return node;
  }

  term(): Node | undefined {
    const t = this.nextNonSpace();
    switch (t.typ) {
      case I.identifier:
        if (!BUILTINS.has(t.val) && !this.funcs.has(t.val)) this.errorf(`function ${goQuote(t.val)} not defined`);
        return { kind: 'identifier', pos: t.pos, name: t.val };
      case I.dot: return { kind: 'dot', pos: t.pos };
      case I.nil: return { kind: 'nil', pos: t.pos };
      case I.variable: {
        const ident = t.val.split('.');
        if (!this.vars.includes(ident[0]!)) this.errorf(`undefined variable ${goQuote(ident[0]!)}`);
        return { kind: 'variable', pos: t.pos, ident };
      }
      case I.field: return { kind: 'field', pos: t.pos, ident: t.val.slice(1).split('.') };
      case I.bool: return { kind: 'bool', pos: t.pos, value: t.val === 'true' };
      case I.charConstant: case I.complex: case I.number:
        return this.number(t);
      case I.leftParen:
        return this.pipeline('parenthesized pipeline', I.rightParen);
      case I.string: case I.rawString: {
        const s = goUnquote(t.val);
        if (s === undefined) this.errorf('invalid syntax');
        return { kind: 'string', pos: t.pos, quoted: t.val, text: s };
      }
    }
    this.backup();
    return undefined;
  }

  number(t: Item): NumberNode {
    const n: NumberNode = {
      kind: 'number', pos: t.pos, text: t.val, isInt: false, isUint: false, isFloat: false, int: 0n, float: 0,
    };
    if (t.typ === I.charConstant) {
      const body = t.val.slice(1, -1);
      let cp: number | undefined;
      if (body === '\\\'') cp = 39;
      else if (body.startsWith('\\') && body !== '\\"') {
        const s = goUnquote('"' + body + '"');
        if (s !== undefined && [...s].length === 1) cp = s.codePointAt(0);
        else if (s === undefined) this.errorf('invalid syntax');
      } else if (!body.startsWith('\\') && [...body].length === 1 && body !== '\'') cp = body.codePointAt(0);
      if (cp === undefined) this.errorf(body === '\\"' ? 'invalid syntax' : `malformed character constant: ${t.val}`);
      n.int = BigInt(cp);
      n.isInt = n.isUint = n.isFloat = true;
      n.float = cp;
      return n;
    }
    if (t.val.endsWith('i')) this.errorf('complex numbers are not supported');
    const text = t.val;
    const u = /^[+-]/.test(text) ? undefined : parseGoUint(text);
    if (u !== undefined) {
      n.isUint = true;
      n.int = u;
    }
    const i = parseGoInt(text);
    if (i !== undefined) {
      n.isInt = true;
      n.int = i;
      if (i === 0n) n.isUint = true;
    }
    if (n.isInt || n.isUint) {
      n.isFloat = true;
      n.float = Number(n.int);
    } else {
      const f = parseGoFloat(text);
      if (f !== undefined) {
        if (!/[.eEpP]/.test(text)) this.errorf(`integer overflow: ${goQuote(text)}`);
        n.isFloat = true;
        n.float = f;
        if (Number.isInteger(f) && f >= -(2 ** 63) && f < 2 ** 63) {
          n.isInt = true;
          n.int = BigInt(f);
        }
        if (Number.isInteger(f) && f >= 0 && f < 2 ** 64) {
          n.isUint = true;
          n.int = BigInt(f);
        }
      }
    }
    if (!n.isInt && !n.isUint && !n.isFloat) this.errorf(`illegal number syntax: ${goQuote(text)}`);
    return n;
  }
}

function underscoreOK(s: string): boolean {
  if (!s.includes('_')) return true;
  // Go: underscores only between digits or after a base prefix.
  let body = s.replace(/^[+-]/, '');
  if (/^0[xXoObB]/.test(body)) body = body.slice(2).replace(/^_/, '');
  return !/(^_|_$|__)/.test(body);
}

function parseGoUint(s: string): bigint | undefined {
  if (!underscoreOK(s)) return undefined;
  const t = s.replace(/_/g, '');
  let v: bigint;
  if (/^0[xX][0-9a-fA-F]+$/.test(t) || /^0[bB][01]+$/.test(t) || /^0[oO][0-7]+$/.test(t)) v = BigInt(t);
  else if (/^0[0-7]*$/.test(t)) v = BigInt('0o' + (t.slice(1) || '0'));
  else if (/^[1-9][0-9]*$/.test(t)) v = BigInt(t);
  else return undefined;
  return v <= 0xffffffffffffffffn ? v : undefined;
}

function parseGoInt(s: string): bigint | undefined {
  const neg = s.startsWith('-');
  const body = s.startsWith('-') || s.startsWith('+') ? s.slice(1) : s;
  const u = parseGoUint(body);
  if (u === undefined) return undefined;
  const v = neg ? -u : u;
  return v >= -(2n ** 63n) && v < 2n ** 63n ? v : undefined;
}

function parseGoFloat(s: string): number | undefined {
  if (!underscoreOK(s)) return undefined;
  const t = s.replace(/_/g, '');
  if (/^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$/.test(t)) {
    const f = Number(t);
    return Number.isFinite(f) ? f : undefined;
  }
  const m = /^([+-]?)0[xX]([0-9a-fA-F]*)\.?([0-9a-fA-F]*)[pP]([+-]?[0-9]+)$/.exec(t);
  if (m !== null && (m[2]! + m[3]!).length > 0) {
    const mant = parseInt((m[2]! + m[3]!) || '0', 16) / 16 ** m[3]!.length;
    const f = mant * 2 ** Number(m[4]);
    return m[1] === '-' ? -f : f;
  }
  return undefined;
}

/** Go's strconv.Unquote for "..." and `...` literals; undefined when invalid. */
export function goUnquote(q: string): string | undefined {
  if (q.length < 2) return undefined;
  if (q[0] === '`') return q.endsWith('`') ? q.slice(1, -1).replace(/\r/g, '') : undefined;
  if (q[0] !== '"' || !q.endsWith('"')) return undefined;
  const body = q.slice(1, -1);
  const bytes: number[] = [];
  const enc = new TextEncoder();
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c === '"' || c === '\n') return undefined;
    if (c !== '\\') {
      const cp = body.codePointAt(i)!;
      const ch = String.fromCodePoint(cp);
      for (const b of enc.encode(ch)) bytes.push(b);
      i += ch.length - 1;
      continue;
    }
    const e = body[++i];
    const simple: Record<string, number> = { a: 7, b: 8, f: 12, n: 10, r: 13, t: 9, v: 11, '\\': 92, '"': 34 };
    if (e !== undefined && e in simple) { bytes.push(simple[e]!); continue; }
    const hexLen = e === 'x' ? 2 : e === 'u' ? 4 : e === 'U' ? 8 : 0;
    if (hexLen > 0) {
      const h = body.slice(i + 1, i + 1 + hexLen);
      if (!new RegExp(`^[0-9a-fA-F]{${hexLen}}$`).test(h)) return undefined;
      const v = parseInt(h, 16);
      i += hexLen;
      if (e === 'x') bytes.push(v);
      else {
        if (v > 0x10ffff || (v >= 0xd800 && v < 0xe000)) return undefined;
        for (const b of enc.encode(String.fromCodePoint(v))) bytes.push(b);
      }
      continue;
    }
    if (e !== undefined && e >= '0' && e <= '7') {
      const o = body.slice(i, i + 3);
      if (!/^[0-7]{3}$/.test(o)) return undefined;
      const v = parseInt(o, 8);
      if (v > 255) return undefined;
      bytes.push(v);
      i += 2;
      continue;
    }
    return undefined;
  }
  return Buffer.from(bytes).toString('utf8');
}

/** Go's unicode.IsPrint for one rune: letters, marks, numbers, punctuation, symbols, and the ASCII space only. */
function isGoPrint(ch: string): boolean {
  return ch === ' ' || GO_PRINT.test(ch);
}
const GO_PRINT = /^[\p{L}\p{M}\p{N}\p{P}\p{S}]$/u;

/** Go's strconv.Quote (ASCII-printable and printable Unicode kept); QuoteToASCII when `ascii`. */
export function goQuote(s: string, ascii = false): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    switch (ch) {
      case '"': out += '\\"'; continue;
      case '\\': out += '\\\\'; continue;
      case '\x07': out += '\\a'; continue;
      case '\b': out += '\\b'; continue;
      case '\f': out += '\\f'; continue;
      case '\n': out += '\\n'; continue;
      case '\r': out += '\\r'; continue;
      case '\t': out += '\\t'; continue;
      case '\v': out += '\\v'; continue;
    }
    if (cp < 0x20 || cp === 0x7f) out += '\\x' + cp.toString(16).padStart(2, '0');
    else if (cp === 0xfffd && ch !== '\ufffd') out += '\\ufffd';
    else if (cp >= 0x80 && (ascii || !isGoPrint(ch))) {
      out += cp > 0xffff ? '\\U' + cp.toString(16).padStart(8, '0') : '\\u' + cp.toString(16).padStart(4, '0');
    } else out += ch;
  }
  return out + '"';
}

// ---------------------------------------------------------------- template

/** A parsed template: Go's *template.Template with one tree. */
export class GoTemplate {
  readonly name: string;
  readonly text: string;
  readonly root: ListNode;
  readonly funcs: ReadonlyMap<string, GoFunc>;
  /** Every template of the text by name ({{define}}, {{block}}; the main one under `name`). */
  readonly trees: ReadonlyMap<string, ListNode>;

  /**
   * For a template of only text and `{{ .Field }}` actions: the text parts and
   * field names alternating (text at even indexes), executed without the
   * general machinery when every field is a string.
   */
  private readonly simple: string[] | undefined;

  private constructor(name: string, text: string, trees: ReadonlyMap<string, ListNode>, funcs: ReadonlyMap<string, GoFunc>) {
    this.name = name;
    this.text = text;
    // A {{define}} of the main name replaces a main text that is empty (Go's Tree.add).
    this.root = trees.get(name)!;
    this.trees = trees;
    this.funcs = funcs;
    this.simple = simpleParts(this.root);
  }

  /** Go's template.New(name).Funcs(funcs).Parse(text); throws GoTemplateError. */
  static parse(name: string, text: string, funcs: ReadonlyMap<string, GoFunc> = new Map()): GoTemplate {
    const p = new Parser(name, text, funcs);
    p.parse();
    return new GoTemplate(name, text, p.trees, funcs);
  }

  /** Go's Tree.Root.String(): the template re-printed from its parse tree. */
  toString(): string { return nodeString(this.root); }

  /** Execute with `data` as dot; throws GoExecError. */
  execute(data: unknown): string {
    const parts = this.simple;
    if (parts !== undefined && data instanceof GoStruct) {
      let out = parts[0]!;
      let i = 1;
      for (; i < parts.length; i += 2) {
        const v = data.field(parts[i]!);
        if (typeof v !== 'string') break;
        out += v + parts[i + 1]!;
      }
      if (i >= parts.length) return out;
    }
    const s = new ExecState(this, data);
    s.walk(data, this.root);
    return s.out;
  }
}

function simpleParts(root: ListNode): string[] | undefined {
  const parts: string[] = [''];
  for (const n of root.nodes) {
    if (n.kind === 'text') {
      parts[parts.length - 1] += n.text;
      continue;
    }
    if (n.kind !== 'action' || n.pipe.decl.length > 0 || n.pipe.cmds.length !== 1) return undefined;
    const args = n.pipe.cmds[0]!.args;
    if (args.length !== 1 || args[0]!.kind !== 'field' || args[0].ident.length !== 1) return undefined;
    parts.push(args[0].ident[0]!, '');
  }
  return parts;
}

// ---------------------------------------------------------------- execution

const BREAK = Symbol('break');
const CONTINUE = Symbol('continue');
/** Go's missingVal: no final pipeline value. */
const MISSING = Symbol('missing');

/** Go's maxExecDepth: how deep {{template}} invocations may nest. */
const MAX_EXEC_DEPTH = 100000;

class ExecState {
  readonly t: GoTemplate;
  out = '';
  node: Node | undefined;
  vars: [string, unknown][];
  /** The template being executed (a {{define}}d one inside {{template}}), named in errors. */
  tmpl: string;
  depth = 0;
  /** Set by a field chain: its value is an element of a map[string]interface{} (static type interface{}). */
  lastInterface = false;

  constructor(t: GoTemplate, data: unknown) {
    this.t = t;
    this.tmpl = t.name;
    this.vars = [['$', data]];
  }

  at(n: Node): void { this.node = n; }

  errorf(msg: string): never {
    const name = this.t.name;
    if (this.node === undefined) throw new GoExecError(`template: ${name}: ${msg}`);
    const pos = this.node.pos;
    const before = this.t.text.slice(0, pos);
    const nl = before.lastIndexOf('\n');
    const col = nl < 0 ? Buffer.byteLength(before) : Buffer.byteLength(before.slice(nl + 1));
    const line = 1 + count(before, '\n');
    throw new GoExecError(`template: ${name}:${line}:${col}: executing ${goQuote(this.tmpl)} at <${nodeString(this.node)}>: ${msg}`);
  }

  walk(dot: unknown, node: Node): void {
    this.at(node);
    switch (node.kind) {
      case 'action': {
        const v = this.evalPipeline(dot, node.pipe);
        if (node.pipe.decl.length === 0) this.printValue(node, v);
        return;
      }
      case 'break': throw BREAK;
      case 'continue': throw CONTINUE;
      case 'if': case 'with': {
        const mark = this.vars.length;
        const v = this.evalPipeline(dot, node.pipe);
        const truth = isTrue(v);
        if (truth === undefined) this.errorf(`if/with can't use ${fmtValue(v)}`);
        if (truth) this.walk(node.kind === 'with' ? v : dot, node.list);
        else if (node.elseList !== undefined) this.walk(dot, node.elseList);
        this.vars.length = mark;
        return;
      }
      case 'list':
        for (const n of node.nodes) this.walk(dot, n);
        return;
      case 'range':
        this.walkRange(dot, node);
        return;
      case 'text':
        this.out += node.text;
        return;
      case 'template':
        this.walkTemplate(dot, node);
        return;
      default:
        this.errorf(`unknown node: ${nodeString(node)}`);
    }
  }

  /** `{{template "NAME" PIPE}}`: NAME runs with the pipeline's value as dot and `$`, and no other variables. */
  walkTemplate(dot: unknown, t: TemplateNode): void {
    this.at(t);
    const root = this.t.trees.get(t.name);
    if (root === undefined) this.errorf(`template ${goQuote(t.name)} not defined`);
    if (this.depth === MAX_EXEC_DEPTH) this.errorf(`exceeded maximum template depth (${MAX_EXEC_DEPTH})`);
    // Variables the pipeline declares persist in the caller, as in Go.
    const v = t.pipe === undefined ? undefined : this.evalPipeline(dot, t.pipe);
    const vars = this.vars;
    const tmpl = this.tmpl;
    this.vars = [['$', v]];
    this.tmpl = t.name;
    this.depth++;
    try {
      this.walk(v, root);
    } catch (e) {
      // JavaScript's stack ends long before Go's depth limit: a recursion
      // that deep fails here with Go's error for the limit, at this call.
      if (!(e instanceof RangeError) || !e.message.includes('call stack')) throw e;
      this.vars = vars;
      this.tmpl = tmpl;
      this.depth--;
      this.at(t);
      this.errorf(`exceeded maximum template depth (${MAX_EXEC_DEPTH})`);
    }
    this.vars = vars;
    this.tmpl = tmpl;
    this.depth--;
  }

  walkRange(dot: unknown, r: RangeNode): void {
    this.at(r);
    const mark0 = this.vars.length;
    const val = this.evalPipeline(dot, r.pipe);
    const mark = this.vars.length;
    const decl = r.pipe.decl;
    const one = (index: unknown, elem: unknown): boolean => {
      if (decl.length > 0) {
        if (r.pipe.isAssign) this.setVar(decl[0]!.ident[0]!, decl.length > 1 ? index : elem);
        else this.vars[this.vars.length - 1]![1] = elem;
      }
      if (decl.length > 1) {
        if (r.pipe.isAssign) this.setVar(decl[1]!.ident[0]!, elem);
        else this.vars[this.vars.length - 2]![1] = index;
      }
      try {
        this.walk(elem, r.list);
      } catch (e) {
        if (e !== CONTINUE) throw e;
      } finally {
        this.vars.length = mark;
      }
      return true;
    };
    let ran = false;
    try {
      if (typeof val === 'number' || typeof val === 'bigint' || (val instanceof GoNum && val.type !== 'float64')) {
        if (decl.length > 1) this.errorf(`can't use ${fmtValue(val)} to iterate over more than one variable`);
        const n = typeof val === 'number' ? val : Number(val instanceof GoNum ? val.v : val);
        for (let i = 0; i < n; i++) {
          ran = true;
          one(undefined, val instanceof GoNum ? new GoNum(val.type, i) : typeof val === 'bigint' ? BigInt(i) : i);
        }
      } else if (val instanceof GoSlice) {
        for (let i = 0; i < val.items.length; i++) {
          ran = true;
          one(i, val.items[i]);
        }
      } else if (val instanceof GoMap) {
        if (val.m !== undefined) {
          for (const k of [...val.m.keys()].sort(cmpStrings)) {
            ran = true;
            one(k, val.m.get(k));
          }
        }
      } else if (val === undefined || val === null) {
        // An invalid value acts like an empty map.
      } else {
        this.errorf(`range can't iterate over ${fmtValue(val)}`);
      }
    } catch (e) {
      if (e !== BREAK) throw e;
    }
    if (!ran && r.elseList !== undefined) this.walk(dot, r.elseList);
    this.vars.length = mark0;
  }

  setVar(name: string, v: unknown): void {
    for (let i = this.vars.length - 1; i >= 0; i--) {
      if (this.vars[i]![0] === name) {
        this.vars[i]![1] = v;
        return;
      }
    }
    this.errorf(`undefined variable: ${name}`);
  }

  varValue(name: string): unknown {
    for (let i = this.vars.length - 1; i >= 0; i--) {
      if (this.vars[i]![0] === name) return this.vars[i]![1];
    }
    this.errorf(`undefined variable: ${name}`);
  }

  evalPipeline(dot: unknown, pipe: PipeNode): unknown {
    this.at(pipe);
    let v: unknown = MISSING;
    for (const cmd of pipe.cmds) {
      v = this.evalCommand(dot, cmd, v);
      // Go digs into an interface{} result: a nil one becomes no value.
      if (v === null) v = undefined;
    }
    for (const d of pipe.decl) {
      if (pipe.isAssign) this.setVar(d.ident[0]!, v);
      else this.vars.push([d.ident[0]!, v]);
    }
    return v;
  }

  notAFunction(args: Node[], final: unknown): void {
    if (args.length > 1 || final !== MISSING) this.errorf(`can't give argument to non-function ${nodeString(args[0]!)}`);
  }

  evalCommand(dot: unknown, cmd: CommandNode, final: unknown): unknown {
    const first = cmd.args[0]!;
    switch (first.kind) {
      case 'field': return this.evalFieldNode(dot, first, cmd.args, final);
      case 'chain': return this.evalChainNode(dot, first, cmd.args, final);
      case 'identifier': return this.evalFunction(dot, first, cmd, cmd.args, final);
      case 'pipe':
        this.notAFunction(cmd.args, final);
        return this.evalPipeline(dot, first);
      case 'variable': return this.evalVariableNode(dot, first, cmd.args, final);
    }
    this.at(first);
    this.notAFunction(cmd.args, final);
    switch (first.kind) {
      case 'bool': return first.value;
      case 'dot': return dot;
      case 'nil': this.errorf('nil is not a command'); break;
      case 'number': return this.idealConstant(first);
      case 'string': return first.text;
    }
    this.errorf(`can't evaluate command ${goQuote(nodeString(first))}`);
  }

  idealConstant(c: NumberNode): unknown {
    this.at(c);
    if (c.isFloat && !/^0[xX]/.test(c.text) && !c.text.startsWith('\'') && /[.eEpP]/.test(c.text)) {
      return new GoNum('float64', c.float);
    }
    // An int beyond 2^53 stays exact as a bigint (which otherwise stands for uint64).
    if (c.isInt) return Number.isSafeInteger(Number(c.int)) ? Number(c.int) : new GoNum('int', Number(c.int), c.int);
    if (c.isUint) this.errorf(`${c.text} overflows int`);
    return undefined;
  }

  evalFieldNode(dot: unknown, f: FieldNode, args: Node[], final: unknown): unknown {
    this.at(f);
    return this.evalFieldChain(dot, dot, f, f.ident, args, final);
  }

  evalChainNode(dot: unknown, c: ChainNode, args: Node[] | undefined, final: unknown): unknown {
    this.at(c);
    if (c.node.kind === 'nil') this.errorf(`indirection through explicit nil in ${nodeString(c)}`);
    const v = this.evalArg(dot, 'any', c.node);
    return this.evalFieldChain(dot, v, c, c.fields, args, final);
  }

  evalVariableNode(dot: unknown, v: VariableNode, args: Node[] | undefined, final: unknown): unknown {
    this.at(v);
    const value = this.varValue(v.ident[0]!);
    if (v.ident.length === 1) {
      if (args !== undefined) this.notAFunction(args, final);
      return value;
    }
    return this.evalFieldChain(dot, value, v, v.ident.slice(1), args, final);
  }

  evalFieldChain(dot: unknown, recv: unknown, node: Node, ident: string[], args: Node[] | undefined, final: unknown): unknown {
    const n = ident.length;
    // An element of a map[string]interface{} keeps its static type in the chain (Go's errors name it).
    let staticType: string | undefined;
    for (let i = 0; i < n - 1; i++) {
      const from = recv;
      recv = this.evalField(dot, ident[i]!, node, undefined, MISSING, recv, staticType);
      staticType = from instanceof GoMap && from.type.endsWith(']interface {}') ? 'interface {}' : undefined;
    }
    this.lastInterface = recv instanceof GoMap && recv.type.endsWith(']interface {}');
    return this.evalField(dot, ident[n - 1]!, node, args, final, recv, staticType);
  }

  evalField(dot: unknown, name: string, node: Node, args: Node[] | undefined, final: unknown, recv: unknown, staticType?: string): unknown {
    if (recv === undefined) return undefined;
    if (recv === null) this.errorf(`nil pointer evaluating interface {}.${name}`);
    const hasArgs = (args !== undefined && args.length > 1) || final !== MISSING;
    if (recv instanceof GoStruct) {
      const m = recv.method(name);
      if (m !== undefined) return this.evalCall(dot, m, false, node, name, args, final);
      const f = recv.field(name);
      if (f === UNEXPORTED) this.errorf(`${name} is an unexported field of struct type ${recv.goType}`);
      if (f !== NO_FIELD) {
        if (hasArgs) this.errorf(`${name} has arguments but cannot be invoked as function`);
        return f;
      }
    } else if (recv instanceof GoMap) {
      if (hasArgs) this.errorf(`${name} is not a method but has arguments`);
      return recv.m?.get(name);
    }
    this.errorf(`can't evaluate field ${name} in type ${staticType ?? typeName(recv)}`);
  }

  evalFunction(dot: unknown, node: IdentifierNode, cmd: Node, args: Node[] | undefined, final: unknown): unknown {
    this.at(node);
    const name = node.name;
    const f = this.t.funcs.get(name);
    if (f !== undefined) return this.evalCall(dot, f, false, cmd, name, args, final);
    return this.evalBuiltin(dot, name, cmd, args, final);
  }

  evalCall(dot: unknown, f: GoFunc, _builtin: boolean, node: Node, name: string, args: Node[] | undefined, final: unknown): unknown {
    const a = args === undefined ? [] : args.slice(1);
    let numIn = a.length;
    if (final !== MISSING) numIn++;
    let numFixed = a.length;
    if (f.variadic !== undefined) {
      numFixed = f.params.length;
      if (numIn < numFixed) this.errorf(`wrong number of args for ${name}: want at least ${f.params.length} got ${a.length}`);
    } else if (numIn !== f.params.length) {
      this.errorf(`wrong number of args for ${name}: want ${f.params.length} got ${numIn}`);
    }
    const argv: unknown[] = [];
    let i = 0;
    for (; i < numFixed && i < a.length; i++) argv.push(this.evalArg(dot, f.params[i]!, a[i]!));
    if (f.variadic !== undefined) for (; i < a.length; i++) argv.push(this.evalArg(dot, f.variadic, a[i]!));
    if (final !== MISSING) {
      const t = f.variadic !== undefined && numIn - 1 >= numFixed ? f.variadic : f.params[numIn - 1]!;
      argv.push(this.validateType(final, t));
    }
    try {
      return f.fn(...argv);
    } catch (e) {
      if (e instanceof GoCallError) {
        this.at(node);
        this.errorf(`error calling ${name}: ${e.message}`);
      }
      throw e;
    }
  }

  validateType(v: unknown, t: string): unknown {
    if (t === 'value') return v;
    if (v === undefined) {
      if (t === 'any') return null;
      this.errorf(`invalid value; expected ${t}`);
    }
    if (t === 'any') return v;
    const vt = typeName(v);
    if (vt !== t) this.errorf(`wrong type for value; expected ${t}; got ${vt}`);
    return v;
  }

  evalArg(dot: unknown, t: string, n: Node): unknown {
    this.at(n);
    switch (n.kind) {
      case 'dot': return this.validateType(dot, t);
      case 'nil':
        if (t === 'any') return null;
        if (t === 'value') return undefined;
        this.errorf(`cannot assign nil to ${t}`);
        break;
      case 'field': return this.validateType(this.evalFieldNode(dot, n, [n], MISSING), t);
      case 'variable': return this.validateType(this.evalVariableNode(dot, n, undefined, MISSING), t);
      case 'pipe': return this.validateType(this.evalPipeline(dot, n), t);
      case 'identifier': return this.validateType(this.evalFunction(dot, n, n, undefined, MISSING), t);
      case 'chain': return this.validateType(this.evalChainNode(dot, n, undefined, MISSING), t);
    }
    switch (t) {
      case 'bool':
        if (n.kind === 'bool') return n.value;
        this.errorf(`expected bool; found ${nodeString(n)}`);
        break;
      case 'int':
        if (n.kind === 'number' && n.isInt) return Number(n.int);
        this.errorf(`expected integer; found ${nodeString(n)}`);
        break;
      case 'string':
        if (n.kind === 'string') return n.text;
        this.errorf(`expected string; found ${nodeString(n)}`);
        break;
      case 'any': case 'value':
        switch (n.kind) {
          case 'bool': return n.value;
          case 'number': return this.idealConstant(n);
          case 'string': return n.text;
        }
    }
    this.errorf(`can't handle ${nodeString(n)} for arg of type ${t}`);
  }

  /** Evaluate builtin arguments as Go's reflect.Value parameters do (interface{} semantics). */
  private args(dot: unknown, a: Node[], final: unknown): unknown[] {
    const out: unknown[] = [];
    for (const n of a) out.push(this.evalArg(dot, 'value', n));
    if (final !== MISSING) out.push(final);
    return out;
  }

  evalBuiltin(dot: unknown, name: string, node: Node, args: Node[] | undefined, final: unknown): unknown {
    const a = args === undefined ? [] : args.slice(1);
    const numIn = a.length + (final !== MISSING ? 1 : 0);
    const want = (n: number, atLeast: boolean): void => {
      if (atLeast ? numIn < n : numIn !== n) {
        this.errorf(atLeast
          ? `wrong number of args for ${name}: want at least ${n} got ${a.length}`
          : `wrong number of args for ${name}: want ${n} got ${numIn}`);
      }
    };
    const fail = (msg: string): never => {
      this.at(node);
      this.errorf(`error calling ${name}: ${msg}`);
    };
    switch (name) {
      case 'and': case 'or': {
        want(1, true);
        let v: unknown;
        for (const n of a) {
          v = this.evalArg(dot, 'value', n);
          if (truth(v) === (name === 'or')) return v;
        }
        if (final !== MISSING) v = final;
        return v;
      }
      case 'not': {
        want(1, false);
        return !truth(this.args(dot, a, final)[0]);
      }
      case 'len': {
        want(1, false);
        const v = this.args(dot, a, final)[0];
        if (typeof v === 'string') return Buffer.byteLength(v);
        if (v instanceof GoSlice) return v.items.length;
        if (v instanceof GoMap) return v.m?.size ?? 0;
        if (v === undefined) return fail('reflect: call of reflect.Value.Type on zero Value');
        if (v === null) return fail('len of nil pointer');
        // Go looks through the pointer: the struct's type, without *.
        return fail(`len of type ${typeName(v).replace(/^\*/, '')}`);
      }
      case 'index': {
        want(1, true);
        const [item, ...idx] = this.args(dot, a, final);
        let v = item;
        if (v === null || v === undefined) return fail('index of untyped nil');
        for (const x of idx) {
          if (v instanceof GoSlice || typeof v === 'string') {
            const len = typeof v === 'string' ? Buffer.byteLength(v) : v.items.length;
            const i = indexArg(x, len, fail);
            if (i === len) return fail(`reflect: ${typeof v === 'string' ? 'string' : 'slice'} index out of range`);
            if (typeof v === 'string') v = new GoNum('uint8', Buffer.from(v)[i]!);
            else v = v.items[i];
          } else if (v instanceof GoMap) {
            if (x === null || x === undefined) return fail('value is nil; should be of type string');
            if (typeof x !== 'string') return fail(`value has type ${typeName(x)}; should be string`);
            const got = v.m?.get(x);
            v = got === undefined ? v.zero : got;
          } else if (v === undefined) {
            return fail('index of untyped nil');
          } else if (v === null) {
            return fail('index of nil pointer');
          } else {
            return fail(`can't index item of type ${typeName(v)}`);
          }
        }
        return v;
      }
      case 'slice': {
        want(1, true);
        // Unlike index, slice does not look inside an index of static type interface{} (a .Var value).
        const vals: unknown[] = [];
        const boxed: boolean[] = [];
        for (const n of a) {
          this.lastInterface = false;
          vals.push(this.evalArg(dot, 'value', n));
          boxed.push(this.lastInterface && (n.kind === 'field' || n.kind === 'variable' || n.kind === 'chain'));
        }
        if (final !== MISSING) {
          vals.push(final);
          boxed.push(false);
        }
        const [item, ...idx] = vals;
        if (item === null || item === undefined) return fail('slice of untyped nil');
        if (idx.length > 3) return fail(`too many slice indexes: ${idx.length}`);
        let len: number;
        if (typeof item === 'string') {
          if (idx.length === 3) return fail('cannot 3-index slice a string');
          len = Buffer.byteLength(item);
        } else if (item instanceof GoSlice) len = item.items.length;
        else return fail(`can't slice item of type ${typeName(item)}`);
        const ix = [0, len];
        for (let k = 0; k < idx.length; k++) {
          if (boxed[k + 1] === true && idx[k] !== undefined) return fail('cannot index slice/array with type interface {}');
          ix[k] = indexArg(idx[k], len, fail);
        }
        if (ix[0]! > ix[1]!) return fail(`invalid slice index: ${ix[0]} > ${ix[1]}`);
        if (typeof item === 'string') return Buffer.from(item).subarray(ix[0], ix[1]).toString('utf8');
        if (idx.length === 3 && ix[1]! > ix[2]!) return fail(`invalid slice index: ${ix[1]} > ${ix[2]}`);
        return new GoSlice(item.type, item.items.slice(ix[0], ix[1]));
      }
      case 'eq': case 'ne': case 'lt': case 'le': case 'gt': case 'ge': {
        // Go checks the number of arguments before evaluating them.
        want(name === 'eq' ? 1 : 2, name === 'eq');
        const v = this.args(dot, a, final);
        if (name === 'eq') {
          if (v.length < 2) return fail('missing argument for comparison');
          for (let k = 1; k < v.length; k++) {
            const r = compare(v[0], v[k], true);
            if (typeof r === 'string') return fail(r);
            if (r === 0) return true;
          }
          return false;
        }
        const r = compare(v[0], v[1], name === 'ne');
        if (typeof r === 'string') return fail(r);
        switch (name) {
          case 'ne': return r !== 0;
          case 'lt': return r < 0;
          case 'le': return r <= 0;
          case 'gt': return r > 0;
          default: return r >= 0;
        }
      }
      case 'print': return goSprint(this.args(dot, a, final));
      case 'println': return goSprintln(this.args(dot, a, final));
      case 'printf': {
        want(1, true);
        let format: unknown;
        let rest: unknown[];
        if (a.length > 0) {
          format = this.evalArg(dot, 'string', a[0]!);
          rest = this.args(dot, a.slice(1), final);
        } else {
          format = this.validateType(final, 'string');
          rest = [];
        }
        for (let k = 0; k < rest.length; k++) if (rest[k] === undefined) rest[k] = null;
        return goSprintf(format as string, rest);
      }
      case 'html': return htmlEscape(evalArgsString(this.args(dot, a, final)));
      case 'urlquery': return queryEscape(evalArgsString(this.args(dot, a, final)));
      case 'js': return jsEscape(evalArgsString(this.args(dot, a, final)));
      case 'call': {
        want(1, true);
        const v = this.args(dot, a, final);
        // Go names the callee by its node, or by reflect's String() of a piped value.
        const callee = a.length > 0 ? nodeString(a[0]!) : reflectString(final);
        const fn = v[0];
        if (fn === undefined || fn === null) return fail('call of nil');
        // No Go value of this engine is a callable function: a func-typed
        // value models a nil func, which reflect refuses to call.
        if (fn instanceof GoFuncValue) return fail('reflect.Value.Call: call of nil function');
        return fail(`non-function ${callee} of type ${typeName(fn)}`);
      }
    }
    this.errorf(`${goQuote(name)} is not a defined function`);
  }

  printValue(n: Node, v: unknown): void {
    this.at(n);
    if (v === undefined) {
      this.out += '<no value>';
      return;
    }
    if (v instanceof GoFuncValue) this.errorf(`can't print ${nodeString(n)} of type ${v.type}`);
    if (v instanceof GoStruct) {
      const s = v.goString() ?? v.addrString();
      if (s !== undefined) {
        this.out += s;
        return;
      }
      // text/template prints through the pointer: the struct itself, without fmt's &.
      this.out += '{' + v.fieldValues().map((x) => fmtValue(x)).join(' ') + '}';
      return;
    }
    this.out += fmtValue(v);
  }
}

/** A func-typed value (a struct field of func type); only printing it is an error. */
export class GoFuncValue {
  readonly type: string;
  constructor(type: string) { this.type = type; }
}

function indexArg(x: unknown, cap: number, fail: (m: string) => never): number {
  let i: number;
  if (typeof x === 'number') i = x;
  else if (typeof x === 'bigint') i = Number(x);
  else if (x instanceof GoNum && x.type !== 'float64') {
    if (x.big !== undefined) return fail(`index out of range: ${x.big}`);
    i = x.v;
  }
  else if (x === null || x === undefined) return fail('cannot index slice/array with nil');
  else return fail(`cannot index slice/array with type ${typeName(x)}`);
  if (i < 0 || i > cap) return fail(`index out of range: ${i}`);
  return i;
}

/** reflect.Value.String(): a string's text, `<T Value>` for any other type. */
function reflectString(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v === undefined) return '<invalid Value>';
  if (v === null) return '<interface {} Value>';
  return `<${typeName(v)} Value>`;
}

/** text/template's evalArgs (html, js, urlquery): fmt.Sprint, with nil and no value as `<no value>` strings. */
function evalArgsString(args: unknown[]): string {
  if (args.length === 1 && typeof args[0] === 'string') return args[0];
  return goSprint(args.map((a) => {
    if (a === undefined || a === null) return '<no value>';
    // Through a pointer to a struct: the struct (no &), as printableValue does.
    if (a instanceof GoStruct && a.goType.startsWith('*') && a.goString() === undefined) return new StructValue(a);
    return a;
  }));
}

/** The struct a pointer points to (`*T` printed as `T` would be). */
class StructValue extends GoStruct {
  readonly goType: string;
  readonly p: GoStruct;
  constructor(p: GoStruct) {
    super();
    this.p = p;
    this.goType = p.goType.slice(1);
  }

  field(name: string): unknown { return this.p.field(name); }
  override fieldValues(): unknown[] { return this.p.fieldValues(); }
  override fieldNames(): readonly string[] { return this.p.fieldNames(); }
}

function htmlEscape(s: string): string {
  return s.replace(/[\0"'&<>]/g, (c) => ({ '\0': '\uFFFD', '"': '&#34;', '\'': '&#39;', '&': '&amp;', '<': '&lt;', '>': '&gt;' })[c]!);
}

/** Go's template.JSEscapeString. */
function jsEscape(s: string): string {
  let out = '';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (cp >= 0x80) {
      out += isGoPrint(ch) ? ch : '\\u' + cp.toString(16).toUpperCase().padStart(4, '0');
      continue;
    }
    switch (ch) {
      case '\\': out += '\\\\'; break;
      case '\'': out += '\\\''; break;
      case '"': out += '\\"'; break;
      case '<': out += '\\u003C'; break;
      case '>': out += '\\u003E'; break;
      case '&': out += '\\u0026'; break;
      case '=': out += '\\u003D'; break;
      default: out += cp < 0x20 ? '\\u00' + cp.toString(16).toUpperCase().padStart(2, '0') : ch;
    }
  }
  return out;
}

function queryEscape(s: string): string {
  let out = '';
  for (const b of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(b);
    if (/[A-Za-z0-9\-_.~]/.test(c)) out += c;
    else if (c === ' ') out += '+';
    else out += '%' + b.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

function cmpStrings(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** Go's truth for `if`/`with`; undefined when the value has none. */
function isTrue(v: unknown): boolean | undefined {
  if (v === undefined || v === null) return false;
  if (typeof v === 'string') return v.length > 0;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v !== 0;
  if (typeof v === 'bigint') return v !== 0n;
  if (v instanceof GoNum) return v.v !== 0;
  if (v instanceof GoSlice) return v.items.length > 0;
  if (v instanceof GoMap) return (v.m?.size ?? 0) > 0;
  if (v instanceof GoStruct) return true;
  if (v instanceof GoFuncValue) return true;
  return undefined;
}

function truth(v: unknown): boolean {
  return isTrue(v) ?? true;
}

/** Go's reflect type name of a value. */
export function typeName(v: unknown): string {
  if (v === null || v === undefined) return '<nil>';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return 'int';
  if (typeof v === 'bigint') return 'uint64';
  if (v instanceof GoNum) return v.type;
  if (v instanceof GoSlice) return v.type;
  if (v instanceof GoMap) return v.type;
  if (v instanceof GoStruct) return v.goType;
  if (v instanceof GoFuncValue) return v.type;
  return 'interface {}';
}

type Kind = 'bool' | 'int' | 'uint' | 'float' | 'string' | 'other';

function basicKind(v: unknown): Kind {
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return 'int';
  if (typeof v === 'bigint') return 'uint';
  if (typeof v === 'string') return 'string';
  if (v instanceof GoNum) {
    if (v.type.startsWith('float')) return 'float';
    return v.type.startsWith('u') ? 'uint' : 'int';
  }
  return 'other';
}

/** reflect's Kind of a value of no basic kind ('invalid' for no value and nil interfaces). */
function reflectKind(v: unknown): string {
  if (v === undefined || v === null) return 'invalid';
  if (v instanceof GoSlice) return 'slice';
  if (v instanceof GoMap) return 'map';
  if (v instanceof GoFuncValue) return 'func';
  if (v instanceof GoStruct) return v.goType.startsWith('*') ? 'ptr' : 'struct';
  return 'other';
}

/** Go's isNil in eq: no value, or a nil map or func. */
function isNilValue(v: unknown): boolean {
  return v === undefined || v === null || (v instanceof GoMap && v.m === undefined) || v instanceof GoFuncValue;
}

function numOf(v: unknown): number | bigint {
  if (typeof v === 'number' || typeof v === 'bigint') return v;
  return (v as GoNum).big ?? (v as GoNum).v;
}

/**
 * Go's eq/lt comparison: 0 equal, <0 less, >0 greater, or the error text.
 * `eqOnly`: eq/ne, which also compare non-basic comparable values.
 */
function compare(a: unknown, b: unknown, eqOnly: boolean): number | string {
  const ka = basicKind(a);
  const kb = basicKind(b);
  if (!eqOnly && (ka === 'other' || kb === 'other')) return 'invalid type for comparison';
  const nilA = a === null || a === undefined;
  const nilB = b === null || b === undefined;
  if (ka === 'other' && kb === 'other') {
    // Go's eq on two values of no basic kind (nil, maps, slices, structs):
    // nil against anything of a kind that can be nil, else same kinds only.
    const rk = reflectKind(a);
    const rkb = reflectKind(b);
    if (rk !== rkb && !nilA && !nilB) {
      return `non-comparable types ${fmtOne(a, 's', NO_FLAGS)}: ${typeName(a)}, ${typeName(b)}: ${fmtValue(b)}`;
    }
    const na = isNilValue(a);
    const nb = isNilValue(b);
    if (na || nb) return na === nb ? 0 : 1;
    if (b instanceof GoSlice || b instanceof GoMap || b instanceof GoFuncValue) {
      return `non-comparable type ${fmtOne(b, 's', NO_FLAGS)}: ${typeName(b)}`;
    }
    return typeName(a) === typeName(b) && a === b ? 0 : 1;
  }
  if (ka === 'other' || kb === 'other') {
    // One side of no basic kind: only nil on either side is not an error.
    return nilA || nilB ? 1 : `incompatible types for comparison: ${typeName(a)} and ${typeName(b)}`;
  }
  if (ka !== kb) {
    if ((ka === 'int' && kb === 'uint') || (ka === 'uint' && kb === 'int')) {
      const x = BigInt(numOf(a));
      const y = BigInt(numOf(b));
      return x < y ? -1 : x > y ? 1 : 0;
    }
    return `incompatible types for comparison: ${typeName(a)} and ${typeName(b)}`;
  }
  if (ka === 'bool') {
    if (!eqOnly) return 'invalid type for comparison';
    return a === b ? 0 : 1;
  }
  if (ka === 'string') return a === b ? 0 : cmpStrings(a as string, b as string);
  const x = numOf(a);
  const y = numOf(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

// ---------------------------------------------------------------- fmt

/** fmt's %v of a value. */
export function fmtValue(v: unknown, plusV = false): string {
  if (v === null || v === undefined) return '<nil>';
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (v instanceof GoNum) return v.type.startsWith('float') ? formatFloatG(v.v, -1) : String(v.big ?? v.v);
  if (v instanceof GoSlice) return '[' + v.items.map((x) => fmtValue(x, plusV)).join(' ') + ']';
  if (v instanceof GoMap) {
    if (v.m === undefined) return 'map[]';
    return 'map[' + [...v.m.keys()].sort(cmpStrings).map((k) => `${k}:${fmtValue(v.m!.get(k), plusV)}`).join(' ') + ']';
  }
  if (v instanceof GoStruct) {
    const s = v.goString();
    if (s !== undefined) return s;
    const names = plusV ? v.fieldNames() : [];
    const body = '{' + v.fieldValues().map((x, i) => (names[i] !== undefined ? names[i] + ':' : '') + fmtValue(x, plusV)).join(' ') + '}';
    return v.goType.startsWith('*') ? '&' + body : body;
  }
  if (v instanceof GoFuncValue) return '0x0';
  return String(v);
}

/** strconv.FormatFloat(f, 'g', prec, 64) with %v's shortest form for prec -1. */
/** Go's strconv.FormatFloat(f, 'g', prec, 64) (prec -1: shortest, as `%v` prints a float64). */
export function formatFloatG(f: number, prec: number): string {
  if (Number.isNaN(f)) return 'NaN';
  if (!Number.isFinite(f)) return f > 0 ? '+Inf' : '-Inf';
  if (f === 0) return Object.is(f, -0) ? '-0' : '0';
  let digits: string;
  let exp: number;
  if (prec < 0) {
    const e = f.toExponential();
    const m = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(e)!;
    digits = m[2]! + (m[3] ?? '');
    exp = Number(m[4]);
    const eprec = 6;
    const sign = m[1]!;
    if (exp < -4 || exp >= eprec) {
      const mant = digits.length > 1 ? digits[0] + '.' + digits.slice(1) : digits;
      return sign + mant + 'e' + (exp < 0 ? '-' : '+') + String(Math.abs(exp)).padStart(2, '0');
    }
    return sign + plainDecimal(digits, exp);
  }
  const p = prec === 0 ? 1 : prec;
  const d = roundDecimal(exactDecimal(f), p);
  const sign = f < 0 ? '-' : '';
  digits = d.digits.replace(/0+$/, '') || '0';
  exp = d.point - 1;
  if (exp < -4 || exp >= p) {
    const mant = digits.length > 1 ? digits[0] + '.' + digits.slice(1) : digits;
    return sign + mant + 'e' + (exp < 0 ? '-' : '+') + String(Math.abs(exp)).padStart(2, '0');
  }
  return sign + plainDecimal(digits, exp);
}

/** A decimal: the value is 0.DIGITS × 10^point. */
interface Decimal { digits: string; point: number }

/** The exact decimal expansion of |f| (finite, non-zero). */
function exactDecimal(f: number): Decimal {
  const bits = new DataView(new Float64Array([f]).buffer).getBigUint64(0, true);
  let e = Number((bits >> 52n) & 0x7ffn);
  let mant = bits & ((1n << 52n) - 1n);
  if (e === 0) e = 1;
  else mant |= 1n << 52n;
  e -= 1075;
  if (mant === 0n) return { digits: '0', point: 1 };
  if (e >= 0) {
    const digits = (mant << BigInt(e)).toString();
    return { digits, point: digits.length };
  }
  const digits = (mant * 5n ** BigInt(-e)).toString();
  return { digits, point: digits.length + e };
}

/** Round to `n` significant digits, half to even on an exact tie (as strconv; JavaScript rounds ties up). */
function roundDecimal(d: Decimal, n: number): Decimal {
  const { digits, point } = d;
  if (digits.length <= n) return { digits: digits + '0'.repeat(Math.max(0, n - digits.length)), point };
  if (n < 0) return { digits: '', point };
  const next = digits.charCodeAt(n) - 48;
  const rest = digits.slice(n + 1);
  const prev = n > 0 ? digits.charCodeAt(n - 1) - 48 : 0;
  const up = next > 5 || (next === 5 && (/[1-9]/.test(rest) || prev % 2 === 1));
  const kept = digits.slice(0, n);
  if (!up) return { digits: kept, point };
  // Add one unit in the last kept place; all nines carry into a new leading 1.
  const a = kept.split('');
  let k = a.length - 1;
  while (k >= 0 && a[k] === '9') a[k--] = '0';
  if (k < 0) return { digits: '1' + '0'.repeat(Math.max(0, n - 1)), point: point + 1 };
  a[k] = String(Number(a[k]) + 1);
  return { digits: a.join(''), point };
}

/** %.Nf with strconv's rounding. */
function formatFixed(f: number, prec: number): string {
  if (f === 0) return (Object.is(f, -0) ? '-' : '') + (prec > 0 ? '0.' + '0'.repeat(prec) : '0');
  const d = roundDecimal(exactDecimal(f), exactDecimal(f).point + prec);
  let int: string;
  let frac: string;
  if (d.point <= 0) {
    int = '0';
    frac = ('0'.repeat(-d.point) + d.digits).padEnd(prec, '0').slice(0, prec);
  } else {
    int = d.digits.slice(0, d.point).padEnd(d.point, '0');
    frac = d.digits.slice(d.point).padEnd(prec, '0').slice(0, prec);
  }
  return (f < 0 ? '-' : '') + int + (prec > 0 ? '.' + frac : '');
}

/** %.Ne with strconv's rounding. */
function formatExp(f: number, prec: number, verb: string): string {
  let digits = '0'.repeat(prec + 1);
  let exp = 0;
  if (f !== 0) {
    const d = roundDecimal(exactDecimal(f), prec + 1);
    digits = d.digits;
    exp = d.point - 1;
  }
  const mant = digits[0]! + (prec > 0 ? '.' + digits.slice(1) : '');
  const s = (f < 0 || Object.is(f, -0) ? '-' : '') + mant + 'e' + (exp < 0 ? '-' : '+') + String(Math.abs(exp)).padStart(2, '0');
  return verb === 'E' ? s.toUpperCase() : s;
}

/** strconv.FormatFloat(f, 'b', -1, 64): decimal mantissa, binary exponent. */
function formatFloatB(f: number): string {
  const bits = new DataView(new Float64Array([f]).buffer).getBigUint64(0, true);
  let e = Number((bits >> 52n) & 0x7ffn);
  let mant = bits & ((1n << 52n) - 1n);
  if (e === 0) e = 1;
  else mant |= 1n << 52n;
  e -= 1075;
  return (bits >> 63n === 1n ? '-' : '') + mant.toString() + 'p' + (e < 0 ? '-' : '+') + String(Math.abs(e));
}

function plainDecimal(digits: string, exp: number): string {
  if (exp < 0) return '0.' + '0'.repeat(-exp - 1) + digits;
  if (digits.length <= exp + 1) return digits + '0'.repeat(exp + 1 - digits.length);
  return digits.slice(0, exp + 1) + '.' + digits.slice(exp + 1);
}

/** fmt.Sprint: spaces between operands when neither side is a string. */
export function goSprint(args: unknown[]): string {
  let out = '';
  for (let i = 0; i < args.length; i++) {
    if (i > 0 && typeof args[i] !== 'string' && typeof args[i - 1] !== 'string') out += ' ';
    out += fmtValue(args[i]);
  }
  return out;
}

/** fmt.Sprintln: always spaces, then a newline. */
export function goSprintln(args: unknown[]): string {
  return args.map((a) => fmtValue(a)).join(' ') + '\n';
}

interface Spec { minus: boolean; plus: boolean; sharp: boolean; space: boolean; zero: boolean; width?: number; prec?: number }
const NO_FLAGS: Spec = { minus: false, plus: false, sharp: false, space: false, zero: false };

function pad(s: string, sp: Spec, numeric: boolean): string {
  if (sp.width === undefined || [...s].length >= sp.width) return s;
  const n = sp.width - [...s].length;
  if (sp.minus) return s + ' '.repeat(n);
  if (sp.zero && numeric) {
    const sign = /^[+\- ]/.test(s) ? s[0]! : '';
    return sign + '0'.repeat(n) + s.slice(sign.length);
  }
  // fmt pads anything with zeros under the 0 flag, strings too.
  return (sp.zero ? '0' : ' ').repeat(n) + s;
}

/** fmt's %!verb(type=value): the value printed with %v and the verb's flags. */
function badVerb(verb: string, v: unknown, sp: Spec): string {
  if (v === null || v === undefined) return `%!${verb}(<nil>)`;
  return `%!${verb}(${typeName(v)}=${fmtOne(v, 'v', sp, 0, true)})`;
}

/** fmt's %#v (Go syntax) of a value. */
function goSyntax(v: unknown, inInterface = false): string {
  if (v === undefined || v === null) return inInterface ? 'interface {}(nil)' : '<nil>';
  if (typeof v === 'string') return goQuote(v);
  if (typeof v === 'boolean' || typeof v === 'number') return String(v);
  if (typeof v === 'bigint') return '0x' + v.toString(16);
  if (v instanceof GoNum) {
    if (v.type.startsWith('float')) return formatFloatG(v.v, -1);
    return v.type.startsWith('u') ? '0x' + v.v.toString(16) : String(v.big ?? v.v);
  }
  const iface = (t: string): boolean => t.endsWith('interface {}');
  if (v instanceof GoSlice) return `${v.type}{${v.items.map((x) => goSyntax(x, iface(v.type))).join(', ')}}`;
  if (v instanceof GoMap) {
    if (v.m === undefined) return `${v.type}(nil)`;
    const m = v.m;
    return `${v.type}{${[...m.keys()].sort(cmpStrings).map((k) => `${goQuote(k)}:${goSyntax(m.get(k), iface(v.type))}`).join(', ')}}`;
  }
  if (v instanceof GoStruct) {
    const names = v.fieldNames();
    const body = v.fieldValues().map((x, i) => `${names[i] ?? ''}:${goSyntax(x)}`).join(', ');
    return v.goType.startsWith('*') ? `&${v.goType.slice(1)}{${body}}` : `${v.goType}{${body}}`;
  }
  return fmtValue(v);
}

/** An integer as a rune for %c and %q: anything that is not a valid code point is U+FFFD. */
function runeOf(v: number | bigint): number {
  const u = BigInt.asUintN(64, BigInt(v));
  return u > 0x10ffffn || (u >= 0xd800n && u < 0xe000n) ? 0xfffd : Number(u);
}

function fmtInteger(v: number | bigint, verb: string, sp: Spec): string {
  const neg = typeof v === 'bigint' ? v < 0n : v < 0;
  const abs = typeof v === 'bigint' ? (neg ? -v : v) : BigInt(Math.abs(v));
  let s: string;
  switch (verb) {
    case 'd': case 'v': s = abs.toString(10); break;
    case 'x': s = abs.toString(16); if (sp.sharp) s = '0x' + s; break;
    case 'X': s = abs.toString(16).toUpperCase(); if (sp.sharp) s = '0X' + s; break;
    case 'o': s = abs.toString(8); if (sp.sharp) s = '0' + s; break;
    case 'O': s = '0o' + abs.toString(8); break;
    case 'b': s = abs.toString(2); break;
    case 'c': return pad(String.fromCodePoint(runeOf(v)), sp, false);
    case 'q': return pad(goQuoteRune(runeOf(v), sp.plus), sp, false);
    // fmt prints the value as a uint64: a negative one in two's complement.
    case 'U': return pad('U+' + BigInt.asUintN(64, BigInt(v)).toString(16).toUpperCase().padStart(4, '0'), sp, false);
    default: return '';
  }
  if (sp.prec !== undefined) s = s.padStart(sp.prec, '0');
  const sign = neg ? '-' : sp.plus ? '+' : sp.space ? ' ' : '';
  const zeroOK = sp.prec === undefined;
  return pad(sign + s, { ...sp, zero: sp.zero && zeroOK && !sp.minus }, true);
}

function goQuoteRune(cp: number, ascii = false): string {
  const q = goQuote(String.fromCodePoint(cp), ascii);
  return '\'' + q.slice(1, -1).replace(/\\"/g, '"').replace(/'/g, '\\\'') + '\'';
}

function fmtFloat(f: number, verb: string, sp: Spec): string {
  let s: string;
  switch (verb) {
    case 'f': case 'F': s = Number.isFinite(f) ? formatFixed(f, sp.prec ?? 6) : formatFloatG(f, -1); break;
    case 'e': case 'E': s = Number.isFinite(f) ? formatExp(f, sp.prec ?? 6, verb) : formatFloatG(f, -1); break;
    case 'b': s = Number.isFinite(f) ? formatFloatB(f) : formatFloatG(f, -1); break;
    case 'g': case 'G': case 'v': s = formatFloatG(f, sp.prec ?? -1); if (verb === 'G') s = s.toUpperCase(); break;
    case 'x': case 'X': s = formatFloatX(f, sp.prec ?? -1, verb); break;
    default: return '';
  }
  if (sp.sharp && verb !== 'b' && Number.isFinite(f)) {
    const neg = s.startsWith('-');
    s = (neg ? '-' : '') + sharpFloat(neg ? s.slice(1) : s, verb, sp.prec ?? (verb === 'f' || verb === 'F' || verb === 'e' || verb === 'E' ? 6 : -1));
  }
  if (f >= 0 && sp.plus) s = '+' + s;
  else if (f >= 0 && sp.space) s = ' ' + s;
  return pad(s, sp, true);
}

/** fmt's # on a float: always a decimal point, trailing zeros kept up to the precision (6 when shortest). */
function sharpFloat(num: string, verb: string, prec: number): string {
  let digits = verb === 'v' || verb === 'g' || verb === 'G' || verb === 'x' ? (prec === -1 ? 6 : prec) : 0;
  let tail = '';
  let hasPoint = false;
  let nonzero = false;
  for (let i = 0; i < num.length; i++) {
    const c = num[i]!;
    if (c === '.') {
      hasPoint = true;
      continue;
    }
    if (c === 'p' || c === 'P' || ((c === 'e' || c === 'E') && verb !== 'x' && verb !== 'X')) {
      tail = num.slice(i);
      num = num.slice(0, i);
      break;
    }
    // Go counts every significant character, the x of 0x included.
    if (c !== '0') nonzero = true;
    if (nonzero) digits--;
  }
  if (!hasPoint) {
    if (num === '0') digits--;
    num += '.';
  }
  if (digits > 0) num += '0'.repeat(digits);
  return num + tail;
}

/** strconv.FormatFloat(f, 'x' or 'X', prec, 64): hexadecimal mantissa, binary exponent. */
function formatFloatX(f: number, prec: number, verb: string): string {
  if (Number.isNaN(f)) return 'NaN';
  if (!Number.isFinite(f)) return f > 0 ? '+Inf' : '-Inf';
  const bits = new DataView(new Float64Array([f]).buffer).getBigUint64(0, true);
  const neg = bits >> 63n === 1n;
  let exp = Number((bits >> 52n) & 0x7ffn);
  let mant = bits & ((1n << 52n) - 1n);
  if (exp === 0) exp++;
  else mant |= 1n << 52n;
  exp -= 1023;
  if (mant === 0n) exp = 0;
  const top = 1n << 60n;
  mant <<= 8n;
  while (mant !== 0n && (mant & top) === 0n) {
    mant <<= 1n;
    exp--;
  }
  if (prec >= 0 && prec < 15) {
    const shift = BigInt(prec * 4);
    const extra = (mant << shift) & (top - 1n);
    mant >>= 60n - shift;
    if ((extra | (mant & 1n)) > 1n << 59n) mant++;
    mant <<= 60n - shift;
    if ((mant & (1n << 61n)) !== 0n) {
      mant >>= 1n;
      exp++;
    }
  }
  const mask = (1n << 64n) - 1n;
  let out = (neg ? '-' : '') + '0' + verb + String((mant >> 60n) & 1n);
  mant = (mant << 4n) & mask;
  const digit = (): string => {
    const d = Number((mant >> 60n) & 15n).toString(16);
    mant = (mant << 4n) & mask;
    return verb === 'X' ? d.toUpperCase() : d;
  };
  if (prec < 0 && mant !== 0n) {
    out += '.';
    while (mant !== 0n) out += digit();
  } else if (prec > 0) {
    out += '.';
    for (let i = 0; i < prec; i++) out += digit();
  }
  out += (verb === 'X' ? 'P' : 'p') + (exp < 0 ? '-' : '+');
  return out + String(Math.abs(exp)).padStart(2, '0');
}

function fmtString(s: string, verb: string, sp: Spec): string | undefined {
  if (sp.prec !== undefined && (verb === 's' || verb === 'v' || verb === 'q')) s = [...s].slice(0, sp.prec).join('');
  switch (verb) {
    case 's': case 'v': return pad(s, sp, false);
    case 'q': return pad(sp.sharp && !s.includes('`') ? '`' + s + '`' : goQuote(s, sp.plus), sp, false);
    case 'x': case 'X': {
      // `% x`: bytes apart (each with 0x under #); `%#x`: one 0x in front.
      const bytes = [...Buffer.from(s, 'utf8')].map((x) => x.toString(16).padStart(2, '0'));
      let h = sp.space ? bytes.map((x) => (sp.sharp ? '0x' : '') + x).join(' ') : (sp.sharp && bytes.length > 0 ? '0x' : '') + bytes.join('');
      if (verb === 'X') h = h.toUpperCase();
      return pad(h, sp, false);
    }
  }
  return undefined;
}

/** fmt.Sprintf for the verbs templates use: %v %s %d %q %x %X %o %b %c %t %f %e %g %%. */
export function goSprintf(format: string, args: unknown[]): string {
  let out = '';
  let argi = 0;
  for (let i = 0; i < format.length; i++) {
    const c = format[i]!;
    if (c !== '%') { out += c; continue; }
    const sp: Spec = { minus: false, plus: false, sharp: false, space: false, zero: false };
    i++;
    for (; i < format.length; i++) {
      const f = format[i];
      if (f === '-') { sp.minus = true; sp.zero = false; } else if (f === '+') sp.plus = true;
      else if (f === '#') sp.sharp = true;
      else if (f === ' ') sp.space = true;
      else if (f === '0') sp.zero = !sp.minus;
      else break;
    }
    let num = '';
    while (i < format.length && /[0-9]/.test(format[i]!)) num += format[i++];
    if (num !== '') sp.width = Number(num);
    if (format[i] === '.') {
      i++;
      let p = '';
      while (i < format.length && /[0-9]/.test(format[i]!)) p += format[i++];
      sp.prec = p === '' ? 0 : Number(p);
    }
    if (i >= format.length) { out += '%!(NOVERB)'; break; }
    const verb = String.fromCodePoint(format.codePointAt(i)!);
    i += verb.length - 1;
    if (verb === '%') { out += '%'; continue; }
    if (argi >= args.length) { out += `%!${verb}(MISSING)`; continue; }
    const v = args[argi++];
    if (verb === 'T') { out += pad(v === null || v === undefined ? '<nil>' : typeName(v), sp, false); continue; }
    out += fmtOne(v, verb, sp);
  }
  if (argi < args.length) {
    out += '%!(EXTRA ' + args.slice(argi).map((a) => (a === null ? '<nil>' : `${typeName(a)}=${fmtValue(a)}`)).join(', ') + ')';
  }
  return out;
}

/**
 * fmt's printArg/printValue: one operand under one verb. Maps, slices and
 * structs print element by element under the same verb and flags (depth > 0).
 */
function fmtOne(v: unknown, verb: string, sp: Spec, depth = 0, inBadVerb = false): string {
  let plusV = false;
  // badVerb prints with %v but keeps the flags as they are (a + is a sign there).
  if (verb === 'v' && !inBadVerb && (sp.plus || sp.sharp)) {
    // fmt turns %+v and %#v into modes of %v: no sign, no 0x.
    if (sp.sharp) return pad(goSyntax(v), { ...sp, zero: false }, false);
    plusV = true;
    sp = { ...sp, plus: false };
  }
  if (v === null || v === undefined) {
    // Inside a collection a nil is an empty interface{}: <nil> whatever the verb.
    if (depth > 0) return '<nil>';
    return verb === 'v' ? pad('<nil>', sp, false) : badVerb(verb, v, sp);
  }
  if (typeof v === 'boolean') return verb === 't' || verb === 'v' ? pad(String(v), sp, false) : badVerb(verb, v, sp);
  if (typeof v === 'number' || typeof v === 'bigint' || (v instanceof GoNum && !v.type.startsWith('float'))) {
    const n = v instanceof GoNum ? v.big ?? v.v : v;
    if (v instanceof GoNum && v.type === 'uint8' && verb === 'v') return pad(String(n), sp, true);
    const r = fmtInteger(n, verb, sp);
    return r === '' ? badVerb(verb, v, sp) : r;
  }
  if (v instanceof GoNum) {
    const r = fmtFloat(v.v, verb, sp);
    return r === '' ? badVerb(verb, v, sp) : r;
  }
  if (typeof v === 'string') return fmtString(v, verb, sp) ?? badVerb(verb, v, sp);
  if (v instanceof GoStruct) {
    const str = v.goString();
    if (str !== undefined && (verb === 'v' || verb === 's' || verb === 'q' || verb === 'x' || verb === 'X')) {
      return fmtString(str, verb, sp)!;
    }
    if (str === undefined) {
      const names = plusV ? v.fieldNames() : [];
      const body = '{' + v.fieldValues().map((x, i) => (names[i] !== undefined ? names[i] + ':' : '') + fmtOne(x, verb, sp, depth + 1)).join(' ') + '}';
      return v.goType.startsWith('*') && depth === 0 ? '&' + body : body;
    }
  }
  if (v instanceof GoSlice) return '[' + v.items.map((x) => fmtOne(x, verb, plusV ? { ...sp, plus: true } : sp, depth + 1)).join(' ') + ']';
  if (v instanceof GoMap) {
    const m = v.m;
    if (m === undefined) return 'map[]';
    const e = plusV ? { ...sp, plus: true } : sp;
    return 'map[' + [...m.keys()].sort(cmpStrings).map((k) => `${fmtOne(k, verb, e, depth + 1)}:${fmtOne(m.get(k), verb, e, depth + 1)}`).join(' ') + ']';
  }
  if (verb === 'v' || verb === 's') return pad(fmtValue(v, plusV), sp, false);
  return badVerb(verb, v, sp);
}
