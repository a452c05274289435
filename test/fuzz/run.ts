// `npm run fuzz`: each target in its own process for --seconds (default 300), the
// corpus in test/fuzz/corpus/<target>/ growing with what it finds (--save, on by
// default here; --no-save for CI). `--total S` splits S seconds over the targets
// (`--parallel`: at once, each for S; the CI run: `--total 45 --parallel --no-save`). A target that prints nothing for 60 s is
// hung: the parent kills it and the input it was running is kept as a finding.
// `--minimize` drops the corpus files that add no coverage to the others (crash
// and hang inputs stay).
// Exit status 1 on any finding.

import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, mkdtempSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../helpers/server.ts';

const CORPUS = join(ROOT, 'test', 'fuzz', 'corpus');
const argv = process.argv.slice(2);
const opt = (name: string): string | undefined => { const i = argv.indexOf(`--${name}`); return i >= 0 ? argv[i + 1] : undefined; };

if (opt('child') !== undefined) {
  const { fuzz } = await import('./engine.ts');
  const { TARGETS, quiet } = await import('./targets.ts');
  quiet();
  const t = TARGETS.find((x) => x.name === opt('child'))!;
  const current = opt('current')!;
  const { writeFileSync } = await import('node:fs');
  const target = { ...t, run: (b: Buffer) => { writeFileSync(current, b); return t.run(b); } };
  const s = await fuzz(target, join(CORPUS, t.name), {
    seconds: Number(opt('seconds')), save: argv.includes('--save'), minimize: argv.includes('--minimize'), slowMs: 2000,
    progress: (line) => console.log(line),
  });
  console.log(`RESULT ${JSON.stringify({ ...s, findings: s.findings.map((f) => ({ file: f.file, error: f.error })) })}`);
  process.exit(s.findings.length ? 1 : 0);
}

const { TARGETS } = await import('./targets.ts');
const names = opt('targets')?.split(',') ?? TARGETS.map((t) => t.name);
const total = opt('total');
const seconds = total !== undefined ? (argv.includes('--parallel') ? Number(total) : Number(total) / names.length) : Number(opt('seconds') ?? 300);
const save = !argv.includes('--no-save');
const tmp = mkdtempSync(join(tmpdir(), 'nodens-fuzz-run-'));
let failed = false;
const rows: string[] = [];
async function runTarget(name: string): Promise<string> {
  const current = join(tmp, `${name}.current`);
  const child = spawn(process.execPath, [import.meta.filename, '--child', name, '--seconds', String(seconds), '--current', current, ...(save ? ['--save'] : []), ...(argv.includes('--minimize') ? ['--minimize'] : [])], { stdio: ['ignore', 'pipe', 'inherit'] });
  let last = Date.now();
  let result: { execs: number; corpus: number; seeds: number; features: number; ms: number; findings: Array<{ file: string }> } | undefined;
  child.stdout.setEncoding('utf8');
  let buf = '';
  child.stdout.on('data', (d: string) => {
    last = Date.now();
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i); buf = buf.slice(i + 1);
      if (line.startsWith('RESULT ')) result = JSON.parse(line.slice(7));
      else console.log(line);
    }
  });
  const watchdog = setInterval(() => {
    if (Date.now() - last > 60_000) {
      const keep = existsSync(current) ? join(CORPUS, name, `hang-${createHash('sha1').update(readFileSync(current)).digest('hex').slice(0, 16)}`) : '(no input recorded)';
      if (existsSync(current)) copyFileSync(current, keep);
      console.log(`[${name}] HUNG for 60 s; input kept in ${keep}`);
      child.kill('SIGKILL');
    }
  }, 1000);
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  clearInterval(watchdog);
  if (code !== 0 || result === undefined) failed = true;
  return result
    ? `| ${name} | ${(result.ms / 1000).toFixed(0)} s | ${result.execs} | ${(result.execs / (result.ms / 1000)).toFixed(0)} | ${result.seeds} | ${result.corpus} | ${result.features} | ${result.findings.length} |`
    : `| ${name} | - | - | - | - | - | - | exit ${code} |`;
}

// --parallel: all targets at once, each with the whole time (the CI run: the setup target's corpus
// replay alone takes ~40 s on a loaded machine).
if (argv.includes('--parallel')) rows.push(...await Promise.all(names.map(runTarget)));
else for (const name of names) rows.push(await runTarget(name));
console.log('\n| target | time | execs | execs/s | seeds | corpus kept (seeds + finds) | features (src/ blocks × hit buckets) | findings |\n|---|---|---|---|---|---|---|---|');
for (const r of rows) console.log(r);
process.exit(failed ? 1 : 0);
