// Corefile tokeniser with the behaviour of coredns/caddy's caddyfile/lexer.go.
//
// Tokens are separated by Unicode whitespace (`\r` is ignored); `#` outside quotes starts
// a comment to the end of the line, even in the middle of a word; a token starting with
// `"` runs to the next unescaped `"` (only `\"` is an escape, other backslashes stay),
// may span lines and may be empty. Braces are not special here.

import type { Token } from './token.ts';

/** Go's unicode.IsSpace. */
export function isGoSpace(cp: number): boolean {
  if (cp <= 0xff) {
    return cp === 0x20 || (cp >= 0x09 && cp <= 0x0d) || cp === 0x85 || cp === 0xa0;
  }
  return (
    cp === 0x1680 ||
    (cp >= 0x2000 && cp <= 0x200a) ||
    cp === 0x2028 ||
    cp === 0x2029 ||
    cp === 0x202f ||
    cp === 0x205f ||
    cp === 0x3000
  );
}

/** Splits `input` into tokens; every token carries `file` and the line it started on. */
export function lex(input: string, file: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  const n = input.length;
  if (n > 0 && input.charCodeAt(0) === 0xfeff) i = 1; // byte order mark
  let line = 1;
  let val = '';
  let has = false; // a token is being collected (it may be empty: "")
  let tokLine = 0;
  let comment = false;
  let quoted = false;
  let escaped = false;

  const emit = (): void => {
    tokens.push({ text: val, file, line: tokLine });
    val = '';
    has = false;
  };

  while (i < n) {
    const cp = input.codePointAt(i)!;
    const ch = cp > 0xffff ? input.slice(i, i + 2) : input[i];
    i += ch.length;

    if (quoted) {
      if (!escaped) {
        if (cp === 0x5c) {
          escaped = true;
          continue;
        } else if (cp === 0x22) {
          quoted = false;
          emit();
          continue;
        }
      }
      if (cp === 0x0a) line++;
      if (escaped && cp !== 0x22) val += '\\'; // only quotes are escaped
      val += ch;
      escaped = false;
      continue;
    }

    if (isGoSpace(cp)) {
      if (cp === 0x0d) continue;
      if (cp === 0x0a) {
        line++;
        comment = false;
      }
      if (val.length > 0) emit();
      continue;
    }

    if (cp === 0x23) comment = true;
    if (comment) continue;

    if (val.length === 0) {
      tokLine = line;
      has = true;
      if (cp === 0x22) {
        quoted = true;
        continue;
      }
    }
    val += ch;
  }
  // End of input: a pending non-empty token is emitted (also an unterminated quote).
  if (has && val.length > 0) emit();
  return tokens;
}
