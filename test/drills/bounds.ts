// Resource-bounds drill (issue 16), nodens and the reference CoreDNS side by side on loopback:
//  1. a flood of idle and slow (a byte every 500 ms) TCP connections must not stop UDP service: UDP
//     answered and p99 alone, then while the flood holds; TCP queries during it; the server's RSS;
//  2. a 100-long CNAME chain, in a zone (file) and from an upstream (forward), over UDP and TCP:
//     what each server answers (answer count, TC, rcode);
//  3. a query name with a newline, quotes, NUL, DEL and a non-ASCII byte, logged by `log` and
//     `errors`: one line each, escaped as CoreDNS escapes it (miekg's \DDD).
// usage: node test/drills/bounds.ts [--conns N] [--seconds S]
// Exit status 1 when nodens loses UDP service under the flood (< 90% answered, or a median over 100 ms:
// on a loaded 2-core machine nodens has lost up to 5% of UDP queries in this flood, CoreDNS none),
// answers the chains differently from CoreDNS, or logs the name differently or across lines.

import dgram from 'node:dgram';
import net from 'node:net';
import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '../helpers/server.ts';
import { DRILLS, arg, machine, referenceCoreDNS, requireTools, table } from './common.ts';
import { startServer } from './servers.ts';
import { probe, query, type ProbeResult } from './udp-probe.ts';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ------------------------------------------------------------------ 1. TCP flood vs UDP

/** The flood (test/drills/tcp-flood.ts) in its own process, for `seconds` once it holds its connections. */
async function tcpFlood(port: number, n: number, seconds: number): Promise<{ holding: Promise<void>; done: Promise<{ held: number; opened: number }> }> {
  const p = spawn(process.execPath, [join(DRILLS, 'tcp-flood.ts'), String(port), String(n), String(seconds)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  let onHolding!: () => void;
  const holding = new Promise<void>((r) => { onHolding = r; });
  p.stdout.on('data', (c: Buffer) => { out += c.toString(); if (out.includes('holding\n')) onHolding(); });
  const done = new Promise<{ held: number; opened: number }>((resolve, reject) => {
    p.on('exit', () => {
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line === undefined) reject(new Error(`tcp-flood.ts: ${out}`)); else resolve(JSON.parse(line) as { held: number; opened: number });
    });
  });
  return { holding, done };
}

function tcpQuery(port: number, id: number, ms = 2000): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    const q = query('t.drill.test', id);
    const t = setTimeout(() => { s.destroy(); resolve(false); }, ms);
    let got = Buffer.alloc(0);
    s.on('connect', () => { s.write(Buffer.concat([Buffer.from([q.length >> 8, q.length & 0xff]), q])); });
    s.on('data', (d) => { got = Buffer.concat([got, d]); if (got.length >= 4 && got.readUInt16BE(2) === id) { clearTimeout(t); s.destroy(); resolve(true); } });
    s.on('error', () => { clearTimeout(t); resolve(false); });
  });
}

interface FloodRow { server: string; alone: ProbeResult; flooded: ProbeResult; held: number; opened: number; tcpOk: number; tcpTried: number; rssAlone: number; rssFlood: number }

async function floodDrill(name: string, bin: string, conns: number, seconds: number): Promise<FloodRow> {
  const port = await freePort();
  const s = await startServer(name, bin, `.:${port} {\n    bind 127.0.0.1\n    whoami\n}\n`);
  try {
    await probe(port, 'warm.drill.test', 500, 500);
    const alone = await probe(port, 'a.drill.test', 1000, seconds * 1000);
    const rssAlone = s.rssKiB();
    const flood = await tcpFlood(port, conns, seconds + 1);
    await flood.holding;
    let tcpOk = 0;
    const tcpTried = 20;
    const tcp = (async () => { for (let i = 0; i < tcpTried; i++) { if (await tcpQuery(port, 40000 + i)) tcpOk++; await sleep((seconds * 1000) / tcpTried); } })();
    const flooded = await probe(port, 'b.drill.test', 1000, seconds * 1000);
    const rssFlood = s.rssKiB();
    await tcp;
    const { held, opened } = await flood.done;
    return { server: name, alone, flooded, held, opened, tcpOk, tcpTried, rssAlone, rssFlood };
  } finally {
    await s.stop();
  }
}

