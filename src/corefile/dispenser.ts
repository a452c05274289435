// Token dispenser with the semantics of coredns/caddy's caddyfile.Dispenser.
// Plugin setup code walks its directive's tokens with it, e.g.
//
//   while (d.next()) {
//     const args = d.remainingArgs();
//     while (d.nextBlock()) { switch (d.val()) { ... } }
//   }

import type { Token } from './token.ts';
import { CorefileError } from './errors.ts';

export class Dispenser {
  protected filename: string;
  protected tokens: Token[];
  protected cursor: number;
  protected _nesting: number;

  /**
   * @param tokens the tokens to dispense (not copied).
   * @param filename reported by file() (and in errors) while no token is loaded;
   *   defaults to the file of the first token.
   */
  constructor(tokens: Token[], filename?: string) {
    this.tokens = tokens;
    this.filename = filename ?? (tokens.length > 0 ? tokens[0].file : '');
    this.cursor = -1;
    this._nesting = 0;
  }

  /** Loads the next token. Returns false (and stays put) when all tokens are consumed. */
  next(): boolean {
    if (this.cursor < this.tokens.length - 1) {
      this.cursor++;
      return true;
    }
    return false;
  }

  /** Loads the next token only if it is on the same line as the current one. */
  nextArg(): boolean {
    if (this.cursor < 0) {
      this.cursor++;
      return true;
    }
    if (this.cursor >= this.tokens.length) return false;
    if (this.cursor < this.tokens.length - 1) {
      const cur = this.tokens[this.cursor];
      const nxt = this.tokens[this.cursor + 1];
      if (cur.file === nxt.file && cur.line + this.numLineBreaks(this.cursor) === nxt.line) {
        this.cursor++;
        return true;
      }
    }
    return false;
  }

  /** Loads the next token only if it is NOT on the same line as the current one. */
  nextLine(): boolean {
    if (this.cursor < 0) {
      this.cursor++;
      return true;
    }
    if (this.cursor >= this.tokens.length) return false;
    if (this.cursor < this.tokens.length - 1) {
      const cur = this.tokens[this.cursor];
      const nxt = this.tokens[this.cursor + 1];
      if (cur.file !== nxt.file || cur.line + this.numLineBreaks(this.cursor) < nxt.line) {
        this.cursor++;
        return true;
      }
    }
    return false;
  }

  /**
   * Use as a loop condition: loads the next token while it opens a block (a `{` on the
   * current line) or is inside one; returns false once the block's closing `}` is loaded.
   * Like caddy, a `{ ... }` nested inside the block is returned token by token; calling
   * nextBlock() again while positioned after an inner `{` counts that nesting level.
   */
  nextBlock(): boolean {
    if (this._nesting > 0) {
      if (!this.next()) return false;
      if (this.val() === '}') {
        this._nesting--;
        return false;
      }
      return true;
    }
    if (!this.nextArg()) return false; // block must open on same line
    if (this.val() !== '{') {
      this.cursor--; // roll back if not opening brace
      return false;
    }
    if (!this.next()) return false;
    if (this.val() === '}') return false; // opened and closed right away
    this._nesting++;
    return true;
  }

  /** Current block nesting depth as tracked by nextBlock(). */
  nesting(): number {
    return this._nesting;
  }

  /** Text of the current token, '' if none is loaded. */
  val(): string {
    if (this.cursor < 0 || this.cursor >= this.tokens.length) return '';
    return this.tokens[this.cursor].text;
  }

  /** Line of the current token, 0 if none is loaded. */
  line(): number {
    if (this.cursor < 0 || this.cursor >= this.tokens.length) return 0;
    return this.tokens[this.cursor].line;
  }

  /** File of the current token, or the dispenser's file name if none is loaded. */
  file(): string {
    if (this.cursor < 0 || this.cursor >= this.tokens.length) return this.filename;
    const f = this.tokens[this.cursor].file;
    return f !== '' ? f : this.filename;
  }

  /** The current token (undefined if none is loaded). */
  token(): Token {
    return this.tokens[this.cursor];
  }

  /**
   * caddy's Args(): loads up to n following arguments on the same line. Returns them
   * (possibly fewer than n) and whether there were enough.
   */
  args(n: number): { values: string[]; ok: boolean } {
    const values: string[] = [];
    for (let i = 0; i < n; i++) {
      if (!this.nextArg()) return { values, ok: false };
      values.push(this.val());
    }
    return { values, ok: true };
  }

  /**
   * Loads all remaining arguments on the current line. An opening `{` ends the
   * arguments and is not consumed.
   */
  remainingArgs(): string[] {
    const args: string[] = [];
    while (this.nextArg()) {
      if (this.val() === '{') {
        this.cursor--;
        break;
      }
      args.push(this.val());
    }
    return args;
  }

  /** Another argument was expected but a line ending or `{` was found. */
  argErr(): CorefileError {
    if (this.val() === '{') return this.err("Unexpected token '{', expecting argument");
    return this.err(`Wrong argument count or unexpected line ending after '${this.val()}'`);
  }

  /** `<file>:<line> - Syntax error: Unexpected token '<val>', expecting '<expected>'` */
  syntaxErr(expected: string): CorefileError {
    return new CorefileError(
      `${this.file()}:${this.line()} - Syntax error: Unexpected token '${this.val()}', expecting '${expected}'`,
    );
  }

  /** `... - Error during parsing: Unexpected EOF` */
  eofErr(): CorefileError {
    return this.err('Unexpected EOF');
  }

  /** `<file>:<line> - Error during parsing: <msg>` */
  err(msg: string): CorefileError {
    return new CorefileError(`${this.file()}:${this.line()} - Error during parsing: ${msg}`);
  }

  /** Alias of err() for code ported from Errf (format the message with a template string). */
  errf(msg: string): CorefileError {
    return this.err(msg);
  }

  /** Rewinds to before the first token (nesting is reset too). */
  reset(): void {
    this.cursor = -1;
    this._nesting = 0;
  }

  /** Number of newlines inside the text of token i (quoted tokens may span lines). */
  protected numLineBreaks(i: number): number {
    if (i < 0 || i >= this.tokens.length) return 0;
    const t = this.tokens[i].text;
    let n = 0;
    for (let k = t.indexOf('\n'); k !== -1; k = t.indexOf('\n', k + 1)) n++;
    return n;
  }

  /**
   * Whether the current token is on a later line than the previous one (or in another
   * file). True when there is no previous token.
   */
  protected isNewLine(): boolean {
    if (this.cursor < 1) return true;
    if (this.cursor > this.tokens.length - 1) return false;
    const prev = this.tokens[this.cursor - 1];
    const cur = this.tokens[this.cursor];
    return prev.file !== cur.file || prev.line + this.numLineBreaks(this.cursor - 1) < cur.line;
  }
}
