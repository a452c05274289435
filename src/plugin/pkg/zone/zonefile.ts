// RFC 1035 master files as miekg/dns's ZoneParser reads them for CoreDNS: `$ORIGIN`, `$TTL`, `$INCLUDE`
// (relative to the including file, at most 7 deep), `$GENERATE`, `@`, relative names, owners carried over from the
// previous record by a leading blank, TTL and class in either order, parentheses across lines, `;`
// comments, quoted strings. The TTL of a record without one is the `$TTL`, else the last explicit TTL
// (miekg's states: right after an owner a type without any TTL known is an error, "missing TTL with no
// previous value"; after a class it gets the previous record's TTL, 0 at first). Record data are read by the
// codec's presentation parser (`parseRecord` of src/wire/text.ts). Errors read as miekg's:
// `FILE: dns: WHAT: "TOKEN" at line: L:C`.

import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import type { ResourceRecord } from '../../../wire/types.ts';
import { RRType, stringToClass, stringToType } from '../../../wire/constants.ts';
import { fqdn, isDomainName } from '../../../wire/name.ts';
import { parseRecord } from '../../../wire/text.ts';
import { goOpenError } from './errors.ts';

const MAX_INCLUDE_DEPTH = 7;

interface Token {
  /** Raw text, quotes and escapes kept. */
  text: string;
  line: number;
  /** The column miekg reports for the token: its last character's, plus one unless a newline ends it. */
  col: number;
}

interface Logical {
  /** The record's first line starts with a blank (the owner is the previous one). */
  blank: boolean;
  toks: Token[];
  /** Where the line ended (for errors about what is missing). */
  endLine: number;
  endCol: number;
}

/** A master-file error, worded as miekg's ParseError. */
export class ZoneParseError extends Error {
  constructor(file: string, what: string, token: string, line: number, col: number) {
    super(`${file === '' ? '' : file + ': '}dns: ${what}: ${JSON.stringify(token)} at line: ${line}:${col}`);
    this.name = 'ZoneParseError';
  }
}

/** Splits `text` into logical records (parentheses joined, comments dropped). */
function lex(text: string, file: string): Logical[] {
  const out: Logical[] = [];
  let cur: Logical | undefined;
  let paren = 0;
  let line = 1;
  let col = 0;
  const n = text.length;
  let i = 0;
  let atLineStart = true;
  const flush = (): void => {
    if (cur !== undefined && cur.toks.length > 0) {
      cur.endLine = line;
      cur.endCol = col;
      out.push(cur);
    }
    cur = undefined;
  };
  while (i < n) {
    const c = text[i]!;
    if (c === '\n') {
      if (paren === 0) flush();
      line++;
      col = 0;
      i++;
      atLineStart = true;
      continue;
    }
    if (c === ' ' || c === '\t' || c === '\r') {
      if (atLineStart && paren === 0 && cur === undefined && c !== '\r') cur = { blank: true, toks: [], endLine: 0, endCol: 0 };
      atLineStart = false;
      i++;
      col++;
      continue;
    }
    atLineStart = false;
    if (c === ';') {
      while (i < n && text[i] !== '\n') i++;
      continue;
    }
    cur ??= { blank: false, toks: [], endLine: 0, endCol: 0 };
    if (c === '(') {
      paren++;
      i++;
      col++;
      continue;
    }
    if (c === ')') {
      if (paren === 0) throw new ZoneParseError(file, 'extra closing brace', ')', line, col + 1);
      paren--;
      i++;
      col++;
      continue;
    }
    const startLine = line;
    const startCol = col + 1;
    let s = '';
    if (c === '"') {
      s = '"';
      i++;
      col++;
      while (i < n && text[i] !== '"') {
        if (text[i] === '\\' && i + 1 < n) {
          s += text[i]! + text[i + 1]!;
          i += 2;
          col += 2;
          continue;
        }
        if (text[i] === '\n') {
          line++;
          col = 0;
        } else col++;
        s += text[i++]!;
      }
      if (i >= n) throw new ZoneParseError(file, 'unbalanced quote', s, startLine, startCol);
      s += '"';
      i++;
      col++;
    } else {
      while (i < n) {
        const d = text[i]!;
        if (d === ' ' || d === '\t' || d === '\n' || d === '\r' || d === ';' || d === '(' || d === ')' || d === '"') break;
        if (d === '\\' && i + 1 < n) {
          s += d + text[i + 1]!;
          i += 2;
          col += 2;
          continue;
        }
        s += d;
        i++;
        col++;
      }
    }
    // miekg's lexer reports the column where the token ended
    const endsLine = i >= n || text[i] === '\n' || (text[i] === '\r' && text[i + 1] === '\n');
    cur.toks.push({ text: s, line, col: endsLine ? col : col + 1 });
  }
  if (paren !== 0) throw new ZoneParseError(file, 'unbalanced brace', '', line, col);
  flush();
  return out;
}