// ------------------------------------------------------------------ 2. CNAME chains

const CHAIN = 100;

function chainZone(): string {
  const lines = ['$ORIGIN chain.test.', '@ 3600 IN SOA ns.chain.test. host.chain.test. 1 7200 3600 1209600 3600', '@ 3600 IN NS ns', 'ns 3600 IN A 192.0.2.53'];
  for (let i = 0; i < CHAIN; i++) lines.push(`c${i} 3600 IN CNAME c${i + 1}`);
  lines.push(`c${CHAIN} 3600 IN A 192.0.2.9`);
  return lines.join('\n') + '\n';
}

/** An upstream that answers any A query with a CHAIN-long CNAME chain in one message, over UDP and TCP. */
async function chainUpstream(): Promise<{ port: number; close(): void }> {
  const port = await freePort();
  const answer = (q: Buffer): Buffer => {
    let off = 12;
    while (q[off]! !== 0) off += q[off]! + 1;
    const qEnd = off + 5;
    const name = (i: number): Buffer => Buffer.concat([Buffer.from([`u${i}`.length]), Buffer.from(`u${i}`), Buffer.from([0xc0, 12])]);
    const rrs: Buffer[] = [];
    for (let i = 0; i < CHAIN; i++) {
      const owner = i === 0 ? Buffer.from([0xc0, 12]) : name(i);
      const target = name(i + 1);
      rrs.push(Buffer.concat([owner, Buffer.from([0, 5, 0, 1, 0, 0, 0x0e, 0x10, target.length >> 8, target.length & 0xff]), target]));
    }
    rrs.push(Buffer.concat([name(CHAIN), Buffer.from([0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 192, 0, 2, 9])]));
    const head = Buffer.from(q.subarray(0, 12));
    head[2] = 0x85; head[3] = 0x00; // QR AA RD, NOERROR
    head.writeUInt16BE(1, 4); head.writeUInt16BE(rrs.length, 6); head.writeUInt16BE(0, 8); head.writeUInt16BE(0, 10);
    return Buffer.concat([head, q.subarray(12, qEnd), ...rrs]);
  };
  const udp = dgram.createSocket('udp4');
  udp.on('message', (m, r) => { udp.send(answer(m), r.port, r.address); });
  await new Promise<void>((r) => { udp.bind(port, '127.0.0.1', r); });
  const tcp = net.createServer((s) => {
    let buf = Buffer.alloc(0);
    s.on('error', () => { /* client gone */ });
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 2 && buf.length >= buf.readUInt16BE(0) + 2) {
        const a = answer(buf.subarray(2, 2 + buf.readUInt16BE(0)));
        buf = buf.subarray(2 + buf.readUInt16BE(0));
        s.write(Buffer.concat([Buffer.from([a.length >> 8, a.length & 0xff]), a]));
      }
    });
  });
  await new Promise<void>((r) => { tcp.listen(port, '127.0.0.1', r); });
  return { port, close() { udp.close(); tcp.close(); } };
}

/** dig, asynchronously: the chain's upstream answers from this process. */
async function digSummary(port: number, name: string, extra: string[]): Promise<string> {
  const out = await new Promise<string>((resolve) => {
    execFile('dig', ['@127.0.0.1', '-p', String(port), '+time=3', '+tries=1', ...extra, name, 'A'], { encoding: 'utf8', timeout: 10_000 }, (_e, stdout) => { resolve(stdout); });
  });
  const status = /status: (\w+)/.exec(out)?.[1] ?? 'no reply';
  const flags = /;; flags: ([a-z ]*);/.exec(out)?.[1]?.trim() ?? '';
  const answers = /ANSWER: (\d+)/.exec(out)?.[1] ?? '-';
  return `${status}, ${answers} answers${flags.split(' ').includes('tc') ? ', TC' : ''}`;
}

