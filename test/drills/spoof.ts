// Spoofing drill (issue 16): an off-path attacker learns the source port a
// forwarder uses towards its upstream (by asking for a name in a zone he runs)
// and floods forged answers for a target name at that port and its neighbours,
// every ID, while the upstream's real answer takes DELAY ms. Against nodens's
// default configuration, nodens with `reuse_udp_sockets` (CoreDNS's socket
// pooling) and the reference CoreDNS, each with `cache` in front of
// `forward`. Counts forged answers returned to the attacker and, by a second
// client asking again afterwards, cached.
//
//   client 10.99.1.2 ─┐
//   upstream 10.99.2.2 ─ server ns (10.99.{1,2,3}.1): the forwarder on :53
//   attacker 10.99.3.2 ─┘   (the attacker's namespace also owns 10.99.2.2: his
//                            packets leave with the upstream's source address)
//
// usage: node test/drills/spoof.ts [--trials N] [--guesses K] [--delay MS]
// Exit status 1 when nodens's default configuration returned or cached a forged
// answer, or when the flood did not reach a pooled forwarder's socket (the drill
// would prove nothing).

import { join } from 'node:path';
import { Netns, digIn } from '../netns/netns.ts';
import { DRILLS, answering, arg, compileHelper, machine, referenceCoreDNS, requireTools, sysctl, table } from './common.ts';

const FORGED = '6.6.6.6';
const REAL = '192.0.2.1';
const UPSTREAM = '10.99.2.2';
const FORWARDER = '10.99.3.1';
const COLLECTOR = '10.99.3.2:5399';

export interface SpoofRow { server: string; trials: number; forgedReturned: number; forgedCached: number; portHits: number; packets: number; floodMs: number; rcvbufDrops: number; reached: number }

/**
 * The namespace's UDP counters: datagrams that reached a socket (InDatagrams: read; RcvbufErrors: dropped
 * because its receive buffer was full), as opposed to NoPorts (no socket had that port).
 */
function udpCounters(ns: Netns): { reached: number; dropped: number } {
  const lines = ns.exec('cat', ['/proc/net/snmp']).stdout.split('\n').filter((l) => l.startsWith('Udp: '));
  const [head, values] = lines.map((l) => l.split(/\s+/));
  const v = (k: string): number => Number(values![head!.indexOf(k)]);
  return { reached: v('InDatagrams') + v('RcvbufErrors'), dropped: v('RcvbufErrors') };
}

