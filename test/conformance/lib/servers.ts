// Starting and stopping a DNS server process (CoreDNS or nodens, same flags) on a free loopback port.
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { queryUdp } from './client.ts';
import { encodeQuery, parseQueryLine } from './query.ts';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** A port free for both UDP and TCP on 127.0.0.1 (checked, then released; small race accepted). */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await new Promise<number>((resolve, reject) => {
      const s = net.createServer();
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const udpOk = await new Promise<boolean>((resolve) => {
      const u = dgram.createSocket('udp4');
      u.once('error', () => resolve(false));
      u.bind(port, '127.0.0.1', () => u.close(() => resolve(true)));
    });
    if (udpOk) return port;
  }
  throw new Error('no free port found');
}

export function referenceBinary(): string {
  const out = execFileSync(path.join(REPO, 'scripts/coredns-reference.sh'), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  return out.trim().split('\n').pop() ?? '';
}

export function nodensBinary(): string | undefined {
  const p = path.join(REPO, 'bin/nodens');
  return existsSync(p) ? p : undefined;
}

export interface Running {
  name: string;
  port: number;
  proc: ChildProcess;
  /** everything the process printed, stdout and stderr interleaved */
  output(): string;
  exited(): { code: number | null; signal: string | null } | undefined;
  stop(): Promise<void>;
}

export interface StartOptions {
  name: string;
  /** the executable; argv gets `-conf <conf> -dns.port <port> -quiet` appended after `args` */
  command: string;
  args?: string[];
  conf: string;
  cwd: string;
  port?: number;
  env?: Record<string, string>;
  quiet?: boolean;
  /** wrap the command, e.g. ['taskset', '-c', '0'] */
  prefix?: string[];
}

export async function startServer(o: StartOptions): Promise<Running> {
  return spawnServer(o, await portFor(o));
}

async function portFor(o: StartOptions): Promise<number> {
  return o.port ?? await freePort();
}

/** Like startServer, for any command line (argv given whole, e.g. unbound's). */
export function spawnArgv(name: string, argv: string[], cwd: string, port: number, env?: Record<string, string>): Running {
  return wrap(name, port, spawn(argv[0], argv.slice(1), { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }));
}

function spawnServer(o: StartOptions, port: number): Running {
  const argv = [...(o.prefix ?? []), o.command, ...(o.args ?? []), '-conf', o.conf, '-dns.port', String(port)];
  if (o.quiet !== false) argv.push('-quiet');
  return spawnArgv(o.name, argv, o.cwd, port, o.env);
}

function wrap(name: string, port: number, proc: ChildProcess): Running {
  let out = '';
  const keep = (d: Buffer) => {
    out += d.toString();
    if (out.length > 200_000) out = out.slice(-100_000);
  };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  let exit: { code: number | null; signal: string | null } | undefined;
  const exitP = new Promise<void>((resolve) => {
    proc.on('exit', (code, signal) => {
      exit = { code, signal };
      resolve();
    });
    proc.on('error', (e) => {
      out += `spawn error: ${e.message}\n`;
      exit = { code: -1, signal: null };
      resolve();
    });
  });
  return {
    name,
    port,
    proc,
    output: () => out,
    exited: () => exit,
    stop: async () => {
      if (exit) return;
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await exitP;
      clearTimeout(t);
    },
  };
}

/** Waits until the server answers a UDP query (any reply counts) or exits; returns ms waited or throws. */
export async function waitReady(s: Running, probe = '. SOA', timeoutMs = 20000, pollMs = 25, t0 = performance.now()): Promise<number> {
  const q = parseQueryLine(probe);
  let id = 1;
  while (performance.now() - t0 < timeoutMs) {
    const ex = s.exited();
    if (ex) throw new Error(`${s.name} exited (code ${ex.code}, signal ${ex.signal}) before answering:\n${s.output()}`);
    const r = await queryUdp('127.0.0.1', s.port, encodeQuery(q, id++), 200);
    if (r.bytes) return performance.now() - t0;
    await new Promise((res) => setTimeout(res, pollMs));
  }
  throw new Error(`${s.name} did not answer within ${timeoutMs} ms:\n${s.output()}`);
}
