// -log-format json against the reference CoreDNS 1.15.0 binary: both run the
// same Corefile and get the same queries; their JSON records must carry the
// same levels, keys (in order), field types, plugin fields and messages (ports,
// durations and random query names normalised): the start lines, a log plugin
// line, an errors plugin line, caddy's signal line, a startup FATAL (stderr)
// and a plugin FATAL (loop, stdout, exit 1).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { wire } from '../../src/index.ts';
import { exchange } from '../helpers/client.ts';
import { BIN, freePort } from '../helpers/server.ts';
import { referenceBinary } from '../conformance/lib/servers.ts';

const REFERENCE = referenceBinary();

type Rec = Record<string, unknown>;

interface Proc {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

function run(bin: string, args: string[], cwd: string): Proc {
  const child = spawn(bin, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  child.stderr!.on('data', (d: Buffer) => { err += d.toString(); });
  const exited = new Promise<number | null>((resolve) => { child.on('exit', (code) => { resolve(code); }); });
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** Every line must be one JSON object; Go's automaxprocs line (no Node counterpart) is left out. */
function records(text: string): Rec[] {
  return text.split('\n').filter((l) => l !== '').map((l) => {
    try {
      return JSON.parse(l) as Rec;
    } catch {
      throw new Error(`not a JSON record: ${l}`);
    }
  }).filter((r) => !String(r.msg).startsWith('maxprocs: '));
}

async function until(what: string, p: Proc, cond: () => boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\nstdout:\n${p.stdout()}\nstderr:\n${p.stderr()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$/;

/** What must be equal on both sides: level, keys in order, each field's JSON type, and the values named. */
function shape(r: Rec, norm: (s: string) => string): Rec {
  assert.match(String(r.time), TIME);
  const out: Rec = { keys: Object.keys(r).join(','), types: Object.values(r).map((v) => v === null ? 'null' : typeof v).join(',') };
  for (const [k, v] of Object.entries(r)) {
    if (k === 'time' || k === 'client_port' || k === 'duration_seconds') continue;
    out[k] = typeof v === 'string' ? norm(v) : v;
  }
  return out;
}

function dir(files: Record<string, string>): string {
  const d = mkdtempSync(path.join(tmpdir(), 'nodens-logjson-'));
  for (const [n, c] of Object.entries(files)) writeFileSync(path.join(d, n), c);
  return d;
}

test('start lines, a log line, an errors line and the SIGTERM line are the records CoreDNS writes', { timeout: 60_000 }, async () => {
  const closed = await freePort(); // nothing listens: the forward attempt is refused
  const sides: Array<{ name: string; recs: Rec[]; port: number }> = [];
  for (const [name, bin] of [['reference', REFERENCE], ['nodens', BIN]] as const) {
    const port = await freePort();
    const cwd = dir({ Corefile: `.:${port} {\n    bind 127.0.0.1\n    log\n    errors\n    forward . 127.0.0.1:${closed}\n}\n` });
    const p = run(bin, ['-log-format', 'json', '-conf', 'Corefile'], cwd);
    try {
      await until(`${name}: version record`, p, () => p.stdout().includes('CoreDNS-1.15.0'));
      const q = wire.newQuery('a.example.', 1);
      q.id = 4242;
      const reply = wire.decodeMessage(await exchange(port, wire.encodeMessage(q), { timeoutMs: 5000 }));
      assert.equal(reply.rcode, 2, `${name}: the refused upstream gives SERVFAIL`);
      await until(`${name}: errors record`, p, () => p.stdout().includes('"plugin":"errors"'));
      p.child.kill('SIGTERM');
      assert.equal(await p.exited, 0);
      assert.equal(p.stderr(), '', `${name} wrote to stderr`);
      sides.push({ name, recs: records(p.stdout()), port });
    } finally {
      p.child.kill('SIGKILL');
    }
  }
  const [ref, sub] = sides as [typeof sides[0], typeof sides[0]];
  const norm = (port: number) => (s: string): string => s
    .replaceAll(`:${port}`, ':PORT')
    .replace(/127\.0\.0\.1:\d+ - 4242/, '127.0.0.1:CPORT - 4242')
    .replace(/ [\d.]+s$/, ' DURATIONs')
    .replace(/read udp 127\.0\.0\.1:\d+->/, 'read udp 127.0.0.1:SPORT->')
    // The version record's second line names the runtime (go… / node-…, nodens-…).
    .replace(/^(CoreDNS-[\d.]+)\n.*$/s, '$1\nRUNTIME');
  const a = ref.recs.map((r) => shape(r, norm(ref.port)));
  const b = sub.recs.map((r) => shape(r, norm(sub.port)));
  assert.deepEqual(b, a, `reference:\n${ref.recs.map((r) => JSON.stringify(r)).join('\n')}\nnodens:\n${sub.recs.map((r) => JSON.stringify(r)).join('\n')}`);
  // What was compared: the zone line, the version record, the log plugin's record, the errors record, SIGTERM.
  assert.deepEqual(a.map((r) => `${String(r.level)} ${String(r.plugin ?? '')}`),
    ['INFO ', 'INFO ', 'INFO log', 'ERROR errors', 'INFO ']);
  assert.equal(b[2]!.msg, `127.0.0.1:CPORT - 4242 "A IN a.example. udp ${String(b[2]!.request_size)} false 512" SERVFAIL qr,rd 27 DURATIONs`);
  assert.equal(typeof sub.recs[2]!.duration_seconds, 'number');
});

test('a startup FATAL is a JSON record on stderr with exit status 1; an unknown format is refused in text', { timeout: 30_000 }, async () => {
  const cwd = dir({ Corefile: '.:0 {\n    bogus\n}\n' });
  const results = [REFERENCE, BIN].map((bin) => spawnSync(bin, ['-log-format', 'json', '-conf', 'Corefile'], { cwd, encoding: 'utf8', timeout: 15_000 }));
  for (const r of results) assert.equal(r.status, 1, r.stderr);
  const [a, b] = results.map((r) => records(r.stderr).map((x) => shape(x, (s) => s)));
  assert.deepEqual(b, a);
  assert.deepEqual(a, [{ keys: 'time,level,msg', types: 'string,string,string', level: 'FATAL', msg: "Corefile:2 - Error during parsing: Unknown directive 'bogus'" }]);
  assert.deepEqual(records(results[1]!.stdout), []);

  const bad = [REFERENCE, BIN].map((bin) => spawnSync(bin, ['-log-format', 'xml'], { cwd, encoding: 'utf8', timeout: 15_000 }));
  for (const r of bad) {
    assert.equal(r.status, 1);
    assert.match(r.stderr.trim(), /^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d unknown log format "xml": expected text or json$/);
  }
});

test('a plugin FATAL (loop) is a JSON record with the plugin field, then exit 1', { timeout: 60_000 }, async () => {
  const recs: Rec[][] = [];
  const ports: number[] = [];
  await Promise.all([REFERENCE, BIN].map(async (bin, i) => {
    const port = await freePort();
    ports[i] = port;
    const cwd = dir({ Corefile: `.:${port} {\n    bind 127.0.0.1\n    loop\n    forward . 127.0.0.1:${port}\n}\n` });
    const p = run(bin, ['-log-format', 'json', '-conf', 'Corefile'], cwd);
    const timer = setTimeout(() => { p.child.kill('SIGKILL'); }, 30_000);
    const code = await p.exited;
    clearTimeout(timer);
    assert.equal(code, 1, `${bin}\n${p.stdout()}\n${p.stderr()}`);
    recs[i] = records(p.stdout());
  }));
  const fatal = recs.map((rs, i) => {
    const f = rs.filter((r) => r.level === 'FATAL');
    assert.equal(f.length, 1, JSON.stringify(rs));
    return shape(f[0]!, (s) => s.replaceAll(`:${ports[i]!}`, ':PORT').replace(/127\.0\.0\.1:\d+ ->/, '127.0.0.1:SPORT ->').replace(/"HINFO [\d.]+"/, '"HINFO N"'));
  });
  assert.deepEqual(fatal[1], fatal[0]);
  assert.equal(fatal[0]!.plugin, 'loop');
  assert.match(String(fatal[0]!.msg), /^Loop \(127\.0\.0\.1:SPORT -> 127\.0\.0\.1:PORT\) detected for zone "\."/);
});
