// Hostile wire drill (issue 16): pathological and mutated packets over UDP and TCP at a
// running nodens (cache, hosts, kubernetes against the test API server, forward to a
// local unbound; log off; test/drills/stack.ts).
//  1. A hand-made set of malformed packets, each sent to nodens and to the reference
//     CoreDNS (same stack): what each answers (rcode, question count) or whether it drops.
//  2. The flood: batches of 10,000 packets, mostly UDP (hand-made, mutated valid queries,
//     random bytes), with TCP garbage, lying length prefixes, half-open connections and
//     pipelined bursts; 1,000 idle and 300 lying-prefix TCP connections held throughout.
//     After every batch a normal query over UDP and over TCP must be answered; RSS sampled.
// usage: node test/drills/hostile.ts [--packets 100000] [--no-compare]
// Exit status 1 when nodens dies, misses the query between two batches, answers fewer
// than all of a pipelined burst, or its RSS grows past the bound (see RSS_* below).

import dgram from 'node:dgram';
import net from 'node:net';
import { randomBytes, randomInt } from 'node:crypto';
import { arg, machine, referenceCoreDNS, table } from './common.ts';
import { startStack, k8sNames, type Stack } from './stack.ts';
import { query } from './udp-probe.ts';

const BATCH = 10_000;
/** RSS bounds: growth from the end of the first batch to the end, and the peak. */
const RSS_GROWTH_MIB = 64;
const RSS_MAX_MIB = 400;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const u16 = (n: number): number[] => [n >> 8 & 0xff, n & 0xff];
const header = (id: number, flags: number, qd: number, an: number, ns: number, ar: number): number[] => [...u16(id), ...u16(flags), ...u16(qd), ...u16(an), ...u16(ns), ...u16(ar)];
const name = (s: string): number[] => [...s.split('.').filter(Boolean).flatMap((l) => [l.length, ...Buffer.from(l, 'latin1')]), 0];
const OPT = [0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0];
const QTAIL = [0, 1, 0, 1];

/** The hand-made set: name → packet (ID 0x1234 where there is a header). */
export function handMade(): Array<[string, Buffer]> {
  const q = name('www.example.org');
  const rows: Array<[string, number[]]> = [
    ['empty datagram', []],
    ['truncated header (5 bytes)', header(0x1234, 0x0100, 1, 0, 0, 0).slice(0, 5)],
    ['truncated header (11 bytes)', header(0x1234, 0x0100, 1, 0, 0, 0).slice(0, 11)],
    ['header only, qdcount 1', header(0x1234, 0x0100, 1, 0, 0, 0)],
    ['header only, qdcount 0', header(0x1234, 0x0100, 0, 0, 0, 0)],
    ['question without type and class', [...header(0x1234, 0x0100, 1, 0, 0, 0), ...q]],
    ['question cut inside a label', [...header(0x1234, 0x0100, 1, 0, 0, 0), 3, 0x77, 0x77]],
    ['pointer loop (name points at itself)', [...header(0x1234, 0x0100, 1, 0, 0, 0), 0xc0, 12, ...QTAIL]],
    ['pointer ring of two', [...header(0x1234, 0x0100, 1, 0, 0, 0), 1, 0x61, 0xc0, 15, 0xc0, 12, ...QTAIL]],
    ['forward pointer in the question', [...header(0x1234, 0x0100, 1, 0, 0, 0), 0xc0, 18, ...QTAIL, ...q]],
    ['pointer past the end', [...header(0x1234, 0x0100, 1, 0, 0, 0), 0xc0, 0xff, ...QTAIL]],
    ['reserved label type 0x40', [...header(0x1234, 0x0100, 1, 0, 0, 0), 0x40, 0x61, 0, ...QTAIL]],
    ['oversized name (320 octets)', [...header(0x1234, 0x0100, 1, 0, 0, 0), ...Array.from({ length: 5 }, () => [63, ...Buffer.alloc(63, 0x61)]).flat(), 0, ...QTAIL]],
    ['lying qdcount (65535, one question)', [...header(0x1234, 0x0100, 65535, 0, 0, 0), ...q, ...QTAIL]],
    ['lying ancount (65535, no records)', [...header(0x1234, 0x0100, 1, 65535, 0, 0), ...q, ...QTAIL]],
    ['lying arcount (1000, one OPT)', [...header(0x1234, 0x0100, 1, 0, 0, 1000), ...q, ...QTAIL, ...OPT]],
    ['two questions', [...header(0x1234, 0x0100, 2, 0, 0, 0), ...q, ...QTAIL, ...q, ...QTAIL]],
    ['two OPT records', [...header(0x1234, 0x0100, 1, 0, 0, 2), ...q, ...QTAIL, ...OPT, ...OPT]],
    ['50 OPT records', [...header(0x1234, 0x0100, 1, 0, 0, 50), ...q, ...QTAIL, ...Array.from({ length: 50 }, () => OPT).flat()]],
    ['OPT with rdlength past the end', [...header(0x1234, 0x0100, 1, 0, 0, 1), ...q, ...QTAIL, 0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0x01, 0x00]],
    ['OPT version 1', [...header(0x1234, 0x0100, 1, 0, 0, 1), ...q, ...QTAIL, 0, 0, 41, 0x04, 0xd0, 0, 1, 0, 0, 0, 0]],
    ['OPT owner not root', [...header(0x1234, 0x0100, 1, 0, 0, 1), ...q, ...QTAIL, 1, 0x61, 0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]],
    ['QR set (a response as query)', [...header(0x1234, 0x8100, 1, 0, 0, 0), ...q, ...QTAIL]],
    ['opcode 15', [...header(0x1234, 0x7900, 1, 0, 0, 0), ...q, ...QTAIL]],
    ['class 0', [...header(0x1234, 0x0100, 1, 0, 0, 0), ...q, 0, 1, 0, 0]],
    ['trailing garbage after the question', [...header(0x1234, 0x0100, 1, 0, 0, 0), ...q, ...QTAIL, 0xde, 0xad, 0xbe, 0xef]],
  ];
  return rows.map(([n, b]) => [n, Buffer.from(b)]);
}

