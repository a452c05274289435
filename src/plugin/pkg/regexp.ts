// Go regular expressions (RE2 syntax) for plugins whose Corefile arguments are
// Go regexps: rewrite, template, view, errors' consolidate. Backed by re2js, a
// maintained pure-JavaScript port of RE2 with linear-time matching, so
// `(?P<name>…)`, `[[:digit:]]`, `\pL` and Go's flags mean what they mean in
// CoreDNS and no pattern can backtrack catastrophically. JavaScript's RegExp
// is not used: its syntax differs and it backtracks.

import { RE2JS } from 're2js';

export class GoRegexpError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GoRegexpError';
  }
}

/** A compiled Go regexp. */
export class GoRegexp {
  /** The pattern as written. */
  readonly source: string;
  private readonly re: RE2JS;

  private constructor(source: string, re: RE2JS) {
    this.source = source;
    this.re = re;
  }

  /**
   * Compile `pattern` as Go's regexp.Compile does; throws GoRegexpError with
   * Go's message shape (`error parsing regexp: missing closing ): ` + "`(a`").
   */
  static compile(pattern: string): GoRegexp {
    try {
      return new GoRegexp(pattern, RE2JS.compile(pattern));
    } catch (e) {
      throw new GoRegexpError(goErrorText(e instanceof Error ? e.message : String(e)));
    }
  }

  /** Go's MatchString: a match anywhere in `s`. */
  test(s: string): boolean {
    return this.re.test(s);
  }

  /**
   * Go's FindStringSubmatch: the leftmost match and its groups (group 0 is the
   * whole match; a group that did not take part is ''), or undefined.
   */
  findSubmatch(s: string): string[] | undefined {
    const m = this.re.matcher(s);
    if (!m.find()) return undefined;
    const n = m.groupCount();
    const out = new Array<string>(n + 1);
    for (let i = 0; i <= n; i++) out[i] = m.group(i) ?? '';
    return out;
  }

  /** Number of capturing groups (Go's NumSubexp). */
  get groupCount(): number { return this.re.groupCount(); }

  /** Named groups → their index (Go's SubexpNames, as a map). */
  namedGroups(): Record<string, number> { return this.re.namedGroups(); }

  /**
   * Go's ReplaceAllString: every match replaced by `template`, in which `$1`,
   * `${1}`, `$name` and `${name}` expand to groups ($$ is a dollar), with Go's
   * rule that `$1x` means the group named `1x`.
   */
  replaceAll(s: string, template: string): string {
    const m = this.re.matcher(s);
    let out = '';
    let lastMatchEnd = 0;
    let searchPos = 0;
    while (searchPos <= s.length && m.find(searchPos)) {
      const start = m.start();
      const end = m.end();
      out += s.slice(lastMatchEnd, start);
      // No replacement for an empty match right after the previous match (Go's rule).
      if (end > lastMatchEnd || start === 0) out += this.expand(template, m);
      lastMatchEnd = end;
      // Advance past the match, and always by at least one character (a whole code point).
      const width = searchPos < s.length && (s.codePointAt(searchPos) ?? 0) > 0xffff ? 2 : 1;
      if (searchPos + width > end) searchPos += width;
      else if (searchPos + 1 > end) searchPos++;
      else searchPos = end;
    }
    return out + s.slice(lastMatchEnd);
  }

  /** Go's Regexp.Expand of `template` against a match of this regexp (groups by number or name). */
  expandMatch(template: string, groups: readonly string[]): string {
    const names = this.namedGroups();
    let out = '';
    for (let i = 0; i < template.length; i++) {
      const c = template[i]!;
      if (c !== '$' || i + 1 >= template.length) { out += c; continue; }
      const ref = readRef(template, i + 1);
      if (ref === undefined) {
        if (template[i + 1] === '$') { out += '$'; i++; } else out += c;
        continue;
      }
      i = ref.end - 1;
      const idx = /^[0-9]+$/.test(ref.name) ? Number(ref.name) : names[ref.name];
      if (idx !== undefined && idx < groups.length) out += groups[idx] ?? '';
    }
    return out;
  }

  private expand(template: string, m: { groupCount(): number; group(i: number): string | null }): string {
    const groups: string[] = [];
    for (let i = 0; i <= m.groupCount(); i++) groups.push(m.group(i) ?? '');
    return this.expandMatch(template, groups);
  }
}

/** `$name` / `${name}` at `at` (just after the `$`): Go's extract(). */
function readRef(t: string, at: number): { name: string; end: number } | undefined {
  if (t[at] === '{') {
    const close = t.indexOf('}', at + 1);
    if (close < 0) return undefined;
    const name = t.slice(at + 1, close);
    if (name === '' || !/^[A-Za-z0-9_]+$/.test(name)) return undefined;
    return { name, end: close + 1 };
  }
  let j = at;
  while (j < t.length && /[A-Za-z0-9_]/.test(t[j]!)) j++;
  if (j === at) return undefined;
  return { name: t.slice(at, j), end: j };
}

/** re2js reports Java-style texts; CoreDNS users see Go's `error parsing regexp: <code>: ` + "`expr`". */
function goErrorText(msg: string): string {
  return msg.startsWith('error parsing regexp: ') ? msg : `error parsing regexp: ${msg}`;
}
