// Soak (issue 16): nodens in the drills' stack (test/drills/stack.ts: cache, hosts,
// kubernetes against the test API server, forward to a local unbound) under a steady
// 80% of its peak for a long time. In one run: dnsperf flat out for --peak-seconds
// measures the peak; then dnsperf at 80% of it for --seconds, every query reported
// (-v) so the loss and the p99 of each 10 s window are known; RSS sampled every second.
// Query mix (one file, looped): 60% cache hits (500 names asked over and over), 20%
// misses (a new name each under miss.test, forwarded to unbound; the file is long
// enough that a name comes round again only after its cache entry expired), 10%
// kubernetes service names, 10% hosts names.
// usage: node test/drills/soak.ts [--seconds 600] [--peak-seconds 10] [--warmup 60] [--rate N (no peak run)] [--rss-bound 5 (%)]
// Exit status 1 on a crash, a loss of 0.01% or more, or RSS growth of 5% (--rss-bound) or more
// from the end of the warm-up to the end.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { arg, machine, requireTools, table } from './common.ts';
import { HOSTS_N, k8sNames, startStack } from './stack.ts';

const seconds = arg('seconds', 600);
const peakSeconds = arg('peak-seconds', 10);
const warmup = arg('warmup', Math.min(60, Math.round(seconds / 3)));
const LOSS_GOAL = 0.0001;
/** RSS growth bound after warm-up: the 5% goal; `--rss-bound P` for short runs, where the heap has not settled. */
const RSS_GOAL = arg('rss-bound', 5) / 100;

function queryFile(dir: string): string {
  const k8s = k8sNames();
  const lines: string[] = [];
  // 200,000 lines: at the rates this machine reaches, a pass takes longer than the cache's 30 s.
  for (let i = 0; i < 200_000; i++) {
    const r = i % 10;
    if (r < 6) lines.push(`hit${i % 500}.miss.test A`);
    else if (r < 8) lines.push(`m${i}.miss.test A`);
    else if (r === 8) lines.push(`${k8s[i % k8s.length]} A`);
    else lines.push(`h${i % HOSTS_N}.hosts.test A`);
  }
  const f = join(dir, 'queries.txt');
  writeFileSync(f, `${lines.join('\n')}\n`);
  return f;
}

// ---- where lost queries go: the kernel's UDP drop counters next to dnsperf's timeouts --------------

/** Udp RcvbufErrors and InErrors of /proc/net/snmp (this network namespace: other processes' drops count too). */
function snmpUdp(): { rcvbuf: number; inErrors: number } {
  const ls = readFileSync('/proc/net/snmp', 'utf8').split('\n').filter((l) => l.startsWith('Udp: '));
  const head = ls[0]!.split(/\s+/); const vals = ls[1]!.split(/\s+/);
  const v = (k: string): number => Number(vals[head.indexOf(k)]);
  return { rcvbuf: v('RcvbufErrors'), inErrors: v('InErrors') };
}

