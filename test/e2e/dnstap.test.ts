// dnstap against the reference: the same Corefile (dnstap full to a unix socket, dnstap with `extra` to TCP,
// forward to a local upstream, bufsize lowering the queries' EDNS size before dnstap sees them) run by CoreDNS 1.15.0 and by nodens, the same queries (fixed IDs), both taps
// captured by fstrm_capture (fstrm-bin). The captured dnstap messages must match field by field — types,
// fields present and in order, identity, version, extra, addresses, protocols, wire messages — with the
// times and ephemeral ports masked. dnstap-read (bind9-dnsutils) must decode nodens's capture.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BIN, ROOT, freePort, startInProcess } from '../helpers/server.ts';
import { exchange } from '../helpers/client.ts';
import { Capture, Sink, decodeTap, dnstapRead, readFstrmFile } from '../../src/plugin/dnstap/testutil.ts';
import { CONTROL_READY, CONTROL_START, CONTROL_STOP } from '../../src/plugin/dnstap/encode.ts';
import { encodeMessage } from '../../src/wire/encode.ts';
import { newQuery } from '../../src/wire/message.ts';

function referenceBinary(): string {
  const r = spawnSync(join(ROOT, 'scripts', 'coredns-reference.sh'), { encoding: 'utf8', timeout: 900_000 });
  assert.equal(r.status, 0, `scripts/coredns-reference.sh failed: ${r.stderr}`);
  return r.stdout.trim();
}

interface Query { name: string; type: number; tcp: boolean; id: number }
const QUERIES: Query[] = [
  { name: 'example.org.', type: 1, tcp: false, id: 0x1001 },
  { name: 'example.org.', type: 28, tcp: true, id: 0x1002 },
  { name: 'nx.example.org.', type: 1, tcp: false, id: 0x1003 },
  { name: 'x.dead.test.', type: 1, tcp: false, id: 0x1004 },
];

function wireQuery(q: Query): Buffer {
  const m = newQuery(q.name, q.type);
  m.id = q.id;
  m.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [] };
  return encodeMessage(m);
}