async function chainDrill(name: string, bin: string, upstreamPort: number): Promise<string[]> {
  const port = await freePort();
  const corefile = `chain.test:${port} {\n    bind 127.0.0.1\n    file db.chain\n}\nfwd.test:${port} {\n    bind 127.0.0.1\n    forward . 127.0.0.1:${upstreamPort}\n}\n`;
  const s = await startServer(name, bin, corefile, { 'db.chain': chainZone() });
  try {
    return [
      await digSummary(port, 'c0.chain.test', ['+ignore', '+noedns']),
      await digSummary(port, 'c0.chain.test', ['+tcp']),
      await digSummary(port, 'x.fwd.test', ['+ignore', '+noedns']),
      await digSummary(port, 'x.fwd.test', ['+tcp']),
    ];
  } finally {
    await s.stop();
  }
}

// ------------------------------------------------------------------ 3. names in logs

const HOSTILE_LABEL = Buffer.from([0x65, 0x76, 0x0a, 0x69, 0x6c, 0x22, 0x00, 0x20, 0x5c, 0x7f, 0xe9, 0x27]); // ev\nil"\0 \\\x7fé'

function hostileQuery(id: number): Buffer {
  const tail = query('drill.test', id);
  return Buffer.concat([tail.subarray(0, 12), Buffer.from([HOSTILE_LABEL.length]), HOSTILE_LABEL, tail.subarray(12)]);
}

async function logDrill(name: string, bin: string): Promise<{ logLines: string[]; errorLines: string[] }> {
  const port = await freePort();
  const closed = await freePort(); // nothing listens there: forward fails and errors logs it
  const s = await startServer(name, bin, `.:${port} {\n    bind 127.0.0.1\n    log\n    errors\n    forward . 127.0.0.1:${closed}\n}\n`);
  try {
    const sock = dgram.createSocket('udp4');
    await new Promise<void>((r) => { sock.once('message', () => { r(); }); sock.send(hostileQuery(4242), port, '127.0.0.1'); setTimeout(r, 4000); });
    sock.close();
    await sleep(500);
    return { logLines: s.lines.filter((l) => l.includes('drill.test') && l.startsWith('[INFO]')), errorLines: s.lines.filter((l) => l.includes('drill.test') && l.startsWith('[ERROR]')) };
  } finally {
    await s.stop();
  }
}

/** The query name as a log line shows it (between the type/class and the protocol, or after `errors: 2`). */
function loggedName(line: string | undefined): string {
  if (line === undefined) return '(none)';
  return /"A IN (.*) udp \d+/.exec(line)?.[1] ?? /plugin\/errors: \d+ (.*) A: /.exec(line)?.[1] ?? `(unparsed) ${line}`;
}

// ------------------------------------------------------------------ main

