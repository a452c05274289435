// Go (RE2) regular expressions as JavaScript RegExps, for `consolidate`.
// The common syntax is shared; Go's leading flag group `(?i)`, `(?s)`, `(?m)`
// becomes RegExp flags, `\z` becomes an end anchor, `\Q...\E` is quoted.
// Compile errors are reported in Go's words where the cause is recognisable.

export function goRegExp(src: string): RegExp {
  let body = src;
  let flags = '';
  const m = /^\(\?([imsU]+)\)/.exec(body);
  if (m !== null) {
    for (const f of m[1]) if ((f === 'i' || f === 'm' || f === 's') && !flags.includes(f)) flags += f;
    body = body.slice(m[0].length);
  }
  body = body.replace(/\\Q(.*?)(\\E|$)/g, (_all, lit: string) => lit.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'));
  body = body.replace(/\\z/g, '$(?![\\s\\S])');
  try {
    return new RegExp(body, flags);
  } catch (e) {
    throw new Error('error parsing regexp: ' + goReason(src, e instanceof Error ? e.message : String(e)));
  }
}

function goReason(src: string, js: string): string {
  const q = '`' + src + '`';
  if (/Unterminated group|Unmatched '\('/.test(js)) return 'missing closing ): ' + q;
  if (/Unmatched '\)'/.test(js)) return 'unexpected ): ' + q;
  if (/Unterminated character class|missing \/|Unterminated/.test(js)) return 'missing closing ]: ' + q;
  if (/Nothing to repeat/.test(js)) return 'missing argument to repetition operator: ' + q;
  if (/\\ at end of pattern/.test(js)) return 'trailing backslash at end of expression: ``';
  return 'invalid regular expression: ' + q;
}