/** The socket inodes a process holds. */
function socketInodes(pid: number | undefined): Set<string> {
  const out = new Set<string>();
  if (pid === undefined) return out;
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try { const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`)); if (m) out.add(m[1]!); } catch { /* closed meanwhile */ }
    }
  } catch { /* exited */ }
  return out;
}

/**
 * Per-socket drop counts (the `drops` column of /proc/net/udp and udp6: datagrams the kernel
 * discarded at that socket, a full receive buffer mostly) of each watched process, kept as the
 * highest value seen per socket (sampled every second: a socket's count survives only while it is open).
 */
class SocketDrops {
  private readonly seen = new Map<string, Map<string, number>>();
  /** The most bytes seen waiting in one of a process's receive queues (a process behind its socket). */
  private readonly queued = new Map<string, number>();
  private readonly procs = new Map<string, () => number | undefined>();
  watch(name: string, pid: () => number | undefined): void { this.procs.set(name, pid); this.seen.set(name, new Map()); }
  sample(): void {
    const rows = new Map<string, [number, number]>();
    for (const f of ['/proc/net/udp', '/proc/net/udp6']) {
      for (const l of readFileSync(f, 'utf8').split('\n').slice(1)) {
        const c = l.trim().split(/\s+/);
        if (c.length >= 13) rows.set(c[9]!, [Number(c[12]), parseInt(c[4]!.split(':')[1]!, 16)]);
      }
    }
    for (const [name, pid] of this.procs) {
      const m = this.seen.get(name)!;
      for (const ino of socketInodes(pid())) {
        const r = rows.get(ino);
        if (r === undefined) continue;
        if (r[0] > (m.get(ino) ?? 0)) m.set(ino, r[0]);
        if (r[1] > (this.queued.get(name) ?? 0)) this.queued.set(name, r[1]);
      }
    }
  }
  total(name: string): number { let n = 0; for (const d of this.seen.get(name)!.values()) n += d; return n; }
  /** `drops (peak KiB queued)` */
  show(name: string): string { return `${this.total(name)} (${Math.round((this.queued.get(name) ?? 0) / 1024)} KiB)`; }
}

/** Which part of the mix a query name belongs to (the soak's query file). */
function kindOf(name: string): string {
  if (name.startsWith('hit')) return 'cache hits';
  if (name.endsWith('.miss.test') || name.endsWith('.miss.test.')) return 'misses (forwarded)';
  if (name.includes('.svc.cluster.local')) return 'kubernetes';
  return 'hosts';
}

interface Window { t: number; answered: number; lost: number; p99: number; rssMiB: number }
interface Perf { sent: number; completed: number; lost: number; qps: number; rcodes: string; windows: Window[]; lostBy: Map<string, number> }

function dnsperf(port: number, file: string, args: string[], perQuery: boolean, rss: () => number, started?: (p: ChildProcess) => void): Promise<Perf> {
  return new Promise((resolve, reject) => {
    const lostBy = new Map<string, number>();
    // -b 4096: the client's sockets get a 4 MiB receive buffer, as nodens's listener has; with the default
    // (208 KiB) dnsperf, starved of CPU by the machine's other work, lost replies at its own sockets.
    const p = spawn('dnsperf', ['-s', '127.0.0.1', '-p', String(port), '-d', file, '-c', '8', '-t', '2', '-b', '4096', ...args, ...(perQuery ? ['-v'] : [])], { stdio: ['ignore', 'pipe', 'pipe'] });
    started?.(p);
    const windows: Window[] = [];
    const t0 = Date.now();
    let lat: number[] = []; let lost = 0;
    let tail = ''; let summary = '';
    const close = (): void => {
      lat.sort((a, b) => a - b);
      windows.push({ t: Math.round((Date.now() - t0) / 1000), answered: lat.length, lost, p99: lat.length ? lat[Math.floor(lat.length * 0.99)]! * 1000 : NaN, rssMiB: rss() });
      lat = []; lost = 0;
    };
    const timer = perQuery ? setInterval(close, 10_000) : undefined;
    p.stdout.setEncoding('utf8');
    p.stdout.on('data', (d: string) => {
      const text = tail + d;
      const ls = text.split('\n');
      tail = ls.pop()!;
      for (const l of ls) {
        if (l.startsWith('> ')) {
          if (l.startsWith('> T ')) {
            lost++;
            const k = kindOf(l.split(' ')[2] ?? '');
            lostBy.set(k, (lostBy.get(k) ?? 0) + 1);
          }
          else lat.push(Number(l.slice(l.lastIndexOf(' ') + 1)));
        } else summary += `${l}\n`;
      }
    });
    let err = '';
    p.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    p.on('exit', () => {
      if (timer) { clearInterval(timer); if (lat.length + lost > 0) close(); }
      const num = (re: RegExp): number => Number(re.exec(summary)?.[1]);
      const r = { sent: num(/Queries sent:\s+(\d+)/), completed: num(/Queries completed:\s+(\d+)/), lost: num(/Queries lost:\s+(\d+)/), qps: num(/Queries per second:\s+([\d.]+)/), rcodes: /Response codes:\s+(.*)/.exec(summary)?.[1] ?? '', windows, lostBy };
      if (Number.isNaN(r.sent)) reject(new Error(`dnsperf ${args.join(' ')}: ${summary}${err}`)); else resolve(r);
    });
  });
}

requireTools('dnsperf', 'unbound');
console.log(`soak: ${machine()}; ${seconds} s at 80% of the peak, warm-up ${warmup} s`);
const s = await startStack();
const rssMiB = (): number => Math.round(s.nodens.rssKiB() / 1024);
let failed = false;
try {
  const file = queryFile(mkdtempSync(join(tmpdir(), 'nodens-soak-')));
  // Prime the API watch and the cache a little, then the peak.
  // With -v and its parsing, as in the soak; `--rate N` skips the measurement and offers N q/s.
  const fixed = arg('rate', 0);
  const peak = fixed > 0
    ? { qps: fixed / 0.8, completed: 0, sent: 0, rcodes: 'not measured (--rate)' }
    : await dnsperf(s.port, file, ['-l', String(peakSeconds), '-q', '200'], true, rssMiB);
  const rate = Math.round(peak.qps * 0.8);
  console.log(`peak: ${peak.qps.toFixed(0)} q/s (${peak.completed}/${peak.sent} answered, ${peak.rcodes}); soak at ${rate} q/s`);
  const rssSamples: Array<[number, number]> = [];
  const t0 = Date.now();
  let perfPid: number | undefined;
  const drops = new SocketDrops();
  drops.watch('nodens', () => s.nodens.proc.pid);
  drops.watch('unbound', () => s.unboundPid);
  drops.watch('dnsperf', () => perfPid);
  const snmp0 = snmpUdp();
  const sampler = setInterval(() => { rssSamples.push([(Date.now() - t0) / 1000, rssMiB()]); drops.sample(); }, 1000);
  const soak = await dnsperf(s.port, file, ['-l', String(seconds), '-Q', String(rate), '-q', '2000'], true, rssMiB, (p) => { perfPid = p.pid; });
  clearInterval(sampler);
  const snmp1 = snmpUdp();
  const alive = s.nodens.proc.exitCode === null;
  const median = (xs: number[]): number => { const a = [...xs].sort((x, y) => x - y); return a[a.length >> 1] ?? NaN; };
  const afterWarmup = median(rssSamples.filter(([t]) => t >= warmup && t < warmup + 10).map(([, r]) => r));
  const atEnd = median(rssSamples.filter(([t]) => t >= seconds - 10).map(([, r]) => r));
  const growth = (atEnd - afterWarmup) / afterWarmup;
  const loss = soak.lost / soak.sent;
  console.log('\nper 10 s window:\n');
  console.log(table(['t (s)', 'answered', 'lost', 'p99 ms', 'RSS MiB'], soak.windows.map((w) => [w.t, w.answered, w.lost, w.p99.toFixed(2), w.rssMiB])));
  const p99s = soak.windows.filter((w) => w.answered > 0).map((w) => w.p99);
  console.log(`\n${table(
    ['peak q/s', 'soak q/s (offered → achieved)', 'seconds', 'sent', 'lost', 'loss', 'p99 ms (min/median/max of windows)', 'RSS MiB after warm-up → end', 'RSS growth', 'response codes', 'crashed'],
    [[peak.qps.toFixed(0), `${rate} → ${soak.qps.toFixed(0)}`, seconds, soak.sent, soak.lost, `${(loss * 100).toFixed(4)}%`, `${Math.min(...p99s).toFixed(2)}/${median(p99s).toFixed(2)}/${Math.max(...p99s).toFixed(2)}`, `${afterWarmup} → ${atEnd}`, `${(growth * 100).toFixed(1)}%`, soak.rcodes, alive ? 'no' : 'YES']],
  )}`);
  // Where the lost queries went: dnsperf's timeouts by part of the mix, next to the kernel's drops.
  console.log(`\nlost queries by part of the mix: ${[...soak.lostBy].map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`);
  console.log(`\n${table(
    ['dnsperf timeouts', "nodens's sockets: kernel drops (peak queued)", "unbound's sockets: kernel drops (peak queued)", "dnsperf's sockets: kernel drops (peak queued)", 'Udp RcvbufErrors (whole namespace)', 'Udp InErrors (whole namespace)'],
    [[soak.lost, drops.show('nodens'), drops.show('unbound'), drops.show('dnsperf'), snmp1.rcvbuf - snmp0.rcvbuf, snmp1.inErrors - snmp0.inErrors]],
  )}`);
  console.log("\n(Sampled every second. nodens's sockets: its listener and whichever one-use upstream sockets were open at a sample. Drops at dnsperf's"
    + ' sockets and a dnsperf that sends less than offered are the client falling behind (the machine), not the server. The namespace counters include every other process.)');
  if (!alive) { failed = true; console.log(`FAIL: nodens exited:\n${s.nodens.lines.slice(-20).join('\n')}`); }
  if (!(loss < LOSS_GOAL)) { failed = true; console.log(`FAIL: loss ${(loss * 100).toFixed(4)}% (goal < ${LOSS_GOAL * 100}%)`); }
  if (!(growth < RSS_GOAL)) { failed = true; console.log(`FAIL: RSS grew ${(growth * 100).toFixed(1)}% after warm-up (goal < ${RSS_GOAL * 100}%)`); }
} finally { await s.stop(); }
console.log(failed ? 'soak: FAIL' : 'soak: ok');
process.exit(failed ? 1 : 0);
