// DNS over gRPC: CPU per query of nodens and the reference CoreDNS, A/B alternated in one time window.
//
//   node bench/grpc.ts [--queries N] [--rounds R] [--concurrency C]
//
// Two modes, each server measured as the process's utime+stime (from /proc/PID/stat) over N queries:
//   server: a node:http2 client in this process sends N unary Query calls (C in flight, one connection) to the
//           server's `grpc://` block (whoami);
//   plugin: UDP queries (C in flight) to the server's `.` block, whose grpc plugin forwards them to a fixed
//           upstream (a nodens grpc:// server with whoami, whose CPU is not counted).
// Prints "CPU s / 100k q" per server and round, and the nodens/coredns ratio of the medians. Bounded: R rounds
// of N queries per server and mode.

import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import dgram from 'node:dgram';
import http2 from 'node:http2';
import os from 'node:os';
import path from 'node:path';
import { freePort, nodensBinary, referenceBinary, spawnArgv, waitReady, type Running } from '../test/conformance/lib/servers.ts';
import { grpcFrame, GRPC_PATH } from '../src/wire/grpc.ts';
import { encodeMessage } from '../src/wire/encode.ts';
import { newQuery } from '../src/wire/message.ts';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(name);
  return i < 0 ? def : Number(process.argv[i + 1]);
}
const N = arg('--queries', 20000);
const ROUNDS = arg('--rounds', 2);
const CONC = arg('--concurrency', 16);
const TICK = 100; // USER_HZ

function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) / TICK;
}

/** The pid of the server process (bin/nodens execs node; CoreDNS is itself). */
function pidOf(r: Running): number { return r.proc.pid!; }

const query = encodeMessage(newQuery('www.example.org.', 1));
const body = grpcFrame(query);

async function grpcLoad(port: number): Promise<void> {
  const s = http2.connect(`http://127.0.0.1:${port}`);
  let sent = 0;
  const one = (): Promise<void> => new Promise((resolve, reject) => {
    const st = s.request({ ':method': 'POST', ':path': GRPC_PATH, 'content-type': 'application/grpc', te: 'trailers' });
    st.on('data', () => { /* reply */ });
    st.on('error', reject);
    st.on('close', () => { resolve(); });
    st.end(body);
  });
  const worker = async (): Promise<void> => { while (sent < N) { sent++; await one(); } };
  await Promise.all(Array.from({ length: CONC }, worker));
  s.close();
}

async function udpLoad(port: number): Promise<void> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => { sock.bind(0, '127.0.0.1', r); });
  let sent = 0;
  let got = 0;
  const waiters = new Map<number, () => void>();
  sock.on('message', (m) => { const id = m.readUInt16BE(0); const w = waiters.get(id); if (w) { waiters.delete(id); got++; w(); } });
  const q = Buffer.from(query);
  const one = (id: number): Promise<void> => new Promise((resolve) => {
    q.writeUInt16BE(id, 0);
    const t = setTimeout(() => { waiters.delete(id); resolve(); }, 2000);
    waiters.set(id, () => { clearTimeout(t); resolve(); });
    sock.send(q, port, '127.0.0.1');
  });
  const worker = async (w: number): Promise<void> => { let i = 0; while (sent < N) { sent++; await one((w * 4096 + (i++ % 4096)) & 0xffff); } };
  await Promise.all(Array.from({ length: CONC }, (_, w) => worker(w)));
  sock.close();
  if (got < N * 0.99) throw new Error(`only ${got} of ${N} answered`);
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nodens-bench-grpc-'));
  const up = await freePort();
  const upstream = spawnArgv('upstream', [nodensBinary()!, '-conf', writeConf(dir, 'up', `grpc://127.0.0.1:${up} {\n whoami\n}\n. {\n whoami\n}\n`), '-dns.port', String(await freePort()), '-quiet'], dir, 0);
  await new Promise((r) => setTimeout(r, 1500));
  const results: Record<string, number[]> = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of ['nodens', 'coredns'] as const) {
      const gp = await freePort();
      const dp = await freePort();
      const conf = writeConf(dir, name, `grpc://127.0.0.1:${gp} {\n whoami\n}\n.:${dp} {\n grpc . 127.0.0.1:${up}\n}\n`);
      const cmd = name === 'nodens' ? nodensBinary()! : referenceBinary();
      const r = spawnArgv(name, [cmd, '-conf', conf, '-dns.port', String(dp), '-quiet'], dir, dp);
      await waitReady(r);
      await grpcLoad(gp); // warm-up
      for (const [mode, load] of [['server', () => grpcLoad(gp)], ['plugin', () => udpLoad(dp)]] as const) {
        const c0 = cpuSeconds(pidOf(r));
        await load();
        const c1 = cpuSeconds(pidOf(r));
        const per100k = (c1 - c0) / N * 100000;
        (results[`${mode} ${name}`] ??= []).push(per100k);
        console.log(`round ${round + 1} ${mode.padEnd(6)} ${name.padEnd(7)} CPU s / 100k q: ${per100k.toFixed(2)}`);
      }
      await r.stop();
    }
  }
  await upstream.stop();
  const median = (a: number[]): number => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]!; };
  for (const mode of ['server', 'plugin']) {
    const n = median(results[`${mode} nodens`]!);
    const c = median(results[`${mode} coredns`]!);
    console.log(`${mode}: nodens ${n.toFixed(2)}, coredns ${c.toFixed(2)} CPU s / 100k q; nodens/coredns ${(n / c).toFixed(2)}`);
  }
}

function writeConf(dir: string, name: string, text: string): string {
  const p = path.join(dir, `Corefile.${name}`);
  writeFileSync(p, text);
  return p;
}

await main();
