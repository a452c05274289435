// Corefile parser with the behaviour of coredns/caddy's caddyfile/parse.go: server
// blocks, keys, directives, snippets, `import` of files and globs, `{$ENV}` / `{%ENV%}`.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { Dispenser } from './dispenser.ts';
import type { Token } from './token.ts';
import { lex } from './lexer.ts';
import { goClean } from './gopath.ts';

export interface ParseOptions {
  /** Whether `name` is a known directive (CoreDNS: listed in plugin.cfg). */
  isDirective(name: string): boolean;
  /** Environment for `{$X}` / `{%X%}`; defaults to process.env. */
  env?: Record<string, string | undefined>;
  /** Receives warnings (without the `[WARNING] ` prefix). */
  warn?(msg: string): void;
}

/** caddyfile.ServerBlock: the keys, and all tokens of each directive. */
export interface ServerBlock {
  /** Keys as written (env substituted, trailing comma removed), not yet normalised. */
  keys: Token[];
  /**
   * Directive name → all its tokens (the name token included), every occurrence in
   * the block concatenated in order; insertion order = first appearance.
   */
  tokens: Map<string, Token[]>;
  /** The Corefile path the block was parsed from (main file, as given). */
  file?: string;
}

/** Hard cap on snippet expansions per parse (caddy's maxSnippetExpansions). */
export const MAX_SNIPPET_EXPANSIONS = 10000;
/** Hard cap on file/glob imports per parse (caddy's maxFileExpansions). */
export const MAX_FILE_EXPANSIONS = 100000;

/** Guard against values that keep re-introducing references (Go would loop forever). */
const MAX_ENV_REPLACEMENTS = 10000;

/** Substitutes `{%NAME%}` then `{$NAME}` references in one token (caddy's replaceEnvVars). */
export function replaceEnvVars(s: string, env: Record<string, string | undefined> = process.env): string {
  s = replaceEnvReferences(s, '{%', '%}', env);
  s = replaceEnvReferences(s, '{$', '}', env);
  return s;
}

function replaceEnvReferences(
  s: string,
  refStart: string,
  refEnd: string,
  env: Record<string, string | undefined>,
): string {
  let index = s.indexOf(refStart);
  let rounds = 0;
  while (index !== -1) {
    let endIndex = s.slice(index).indexOf(refEnd);
    if (endIndex === -1) break;
    endIndex += index;
    if (endIndex > index + refStart.length) {
      const ref = s.slice(index, endIndex + refEnd.length);
      const value = env[ref.slice(refStart.length, ref.length - refEnd.length)] ?? '';
      s = s.split(ref).join(value);
    } else {
      return s;
    }
    if (++rounds >= MAX_ENV_REPLACEMENTS) return s;
    index = s.indexOf(refStart);
  }
  return s;
}

/** Go's filepath.Match metacharacters on Unix (filepath.Glob's hasMeta). */
function hasMeta(p: string): boolean {
  return /[*?[\\]/.test(p);
}

class BadPatternError extends Error {}

/** Compiles a filepath.Match pattern (no character classes possible here) to a RegExp. */
function compileMatch(pattern: string): RegExp {
  let re = '^';
  const cps = Array.from(pattern);
  for (let i = 0; i < cps.length; i++) {
    const c = cps[i];
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '\\') {
      i++;
      if (i >= cps.length) throw new BadPatternError('syntax error in pattern');
      re += escapeRe(cps[i]);
    } else if (c === '[') {
      // A class can only be unterminated here (`[` together with `]` is refused earlier).
      throw new BadPatternError('syntax error in pattern');
    } else re += escapeRe(c);
  }
  return new RegExp(re + '$', 'su');
}

