// Loop-storm drill (issue 16): 10k looping queries a second for a few seconds, to a
// self-looping zone and to a ring of two nodens servers (both guarded by `loop { }`),
// while a healthy zone of the same server is under load. In a network namespace;
// nft counters count the packets that travel the loops (server to itself, server to
// its ring partner and back), so the cost of a looping query is measured, not
// inferred (DNS to and from port 53 of the two servers, not from or to the clients).
// The healthy zone's load (dnsperf at a fixed rate; with --max, flat out too) runs in
// short windows, alone and with the storm in turn (--rounds pairs of --seconds each);
// the verdict compares the medians, so that the machine's other work, which comes and
// goes over seconds, weighs on both alike. The servers' CPU time (utime + stime of S
// and B) is read around each window: their share of a core, and the CPU the storm
// adds per looping query (the guard's cost).
//
//   S 127.0.0.11: loop.test -> forward to itself; ring.test -> forward to B; healthy.test: file
//   B 127.0.0.12: ring.test -> forward to S
//   storm from 127.0.0.100, healthy load from 127.0.0.101
//
// usage: node test/drills/loop-storm.ts [--storm-qps N] [--healthy-qps N] [--seconds S (2)] [--rounds N (4)] [--max] [--only loop|ring]
//        [--quarantine S|B] (which server's start-up probe finds the ring, so holds its quarantine; default: a race)
// Exit status 1 when the healthy zone keeps less than 90% of what it answered alone (medians), a
// looping query costs more than 3 packets on the loops, or dnsperf could not send half the storm.

import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Netns } from '../netns/netns.ts';
import { answering, arg, machine, requireTools, table } from './common.ts';

interface Perf { sent: number; completed: number; qps: number; avgMs: number; rcodes: string }
/** One measuring window: the healthy zone's dnsperf (and the storm's), the servers' CPU seconds, its wall seconds. */
interface Window { healthy: Perf; storm?: Perf; cpu: number; wall: number }

const clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/**
 * dnsperf at `qps` (0: flat out) with at most `outstanding` queries in flight. The healthy load may have 1,000:
 * with 200 a latency above 40 ms caps the rate dnsperf sends at 5,000 q/s, and the throughput measured would be
 * the client's window, not what the server answers (the latency is reported beside it).
 */
