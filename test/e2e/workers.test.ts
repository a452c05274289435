// -workers N: worker threads of one process share the port through SO_REUSEPORT;
// the main thread relays signals (stop, reload), a bad Corefile still fails once
// with exit 1, and a worker's unrecovered panic (debug on) stops the server with
// exit 2; /metrics sums the workers.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, ROOT, freePort, startProcess } from '../helpers/server.ts';
import { encodeMessage, newQuery } from '../../src/wire/index.ts';
import { dig, status } from '../helpers/dig.ts';

function childPids(pid: number): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(pid)]).toString().trim().split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** The names of a process's threads (the kernel's comm of each task). */
function threadNames(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map((t) => {
    try {
      return readFileSync(`/proc/${pid}/task/${t}/comm`, 'utf8').trim();
    } catch {
      return '';
    }
  });
}

test('-workers 2 serves from two threads of one process, reloads both on SIGUSR1 and stops cleanly on SIGTERM', async () => {
  const p = await startProcess('.:{PORT} {\n  whoami\n}\n', { args: ['-workers', '2'] });
  try {
    // bin/nodens execs node, so the spawned pid is the process; its workers are threads, not children.
    const pid = p.proc.pid!;
    assert.deepEqual(childPids(pid), []);
    // The main thread serves as worker 1; worker 2 is a thread named after it.
    assert.deepEqual(threadNames(pid).filter((n) => n.startsWith('nodens-worker')), ['nodens-worker-2']);
    for (let i = 0; i < 20; i++) assert.equal(status(await dig(p.port, `q${i}.example.org`, 'A')), 'NOERROR');
    // Only the first worker prints the banner.
    assert.equal(p.stdout.filter((l) => l.startsWith('CoreDNS-')).length, 1);
    // A reload reaches every worker: each reads the new Corefile and answers from it.
    const conf = p.proc.spawnargs[p.proc.spawnargs.indexOf('-conf') + 1]!;
    writeFileSync(conf, `.:${p.port} {\n  template IN A example.org {\n    answer "{{ .Name }} 60 IN A 192.0.2.7"\n  }\n}\n`);
    p.proc.kill('SIGUSR1');
    const deadline = Date.now() + 10_000;
    while (p.stdout.filter((l) => l === '[INFO] Reloading complete').length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(p.stdout.filter((l) => l === '[INFO] SIGUSR1: Reloading').length, 2, p.stdout.join('\n'));
    assert.equal(p.stdout.filter((l) => l === '[INFO] Reloading complete').length, 2, p.stdout.join('\n'));
    for (let i = 0; i < 20; i++) {
      const a = await dig(p.port, `r${i}.example.org`, 'A');
      assert.match(a, /192\.0\.2\.7/, a);
    }
  } finally {
    assert.equal(await p.stop('SIGTERM'), 0);
  }
  assert.equal(p.stdout.filter((l) => l === '[INFO] SIGTERM: Shutting down servers then terminating').length, 2, p.stdout.join('\n'));
});

test('-workers 2: every scrape of /metrics counts the queries of both workers', { timeout: 30_000 }, async () => {
  const mport = await freePort();
  const p = await startProcess(`.:{PORT} {\n  prometheus 127.0.0.1:${mport}\n  whoami\n}\n`, { args: ['-workers', '2'] });
  try {
    // Each query from a fresh source port: SO_REUSEPORT spreads them over both workers.
    const n = 40;
    for (let i = 0; i < n; i++) assert.equal(status(await dig(p.port, `q${i}.example.org`, 'A')), 'NOERROR');
    // The scrape lands on either worker (both listen on the metrics port): each must give the sum.
    for (let i = 0; i < 4; i++) {
      const text = await (await fetch(`http://127.0.0.1:${mport}/metrics`)).text();
      const m = /^coredns_dns_requests_total\{[^}]*type="A"\} (\d+)$/m.exec(text);
      assert.equal(Number(m?.[1]), n, `scrape ${i}:\n${text.split('\n').filter((l) => l.startsWith('coredns_dns_requests_total')).join('\n')}`);
    }
  } finally {
    assert.equal(await p.stop('SIGTERM'), 0);
  }
});