export async function spoofDrill(opts: { trials: number; guesses: number; delayMs: number }): Promise<SpoofRow[]> {
  requireTools('ip', 'gcc', 'dig', 'sysctl');
  const coredns = referenceCoreDNS();
  const flood = compileHelper('flood');
  const server = new Netns('spoof');
  const peers: Netns[] = [];
  try {
    const client = server.veth('10.99.1.1/24', '10.99.1.2/24');
    const upstream = server.veth('10.99.2.1/24', `${UPSTREAM}/24`);
    const attacker = server.veth('10.99.3.1/24', '10.99.3.2/24');
    peers.push(client, upstream, attacker);
    // The forwarder's namespace routes the upstream's reports to the collector, and accepts the upstream's
    // address on the attacker's link (no reverse-path filter: the off-path attacker's packets get there).
    sysctl(server, 'net.ipv4.ip_forward=1', 'net.ipv4.conf.all.rp_filter=0', 'net.ipv4.conf.default.rp_filter=0');
    for (const l of server.exec('ip', ['-o', 'link']).stdout.matchAll(/^\d+: (vn\w+)@/gm)) sysctl(server, `net.ipv4.conf.${l[1]}.rp_filter=0`);
    upstream.route('10.99.3.0/24', '10.99.2.1');
    client.route('10.99.3.0/24', '10.99.1.1');
    attacker.addLoopbackAddress(`${UPSTREAM}/32`);
    attacker.route('10.99.2.0/24', '10.99.3.1');
    upstream.addLoopbackAddress('10.99.2.3/32');
    const up = upstream.run(process.execPath, [join(DRILLS, 'spoof-upstream.ts'), UPSTREAM, '10.99.2.3', COLLECTOR, String(opts.delayMs)]);
    await up.waitFor(/upstream ready/);

    const corefile = (extra: string): string => `.:53 {\n    cache 300\n    forward . ${UPSTREAM}${extra}\n}\n`;
    const servers: Array<{ name: string; start: () => ReturnType<Netns['run']> }> = [
      { name: 'nodens (default)', start: () => server.nodens(corefile(''), 'Corefile.nodens') },
      { name: 'nodens reuse_udp_sockets', start: () => server.nodens(corefile(' {\n        reuse_udp_sockets\n    }'), 'Corefile.reuse') },
      { name: 'CoreDNS 1.15.0', start: () => server.run(coredns, ['-conf', server.file('Corefile.coredns', corefile(''))]) },
    ];
    const rows: SpoofRow[] = [];
    for (const [si, s] of servers.entries()) {
      const proc = s.start();
      await answering(client, '10.99.1.1', `ready${si}.victim.test`);
      const row: SpoofRow = { server: s.name, trials: opts.trials, forgedReturned: 0, forgedCached: 0, portHits: 0, packets: 0, floodMs: 0, rcvbufDrops: 0, reached: 0 };
      for (let i = 0; i < opts.trials; i++) {
        const tag = `${si}-${i}-${process.pid}`;
        const target = `t${tag}.victim.test`;
        const u0 = udpCounters(server);
        const a = attacker.run(process.execPath, [join(DRILLS, 'spoof-attacker.ts'), FORWARDER, '53', UPSTREAM, COLLECTOR,
          target, `p${tag}.attacker.test`, flood, String(opts.guesses), String(opts.delayMs + 200)]);
        const line = await a.waitFor(/^\{/, 20_000);
        await a.exited;
        const u1 = udpCounters(server);
        row.rcvbufDrops += u1.dropped - u0.dropped;
        row.reached += u1.reached - u0.reached;
        const r = JSON.parse(line) as { learnedPort: number; answer: string; flood: string; upstreamPortAfter?: number };
        const sent = /sent (\d+) in ([\d.]+) ms/.exec(r.flood);
        row.packets += Number(sent?.[1] ?? 0);
        row.floodMs += Number(sent?.[2] ?? 0);
        if (r.answer === FORGED) row.forgedReturned++;
        else if (r.answer !== REAL) throw new Error(`${s.name}: unexpected answer ${r.answer} to the attacker`);
        // A second client, later: what the cache holds.
        const again = digIn(client, '10.99.1.1', target);
        if (again.out.includes(FORGED)) row.forgedCached++;
        else if (!again.out.includes(REAL)) throw new Error(`${s.name}: unexpected cached answer ${again.out}`);
        // Whether the target query left from a port the attacker flooded (from the upstream's log).
        const seen = up.out.filter((l) => l.startsWith(`query ${target} `)).map((l) => Number(l.split(' ')[2]));
        if (seen.some((p) => Math.abs(p - r.learnedPort) <= opts.guesses)) row.portHits++;
      }
      rows.push(row);
      await proc.stop();
    }
    return rows;
  } finally {
    // A peer's processes belong to its own Netns object: stop them before the namespaces go.
    for (const p of peers) await p.close();
    await server.close();
  }
}

if (import.meta.main) {
  const opts = { trials: arg('trials', 5), guesses: arg('guesses', 2), delayMs: arg('delay', 300) };
  const t0 = Date.now();
  const rows = await spoofDrill(opts);
  process.stdout.write(`spoofing drill: ${opts.trials} attempts per server, ports flooded: the learned one ±${opts.guesses}, every ID on each, `
    + `upstream answers after ${opts.delayMs} ms (${machine()})\n`);
  process.stdout.write(table(['server', 'attempts', 'target query on a flooded port', 'forged returned', 'forged cached', 'forged packets sent', 'reached a socket (forged + the few real)', 'of which dropped (receive buffer full)', 'flood ms (avg)'],
    rows.map((r) => [r.server, r.trials, r.portHits, r.forgedReturned, r.forgedCached, r.packets, r.reached, r.rcvbufDrops, (r.floodMs / r.trials).toFixed(0)])) + '\n');
  process.stdout.write(`took ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  const dflt = rows[0]!;
  const pooled = rows.slice(1);
  let failed = false;
  if (dflt.forgedReturned + dflt.forgedCached > 0) { process.stdout.write('FAIL: nodens (default) returned or cached a forged answer\n'); failed = true; }
  // The race itself is won only now and then (about one attempt in five here); that the flood reaches a pooled
  // forwarder's socket, a full ID space of it in one attempt at least, is certain when the drill works.
  for (const r of pooled) {
    if (r.reached < 65536) { process.stdout.write(`FAIL: the flood did not reach ${r.server}'s socket (${r.reached} datagrams): the drill proves nothing\n`); failed = true; }
  }
  process.exitCode = failed ? 1 : 0;
}