export async function boundsDrill(opts: { conns: number; seconds: number }): Promise<{ text: string; failures: string[] }> {
  requireTools('dig');
  const coredns = referenceCoreDNS();
  const failures: string[] = [];
  const out: string[] = [];

  const floods = [await floodDrill('nodens', 'nodens', opts.conns, opts.seconds), await floodDrill('CoreDNS 1.15.0', coredns, opts.conns, opts.seconds)];
  const pc = (p: ProbeResult): string => `${((100 * p.answered) / p.sent).toFixed(2)}%`;
  out.push(`1. ${opts.conns} idle and slow TCP connections (reopened when closed) while UDP is probed at 1000 q/s for ${opts.seconds} s`);
  out.push(table(['server', 'UDP answered alone', 'p50/p99 ms alone', 'UDP answered in flood', 'p50/p99 ms in flood', 'connections held (min)', 'connections opened', 'TCP queries answered in flood', 'RSS MiB alone → flood'],
    floods.map((f) => [f.server, pc(f.alone), `${f.alone.p50.toFixed(1)}/${f.alone.p99.toFixed(1)}`, pc(f.flooded), `${f.flooded.p50.toFixed(1)}/${f.flooded.p99.toFixed(1)}`,
      f.held, f.opened, `${f.tcpOk}/${f.tcpTried}`, `${(f.rssAlone / 1024).toFixed(0)} → ${(f.rssFlood / 1024).toFixed(0)}`])));
  const n = floods[0]!;
  if (n.flooded.answered < n.flooded.sent * 0.9 || !(n.flooded.p50 <= 100)) failures.push(`nodens UDP under the TCP flood: ${pc(n.flooded)} answered, p50 ${n.flooded.p50.toFixed(1)} ms`);

  const up = await chainUpstream();
  try {
    const chains = [await chainDrill('nodens', 'nodens', up.port), await chainDrill('CoreDNS 1.15.0', coredns, up.port)];
    out.push(`\n2. A ${CHAIN}-long CNAME chain (dig +noedns over UDP, and over TCP)`);
    const cases = ['zone (file), UDP', 'zone (file), TCP', 'upstream (forward), UDP', 'upstream (forward), TCP'];
    out.push(table(['chain', 'nodens', 'CoreDNS 1.15.0'], cases.map((c, i) => [c, chains[0]![i]!, chains[1]![i]!])));
    // An upstream's UDP reply larger than the client's 512 bytes: CoreDNS reads 512 bytes of it and passes on
    // the records that parsed, without TC (the chain arrives cut, and the client has no reason to retry);
    // nodens answers TC with no records (CoreDNS's truncateResponse), so the client gets the whole chain over
    // TCP. A known difference (docs/reliability.md), shown, not failed on.
    cases.forEach((c, i) => { if (i !== 2 && chains[0]![i] !== chains[1]![i]) failures.push(`${c}: nodens ${chains[0]![i]}, CoreDNS ${chains[1]![i]}`); });
  } finally {
    up.close();
  }

  const logs = [await logDrill('nodens', 'nodens'), await logDrill('CoreDNS 1.15.0', coredns)];
  out.push(`\n3. A query name with the bytes ${JSON.stringify(HOSTILE_LABEL.toString('latin1'))} as its first label, logged`);
  out.push(table(['server', 'log lines', 'name in the log line', 'errors lines', 'name in the errors line'],
    logs.map((l, i) => [i === 0 ? 'nodens' : 'CoreDNS 1.15.0', l.logLines.length, loggedName(l.logLines[0]), l.errorLines.length, loggedName(l.errorLines[0])])));
  const [ln, lc] = logs as [typeof logs[0], typeof logs[0]];
  const raw = [...ln.logLines, ...ln.errorLines].filter((l) => /[\x00-\x1f\x7f-\xff]/.test(l));
  if (raw.length > 0) failures.push(`nodens logged raw control or non-ASCII bytes: ${JSON.stringify(raw)}`);
  if (ln.logLines.length !== 1 || loggedName(ln.logLines[0]) !== loggedName(lc.logLines[0])) failures.push(`log line: nodens ${JSON.stringify(ln.logLines)}, CoreDNS ${JSON.stringify(lc.logLines)}`);
  if (ln.errorLines.length < 1 || loggedName(ln.errorLines[0]) !== loggedName(lc.errorLines[0])) failures.push(`errors line: nodens ${JSON.stringify(ln.errorLines)}, CoreDNS ${JSON.stringify(lc.errorLines)}`);
  return { text: out.join('\n'), failures };
}

if (import.meta.main) {
  const t0 = Date.now();
  const r = await boundsDrill({ conns: arg('conns', 2000), seconds: arg('seconds', 3) });
  process.stdout.write(`resource-bounds drill (${machine()})\n${r.text}\ntook ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  for (const f of r.failures) process.stdout.write(`FAIL: ${f}\n`);
  process.exitCode = r.failures.length > 0 ? 1 : 0;
}
