// Generates man pages from markdown, as CoreDNS does with mmark: man/nodens.1 from docs/man/nodens.1.md,
// man/corefile.5 from docs/man/corefile.5.md and man/nodens-<plugin>.7 from each src/plugin/<plugin>/README.md.
//
//   node scripts/man.ts [OUTDIR]     (npm run man; OUTDIR defaults to man/)
//
// The converter is written here rather than taken from npm: the READMEs use a small subset of markdown
// (headings, paragraphs, bullet and numbered lists nested once, fenced code, tables, inline code, emphasis,
// links), and the packages that render markdown to roff (marked-man, remark-man) pull in a markdown parser
// and its plugins for that. Tables become preformatted text, so no tbl preprocessor is needed.

import { mkdirSync, readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface Page {
  /** File name under the output directory, e.g. nodens-cache.7. */
  file: string;
  source: string;
  name: string;
  section: string;
  /** The .TH centre header. */
  manual: string;
}

/** Every page, in a fixed order. */
export function pages(root = ROOT): Page[] {
  const list: Page[] = [
    { file: 'nodens.1', source: 'docs/man/nodens.1.md', name: 'nodens', section: '1', manual: 'nodens' },
    { file: 'corefile.5', source: 'docs/man/corefile.5.md', name: 'corefile', section: '5', manual: 'nodens' },
  ];
  const plugins = readdirSync(path.join(root, 'src/plugin')).filter((d) => existsSync(path.join(root, 'src/plugin', d, 'README.md'))).sort();
  for (const p of plugins) {
    list.push({ file: `nodens-${p}.7`, source: `src/plugin/${p}/README.md`, name: `nodens-${p}`, section: '7', manual: 'nodens plugins' });
  }
  return list;
}

/** The version and date of the newest release in CHANGELOG.md, so the pages do not change with the day they are built. */
export function release(root = ROOT): { version: string; date: string } {
  const m = /^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$/m.exec(readFileSync(path.join(root, 'CHANGELOG.md'), 'utf8'));
  if (m === null) throw new Error('CHANGELOG.md has no "## [x.y.z] - YYYY-MM-DD" release heading');
  return { version: m[1]!, date: m[2]! };
}

/** Escapes text for roff: backslashes, minus signs, and (for a whole line) a leading dot or quote that would read as a request. */
function escapeText(s: string, line = true): string {
  // Non-ASCII as \[uXXXX], so the page renders the same with or without preconv.
  const t = s.replace(/\\/g, '\\e').replace(/-/g, '\\-')
    .replace(/[^\x00-\x7f]/gu, (ch) => `\\[u${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}]`);
  return line && /^[.']/.test(t) ? `\\&${t}` : t;
}

/** Inline code may be one long word (a metric name, a path): \: lets roff break it after _ and /. */
function breakable(s: string): string {
  return s.replace(/([_/])/g, '$1\\:');
}

/** Inline markdown to roff: `code` and **strong** in bold, *emphasis* in italics, links as their text (and URL when absolute). */
export function inline(s: string): string {
  const out: string[] = [];
  let i = 0;
  while (i < s.length) {
    const c = s[i]!;
    if (c === '`') {
      const end = s.indexOf('`', i + 1);
      if (end > i) {
        out.push(`\\fB${breakable(escapeText(s.slice(i + 1, end), false))}\\fR`);
        i = end + 1;
        continue;
      }
    }
    if (c === '*' && s[i + 1] === '*') {
      const end = s.indexOf('**', i + 2);
      if (end > i + 2) {
        out.push(`\\fB${inline(s.slice(i + 2, end))}\\fR`);
        i = end + 2;
        continue;
      }
    }
    if ((c === '*' || c === '_') && s[i + 1] !== undefined && s[i + 1] !== ' ' && s[i + 1] !== c) {
      // _ only opens emphasis at a word start, so snake_case names stay as they are.
      const atWordStart = i === 0 || /[\s(\["']/.test(s[i - 1]!);
      const end = s.indexOf(c, i + 1);
      if (end > i + 1 && (c === '*' || atWordStart) && s[end - 1] !== ' ') {
        out.push(`\\fI${inline(s.slice(i + 1, end))}\\fR`);
        i = end + 1;
        continue;
      }
    }
    if (c === '[') {
      const m = /^\[([^\]]*)\]\(([^)\s]*)\)/.exec(s.slice(i));
      if (m !== null) {
        const text = inline(m[1]!);
        out.push(/^https?:/.test(m[2]!) && m[2] !== m[1] ? `${text} \\(la${breakable(escapeText(m[2]!, false))}\\(ra` : text);
        i += m[0].length;
        continue;
      }
    }
    out.push(escapeText(c, false));
    i++;
  }
  return out.join('');
}

/** Plain text of a table cell: markup dropped, for the preformatted table. */
function plain(s: string): string {
  return s.replace(/`([^`]*)`/g, '$1').replace(/\*\*([^*]*)\*\*/g, '$1').replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/\\\|/g, '|');
}

function splitRow(line: string): string[] {
  const cells = line.trim().replace(/^\|/, '').replace(/\|$/, '').split(/(?<!\\)\|/);
  return cells.map((c) => plain(c.trim()));
}

function codeBlock(lines: string[]): string[] {
  return ['.PP', '.RS 4', '.nf', ...lines.map((l) => escapeText(l)), '.fi', '.RE'];
}

const LIST_ITEM = /^( *)([*-]|\d+\.) +(.*)$/;

/** Converts one markdown document to a man page. The first level-1 heading is the page's title and is not repeated. */
export function toRoff(markdown: string, page: Page, rel: { version: string; date: string }): string {
  const out: string[] = [
    `.\\" Generated by scripts/man.ts from ${page.source}; do not edit.`,
    `.TH "${page.name.toUpperCase()}" "${page.section}" "${rel.date}" "nodens ${rel.version}" "${page.manual}"`,
    // Left-aligned: a line holding one long name broken at _ has no spaces to justify with.
    '.ad l',
  ];
  const lines = markdown.replace(/\r\n/g, '\n').split('\n');
  let i = 0;
  let para: string[] = [];
  let listDepth = 0; // 0: no list; 1: in a list; 2: in a nested list (inside .RS)
  const flush = (): void => {
    if (para.length === 0) return;
    // A text line starting with a dot or quote would read as a request.
    const text = inline(para.join(' '));
    out.push(/^[.']/.test(text) ? `\\&${text}` : text);
    para = [];
  };
  const endList = (): void => {
    if (listDepth === 2) out.push('.RE');
    listDepth = 0;
  };
  while (i < lines.length) {
    const line = lines[i]!;
    if (line.startsWith('```')) {
      flush();
      const code: string[] = [];
      i++;
      while (i < lines.length && !lines[i]!.startsWith('```')) code.push(lines[i++]!);
      i++;
      if (listDepth > 0) out.push('.RS 2', ...codeBlock(code), '.RE');
      else out.push(...codeBlock(code));
      continue;
    }
    const h = /^(#{1,4}) +(.*)$/.exec(line);
    if (h !== null) {
      flush();
      endList();
      if (h[1] === '#') { i++; continue; }
      out.push(h[1] === '##' ? `.SH "${plain(h[2]!).toUpperCase().replace(/"/g, '')}"` : `.SS "${plain(h[2]!).replace(/"/g, '')}"`);
      i++;
      continue;
    }
    if (line.trim().startsWith('|')) {
      flush();
      endList();
      const rows: string[][] = [];
      while (i < lines.length && lines[i]!.trim().startsWith('|')) {
        const l = lines[i++]!;
        // The delimiter row (| --- | :-- |, the closing pipe optional) is dropped.
        if (!/^\s*\|[\s:|-]*-[\s:|-]*$/.test(l)) rows.push(splitRow(l));
      }
      const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
      const text = rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  ').trimEnd());
      out.push(...codeBlock(text));
      continue;
    }
    const li = LIST_ITEM.exec(line);
    if (li !== null) {
      flush();
      const nested = li[1]!.length >= 2;
      if (nested && listDepth === 1) { out.push('.RS 2'); listDepth = 2; }
      if (!nested && listDepth === 2) { out.push('.RE'); listDepth = 1; }
      if (listDepth === 0) listDepth = 1;
      out.push(li[2] === '*' || li[2] === '-' ? '.IP \\(bu 2' : `.IP ${li[2]} 4`);
      para.push(li[3]!);
      i++;
      // Continuation lines of the item: indented, not a new item, not blank.
      while (i < lines.length && /^ +\S/.test(lines[i]!) && !LIST_ITEM.test(lines[i]!) && !lines[i]!.trim().startsWith('```')) para.push(lines[i++]!.trim());
      continue;
    }
    if (line.trim() === '') {
      flush();
      i++;
      // A blank line ends a list unless the next line continues it.
      let j = i;
      while (j < lines.length && lines[j]!.trim() === '') j++;
      if (listDepth > 0 && j < lines.length && !LIST_ITEM.test(lines[j]!) && !/^ +\S/.test(lines[j]!)) endList();
      continue;
    }
    if (para.length === 0) {
      if (listDepth > 0 && /^ +\S/.test(line)) out.push('.IP');
      else { endList(); out.push('.PP'); }
    }
    para.push(line.trim());
    i++;
  }
  flush();
  endList();
  return out.join('\n') + '\n';
}

/** Writes every page into outDir; returns the file names written. */
export function generate(outDir: string, root = ROOT): string[] {
  const rel = release(root);
  mkdirSync(outDir, { recursive: true });
  const written: string[] = [];
  for (const p of pages(root)) {
    writeFileSync(path.join(outDir, p.file), toRoff(readFileSync(path.join(root, p.source), 'utf8'), p, rel));
    written.push(p.file);
  }
  return written;
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = path.resolve(process.argv[2] ?? path.join(ROOT, 'man'));
  const files = generate(out);
  process.stdout.write(`${files.length} pages written to ${out}\n`);
}
