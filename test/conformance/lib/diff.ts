// Side-by-side line diff (LCS), for showing two dig-like replies next to each other.

export function sideBySide(left: string[], right: string[], leftTitle: string, rightTitle: string): string {
  const a = left.map((l) => l.replace(/\t/g, '  '));
  const b = right.map((l) => l.replace(/\t/g, '  '));
  const n = a.length;
  const m = b.length;
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  type Row = [string, string, string];
  const rows: Row[] = [];
  let i = 0;
  let j = 0;
  const pendL: string[] = [];
  const pendR: string[] = [];
  const flush = () => {
    const k = Math.max(pendL.length, pendR.length);
    for (let x = 0; x < k; x++) {
      const l = pendL[x];
      const r = pendR[x];
      rows.push([l ?? '', l !== undefined && r !== undefined ? '|' : l !== undefined ? '<' : '>', r ?? '']);
    }
    pendL.length = 0;
    pendR.length = 0;
  };
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      flush();
      rows.push([a[i], ' ', b[j]]);
      i++;
      j++;
    } else if (j < m && (i === n || lcs[i][j + 1] >= lcs[i + 1][j])) {
      pendR.push(b[j++]);
    } else {
      pendL.push(a[i++]);
    }
  }
  flush();
  const width = Math.min(72, Math.max(leftTitle.length, ...a.map((l) => l.length)));
  const cut = (s: string) => (s.length > width ? `${s.slice(0, width - 1)}…` : s.padEnd(width));
  const out = [`    ${cut(leftTitle)}   ${rightTitle}`, `    ${'-'.repeat(width)}   ${'-'.repeat(Math.min(72, Math.max(rightTitle.length, ...b.map((l) => l.length))))}`];
  for (const [l, mark, r] of rows) out.push(`    ${cut(l)} ${mark} ${r}`.trimEnd());
  return out.join('\n');
}