test('-workers 2 with a bad Corefile fails once with CoreDNS\'s error and exit 1', async () => {
  const p = await startProcess('.:{PORT} {\n  nosuch\n}\n', { args: ['-workers', '2'], wait: false });
  assert.equal(await p.exited, 1);
  assert.equal(p.stderr.filter((l) => /Unknown directive 'nosuch'/.test(l)).length, 1, p.stderr.join('\n'));
});

test('-workers 2 with debug: a worker\'s unrecovered panic stops the whole server with exit 2, as CoreDNS stops', { timeout: 30_000 }, async () => {
  // whoami is made to throw for *.panic.test by a preloaded test helper (see cli.test.ts for CoreDNS's own panic).
  const p = await startProcess('.:{PORT} {\n  debug\n  whoami\n}\n', {
    args: ['-workers', '2'],
    env: { NODE_OPTIONS: `--import ${join(ROOT, 'test', 'helpers', 'whoami-throws.ts')}`, NODENS_BUNDLE: '0' },
  });
  try {
    await dig(p.port, 'x.panic.test').catch(() => '');
    assert.equal(await p.exited, 2);
    assert.equal(p.stderr.filter((l) => l.startsWith('panic: whoami-throws: boom')).length, 1, p.stderr.join('\n'));
    assert.equal(p.stdout.some((l) => / exited \(2\); starting a new one/.test(l)), false, p.stdout.join('\n'));
  } finally {
    await p.stop();
  }
});

for (const workers of ['1', '2']) test(`-workers ${workers}: a stdout reader that falls behind holds the server back (as a full pipe holds CoreDNS's log) instead of piling log lines up in memory`, { timeout: 60_000 }, async () => {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'nodens-workers-log-'));
  writeFileSync(join(dir, 'Corefile'), `.:${port} {\n  log\n  whoami\n}\n`);
  const proc = spawn(BIN, ['-conf', join(dir, 'Corefile'), '-workers', workers], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise<void>((resolve, reject) => {
      let seen = '';
      const onData = (c: Buffer): void => {
        seen += c.toString();
        if (seen.includes('CoreDNS-')) { proc.stdout!.off('data', onData); resolve(); }
      };
      proc.stdout!.on('data', onData);
      proc.once('exit', (code) => { reject(new Error(`exited ${code}: ${seen}`)); });
    });
    proc.stdout!.pause(); // nobody reads the log any more: the pipe fills
    const rssKiB = (): number => Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${proc.pid}/status`, 'utf8'))![1]);
    const before = rssKiB();
    const sock = dgram.createSocket('udp4');
    let answered = 0;
    sock.on('message', () => { answered++; });
    await new Promise<void>((r) => { sock.bind(0, '127.0.0.1', r); });
    // 40,000 logged queries, 200 at a time on the wire at most (bounded in count and time).
    const total = 40_000;
    const started = Date.now();
    for (let sent = 0; sent < total && Date.now() - started < 20_000;) {
      if (sent - answered < 200) {
        sock.send(encodeMessage({ ...newQuery(`q${sent}.example.org.`, 1), id: sent & 0xffff }), port, '127.0.0.1');
        sent++;
      } else {
        await new Promise((r) => setTimeout(r, 5));
        if (Date.now() - started > 3000 && answered < total / 2) break; // held back: the point of the test
      }
    }
    const growthMiB = (rssKiB() - before) / 1024;
    assert.ok(answered < total / 2, `${answered} of ${total} queries answered while the log went unread`);
    assert.ok(growthMiB < 64, `RSS grew ${growthMiB.toFixed(1)} MiB while the log went unread`);
    // Reading again releases the workers: answers resume.
    proc.stdout!.resume();
    const after = answered;
    for (let i = 0; i < 50 && answered === after; i++) {
      sock.send(encodeMessage({ ...newQuery('again.example.org.', 1), id: 4242 }), port, '127.0.0.1');
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(answered > after, 'answers resume once the log is read');
    sock.close();
  } finally {
    proc.stdout!.resume(); // a writer blocked on the full pipe could not act on the signal
    proc.kill('SIGTERM');
    const killer = setTimeout(() => { proc.kill('SIGKILL'); }, 10_000);
    await new Promise((r) => { if (proc.exitCode !== null) r(null); else proc.once('exit', r); });
    clearTimeout(killer);
  }
});