function dnsperf(ns: Netns, from: string, file: string, qps: number, seconds: number, outstanding = 200): Promise<Perf> {
  const args = ['-s', '127.0.0.11', '-a', from, '-d', file, '-l', String(seconds), '-t', '2', '-q', String(outstanding)];
  if (qps > 0) args.push('-Q', String(qps));
  return new Promise((resolve, reject) => {
    const p = spawn('ip', ['netns', 'exec', ns.name, 'dnsperf', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (c: Buffer) => { out += c.toString(); });
    p.stderr.on('data', (c: Buffer) => { out += c.toString(); });
    const kill = setTimeout(() => { p.kill('SIGKILL'); }, (seconds + 15) * 1000);
    p.on('exit', () => {
      clearTimeout(kill);
      const num = (re: RegExp): number => Number(re.exec(out)?.[1] ?? NaN);
      const r: Perf = {
        sent: num(/Queries sent:\s+(\d+)/), completed: num(/Queries completed:\s+(\d+)/), qps: num(/Queries per second:\s+([\d.]+)/),
        avgMs: num(/Average Latency \(s\):\s+([\d.]+)/) * 1000, rcodes: /Response codes:\s+(.*)/.exec(out)?.[1]?.trim() ?? '',
      };
      if (Number.isNaN(r.sent)) reject(new Error(`dnsperf ${args.join(' ')}:\n${out}`)); else resolve(r);
    });
  });
}

/** Packets counted by the namespace's nft counters, by name. */
function counters(ns: Netns): Record<string, number> {
  const j = JSON.parse(ns.exec('nft', ['-j', 'list', 'counters']).stdout) as { nftables: Array<{ counter?: { name: string; packets: number } }> };
  const out: Record<string, number> = {};
  for (const e of j.nftables) if (e.counter !== undefined) out[e.counter.name] = e.counter.packets;
  return out;
}

export interface StormResult { rows: Array<Array<string | number>>; failures: string[] }

export async function loopStormDrill(opts: { stormQps: number; healthyQps: number; seconds: number; rounds: number; max: boolean; only: string; quarantine?: '' | 'S' | 'B' }): Promise<StormResult> {
  requireTools('ip', 'nft', 'dnsperf', 'dig');
  const ns = new Netns('storm');
  try {
    const nft = (...a: string[]): void => { const r = ns.exec('nft', a); if (r.status !== 0) throw new Error(`nft ${a.join(' ')}: ${r.stdout}`); };
    nft('add', 'table', 'ip', 'drill');
    // DNS between the servers, never the clients' own traffic: upstream queries (they leave from 127.0.0.1) to
    // port 53 of S or B, replies from it, the guard's probes; over UDP and TCP.
    nft('add', 'counter', 'ip', 'drill', 'loops');
    nft('add', 'chain', 'ip', 'drill', 'out', '{ type filter hook output priority 0; }');
    for (const proto of ['udp', 'tcp']) {
      nft('add', 'rule', 'ip', 'drill', 'out', 'ip', 'daddr', '{ 127.0.0.11, 127.0.0.12 }', 'ip', 'saddr', '!=', '{ 127.0.0.100, 127.0.0.101 }', proto, 'dport', '53', 'counter', 'name', 'loops');
      nft('add', 'rule', 'ip', 'drill', 'out', 'ip', 'saddr', '{ 127.0.0.11, 127.0.0.12 }', 'ip', 'daddr', '!=', '{ 127.0.0.100, 127.0.0.101 }', proto, 'sport', '53', 'counter', 'name', 'loops');
    }

    const zone = ['$ORIGIN healthy.test.', '@ 3600 IN SOA ns.healthy.test. host.healthy.test. 1 7200 3600 1209600 3600', '@ 3600 IN NS ns', 'ns 3600 IN A 192.0.2.53'];
    for (let i = 0; i < 100; i++) zone.push(`h${i} 3600 IN A 192.0.2.${i + 1}`);
    ns.file('db.healthy', zone.join('\n') + '\n');
    ns.file('healthy.txt', Array.from({ length: 100 }, (_, i) => `h${i}.healthy.test A`).join('\n') + '\n');
    // Every looping query a new name: neither cache nor coalescing can absorb the storm.
    const total = opts.stormQps * opts.seconds + 1000;
    for (let r = 0; r < opts.rounds; r++) {
      ns.file(`storm${r}.txt`, Array.from({ length: total }, (_, i) => `s${r}-${i}.${opts.only !== '' ? opts.only : i % 2 === 0 ? 'loop' : 'ring'}.test A`).join('\n') + '\n');
    }

    const coreS = `loop.test:53 {\n    bind 127.0.0.11\n    loop {\n    }\n    forward . 127.0.0.11:53\n}\n`
      + `ring.test:53 {\n    bind 127.0.0.11\n    loop {\n    }\n    forward . 127.0.0.12:53\n}\n`
      + `healthy.test:53 {\n    bind 127.0.0.11\n    file ${ns.dir}/db.healthy\n}\n`;
    const coreB = `ring.test:53 {\n    bind 127.0.0.12\n    loop {\n    }\n    forward . 127.0.0.11:53\n}\n`;
    // Who quarantines the ring depends on which start-up probe makes the lap first. --quarantine S|B
    // decides it: the other server starts first, its probe finds nobody, and the later one's probe goes
    // round the ring and back to it. Without the option both start at once (the race).
    const quarantine = opts.quarantine ?? '';
    const first = quarantine === 'B' ? 'S' : 'B';
    const startS = (): ReturnType<Netns['nodens']> => ns.nodens(coreS, 'Corefile.S');
    const startB = (): ReturnType<Netns['nodens']> => ns.nodens(coreB, 'Corefile.B');
    let S, B;
    if (quarantine === '') {
      S = startS();
      B = startB();
    } else if (first === 'S') {
      S = startS();
      await S.waitFor(/^CoreDNS-/);
      B = startB();
    } else {
      B = startB();
      await B.waitFor(/^CoreDNS-/);
      S = startS();
    }
    await S.waitFor(/^CoreDNS-/);
    await B.waitFor(/^CoreDNS-/);
    if (quarantine !== '') {
      const holder = quarantine === 'B' ? B : S;
      await holder.waitFor(new RegExp(`Loop detected for zone "ring\\.test\\." through upstream 127\\.0\\.0\\.1${quarantine === 'B' ? '1' : '2'}:53`), 10_000);
    }
    const ringHolders = (): string => [['S', S, '127\\.0\\.0\\.12'], ['B', B, '127\\.0\\.0\\.11']]
      .filter(([, p, up]) => (p as typeof S).out.some((l) => new RegExp(`Loop detected for zone "ring\\.test\\." through upstream ${up as string}:53`).test(l)))
      .map(([n]) => n as string).join('+') || 'none';
    await answering(ns, '127.0.0.11', 'h1.healthy.test');

    const rows: Array<Array<string | number>> = [];
    const failures: string[] = [];
    const cpuOf = (pid: number | undefined): number => {
      try {
        const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
        return (Number(f[11]) + Number(f[12])) / clockTicks;
      } catch { return NaN; }
    };
    const serverCpu = (): number => cpuOf(S.proc.pid) + cpuOf(B.proc.pid);
    const rates = opts.max ? [opts.healthyQps, 0] : [opts.healthyQps];
    let heldAtStart = '';
    for (const rate of rates) {
      const label = rate > 0 ? `${rate} q/s offered` : 'flat out';
      // Warm-up (JIT, zone lookups) so that "alone" is not measured on a cold server.
      await dnsperf(ns, '127.0.0.101', `${ns.dir}/healthy.txt`, rate, 1);
      // Short windows, alone and in the storm in turn, compared by their medians: the machine's other
      // work comes and goes over seconds, and one long "alone" then one long "storm" window measured it
      // at two different moments.
      const healthyWindow = rate > 0 ? 1000 : 200;
      const alone: Window[] = [];
      const inStorm: Window[] = [];
      let stormSent = 0;
      let loopPackets = 0;
      const before = counters(ns).loops!;
      heldAtStart = ringHolders();
      for (let r = 0; r < opts.rounds; r++) {
        const a0 = serverCpu();
        const ta = Date.now();
        const a = await dnsperf(ns, '127.0.0.101', `${ns.dir}/healthy.txt`, rate, opts.seconds, healthyWindow);
        alone.push({ healthy: a, cpu: serverCpu() - a0, wall: (Date.now() - ta) / 1000 });
        const c0 = counters(ns);
        const s0 = serverCpu();
        const ts = Date.now();
        const [h, storm] = await Promise.all([
          dnsperf(ns, '127.0.0.101', `${ns.dir}/healthy.txt`, rate, opts.seconds, healthyWindow),
          dnsperf(ns, '127.0.0.100', `${ns.dir}/storm${r}.txt`, opts.stormQps, opts.seconds),
        ]);
        inStorm.push({ healthy: h, storm, cpu: serverCpu() - s0, wall: (Date.now() - ts) / 1000 });
        loopPackets += counters(ns).loops! - c0.loops!;
        stormSent += storm.sent;
      }
      const med = (xs: number[]): number => { const a = [...xs].sort((x, y) => x - y); return a.length % 2 === 1 ? a[a.length >> 1]! : (a[a.length / 2 - 1]! + a[a.length / 2]!) / 2; };
      const aloneQps = med(alone.map((w) => w.healthy.qps));
      const stormQps = med(inStorm.map((w) => w.healthy.qps));
      const kept = stormQps / aloneQps;
      const perQuery = loopPackets / stormSent;
      const looping = med(inStorm.map((w) => w.storm!.qps));
      // The servers' CPU (S and B, utime + stime) per second of each window, and what the storm added per looping query.
      const cpuAlone = med(alone.map((w) => w.cpu / w.wall));
      const cpuStorm = med(inStorm.map((w) => w.cpu / w.wall));
      const usPerLoop = med(inStorm.map((w, i) => ((w.cpu - alone[i]!.cpu * (w.wall / alone[i]!.wall)) / w.storm!.sent) * 1e6));
      const rcodes = [...new Set(inStorm.map((w) => w.storm!.rcodes.replace(/ \([\d.]+%\)/g, '')))].join(' / ');
      rows.push([label, before, `${aloneQps.toFixed(0)} (${alone.map((w) => w.healthy.qps.toFixed(0)).join(', ')})`, med(alone.map((w) => w.healthy.avgMs)).toFixed(2),
        `${stormQps.toFixed(0)} (${inStorm.map((w) => w.healthy.qps.toFixed(0)).join(', ')})`, med(inStorm.map((w) => w.healthy.avgMs)).toFixed(2), `${(100 * kept).toFixed(1)}%`,
        stormSent, looping.toFixed(0), rcodes, loopPackets, perQuery.toFixed(2), `${(100 * cpuAlone).toFixed(0)}% → ${(100 * cpuStorm).toFixed(0)}%`, usPerLoop.toFixed(0)]);
      // Flat out, the two dnsperf and the two servers share the machine's cores: a figure, not a bound.
      if (rate > 0 && kept < 0.9) failures.push(`healthy zone (${label}) kept ${(100 * kept).toFixed(1)}% of its throughput under the storm (medians of ${opts.rounds} windows each)`);
      // A storm the machine could not send tests nothing: half the offered rate at least, or the run does not count.
      if (looping < opts.stormQps / 2) failures.push(`the storm was not delivered: dnsperf sent ${looping.toFixed(0)} looping q/s of ${opts.stormQps} (median; the machine is too busy to run this drill)`);
      if (!(perQuery <= 3)) failures.push(`a looping query cost ${perQuery.toFixed(2)} packets on the loops (${label})`);
    }
    const detections = [...S.out, ...B.out].filter((l) => /Loop detected|forwarding loop/i.test(l)).length;
    rows.push([`(loop detections logged: ${detections}; ring quarantined by ${heldAtStart} before the storm, ${ringHolders()} after)`, '', '', '', '', '', '', '', '', '', '', '', '', '']);
    return { rows, failures };
  } finally {
    await ns.close();
  }
}

if (import.meta.main) {
  const opts = { stormQps: arg('storm-qps', 10000), healthyQps: arg('healthy-qps', 5000), seconds: arg('seconds', 2), rounds: arg('rounds', 4), max: process.argv.includes('--max'),
    only: process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1]! : '',
    quarantine: (process.argv.includes('--quarantine') ? process.argv[process.argv.indexOf('--quarantine') + 1]! : '') as '' | 'S' | 'B' };
  if (!['', 'S', 'B'].includes(opts.quarantine)) throw new Error('--quarantine takes S or B');
  const t0 = Date.now();
  const r = await loopStormDrill(opts);
  process.stdout.write(`loop-storm drill: ${opts.stormQps} looping q/s (${opts.only === '' ? 'self-loop and ring of two' : opts.only === 'loop' ? 'self-loop only' : 'ring of two only'}, new name each) in ${opts.rounds} windows of ${opts.seconds} s, each after a window of the healthy load alone (${machine()}, load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')})\n`);
  process.stdout.write(table(['healthy load', 'loop packets before (detection, probes)', 'healthy q/s alone, median (windows)', 'avg ms alone', 'healthy q/s in storm, median (windows)', 'avg ms in storm', 'kept', 'looping queries sent', 'looping q/s (median)', 'looping answers', 'packets on the loops', 'packets per looping query', 'servers\' CPU alone → in storm (of one core)', 'µs CPU per looping query (S+B)'], r.rows) + '\n');
  process.stdout.write(`took ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  for (const f of r.failures) process.stdout.write(`FAIL: ${f}\n`);
  process.exitCode = r.failures.length > 0 ? 1 : 0;
}
