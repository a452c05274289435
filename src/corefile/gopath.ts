// Go's path/filepath.Clean on Unix, for the places where CoreDNS cleans a path
// before using or printing it. Purely lexical: the file system is never asked.

/**
 * The shortest path naming the same file as `p`, by Go's rules: runs of `/`
 * become one, `.` elements go, `..` removes the element before it (and at
 * the root, itself), a trailing `/` goes (except for `/` itself), and an
 * empty result is `.`.
 */
export function goClean(p: string): string {
  if (p === '') return '.';
  const rooted = p.startsWith('/');
  const out: string[] = [];
  // Leading `..` elements of a relative path that cannot be cancelled.
  let up = 0;
  for (const el of p.split('/')) {
    if (el === '' || el === '.') continue;
    if (el === '..') {
      if (out.length > 0) out.pop();
      else if (!rooted) up++;
      // `..` at the root is the root.
      continue;
    }
    out.push(el);
  }
  const parts = [...Array<string>(up).fill('..'), ...out];
  if (rooted) return '/' + parts.join('/');
  return parts.length === 0 ? '.' : parts.join('/');
}