const RCODES = ['NOERROR', 'FORMERR', 'SERVFAIL', 'NXDOMAIN', 'NOTIMP', 'REFUSED'];

/** What a server does with `pkt` over UDP: "drop" or rcode + question count. */
async function answerTo(port: number, pkt: Buffer): Promise<string> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => { sock.bind(0, '127.0.0.1', r); });
  try {
    const got = new Promise<Buffer | undefined>((resolve) => {
      sock.on('message', (m) => { resolve(m); });
      setTimeout(() => { resolve(undefined); }, 700);
    });
    sock.send(pkt, port, '127.0.0.1');
    const m = await got;
    if (m === undefined) return 'drop';
    if (m.length < 12) return `reply of ${m.length} bytes`;
    const rcode = m[3]! & 0xf;
    return `${RCODES[rcode] ?? `rcode ${rcode}`}, qd ${m.readUInt16BE(4)}${m[2]! & 0x02 ? ', TC' : ''}`;
  } finally { sock.close(); }
}

function mutate(b: Buffer): Buffer {
  const m = Buffer.from(b);
  switch (randomInt(6)) {
    case 0: for (let i = randomInt(1, 6); i > 0; i--) m[randomInt(m.length)] = randomInt(256); return m;
    case 1: return m.subarray(0, randomInt(m.length));
    case 2: return Buffer.concat([m, randomBytes(randomInt(1, 40))]);
    case 3: { const at = randomInt(12, m.length); m[at] = 0xc0; m[(at + 1) % m.length] = randomInt(256); return m; }
    case 4: m.writeUInt16BE(randomInt(65536), 4 + 2 * randomInt(4)); return m;
    default: m[randomInt(Math.min(12, m.length))] ^= 1 << randomInt(8); return m;
  }
}

function tcpFrame(b: Buffer): Buffer { return Buffer.concat([Buffer.from(u16(b.length)), b]); }

/** Open `n` TCP connections that send `first` (if any) and then hold; returns them. */
async function holdConnections(port: number, n: number, first?: (i: number) => Buffer): Promise<net.Socket[]> {
  const out: net.Socket[] = [];
  for (let i = 0; i < n; i++) {
    const s = net.connect({ port, host: '127.0.0.1' });
    s.on('error', () => { /* closed by the server's timeouts: expected */ });
    if (first) s.on('connect', () => { s.write(first(i)); });
    out.push(s);
    if (i % 100 === 99) await sleep(20);
  }
  return out;
}