/** miekg's stringToTTL: seconds, or BIND units (1w2d3h4m5s, case-insensitive). */
export function stringToTtl(s: string): number | undefined {
  if (s === '') return undefined;
  let total = 0;
  let num = 0;
  let digits = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c >= '0' && c <= '9') {
      num = num * 10 + (c.charCodeAt(0) - 48);
      digits = true;
      continue;
    }
    const unit = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 }[c.toLowerCase()];
    if (unit === undefined || !digits) return undefined;
    total += num * unit;
    num = 0;
    digits = false;
  }
  total += num;
  return total > 0xffffffff ? undefined : total;
}

/** An owner or origin made absolute against `origin` (miekg's toAbsoluteName); undefined when invalid. */
function toAbsolute(name: string, origin: string): string | undefined {
  if (name === '@') return origin === '' ? undefined : origin;
  if (!isDomainName(name)) return undefined;
  if (name.endsWith('.') && !name.endsWith('\\.')) return name;
  if (origin === '') return undefined;
  return origin === '.' ? name + '.' : name + '.' + origin;
}

/** The codec's rdata error in miekg's words where they are known (A, AAAA, MX preference, trailing garbage). */
function rdataError(file: string, typeTok: Token, rdata: Token[], what: string): ZoneParseError {
  const type = typeTok.text.toUpperCase();
  const first = rdata[0];
  const garbage = /^garbage after rdata: (".*")$/.exec(what);
  if (garbage !== null) {
    const text = JSON.parse(garbage[1]!) as string;
    const t = rdata.find((x) => x.text === text) ?? first ?? typeTok;
    return new ZoneParseError(file, 'garbage after rdata', t.text, t.line, t.col);
  }
  let miekg: string | undefined;
  if (what === 'bad A address') miekg = 'bad A A';
  else if (what === 'bad AAAA address') miekg = 'bad AAAA AAAA';
  else if (type === 'MX' && what.startsWith('bad preference')) miekg = 'bad MX Pref';
  const t = first ?? typeTok;
  return new ZoneParseError(file, miekg ?? what, t.text, t.line, t.col);
}

interface State {
  origin: string;
  /** The default TTL and whether `$TTL` set it. */
  ttl: { value: number; directive: boolean } | undefined;
  owner: string;
  /** The TTL of the previous record (what a record gets before any TTL was seen: 0 at first). */
  lastTtl: number;
  /** Inside the lines of a `$GENERATE`. */
  noGenerate?: boolean;
}

/** Go's fmt %d/%o/%x/%X with an optional zero-padded width. */
function formatInt(v: number, base: string, width: number): string {
  const neg = v < 0;
  let digits = Math.abs(v).toString(base === 'd' ? 10 : base === 'o' ? 8 : 16);
  if (base === 'X') digits = digits.toUpperCase();
  const w = neg ? width - 1 : width;
  if (digits.length < w) digits = '0'.repeat(w - digits.length) + digits;
  return (neg ? '-' : '') + digits;
}

/** The `{offset,width,base}` modifier of a `$GENERATE` substitution, or miekg's error text. */
function generateModifier(m: string): { offset: number; width: number; base: string } | string {
  const parts = m.split(',');
  if (parts.length > 3) return 'bad modifier in $GENERATE';
  const [offStr, widthStr = '0', base = 'd'] = parts;
  if (!['o', 'd', 'x', 'X'].includes(base)) return 'bad base in $GENERATE';
  if (!/^[+-]?\d+$/.test(offStr!)) return 'bad offset in $GENERATE';
  if (!/^\+?\d+$/.test(widthStr) || Number(widthStr) > 255) return 'bad width in $GENERATE';
  return { offset: Number(offStr), width: Number(widthStr), base };
}

/**
 * The lines a `$GENERATE start-stop[/step] TEMPLATE` stands for (miekg's generateReader): `$` is the
 * counter, `${offset[,width[,base]]}` a formatted one, `$$` and `\$` a dollar sign.
 */
