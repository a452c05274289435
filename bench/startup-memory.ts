// Start to first answer and idle memory: nodens vs CoreDNS, runs alternated so that load on a shared machine
// falls on both alike; also a bare Node process (Node's own floor).
//
//   node bench/startup-memory.ts [--runs N] [--corefiles hosts,quickstart,kubeadm,dot,doh] [--servers nodens,coredns,node]
//   NODENS_BASE_BIN=<another checkout>/bin/nodens ... --servers nodens,base,coredns   (A/B of two builds)
//   NODENS_BINS=a=/path/to/bin,b=/other/bin ... --servers a,b,coredns                 (any number of named builds)
//
// Each run spawns the server (pinned to core 0), sends a UDP probe every 2 ms until one is answered (start-up time),
// and the CPU time the process had used by then (less sensitive to other load than the wall-clock time); then
// waits 1.5 s and reads VmRSS, then the parts of it from /proc/<pid>/smaps_rollup (anonymous vs file-backed).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { testCerts } from '../test/helpers/certs.ts';
import { REPO, freePort, nodensBinary, referenceBinary, spawnArgv, waitReady } from '../test/conformance/lib/servers.ts';

const HOSTS_FILES = { 'hosts.txt': Array.from({ length: 300 }, (_, i) => `10.0.${i >> 8}.${i & 255} h${i}.bench.test`).join('\n') + '\n' };

const COREFILES: Record<string, { text: (up: number) => string; probe: string; files?: Record<string, string> }> = {
  // bench/run.ts's hosts scenario: one zone answered from a hosts file of 300 names
  hosts: {
    text: () => 'bench.test {\n    hosts hosts.txt\n}\n',
    probe: 'h0.bench.test. A',
    files: HOSTS_FILES,
  },
  quickstart: {
    text: () => readFileSync(path.join(REPO, 'examples/Corefile.quickstart'), 'utf8').replace('.:1053 {', '. {'),
    probe: 'www.example.org. A',
  },
  // bench/run.ts's dot and doh scenarios: the hosts zone on plain DNS (probed) and again behind TLS
  dot: {
    text: () => 'bench.test {\n    hosts hosts.txt\n}\ntls://bench.test:{$BENCH_SECURE_PORT} {\n    tls {$BENCH_CERT} {$BENCH_KEY}\n    hosts hosts.txt\n}\n',
    probe: 'h0.bench.test. A',
    files: HOSTS_FILES,
  },
  doh: {
    text: () => 'bench.test {\n    hosts hosts.txt\n}\nhttps://bench.test:{$BENCH_SECURE_PORT} {\n    tls {$BENCH_CERT} {$BENCH_KEY}\n    hosts hosts.txt\n}\n',
    probe: 'h0.bench.test. A',
    files: HOSTS_FILES,
  },
  // kubeadm's default Corefile without the kubernetes plugin (health and ready on free ports)
  kubeadm: {
    text: (up) => `. {\n    errors\n    health :{$BENCH_HEALTH_PORT} {\n        lameduck 5s\n    }\n    ready :{$BENCH_READY_PORT}\n` +
      `    prometheus :{$BENCH_METRICS_PORT}\n    forward . 127.0.0.1:${up} {\n        max_concurrent 1000\n    }\n` +
      '    cache 30\n    loop\n    reload\n    loadbalance\n}\n',
    probe: 'example.org. A',
  },
};

interface Sample { server: string; corefile: string; startupMs: number; cpuMs: number; rssMiB: number; anonMiB: number; fileMiB: number }