function escapeRe(c: string): string {
  return c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

/** Go's filepath.Glob (Unix): sorted matches; unreadable directories match nothing. */
function glob(pattern: string): string[] {
  compileMatch(pattern); // validates the whole pattern (ErrBadPattern)
  if (!hasMeta(pattern)) {
    try {
      fs.lstatSync(pattern);
      return [pattern];
    } catch {
      return [];
    }
  }
  // filepath.Split keeps everything up to the last separator; cleanGlobPath trims it.
  const slash = pattern.lastIndexOf('/');
  const file = pattern.slice(slash + 1);
  const dir = slash === -1 ? '.' : slash === 0 ? '/' : pattern.slice(0, slash);
  if (!hasMeta(dir)) return globIn(dir, file);
  if (dir === pattern) throw new BadPatternError('syntax error in pattern');
  const out: string[] = [];
  for (const d of glob(dir)) out.push(...globIn(d, file));
  return out;
}

function globIn(dir: string, pattern: string): string[] {
  let names: string[];
  try {
    if (!fs.statSync(dir).isDirectory()) return [];
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  names.sort(compareBytes);
  const re = compileMatch(pattern);
  const out: string[] = [];
  for (const name of names) if (re.test(name)) out.push(path.join(dir, name));
  return out;
}

/** Go string ordering (UTF-8 byte order). */
export function compareBytes(a: string, b: string): number {
  if (a === b) return 0;
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** Go's os error text for a failed open. */
function osErrorText(e: unknown): string {
  const code = (e as { code?: string }).code;
  switch (code) {
    case 'ENOENT':
      return 'no such file or directory';
    case 'EACCES':
      return 'permission denied';
    case 'ELOOP':
      return 'too many levels of symbolic links';
    case 'ENOTDIR':
      return 'not a directory';
    case 'ENAMETOOLONG':
      return 'file name too long';
    case 'EISDIR':
      return 'is a directory';
    default:
      return e instanceof Error ? e.message : String(e);
  }
}

class Parser extends Dispenser {
  private readonly opts: ParseOptions;
  private readonly env: Record<string, string | undefined>;
  private block: ServerBlock = { keys: [], tokens: new Map() };
  private eof = false;
  private snippets: Map<string, Token[]> | undefined;
  private snippetExpansions = 0;
  private fileExpansions = 0;

  constructor(tokens: Token[], filename: string, opts: ParseOptions) {
    super(tokens, filename);
    this.opts = opts;
    this.env = opts.env ?? process.env;
  }

  private env_(s: string): string {
    return replaceEnvVars(s, this.env);
  }

  parseAll(): ServerBlock[] {
    const blocks: ServerBlock[] = [];
    while (this.next()) {
      this.parseOne();
      if (this.block.keys.length > 0) blocks.push(this.block);
    }
    return blocks;
  }

  private parseOne(): void {
    this.block = { keys: [], tokens: new Map(), file: this.filename };
    this.begin();
  }

  private begin(): void {
    if (this.tokens.length === 0) return;
    this.addresses();
    if (this.eof) return; // the input ended on the keys line
    const snippet = this.isSnippet();
    if (snippet !== undefined) {
      if (this.snippets === undefined) this.snippets = new Map();
      if (this.snippets.has(snippet)) {
        throw this.err(`redeclaration of previously declared snippet ${snippet}`);
      }
      const tokens = this.snippetTokens();
      // minimal guard: a snippet whose body imports itself (at a line start)
      for (let i = 0; i + 1 < tokens.length; i++) {
        if (tokens[i].text === 'import') {
          const atLineStart =
            i === 0 || tokens[i - 1].file !== tokens[i].file || tokens[i - 1].line !== tokens[i].line;
          if (atLineStart && this.env_(tokens[i + 1].text) === snippet) {
            throw this.err(`maximum snippet import depth (${MAX_SNIPPET_EXPANSIONS}) exceeded`);
          }
        }
      }
      this.snippets.set(snippet, tokens);
      this.block.keys = []; // not a server block
      return;
    }
    this.blockContents();
  }

  private addresses(): void {
    let expectingAnother = false;
    for (;;) {
      let tkn = this.env_(this.val());

      // import replaces tokens during parse time
      if (tkn === 'import' && this.isNewLine()) {
        this.doImport();
        continue;
      }

      // an open brace definitely ends the addresses
      if (tkn === '{') {
        if (expectingAnother) {
          throw this.err(`Expected another address but had '${tkn}' - check for extra comma`);
        }
        break;
      }

      if (tkn !== '') {
        // a trailing comma means another address follows, maybe on the next line
        if (tkn.endsWith(',')) {
          tkn = tkn.slice(0, -1);
          expectingAnother = true;
        } else {
          expectingAnother = false;
        }
        const cur = this.token();
        this.block.keys.push({ text: tkn, file: cur.file, line: cur.line });
      }

      const hasNext = this.next();
      if (expectingAnother && !hasNext) throw this.eofErr();
      if (!hasNext) {
        this.eof = true;
        break;
      }
      if (!expectingAnother && this.isNewLine()) break;
    }
  }

  private blockContents(): void {
    const braced = this.val() === '{';
    if (!braced) this.cursor--; // single-server configs don't need braces
    this.directives();
    if (braced && this.val() !== '}') throw this.syntaxErr('}');
  }

  private directives(): void {
    while (this.next()) {
      if (this.val() === '}') break; // end of server block
      if (this.val() === 'import') {
        this.doImport();
        this.cursor--; // next() advances again
        continue;
      }
      this.directive();
    }
  }

  /**
   * Replaces `import PATTERN` (2 tokens) by the imported tokens. Afterwards the cursor is
   * on the first imported token (or what followed the import).
   */
  private doImport(): void {
    if (!this.nextArg()) throw this.argErr();
    const importPattern = this.env_(this.val());
    if (importPattern === '') throw this.err('Import requires a non-empty filepath');
    if (this.nextArg()) throw this.err('Import takes only one argument (glob pattern or file)');

    const before = this.tokens.slice(0, this.cursor - 1);
    const after = this.tokens.slice(this.cursor + 1);
    let imported: Token[] = [];

    const snippet = this.snippets?.get(importPattern);
    if (snippet !== undefined) {
      if (this.snippetExpansions >= MAX_SNIPPET_EXPANSIONS) {
        throw this.err(`maximum snippet import depth (${MAX_SNIPPET_EXPANSIONS}) exceeded`);
      }
      this.snippetExpansions++;
      imported = snippet.map((t) => ({ ...t }));
    } else {
      if (this.fileExpansions >= MAX_FILE_EXPANSIONS) {
        // sic: caddy prints the snippet limit here
        throw this.err(`maximum file import depth (${MAX_SNIPPET_EXPANSIONS}) exceeded`);
      }
      this.fileExpansions++;
      // relative to the file of the token being processed, not the working directory
      const absFile = path.resolve(this.file());
      const globPattern = importPattern.startsWith('/')
        ? importPattern
        : goClean(path.join(path.dirname(absFile), importPattern));
      if (
        count(globPattern, '*') > 1 ||
        count(globPattern, '?') > 1 ||
        (globPattern.includes('[') && globPattern.includes(']'))
      ) {
        throw this.err(`Glob pattern may only contain one wildcard (*), but has others: ${globPattern}`);
      }
      let matches: string[];
      try {
        matches = glob(globPattern);
      } catch (e) {
        if (e instanceof BadPatternError) {
          throw this.err(`Failed to use import pattern ${importPattern}: ${e.message}`);
        }
        throw e;
      }
      if (matches.length === 0) {
        if (/[*?[\]]/.test(globPattern)) {
          this.opts.warn?.(`No files matching import glob pattern: ${importPattern}`);
        } else {
          throw this.err(`File to import not found: ${importPattern}`);
        }
      }
      for (const m of matches) {
        for (const t of this.doSingleImport(m)) imported.push(t);
      }
    }

    this.tokens = before.concat(imported, after);
    this.cursor--;
  }

  /** Lexes one imported file; its tokens carry the file's absolute path. */
  private doSingleImport(importFile: string): Token[] {
    let fd: number;
    try {
      fd = fs.openSync(importFile, 'r');
    } catch (e) {
      throw this.err(`Could not import ${importFile}: open ${importFile}: ${osErrorText(e)}`);
    }
    let text: string;
    try {
      const st = fs.fstatSync(fd);
      if (st.isDirectory()) throw this.err(`Could not import ${importFile}: is a directory`);
      text = fs.readFileSync(fd, 'utf8');
    } catch (e) {
      if (e instanceof Error && e.name === 'CorefileError') throw e;
      throw this.err(`Could not import ${importFile}: read ${importFile}: ${osErrorText(e)}`);
    } finally {
      fs.closeSync(fd);
    }
    return lex(text, path.resolve(importFile));
  }

  /**
   * Collects the tokens of one directive: the rest of its line plus any `{ ... }` block
   * (nesting tracked); imports at line starts are expanded.
   */
  private directive(): void {
    const dir = this.env_(this.val());
    let nesting = 0;
    if (!this.opts.isDirective(dir)) throw this.err(`Unknown directive '${dir}'`);

    const list: Token[] = this.block.tokens.get(dir) ?? [];
    if (!this.block.tokens.has(dir)) this.block.tokens.set(dir, list);
    list.push(this.tokens[this.cursor]);

    while (this.next()) {
      const v = this.val();
      if (v === '{') {
        nesting++;
      } else if (this.isNewLine() && nesting === 0) {
        this.cursor--; // read too far
        break;
      } else if (v === '}' && nesting > 0) {
        nesting--;
      } else if (v === '}' && nesting === 0) {
        throw this.err("Unexpected '}' because no matching opening brace");
      } else if (v === 'import' && this.isNewLine()) {
        this.doImport();
        this.cursor--;
        continue;
      }
      const t = this.tokens[this.cursor];
      const replaced = { text: this.env_(t.text), file: t.file, line: t.line };
      this.tokens[this.cursor] = replaced;
      list.push(replaced);
    }
    if (nesting > 0) throw this.eofErr();
  }

  private isSnippet(): string | undefined {
    const keys = this.block.keys;
    if (keys.length === 1 && keys[0].text.startsWith('(') && keys[0].text.endsWith(')')) {
      const k = keys[0].text.slice(1);
      return k.endsWith(')') ? k.slice(0, -1) : k;
    }
    return undefined;
  }

  /** Reads a snippet's `{ ... }` body for later replay. */
  private snippetTokens(): Token[] {
    if (this.val() !== '{') throw this.syntaxErr('{');
    let depth = 1;
    const tokens: Token[] = [];
    while (this.next()) {
      if (this.val() === '}') {
        depth--;
        if (depth === 0) break;
      }
      if (this.val() === '{') depth++;
      tokens.push(this.tokens[this.cursor]);
    }
    if (depth !== 0) throw this.syntaxErr('}');
    return tokens;
  }
}

function count(s: string, c: string): number {
  let n = 0;
  for (let i = s.indexOf(c); i !== -1; i = s.indexOf(c, i + 1)) n++;
  return n;
}

/**
 * Parses a Corefile into server blocks. `file` is the path as given (used in errors
 * and to resolve relative imports). Throws CorefileError.
 */
export function parseCorefile(input: string, file: string, opts: ParseOptions): ServerBlock[] {
  return new Parser(lex(input, file), file, opts).parseAll();
}

/** All tokens of a file without parsing (caddy's allTokens). */
export { lex as allTokens };
