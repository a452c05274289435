// google/shlex's Split, which caddy's SplitCommandAndArgs uses on Unix: words separated by blanks; "double" quotes
// (a backslash inside takes the next character as it is), 'single' quotes (nothing escaped), a backslash outside
// quotes escapes the next character, and `#` at the start of a word comments out the rest of the line.

/** Splits `s` into words; throws with google/shlex's error text for an unclosed quote or a trailing backslash. */
export function splitCommand(s: string): string[] {
  const words: string[] = [];
  let i = 0;
  const n = s.length;
  const blank = (c: string): boolean => c === ' ' || c === '\t' || c === '\r' || c === '\n';
  while (i < n) {
    while (i < n && blank(s[i]!)) i++;
    if (i >= n) break;
    if (s[i] === '#') break;
    let word = '';
    while (i < n && !blank(s[i]!)) {
      const c = s[i]!;
      if (c === '\\') {
        if (i + 1 >= n) throw new Error('EOF found after escape character');
        word += s[i + 1];
        i += 2;
      } else if (c === "'") {
        const end = s.indexOf("'", i + 1);
        if (end < 0) throw new Error('EOF found when expecting closing quote.');
        word += s.slice(i + 1, end);
        i = end + 1;
      } else if (c === '"') {
        i++;
        for (;;) {
          if (i >= n) throw new Error('EOF found when expecting closing quote.');
          const q = s[i]!;
          if (q === '"') { i++; break; }
          if (q === '\\') {
            if (i + 1 >= n) throw new Error('EOF found when expecting closing quote.');
            // google/shlex drops the backslash before any character inside double quotes.
            word += s[i + 1];
            i += 2;
            continue;
          }
          word += q;
          i++;
        }
      } else {
        word += c;
        i++;
      }
    }
    words.push(word);
  }
  return words;
}