/** A pipelined burst of `n` queries in one write on one connection: how many answers came back. */
function pipelined(port: number, n: number, name: string): Promise<number> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    let got = Buffer.alloc(0);
    let answers = 0;
    const done = (): void => { clearTimeout(t); s.destroy(); resolve(answers); };
    const t = setTimeout(done, 5000);
    s.on('connect', () => { s.write(Buffer.concat(Array.from({ length: n }, (_, i) => tcpFrame(query(name, i + 1))))); });
    s.on('data', (d) => {
      got = Buffer.concat([got, d]);
      while (got.length >= 2 && got.length >= 2 + got.readUInt16BE(0)) { answers++; got = got.subarray(2 + got.readUInt16BE(0)); }
      if (answers === n) done();
    });
    s.on('error', done);
  });
}

/** One TCP connection that sends `payload` then closes (or, if `halfOpen`, ends its side and waits). */
function tcpShot(port: number, payload: Buffer, halfOpen: boolean): Promise<void> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    const t = setTimeout(() => { s.destroy(); resolve(); }, 1000);
    s.on('connect', () => { if (halfOpen) s.end(payload); else { s.write(payload); setTimeout(() => { s.destroy(); }, 50); } });
    s.on('close', () => { clearTimeout(t); resolve(); });
    s.on('error', () => { /* reset by the server: fine */ });
  });
}

async function normalUdp(port: number, qname: string): Promise<boolean> {
  for (let i = 0; i < 3; i++) {
    const a = await answerTo(port, query(qname, 0x4242));
    if (a.startsWith('NOERROR')) return true;
  }
  return false;
}

async function normalTcp(port: number, qname: string): Promise<boolean> { return (await pipelined(port, 1, qname)) === 1; }

async function compare(): Promise<Array<[string, string, string]>> {
  const rows: Array<[string, string, string]> = [];
  const n = await startStack('nodens', 'nodens');
  const c = await startStack('coredns', referenceCoreDNS());
  try {
    for (const [label, pkt] of handMade()) rows.push([label, await answerTo(n.port, pkt), await answerTo(c.port, pkt)]);
  } finally { await n.stop(); await c.stop(); }
  return rows;
}

interface FloodResult { packets: number; udp: number; tcpMessages: number; batches: number; checksFailed: number; burstsShort: number; udpReplies: number; rssMiB: number[]; seconds: number; idleClosedByServer: number; alive: boolean }

async function flood(s: Stack, packets: number): Promise<FloodResult> {
  const port = s.port;
  const base = [query('www.example.org', 1), query('h1.hosts.test', 2, 28), query(k8sNames()[0]!, 3), query('x.miss.test', 4)];
  base.push(...base.map((b) => Buffer.concat([b.subarray(0, 11), Buffer.from([1]), b.subarray(12), Buffer.from([0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 0])])));
  const hand = handMade().map(([, b]) => b);
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => { sock.bind(0, '127.0.0.1', r); });
  sock.setSendBufferSize(4 << 20);
  let udpReplies = 0;
  sock.on('message', () => { udpReplies++; });
  const idle = await holdConnections(port, 1000);
  let idleClosedByServer = 0;
  for (const c of idle) c.on('close', () => { idleClosedByServer++; });
  const lying = await holdConnections(port, 300, (i) => Buffer.concat([Buffer.from([0xff, 0xff]), randomBytes(i % 50)]));
  const rssMiB: number[] = [];
  const t0 = Date.now();
  let sent = 0; let udp = 0; let tcpMessages = 0; let batches = 0; let checksFailed = 0; let burstsShort = 0;
  while (sent < packets) {
    const n = Math.min(BATCH, packets - sent);
    const tcpJobs = new Set<Promise<void>>();
    const tcp = async (job: Promise<void>): Promise<void> => {
      tcpJobs.add(job);
      void job.then(() => tcpJobs.delete(job));
      // At most 200 of these short connections at a time, so UDP keeps flowing meanwhile.
      if (tcpJobs.size >= 200) await Promise.race(tcpJobs);
    };
    for (let i = 0; i < n; i++) {
      const r = randomInt(100);
      if (r < 97) {
        const pkt = r < 10 ? hand[randomInt(hand.length)]! : r < 70 ? mutate(base[randomInt(base.length)]!) : randomBytes(randomInt(0, 700));
        sock.send(pkt, port, '127.0.0.1');
        udp++;
        // Pace the sender a little so the packets reach the server rather than the sender's own buffer.
        if (udp % 200 === 0) await sleep(1);
      } else if (r < 98) { // TCP garbage
        await tcp(tcpShot(port, randomBytes(randomInt(1, 300)), false)); tcpMessages++;
      } else if (r < 99) { // a lying length prefix, then fewer bytes, then the client half-closes
        await tcp(tcpShot(port, Buffer.concat([Buffer.from(u16(randomInt(100, 65536))), mutate(base[0]!)]), true)); tcpMessages++;
      } else { // mutated messages in valid frames, half-open after
        await tcp(tcpShot(port, Buffer.concat(Array.from({ length: 5 }, () => tcpFrame(mutate(base[randomInt(base.length)]!)))), true)); tcpMessages += 5;
      }
    }
    await Promise.all(tcpJobs);
    // A pipelined burst of 100 good queries must be answered in full.
    const got = await pipelined(port, 100, 'h2.hosts.test');
    tcpMessages += 100;
    if (got !== 100) { burstsShort++; console.log(`batch ${batches + 1}: pipelined burst answered ${got}/100`); }
    sent += n;
    batches++;
    if (s.nodens.proc.exitCode !== null) break;
    const okU = await normalUdp(port, `b${batches}.miss.test`);
    const okT = await normalTcp(port, k8sNames()[0]!);
    if (!okU || !okT) { checksFailed++; console.log(`batch ${batches}: normal query unanswered (udp ${okU}, tcp ${okT})`); }
    rssMiB.push(Math.round(s.nodens.rssKiB() / 1024));
    if (batches % 10 === 0 || sent >= packets) console.log(`${sent} packets, ${((Date.now() - t0) / 1000).toFixed(0)} s, RSS ${rssMiB.at(-1)} MiB`);
  }
  for (const c of [...idle, ...lying]) c.destroy();
  sock.close();
  return { packets: sent, udp, tcpMessages, batches, checksFailed, burstsShort, udpReplies, rssMiB, seconds: (Date.now() - t0) / 1000, idleClosedByServer, alive: s.nodens.proc.exitCode === null };
}