function kib(text: string, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

function memory(pid: number): { rssMiB: number; anonMiB: number; fileMiB: number } {
  const st = readFileSync(`/proc/${pid}/status`, 'utf8');
  return {
    rssMiB: kib(st, 'VmRSS') / 1024,
    anonMiB: kib(st, 'RssAnon') / 1024,
    fileMiB: kib(st, 'RssFile') / 1024,
  };
}

const CLK_TCK = 100;
function cpuMs(pid: number): number {
  const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function upstream(): Promise<{ port: number; stop(): void }> {
  // A tiny UDP upstream (any reply will do for the probe: forward passes it back).
  const dgram = await import('node:dgram');
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
  s.on('message', (m, rinfo) => {
    const reply = Buffer.from(m);
    reply[2] |= 0x80;
    s.send(reply, rinfo.port, rinfo.address);
  });
  return { port: (s.address()).port, stop: () => s.close() };
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const opt = (name: string, dflt: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : dflt;
  };
  const runs = Number(opt('--runs', '5'));
  const corefiles = opt('--corefiles', 'hosts,quickstart,kubeadm').split(',');
  const servers = opt('--servers', 'nodens,coredns,node').split(',');
  const bins: Record<string, string> = { coredns: referenceBinary(), nodens: nodensBinary() ?? '', base: process.env.NODENS_BASE_BIN ?? '' };
  for (const kv of (process.env.NODENS_BINS ?? '').split(',').filter((x) => x !== '')) {
    const eq = kv.indexOf('=');
    bins[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'nodens-startup-'));
  const up = await upstream();
  const certs = testCerts();
  const samples: Sample[] = [];
  try {
    for (let run = 0; run < runs; run++) {
      for (const cf of corefiles) {
        for (const server of servers) {
          if (server === 'node' && cf !== corefiles[0]) continue;
          const port = await freePort();
          const env: Record<string, string> = {
            BENCH_HEALTH_PORT: String(await freePort()), BENCH_READY_PORT: String(await freePort()),
            BENCH_METRICS_PORT: String(await freePort()), BENCH_SECURE_PORT: String(await freePort()),
            BENCH_CERT: certs.cert, BENCH_KEY: certs.key,
          };
          const conf = path.join(tmp, `Corefile.${cf}`);
          writeFileSync(conf, COREFILES[cf].text(up.port));
          for (const [name, text] of Object.entries(COREFILES[cf].files ?? {})) writeFileSync(path.join(tmp, name), text);
          let argv: string[];
          if (server === 'node') {
            const node = path.join(REPO, 'node_modules/node/bin/node');
            argv = ['taskset', '-c', '0', node, '-e', 'setInterval(() => {}, 1000)'];
            const p = spawn(argv[0], argv.slice(1), { stdio: 'ignore' });
            await sleep(1500);
            samples.push({ server, corefile: '-', startupMs: NaN, cpuMs: NaN, ...memory(p.pid!) });
            p.kill('SIGKILL');
            continue;
          }
          argv = ['taskset', '-c', '0', bins[server], '-conf', conf, '-dns.port', String(port), '-quiet'];
          const t0 = performance.now();
          const proc = spawnArgv(server, argv, tmp, port, env);
          try {
            const ms = await waitReady(proc, COREFILES[cf].probe, 30000, 2, t0);
            const cpu = cpuMs(proc.proc.pid!);
            await sleep(1500);
            samples.push({ server, corefile: cf, startupMs: ms, cpuMs: cpu, ...memory(proc.proc.pid!) });
          } finally {
            await proc.stop();
          }
        }
      }
    }
  } finally {
    up.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
  const f = (v: number, d = 1) => (Number.isNaN(v) ? '–' : v.toFixed(d));
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length === 0 ? NaN : s[Math.floor((s.length - 1) / 2)];
  };
  console.log(`load average: ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}; ${runs} runs, alternated`);
  console.log('| corefile | server | startup ms (median; all) | CPU ms to first answer (median) | idle RSS MiB (median) | anon | file |');
  console.log('| --- | --- | --- | ---: | ---: | ---: | ---: |');
  const keys = [...new Set(samples.map((s) => `${s.corefile}\t${s.server}`))];
  for (const k of keys) {
    const [cf, server] = k.split('\t');
    const ss = samples.filter((s) => s.corefile === cf && s.server === server);
    console.log(`| ${cf} | ${server} | ${f(median(ss.map((s) => s.startupMs)), 0)}; ${ss.map((s) => f(s.startupMs, 0)).join(' ')} | ` +
      `${f(median(ss.map((s) => s.cpuMs)), 0)} | ` +
      `${f(median(ss.map((s) => s.rssMiB)))} | ${f(median(ss.map((s) => s.anonMiB)))} | ${f(median(ss.map((s) => s.fileMiB)))} |`);
  }
}

await main();