function generate(file: string, range: Token, template: string): string {
  const err = (what: string): ZoneParseError => new ZoneParseError(file, what, range.text, range.line, range.col);
  let token = range.text;
  let step = 1;
  const slash = token.indexOf('/');
  if (slash >= 0) {
    const st = token.slice(slash + 1);
    if (!/^[+-]?\d+$/.test(st) || Number(st) <= 0) throw err('bad step in $GENERATE range');
    step = Number(st);
    token = token.slice(0, slash);
  }
  const dash = token.indexOf('-');
  if (dash < 0) throw err('bad start-stop in $GENERATE range');
  const startStr = token.slice(0, dash);
  const endStr = token.slice(dash + 1);
  if (!/^[+-]?\d+$/.test(startStr)) throw err('bad start in $GENERATE range');
  if (!/^[+-]?\d+$/.test(endStr)) throw err('bad stop in $GENERATE range');
  const start = Number(startStr);
  const end = Number(endStr);
  if (end < 0 || start < 0 || end < start || Math.floor((end - start) / step) > 65535) throw err('bad range in $GENERATE range');
  let out = '';
  for (let cur = start; cur <= end; cur += step) {
    let escape = false;
    for (let si = 0; si < template.length; si++) {
      const c = template[si]!;
      if (c === '\\') {
        if (escape) {
          escape = false;
          out += '\\';
        } else escape = true;
        continue;
      }
      if (c === '$') {
        if (escape) {
          escape = false;
          out += '$';
          continue;
        }
        if (si === template.length - 1) {
          out += String(cur);
          continue;
        }
        if (template[si + 1] === '$') {
          si++;
          out += '$';
          continue;
        }
        let mod = { offset: 0, width: 0, base: 'd' };
        if (template[si + 1] === '{') {
          // miekg reports these at the substitution, counted from the blank after the range
          const at = (what: string, to: number): ZoneParseError =>
            new ZoneParseError(file, what, template.slice(si, to), range.line, range.col + si + 1);
          const close = template.indexOf('}', si + 2);
          if (close < 0) throw at('bad modifier in $GENERATE', template.length);
          const m = generateModifier(template.slice(si + 2, close));
          if (typeof m === 'string') throw at(m, close + 1);
          if (start + m.offset < 0 || end + m.offset > 2147483647) throw at('bad offset in $GENERATE', close + 1);
          mod = m;
          si = close;
        }
        out += formatInt(cur + mod.offset, mod.base, mod.width);
        continue;
      }
      if (escape) {
        // miekg drops the character after a backslash that escapes neither `\` nor `$`
        escape = false;
        continue;
      }
      out += c;
    }
    out += '\n';
  }
  return out;
}

/**
 * Parses the master file at `file` (its text `text`) with initial origin `origin`, handing each
 * record to `onRecord` in file order. Throws ZoneParseError (or the error of an `$INCLUDE` that
 * cannot be read) on the first error.
 */
export function parseZone(text: string, origin: string, file: string, onRecord: (rr: ResourceRecord) => void): void {
  parseInto(text, file, { origin: fqdn(origin), ttl: undefined, owner: '', lastTtl: 0 }, 0, onRecord);
}

