// A reload under load loses no query: dnsperf runs 10 s against bin/nodens
// while the test rewrites the Corefile four times and the reload plugin swaps
// the configuration each time; dnsperf's "Queries lost" must be 0. Also with
// a broken Corefile in the middle (the old one keeps serving).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startProcess, freePort, type NodensProcess } from '../helpers/server.ts';
import { get, sleep } from './prometheus-util.ts';

function dnsperf(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('dnsperf', args, { timeout: 40000 }, (err, stdout, stderr) => {
      if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') {
        reject(new Error('dnsperf is not installed: apt-get install -y dnsperf'));
        return;
      }
      if (err) { reject(new Error(`dnsperf failed: ${err.message}\n${stdout}\n${stderr}`)); return; }
      resolve(stdout);
    });
  });
}

function confPath(p: NodensProcess): string {
  const args = p.proc.spawnargs;
  return args[args.indexOf('-conf') + 1]!;
}

test('reload under a dnsperf load loses no query', { timeout: 60000 }, async () => {
  const [hp, mp] = [await freePort(), await freePort()];
  const conf = (port: number, variant: number) =>
    `.:${port} {\n reload 2s 0s\n health 127.0.0.1:${hp}\n prometheus 127.0.0.1:${mp}\n` +
    `${variant % 2 ? ' chaos\n' : ''} whoami\n}\n` +
    `example.org:${port} {\n prometheus 127.0.0.1:${mp}\n hosts {\n  10.0.0.${variant} www.example.org\n  fallthrough\n }\n whoami\n}\n`;
  const p = await startProcess(conf(0, 0).replaceAll(':0 {', ':{PORT} {'));
  const dir = mkdtempSync(join(tmpdir(), 'nodens-reload-load-'));
  try {
    await p.waitFor(/Running configuration SHA512/);
    const data = join(dir, 'queries.txt');
    writeFileSync(data, ['www.example.org A', 'a.example.com A', 'b.example.org AAAA', 'c.example.net TXT'].join('\n') + '\n');
    const run = dnsperf(['-s', '127.0.0.1', '-p', String(p.port), '-d', data, '-l', '10', '-c', '4', '-q', '50', '-Q', '2000', '-t', '3']);
    // Rewrite the Corefile four times (the fourth one broken), spread over the run.
    const file = confPath(p);
    const variants = [1, 2, -1, 3];
    for (const v of variants) {
      await sleep(2100);
      writeFileSync(file, v < 0 ? conf(p.port, 0).replace(' whoami\n}', ' whoami\n nosuchplugin\n}') : conf(p.port, v));
    }
    const out = await run;
    const lost = /Queries lost:\s+(\d+)/.exec(out);
    const completed = /Queries completed:\s+(\d+)/.exec(out);
    assert.ok(lost && completed, out);
    const reloads = p.stdout.filter((l) => l === '[INFO] Reloading complete').length;
    const failures = p.stdout.filter((l) => l.startsWith('[ERROR] plugin/reload: Corefile changed but reload failed')).length;
    console.log(`dnsperf: ${completed![1]} completed, ${lost![1]} lost; ${reloads} reloads, ${failures} failed reload(s)`);
    assert.ok(reloads >= 2, `only ${reloads} reloads happened during the run:\n${p.stdout.join('\n')}`);
    assert.equal(failures, 1);
    assert.ok(Number(completed![1]) > 5000, out);
    assert.equal(Number(lost![1]), 0, out);
    assert.equal((await get(hp, '/health')).status, 200);
    assert.equal((await get(mp, '/metrics')).status, 200);
  } finally {
    await p.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