/** One side: run `bin` with the Corefile, send the queries, stop, return the frames of both captures. */
async function runSide(bin: string, upstream: number, dead: number, dir: string, side: string): Promise<{ full: Buffer[]; tcp: Buffer[]; replies: Buffer[] }> {
  const sock = join(dir, `${side}.sock`);
  const tcpPort = await freePort();
  const capFull = await Capture.start({ unix: sock }, join(dir, `${side}-full.fstrm`));
  const capTcp = await Capture.start({ port: tcpPort }, join(dir, `${side}-tcp.fstrm`));
  const port = await freePort();
  const corefile = `.:${port} {
  metadata
  bufsize 1100
  dnstap unix://${sock} full
  dnstap tcp://127.0.0.1:${tcpPort} {
    identity tap-e2e
    version V1
    extra "{type} {name} {proto} {/forward/upstream} {rcode}"
  }
  forward . 127.0.0.1:${upstream}
}
dead.test.:${port} {
  dnstap unix://${sock} full
  forward . 127.0.0.1:${dead} {
    max_fails 0
  }
}
`;
  const file = join(dir, `${side}.Corefile`);
  writeFileSync(file, corefile);
  const proc = spawn(bin, ['-conf', file], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => { out += d.toString(); });
  proc.stderr.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = new Promise<void>((resolve) => { proc.once('exit', () => { resolve(); }); });
  const replies: Buffer[] = [];
  try {
    for (let i = 0; i < 200 && !out.includes('CoreDNS-'); i++) await sleep(25);
    assert.ok(out.includes('CoreDNS-'), `${side} did not start:\n${out}`);
    assert.ok(await capFull.waitFor('accepted new connection'), capFull.log);
    assert.ok(await capTcp.waitFor('accepted new connection'), capTcp.log);
    for (const q of QUERIES) replies.push(await exchange(port, wireQuery(q), { tcp: q.tcp, timeoutMs: 8000 }));
  } finally {
    proc.kill('SIGTERM');
    await exited;
  }
  assert.ok(await capFull.waitFor(/closing \(read/), `${side}: no STOP on the unix tap:\n${capFull.log}`);
  assert.ok(await capTcp.waitFor(/closing \(read/), `${side}: no STOP on the tcp tap:\n${capTcp.log}`);
  await capFull.stop();
  await capTcp.stop();
  assert.ok(!/\[ERROR\]|\[WARNING\]/.test(out), `${side} logged:\n${out}`);
  return { full: readFstrmFile(capFull.out), tcp: readFstrmFile(capTcp.out), replies };
}

/** The frames as comparable text: times checked then masked, ephemeral ports masked, message IDs kept.
 * Grouped by query (its DNS ID, or the type and name of `extra` on the tap without messages) with a stable
 * sort, so each query's own messages keep their order: both servers write the reply before queueing its
 * CLIENT_RESPONSE, so the client's next query can be tapped first. */
function normalise(frames: Buffer[], upstreamPort: number): string[] {
  const idOf = (line: string): string => /_message=([0-9a-f]{4})/.exec(line)?.[1] ?? /extra="(\S+ \S+)/.exec(line)?.[1] ?? '';
  return frames.map((f) => {
    const d = decodeTap(f);
    const msg = d.message.map(([k, v]) => {
      if (k.endsWith('_time_sec')) {
        assert.ok(Math.abs((v as number) - Date.now() / 1000) < 120, `${k} ${String(v)}`);
        return `${k}=<sec>`;
      }
      if (k.endsWith('_time_nsec')) {
        assert.ok((v as number) < 1e9);
        return `${k}=<nsec>`;
      }
      if (k === 'query_port') return `${k}=<port>`;
      if (k === 'response_port') return `${k}=${v === upstreamPort ? '<upstream>' : v === 0 ? '0' : '<port>'}`;
      return `${k}=${Buffer.isBuffer(v) ? v.toString('hex') : String(v)}`;
    });
    const top = d.top.map(([k, v]) => `${k}=${Buffer.isBuffer(v) ? JSON.stringify(v.toString()) : String(v)}`);
    return [...top, ...msg].join(' ').replaceAll(`127.0.0.1:${upstreamPort}`, '127.0.0.1:<upstream>');
  }).map((line, i) => ({ line, i })).sort((a, b) => idOf(a.line).localeCompare(idOf(b.line)) || a.i - b.i).map((e) => e.line);
}

test('dnstap: nodens emits what CoreDNS 1.15.0 emits (client and forwarder messages, full and extra, unix and tcp)', { timeout: 180_000 }, async () => {
  const reference = referenceBinary();
  const up = await startInProcess('.:0 {\n hosts {\n  10.0.0.1 example.org\n  2001:db8::1 example.org\n }\n}\n');
  const upstream = up.port;
  const dead = await freePort(); // nothing listens: forward fails, SERVFAIL
  const dir = mkdtempSync(join(tmpdir(), 'dnstap-e2e-'));
  try {
    const ref = await runSide(reference, upstream, dead, dir, 'coredns');
    const sub = await runSide(BIN, upstream, dead, dir, 'nodens');
    // The clients got the same answers.
    assert.deepEqual(sub.replies.map((r) => r.toString('hex')), ref.replies.map((r) => r.toString('hex')));
    // 3 forwarded queries: 4 messages each; the dead upstream: CLIENT_QUERY, 2 FORWARDER_QUERY attempts, CLIENT_RESPONSE.
    assert.equal(ref.full.length, 16, normalise(ref.full, upstream).join('\n'));
    assert.deepEqual(normalise(sub.full, upstream), normalise(ref.full, upstream));
    if (process.env.DNSTAP_E2E_PRINT) console.log([...normalise(ref.full, upstream), ...normalise(ref.tcp, upstream)].join("\n"));
    assert.equal(ref.tcp.length, 12);
    assert.deepEqual(normalise(sub.tcp, upstream), normalise(ref.tcp, upstream));
    // bind9's reader decodes nodens's capture.
    const text = dnstapRead(join(dir, 'nodens-full.fstrm'));
    for (const t of ['CLIENT_QUERY', 'CLIENT_RESPONSE', 'FORWARDER_QUERY', 'FORWARDER_RESPONSE']) assert.ok(text.includes(`type: ${t}`), t);
    assert.ok(text.includes("- 'example.org. 3600 IN AAAA 2001:db8::1'"), text);
  } finally {
    await up.stop();
  }
});

/** `dnstap listen`: sinks connect to the server (unix and tcp); the same comparison. */
async function runListenSide(bin: string, upstream: number, dir: string, side: string): Promise<{ full: Buffer[]; tcp: Buffer[]; controls: number[][] }> {
  const sock = join(dir, `${side}-listen.sock`);
  const tcpPort = await freePort();
  const port = await freePort();
  const file = join(dir, `${side}-listen.Corefile`);
  writeFileSync(file, `.:${port} {
  dnstap listen unix://${sock} full
  dnstap listen tcp://127.0.0.1:${tcpPort} {
    identity tap-listen
  }
  forward . 127.0.0.1:${upstream}
}
`);
  const proc = spawn(bin, ['-conf', file], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => { out += d.toString(); });
  proc.stderr.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = new Promise<void>((resolve) => { proc.once('exit', () => { resolve(); }); });
  let full: Sink | undefined;
  let tcp: Sink | undefined;
  try {
    for (let i = 0; i < 200 && !out.includes('CoreDNS-'); i++) await sleep(25);
    assert.ok(out.includes('CoreDNS-'), `${side} did not start:\n${out}`);
    full = await Sink.connect({ unix: sock });
    tcp = await Sink.connect({ port: tcpPort });
    await sleep(100);
    for (const q of QUERIES.slice(0, 3)) await exchange(port, wireQuery(q), { tcp: q.tcp, timeoutMs: 8000 });
    await full.waitFrames(12);
    await tcp.waitFrames(12);
  } finally {
    proc.kill('SIGTERM');
    await exited;
  }
  assert.ok(await full.waitClosed() && await tcp.waitClosed(), `${side}: sessions not ended`);
  assert.ok(!/\[ERROR\]|\[WARNING\]/.test(out), `${side} logged:\n${out}`);
  return { full: full.frames, tcp: tcp.frames, controls: [full.controls, tcp.controls] };
}

test('dnstap listen: sinks that connect get what CoreDNS 1.15.0 sends them (unix and tcp, READY/START/STOP)', { timeout: 180_000 }, async () => {
  const reference = referenceBinary();
  const up = await startInProcess('.:0 {\n hosts {\n  10.0.0.1 example.org\n  2001:db8::1 example.org\n }\n}\n');
  const dir = mkdtempSync(join(tmpdir(), 'dnstap-listen-e2e-'));
  try {
    const ref = await runListenSide(reference, up.port, dir, 'coredns');
    const sub = await runListenSide(BIN, up.port, dir, 'nodens');
    assert.equal(ref.full.length, 12);
    // CoreDNS hands frames to its sink from a goroutine through a channel: on a loaded machine one query's
    // CLIENT_RESPONSE can follow the next query's CLIENT_QUERY. The frames are compared as sets; nodens's own order
    // is the causal one, query by query (CLIENT_QUERY, FORWARDER_QUERY, FORWARDER_RESPONSE, CLIENT_RESPONSE).
    const sorted = (frames: Buffer[]): string[] => normalise(frames, up.port).sort();
    assert.deepEqual(sorted(sub.full), sorted(ref.full));
    assert.deepEqual(sorted(sub.tcp), sorted(ref.tcp));
    for (const frames of [sub.full, sub.tcp]) {
      const types = normalise(frames, up.port).map((l) => / type=1 type=(\d+) /.exec(l)?.[1]);
      assert.deepEqual(types, ['5', '7', '8', '6', '5', '7', '8', '6', '5', '7', '8', '6'], 'nodens: each query\'s frames in order');
    }
    assert.deepEqual(sub.controls, ref.controls);
    assert.deepEqual(sub.controls[0], [CONTROL_READY, CONTROL_START, CONTROL_STOP]);
  } finally {
    await up.stop();
  }
});
