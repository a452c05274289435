// The reference CoreDNS binary for tests that compare with it (scripts/coredns-reference.sh prints its path,
// building it once when missing), and the error line it prints for a Corefile that fails setup.

import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './server.ts';

let binary: string | undefined;

export function corednsBinary(): string {
  binary ??= execFileSync(join(ROOT, 'scripts', 'coredns-reference.sh'), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
    .trim().split('\n').pop() ?? '';
  return binary;
}

let dir: string | undefined;

/** CoreDNS's `plugin/...` error line for `corefile` (run as `Corefile` in a scratch directory); '' when it starts. */
export function corednsSetupError(corefile: string): string {
  dir ??= mkdtempSync(join(tmpdir(), 'nodens-reference-'));
  writeFileSync(join(dir, 'Corefile'), corefile);
  const r = spawnSync(corednsBinary(), ['-conf', 'Corefile', '-dns.port', '0'], { cwd: dir, encoding: 'utf8', timeout: 5000 });
  if (r.status === null) return ''; // still running after 5 s: it started
  return (r.stdout + r.stderr).split('\n').map((l) => l.trim()).find((l) => l.startsWith('plugin/')) ?? '';
}
