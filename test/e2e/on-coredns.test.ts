// The `on` plugin side by side with the reference CoreDNS 1.15.0: the same Corefile of real commands that write
// files, run through start, a SIGUSR1 reload and SIGTERM. The files each command wrote, the log lines (with the
// hooks' random IDs masked), the order against the banner and the exit status must be the same.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, nodensBinary, referenceBinary } from '../conformance/lib/servers.ts';

interface Outcome { lines: string[]; files: Record<string, string>; code: number | null }

function corefile(dir: string, port: number): string {
  return `.:${port} {\n` +
    // Blocking: the banner's version lines wait for it.
    ` on startup sh -c "'sleep 0.3; echo up >> ${dir}/startup'"\n` +
    // caddy joins the arguments and splits them again: plain words stay words.
    ` on startup touch ${dir}/touched\n` +
    // Non-blocking: a trailing & starts it and goes on.
    ` on startup sh -c "'sleep 0.5; echo late >> ${dir}/background'" &\n` +
    ` on startup false\n` +
    ` on startup /nonexistent/cmd\n` +
    ` on shutdown sh -c "'echo down >> ${dir}/shutdown'"\n` +
    ` on certrenew touch ${dir}/never\n` +
    ' whoami\n}\n';
}

async function run(bin: string): Promise<Outcome> {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-on-'));
  const port = await freePort();
  const conf = join(dir, 'Corefile');
  writeFileSync(conf, corefile(dir, port));
  const proc = spawn(bin, ['-conf', conf], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => { out += d.toString(); });
  proc.stderr.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = new Promise<number | null>((resolve) => { proc.on('exit', (code) => { resolve(code); }); });
  const waitFor = async (re: RegExp): Promise<void> => {
    const deadline = Date.now() + 15000;
    while (!re.test(out)) {
      if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`did not see ${re}:\n${out}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  await waitFor(/^CoreDNS-/m);
  await new Promise((r) => setTimeout(r, 800)); // the background command ends
  proc.kill('SIGUSR1');
  await waitFor(/Reloading complete/);
  await new Promise((r) => setTimeout(r, 800));
  proc.kill('SIGTERM');
  const code = await exited;
  const files: Record<string, string> = {};
  for (const f of ['startup', 'touched', 'background', 'shutdown', 'never']) files[f] = existsSync(join(dir, f)) ? readFileSync(join(dir, f), 'utf8') : '<none>';
  const lines = out.split('\n')
    .filter((l) => l !== '' && !l.startsWith('maxprocs:') && !/^linux\/|^CoreDNS-|^\.:\d+$/.test(l))
    .map((l) => l.replaceAll(dir, 'DIR').replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, 'ID'));
  return { lines, files, code };
}

test('on: startup (blocking and &), failures, reload and shutdown as CoreDNS runs them', async () => {
  const bin = nodensBinary();
  assert.ok(bin !== undefined, 'bin/nodens is missing: npm run build');
  const [ref, sub] = [await run(referenceBinary()), await run(bin)];
  assert.deepEqual(ref.files, { startup: 'up\nup\n', touched: '', background: 'late\nlate\n', shutdown: 'down\n', never: '<none>' });
  assert.deepEqual(sub.files, ref.files);
  // caddy's EmitEvent walks a sync.Map: its hooks run in no fixed order. Compare the lines as sets, in order per phase.
  const phases = (o: Outcome): string[][] => {
    const cut = (re: RegExp): number => o.lines.findIndex((l) => re.test(l));
    const r = cut(/SIGUSR1/), t = cut(/SIGTERM/);
    return [o.lines.slice(0, r).sort(), o.lines.slice(r, t).sort(), o.lines.slice(t).sort()];
  };
  assert.deepEqual(phases(sub), phases(ref));
  assert.equal(sub.code, ref.code);
  assert.ok(ref.lines.some((l) => l === "error on 'on-ID' hook: exit status 1"), ref.lines.join('\n'));
});

test('on with -workers 2: each command runs once, in the first worker, as in CoreDNS\'s one process', async () => {
  const bin = nodensBinary();
  assert.ok(bin !== undefined, 'bin/nodens is missing: npm run build');
  const dir = mkdtempSync(join(tmpdir(), 'nodens-on-workers-'));
  const port = await freePort();
  const conf = join(dir, 'Corefile');
  writeFileSync(conf, `.:${port} {\n on startup sh -c "'echo up >> ${dir}/up'"\n on shutdown sh -c "'echo down >> ${dir}/down'"\n whoami\n}\n`);
  const proc = spawn(bin, ['-conf', conf, '-workers', '2'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => { out += d.toString(); });
  proc.stderr.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = new Promise<number | null>((resolve) => { proc.on('exit', (code) => { resolve(code); }); });
  const deadline = Date.now() + 15000;
  while (!/^CoreDNS-/m.test(out) && Date.now() < deadline && proc.exitCode === null) await new Promise((r) => setTimeout(r, 25));
  await new Promise((r) => setTimeout(r, 1000));
  proc.kill('SIGTERM');
  assert.equal(await exited, 0, out);
  assert.equal(readFileSync(join(dir, 'up'), 'utf8'), 'up\n', out);
  assert.equal(readFileSync(join(dir, 'down'), 'utf8'), 'down\n', out);
});