const packets = arg('packets', 100_000);
console.log(`hostile wire drill: ${machine()}`);
let failed = false;
if (!process.argv.includes('--no-compare')) {
  const rows = await compare();
  console.log('\nMalformed packets over UDP (same stack, same packet):\n');
  console.log(table(['packet', 'nodens', 'CoreDNS 1.15.0'], rows.map(([a, b, c]) => [a, b, b === c ? c : `${c} (differs)`])));
}
const s = await startStack('nodens', 'nodens');
try {
  const rssStart = Math.round(s.nodens.rssKiB() / 1024);
  const r = await flood(s, packets);
  const first = r.rssMiB[0] ?? rssStart;
  const last = r.rssMiB.at(-1) ?? rssStart;
  const peak = Math.max(...r.rssMiB, rssStart);
  console.log(`\n${table(
    ['packets', 'UDP', 'TCP messages', 'batches', 'seconds', 'UDP replies', 'checks failed', 'bursts short', 'idle conns closed by server', 'RSS MiB start → 1st batch → end (peak)', 'alive'],
    [[r.packets, r.udp, r.tcpMessages, r.batches, r.seconds.toFixed(0), r.udpReplies, r.checksFailed, r.burstsShort, `${r.idleClosedByServer}/1000`, `${rssStart} → ${first} → ${last} (${peak})`, r.alive ? 'yes' : 'NO']],
  )}`);
  if (!r.alive) { failed = true; console.log(`FAIL: nodens exited (${s.nodens.proc.exitCode}):\n${s.nodens.lines.slice(-20).join('\n')}`); }
  if (r.checksFailed > 0) { failed = true; console.log(`FAIL: ${r.checksFailed} batches without an answer to a normal query`); }
  if (r.burstsShort > 0) { failed = true; console.log(`FAIL: ${r.burstsShort} pipelined bursts not answered in full`); }
  if (last - first > RSS_GROWTH_MIB || peak > RSS_MAX_MIB) { failed = true; console.log(`FAIL: RSS grew ${last - first} MiB after the first batch (bound ${RSS_GROWTH_MIB}) or peaked at ${peak} MiB (bound ${RSS_MAX_MIB})`); }
} finally { await s.stop(); }
console.log(failed ? 'hostile drill: FAIL' : 'hostile drill: ok');
process.exit(failed ? 1 : 0);
