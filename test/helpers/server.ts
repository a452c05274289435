// Start nodens for a test: in-process through the library API, or as a real
// process through bin/nodens. Both bind 127.0.0.1-reachable ports chosen by
// the kernel and clean up after themselves.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer } from 'node:net';
import dgram from 'node:dgram';
import { startServer, setLogSink, processMetricsRegistry, type NodensServer, type ExternalPlugin } from '../../src/index.ts';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BIN = join(ROOT, 'bin', 'nodens');

/** Collected log lines of in-process servers (the log sink is process-wide). */
export const logLines: string[] = [];
setLogSink((line) => { logLines.push(line); });

/**
 * An in-process server counting in the process's metrics registry (as the nodens command does), so a
 * test reads its metrics from `registry` of src/plugin/pkg/metrics.ts. startServer alone gives each
 * server a registry of its own.
 */
export async function startInProcess(corefile: string, opts: { plugins?: ExternalPlugin[]; env?: Record<string, string> } = {}): Promise<NodensServer> {
  return startServer({ corefile, plugins: opts.plugins, env: opts.env, metrics: processMetricsRegistry });
}

/** A port free for both UDP and TCP on 127.0.0.1 right now. */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = await new Promise<number>((resolve, reject) => {
      const s = createServer();
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => { const p = (s.address() as { port: number }).port; s.close(() => { resolve(p); }); });
    });
    const udpFree = await new Promise<boolean>((resolve) => {
      const u = dgram.createSocket('udp4');
      u.once('error', () => { resolve(false); });
      u.bind(port, '127.0.0.1', () => { u.close(() => { resolve(true); }); });
    });
    if (udpFree) return port;
  }
  throw new Error('no free port');
}

export interface NodensProcess {
  proc: ChildProcess;
  port: number;
  stdout: string[];
  stderr: string[];
  /** Resolves with the exit code when the process ends. */
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  waitFor(pattern: RegExp, ms?: number): Promise<string>;
}

/**
 * Run bin/nodens with a Corefile written to a temp dir. `{PORT}` in the text is
 * replaced by a free port. Waits until the version banner is printed (or the
 * process exits) unless `wait` is false. `env` is added to this process's environment.
 */
export async function startProcess(corefile: string, opts: { args?: string[]; wait?: boolean; files?: Record<string, string>; env?: Record<string, string> } = {}): Promise<NodensProcess> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'nodens-test-'));
  for (const [name, text] of Object.entries(opts.files ?? {})) writeFileSync(join(dir, name), text);
  const file = join(dir, 'Corefile');
  writeFileSync(file, corefile.replaceAll('{PORT}', String(port)));
  const proc = spawn(BIN, ['-conf', file, ...(opts.args ?? [])], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...opts.env } });
  const stdout: string[] = [];
  const stderr: string[] = [];
  const waiters: Array<() => void> = [];
  const feed = (into: string[]) => {
    let partial = '';
    return (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop()!;
      into.push(...lines);
      for (const w of waiters.splice(0)) w();
    };
  };
  proc.stdout!.on('data', feed(stdout));
  proc.stderr!.on('data', feed(stderr));
  const exited = new Promise<number | null>((resolve) => { proc.on('exit', (code) => { for (const w of waiters.splice(0)) w(); resolve(code); }); });
  const waitFor = async (pattern: RegExp, ms = 10000): Promise<string> => {
    const deadline = Date.now() + ms;
    for (;;) {
      const hit = [...stdout, ...stderr].find((l) => pattern.test(l));
      if (hit !== undefined) return hit;
      if (proc.exitCode !== null || Date.now() > deadline) {
        throw new Error(`did not see ${pattern} (exit ${proc.exitCode}); stdout:\n${stdout.join('\n')}\nstderr:\n${stderr.join('\n')}`);
      }
      await new Promise<void>((r) => { waiters.push(r); setTimeout(r, 50); });
    }
  };
  const np: NodensProcess = {
    proc, port, stdout, stderr, exited, waitFor,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null) proc.kill(signal);
      return exited;
    },
  };
  if (opts.wait !== false) await waitFor(/^CoreDNS-|^\S+ - Error|error|Error/);
  return np;
}
