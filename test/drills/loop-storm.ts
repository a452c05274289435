// Loop-storm drill (issue 16): 10k looping queries a second for a few seconds, to a
// self-looping zone and to a ring of two nodens servers (both guarded by `loop { }`),
// while a healthy zone of the same server is under load. In a network namespace;
// nft counters count the packets that travel the loops (server to itself, server to
// its ring partner and back), so the cost of a looping query is measured, not
// inferred (DNS to and from port 53 of the two servers, not from or to the clients). The healthy zone's load runs alone first, then with the storm, in the
// same run, with dnsperf at a fixed rate (and, with --max, flat out).
//
//   S 127.0.0.11: loop.test -> forward to itself; ring.test -> forward to B; healthy.test: file
//   B 127.0.0.12: ring.test -> forward to S
//   storm from 127.0.0.100, healthy load from 127.0.0.101
//
// usage: node test/drills/loop-storm.ts [--storm-qps N] [--healthy-qps N] [--seconds S] [--max] [--only loop|ring]
// Exit status 1 when the healthy zone keeps less than 90% of what it answered alone, or a
// looping query costs more than 3 packets on the loops.

import { spawn } from 'node:child_process';
import { Netns } from '../netns/netns.ts';
import { answering, arg, machine, requireTools, table } from './common.ts';

interface Perf { sent: number; completed: number; qps: number; avgMs: number; rcodes: string }

function dnsperf(ns: Netns, from: string, file: string, qps: number, seconds: number): Promise<Perf> {
  const args = ['-s', '127.0.0.11', '-a', from, '-d', file, '-l', String(seconds), '-t', '2', '-q', '200'];
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

export async function loopStormDrill(opts: { stormQps: number; healthyQps: number; seconds: number; max: boolean; only: string }): Promise<StormResult> {
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
    ns.file('storm.txt', Array.from({ length: total }, (_, i) => `s${i}.${opts.only !== '' ? opts.only : i % 2 === 0 ? 'loop' : 'ring'}.test A`).join('\n') + '\n');

    const S = ns.nodens(`loop.test:53 {\n    bind 127.0.0.11\n    loop {\n    }\n    forward . 127.0.0.11:53\n}\n`
      + `ring.test:53 {\n    bind 127.0.0.11\n    loop {\n    }\n    forward . 127.0.0.12:53\n}\n`
      + `healthy.test:53 {\n    bind 127.0.0.11\n    file ${ns.dir}/db.healthy\n}\n`, 'Corefile.S');
    const B = ns.nodens(`ring.test:53 {\n    bind 127.0.0.12\n    loop {\n    }\n    forward . 127.0.0.11:53\n}\n`, 'Corefile.B');
    await S.waitFor(/^CoreDNS-/);
    await B.waitFor(/^CoreDNS-/);
    await answering(ns, '127.0.0.11', 'h1.healthy.test');

    const rows: Array<Array<string | number>> = [];
    const failures: string[] = [];
    const rates = opts.max ? [opts.healthyQps, 0] : [opts.healthyQps];
    for (const rate of rates) {
      const label = rate > 0 ? `${rate} q/s offered` : 'flat out';
      // Warm-up (JIT, zone lookups) so that "alone" is not measured on a cold server.
      await dnsperf(ns, '127.0.0.101', `${ns.dir}/healthy.txt`, rate, 1);
      const alone = await dnsperf(ns, '127.0.0.101', `${ns.dir}/healthy.txt`, rate, opts.seconds);
      const c0 = counters(ns);
      const [withStorm, storm] = await Promise.all([
        dnsperf(ns, '127.0.0.101', `${ns.dir}/healthy.txt`, rate, opts.seconds),
        dnsperf(ns, '127.0.0.100', `${ns.dir}/storm.txt`, opts.stormQps, opts.seconds),
      ]);
      const c1 = counters(ns);
      const loopPackets = c1.loops! - c0.loops!;
      const perQuery = loopPackets / storm.sent;
      const kept = withStorm.qps / alone.qps;
      rows.push([label, c0.loops!, alone.qps.toFixed(0), `${alone.avgMs.toFixed(2)}`, withStorm.qps.toFixed(0), `${withStorm.avgMs.toFixed(2)}`, `${(100 * kept).toFixed(1)}%`,
        storm.sent, `${storm.qps.toFixed(0)}`, storm.rcodes, loopPackets, perQuery.toFixed(2)]);
      // Flat out, the two dnsperf and the two servers share the machine's cores: a figure, not a bound.
      if (rate > 0 && kept < 0.9) failures.push(`healthy zone (${label}) kept ${(100 * kept).toFixed(1)}% of its throughput under the storm`);
      if (!(perQuery <= 3)) failures.push(`a looping query cost ${perQuery.toFixed(2)} packets on the loops (${label})`);
    }
    const detections = [...S.out, ...B.out].filter((l) => /Loop detected|forwarding loop/i.test(l)).length;
    rows.push([`(loop detections logged: ${detections})`, '', '', '', '', '', '', '', '', '', '', '']);
    return { rows, failures };
  } finally {
    await ns.close();
  }
}

if (import.meta.main) {
  const opts = { stormQps: arg('storm-qps', 10000), healthyQps: arg('healthy-qps', 5000), seconds: arg('seconds', 3), max: process.argv.includes('--max'),
    only: process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1]! : '' };
  const t0 = Date.now();
  const r = await loopStormDrill(opts);
  process.stdout.write(`loop-storm drill: ${opts.stormQps} looping q/s (${opts.only === '' ? 'self-loop and ring of two' : opts.only === 'loop' ? 'self-loop only' : 'ring of two only'}, new name each) for ${opts.seconds} s against a healthy zone's load (${machine()})\n`);
  process.stdout.write(table(['healthy load', 'loop packets before (detection, probes)', 'healthy q/s alone', 'avg ms alone', 'healthy q/s in storm', 'avg ms in storm', 'kept', 'looping queries sent', 'looping q/s', 'looping answers', 'packets on the loops', 'packets per looping query'], r.rows) + '\n');
  process.stdout.write(`took ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  for (const f of r.failures) process.stdout.write(`FAIL: ${f}\n`);
  process.exitCode = r.failures.length > 0 ? 1 : 0;
}