function parseInto(text: string, file: string, st: State, depth: number, onRecord: (rr: ResourceRecord) => void): void {
  const recs = lex(text, file);
  for (let ri = 0; ri < recs.length; ri++) {
    const rec = recs[ri]!;
    const toks = rec.toks;
    const first = toks[0]!;
    let k = 0;
    if (!rec.blank) {
      const dir = first.text.toUpperCase();
      if (dir === '$ORIGIN') {
        const v = toks[1];
        if (v === undefined) throw new ZoneParseError(file, 'not a TTL', first.text, first.line, first.col);
        if (toks.length > 2) throw new ZoneParseError(file, 'garbage after $ORIGIN', toks[2]!.text, toks[2]!.line, toks[2]!.col);
        const o = toAbsolute(v.text, st.origin);
        if (o === undefined) throw new ZoneParseError(file, 'bad origin name', v.text, v.line, v.col);
        st.origin = o;
        continue;
      }
      if (dir === '$TTL') {
        const v = toks[1];
        if (v === undefined) throw new ZoneParseError(file, 'not a TTL', first.text, first.line, first.col);
        const t = stringToTtl(v.text);
        if (t === undefined) throw new ZoneParseError(file, 'expecting $TTL value, not this...', v.text, v.line, v.col);
        if (toks.length > 2) throw new ZoneParseError(file, 'garbage after $TTL', toks[2]!.text, toks[2]!.line, toks[2]!.col);
        st.ttl = { value: t, directive: true };
        continue;
      }
      if (dir === '$INCLUDE') {
        const v = toks[1];
        if (v === undefined) throw new ZoneParseError(file, 'not a TTL', first.text, first.line, first.col);
        let newOrigin = st.origin;
        if (toks[2] !== undefined) {
          const o = toAbsolute(toks[2].text, st.origin);
          if (o === undefined) throw new ZoneParseError(file, 'bad origin name', toks[2].text, toks[2].line, toks[2].col);
          newOrigin = o;
        }
        if (toks.length > 3) throw new ZoneParseError(file, 'garbage after $INCLUDE', toks[3]!.text, toks[3]!.line, toks[3]!.col);
        if (depth >= MAX_INCLUDE_DEPTH) throw new ZoneParseError(file, 'too deeply nested $INCLUDE', v.text, v.line, v.col);
        const path = isAbsolute(v.text) ? v.text : join(dirname(file), v.text);
        let sub: string;
        try {
          sub = readFileSync(path, 'utf8');
        } catch (e) {
          const as = path !== v.text ? ` as \`${path}'` : '';
          throw new ZoneParseError(file, `failed to open \`${v.text}'${as}: ${goOpenError(path, e)}`, v.text, v.line, v.col);
        }
        // The included file starts with the new origin and the current default TTL; what it sets stays inside.
        parseInto(sub, path, { origin: newOrigin, ttl: st.ttl, owner: st.owner, lastTtl: st.lastTtl }, depth + 1, onRecord);
        continue;
      }
      if (dir === '$GENERATE') {
        if (st.noGenerate === true) throw new ZoneParseError(file, 'nested $GENERATE directive not allowed', first.text, first.line, first.col);
        const range = toks[1];
        if (range === undefined) throw new ZoneParseError(file, 'not a TTL', first.text, first.line, first.col);
        const text = generate(file, range, toks.slice(2).map((t) => t.text).join(' '));
        // miekg parses the generated lines on their own: the current origin, a default TTL of 3600
        parseInto(text, file, { origin: st.origin, ttl: { value: 3600, directive: false }, owner: '', lastTtl: 0, noGenerate: true }, depth, onRecord);
        continue;
      }
      const o = toAbsolute(first.text, st.origin);
      if (o === undefined) throw new ZoneParseError(file, 'bad owner name', first.text, first.line, first.col);
      st.owner = o;
      k = 1;
    }
    // miekg's states after the owner: TTL and class in either order, then the type
    let ttl: number | undefined;
    let cls: number | undefined;
    let typeTok: Token | undefined;
    let state: 'start' | 'any' | 'noTtl' | 'noClass' | 'rrtype' = rec.blank ? 'start' : 'any';
    const err = (what: string, t: Token): ZoneParseError => new ZoneParseError(file, what, t.text, t.line, t.col);
    const asTtl = (t: Token): number => {
      const v = stringToTtl(t.text);
      if (v === undefined) throw err('not a TTL', t);
      if (st.ttl === undefined || !st.ttl.directive) st.ttl = { value: v, directive: false };
      return v;
    };
    while (k < toks.length && typeTok === undefined) {
      const t = toks[k++]!;
      const kind = stringToType(t.text) !== undefined ? 'type' : stringToClass(t.text) !== undefined ? 'class' : 'string';
      switch (state) {
        case 'start': case 'any':
          if (kind === 'type') {
            if (state === 'any' && st.ttl === undefined) throw err('missing TTL with no previous value', t);
            typeTok = t;
          } else if (kind === 'class') {
            cls = stringToClass(t.text);
            state = 'noClass';
          } else {
            ttl = asTtl(t);
            state = 'noTtl';
          }
          break;
        case 'noTtl':
          if (kind === 'type') typeTok = t;
          else if (kind === 'class') {
            cls = stringToClass(t.text);
            state = 'rrtype';
          } else throw err('expecting RR type or class, not this...', t);
          break;
        case 'noClass':
          if (kind === 'type') typeTok = t;
          else if (kind === 'string') {
            ttl = asTtl(t);
            state = 'rrtype';
          } else throw err('expecting RR type or TTL, not this...', t);
          break;
        case 'rrtype':
          if (kind !== 'type') throw err('unknown RR type', t);
          typeTok = t;
          break;
      }
    }
    if (typeTok === undefined) {
      const last = toks[toks.length - 1]!;
      throw new ZoneParseError(file, 'unexpected newline', '', last.line, last.col);
    }
    ttl ??= st.ttl?.value ?? st.lastTtl;
    st.lastTtl = ttl;
    const rdata = toks.slice(k);
    const line = `${st.owner === '' ? st.origin : st.owner} ${ttl} CLASS${cls ?? 1} ${typeTok.text} ${rdata.map((t) => t.text).join(' ')}`;
    let rr: ResourceRecord;
    try {
      rr = parseRecord(line, st.origin, ttl);
    } catch (e) {
      throw rdataError(file, typeTok, rdata, (e as Error).message.replace(/^dns: /, ''));
    }
    onRecord(rr);
    // miekg reads one more line after an IPSECKEY's key as its trailing garbage: a record on the very
    // next line is refused (an empty or comment line there is swallowed instead)
    const after = recs[ri + 1];
    if (rr.type === RRType.IPSECKEY && after !== undefined && after.toks[0]!.line === rec.endLine + 1) {
      const t = after.toks[0]!;
      throw new ZoneParseError(file, 'garbage after rdata', t.text, t.line, t.col);
    }
  }
}
