// A DNS server under drill as a real process on loopback: nodens (bin/nodens)
// or the reference CoreDNS, with the same Corefile, its output collected.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN } from '../helpers/server.ts';

export interface Running {
  name: string;
  proc: ChildProcess;
  lines: string[];
  rssKiB(): number;
  stop(): Promise<void>;
}

/** Start `bin` ('nodens' or a CoreDNS binary) with `corefile` and `files` in a fresh directory; waits for its banner. */
export async function startServer(name: string, bin: string, corefile: string, files: Record<string, string> = {}): Promise<Running> {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-drill-'));
  for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
  writeFileSync(join(dir, 'Corefile'), corefile);
  const proc = spawn(bin === 'nodens' ? BIN : bin, ['-conf', join(dir, 'Corefile')], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const feed = (): ((c: Buffer) => void) => {
    let partial = '';
    return (c) => { const ls = (partial + c.toString('latin1')).split('\n'); partial = ls.pop()!; lines.push(...ls); };
  };
  proc.stdout!.on('data', feed());
  proc.stderr!.on('data', feed());
  const exited = new Promise<void>((r) => { proc.on('exit', () => { r(); }); });
  const deadline = Date.now() + 15_000;
  while (!lines.some((l) => l.startsWith('CoreDNS-'))) {
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`${name} did not start:\n${lines.join('\n')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    name, proc, lines,
    rssKiB() { return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${proc.pid}/status`, 'utf8'))?.[1] ?? 0); },
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      const t = setTimeout(() => { proc.kill('SIGKILL'); }, 7000);
      await exited;
      clearTimeout(t);
    },
  };
}
