// What the drills share: the reference CoreDNS, sysctls inside a namespace,
// a C helper compiled on the spot, waiting for a server to answer, and the
// figures table each drill prints.

import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../helpers/server.ts';
import { available, digIn, type Netns } from '../netns/netns.ts';

export const DRILLS = join(ROOT, 'test', 'drills');

/** The drills need root and namespaces, and these tools: CI installs them; a missing one fails loudly. */
export function requireTools(...cmds: string[]): void {
  if (!available()) throw new Error('network namespaces unavailable: run as root with iproute2 installed');
  for (const cmd of cmds) {
    if (spawnSync('sh', ['-c', `command -v ${cmd}`]).status !== 0) throw new Error(`${cmd} is not installed (see .ci/run's package list)`);
  }
}

/** The reference CoreDNS (built once by the script when missing; .ci/run builds it first). */
export function referenceCoreDNS(): string {
  const r = spawnSync(join(ROOT, 'scripts', 'coredns-reference.sh'), { encoding: 'utf8', timeout: 900_000 });
  if (r.status !== 0) throw new Error(`scripts/coredns-reference.sh failed: ${r.stderr}`);
  return r.stdout.trim();
}

/** Compile test/drills/NAME.c with gcc into a temporary directory; returns the binary's path. */
export function compileHelper(name: string): string {
  const out = join(mkdtempSync(join(tmpdir(), 'nodens-drill-')), name);
  const r = spawnSync('gcc', ['-O2', '-Wall', '-o', out, join(DRILLS, `${name}.c`)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`gcc ${name}.c failed: ${r.stderr}`);
  return out;
}

export function sysctl(ns: Netns, ...settings: string[]): void {
  for (const s of settings) {
    const r = ns.exec('sysctl', ['-q', '-w', s]);
    if (r.status !== 0) throw new Error(`sysctl ${s} in ${ns.name}: ${r.stdout}`);
  }
}

/** Until `server` answers `name` with NOERROR from inside `ns` (bounded). */
export async function answering(ns: Netns, server: string, name: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = digIn(ns, server, name);
    if (r.status === 'NOERROR') return;
    if (Date.now() > deadline) throw new Error(`${server} does not answer ${name}: ${r.out}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** A plain-text table (the drills' figures, pasted as is into docs/reliability.md). */
export function table(head: string[], rows: Array<Array<string | number>>): string {
  const cells = [head, ...rows.map((r) => r.map(String))];
  const widths = head.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  const line = (r: string[]): string => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...cells.slice(1).map(line)].join('\n');
}

/** `--name value` from argv, else the default. */
export function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

/** Date and machine, for the figures' heading. */
export function machine(): string {
  const cpu = spawnSync('sh', ['-c', "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], { encoding: 'utf8' }).stdout.trim();
  return `${new Date().toISOString().slice(0, 16)}Z, ${cpu}, ${spawnSync('nproc', { encoding: 'utf8' }).stdout.trim()} cores, Node ${process.version}`;
}
