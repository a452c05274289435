// The trace plugin against a real Zipkin server (io.zipkin:zipkin-server, in-memory storage, on a loopback port),
// and the reference CoreDNS 1.15.0 with the same Corefile: both send their spans to the same Zipkin, and the
// traces Zipkin keeps of each are compared (span names and tree, kind, local endpoint, tags, annotation values;
// not ids, timestamps or durations).

import test from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ROOT, BIN, freePort } from '../helpers/server.ts';
import { exchange } from '../helpers/client.ts';
import { encodeMessage } from '../../src/wire/encode.ts';
import { newQuery } from '../../src/wire/message.ts';

function scriptPath(script: string, timeout: number): string {
  const r = spawnSync(join(ROOT, 'scripts', script), { encoding: 'utf8', timeout });
  assert.equal(r.status, 0, `scripts/${script} failed: ${r.stderr}`);
  return r.stdout.trim();
}

interface Zipkin { port: number; proc: ChildProcess; log: string[] }

async function startZipkin(): Promise<Zipkin> {
  const jar = scriptPath('zipkin-server.sh', 600_000);
  const port = await freePort();
  const log: string[] = [];
  const proc = spawn('java', ['-Xmx256m', '-XX:TieredStopAtLevel=1', '-jar', jar], {
    env: { ...process.env, QUERY_PORT: String(port), STORAGE_TYPE: 'mem', JAVA_OPTS: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout!.on('data', (d: Buffer) => { log.push(d.toString()); });
  proc.stderr!.on('data', (d: Buffer) => { log.push(d.toString()); });
  for (let i = 0; i < 240; i++) {
    if (proc.exitCode !== null) break;
    try {
      const r = await fetch(`http://127.0.0.1:${port}/health`);
      if (r.ok) return { port, proc, log };
    } catch { /* not yet */ }
    await sleep(500);
  }
  proc.kill('SIGKILL');
  throw new Error(`Zipkin did not come up on ${port}:\n${log.join('')}`);
}

interface Span {
  traceId: string; id: string; parentId?: string; name?: string; kind?: string;
  localEndpoint?: { serviceName?: string; ipv4?: string; ipv6?: string; port?: number };
  tags?: Record<string, string>; annotations?: { timestamp: number; value: string }[];
}

async function traces(zipkin: number): Promise<Span[][]> {
  const r = await fetch(`http://127.0.0.1:${zipkin}/api/v2/traces?limit=1000&lookback=3600000`);
  assert.equal(r.status, 200);
  return await r.json() as Span[][];
}

/** What is compared of a trace: the span tree without ids and times, the local port named for what it is. */
interface Node { name: string; kind: string; endpoint: string; tags: Record<string, string>; annotations: string[]; children: Node[] }

function tree(spans: Span[], dnsPort: number): Node {
  const ids = new Set(spans.map((s) => s.id));
  const node = (s: Span): Node => {
    const le = { ...s.localEndpoint };
    if (le.port === dnsPort) le.port = -1;
    return {
      name: s.name ?? '',
      kind: s.kind ?? '',
      endpoint: JSON.stringify(le),
      tags: s.tags ?? {},
      annotations: (s.annotations ?? []).map((a) => a.value).sort(),
      children: spans.filter((c) => c.parentId === s.id).map(node).sort((a, b) => a.name.localeCompare(b.name)),
    };
  };
  const roots = spans.filter((s) => s.parentId === undefined || !ids.has(s.parentId));
  assert.equal(roots.length, 1, `one root span per trace: ${JSON.stringify(spans)}`);
  return node(roots[0]!);
}

const CORE = (port: number, zipkin: number): string => `example.org:${port} {
  bind 127.0.0.1
  trace 127.0.0.1:${zipkin} {
    service Nodens-E2E
    zipkin_max_batch_interval 100ms
    zipkin_max_batch_size 5
  }
  metadata
  errors
  log
  hosts {
    10.0.0.1 a.example.org
    fallthrough
  }
  template IN TXT example.org {
    answer "{{ .Name }} 60 IN TXT \\"hi\\""
  }
  template IN MX example.org {
    rcode NXDOMAIN
  }
  template IN A example.org {
    match "^cname[.]example[.]org[.]$"
    answer "cname.example.org. 60 IN CNAME a.example.org."
    upstream
    fallthrough
  }
}
sampled.test:${port} {
  bind 127.0.0.1
  trace zipkin http://127.0.0.1:${zipkin}/api/v2/spans {
    every 2
    zipkin_max_batch_interval 100ms
  }
  whoami
}
`;

interface Q { name: string; type: number; tcp: boolean }
const QUERIES: Q[] = [
  { name: 'a.example.org.', type: 1, tcp: false },
  { name: 'A.Example.org.', type: 1, tcp: true },
  { name: 'txt.example.org.', type: 16, tcp: false },
  { name: 'mx.example.org.', type: 15, tcp: false },
  { name: 'nothing.example.org.', type: 1, tcp: false }, // no next plugin after hosts: SERVFAIL with an error
  { name: 'cname.example.org.', type: 1, tcp: false }, // template follows the CNAME through the server: a lookup
  { name: 'one.sampled.test.', type: 1, tcp: false },
  { name: 'two.sampled.test.', type: 1, tcp: false },
  { name: 'three.sampled.test.', type: 1, tcp: false },
  { name: 'four.sampled.test.', type: 28, tcp: false },
];
const EXPECTED_TRACES = 8; // six of example.org, two of four in sampled.test

/** Runs `cmd` with the Corefile, sends the queries, waits until Zipkin has every new trace, stops it. */
async function runSide(cmd: string, zipkin: number, known: Set<string>, dir: string, side: string): Promise<{ port: number; traces: Span[][] }> {
  const port = await freePort();
  const file = join(dir, `${side}.Corefile`);
  writeFileSync(file, CORE(port, zipkin));
  const proc = spawn(cmd, ['-conf', file], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => { out += d.toString(); });
  proc.stderr.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = new Promise<void>((resolve) => { proc.once('exit', () => { resolve(); }); });
  try {
    for (let i = 0; i < 200 && !out.includes('CoreDNS-'); i++) await sleep(25);
    assert.ok(out.includes('CoreDNS-'), `${side} did not start:\n${out}`);
    for (const [i, q] of QUERIES.entries()) {
      const m = newQuery(q.name, q.type);
      m.id = 0x2000 + i;
      m.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [] };
      await exchange(port, encodeMessage(m), { tcp: q.tcp, timeoutMs: 8000 });
    }
    let fresh: Span[][] = [];
    for (let i = 0; i < 100; i++) {
      fresh = (await traces(zipkin)).filter((t) => !known.has(t[0]!.traceId));
      const complete = fresh.filter((t) => t.some((s) => s.name === 'servedns'));
      if (complete.length >= EXPECTED_TRACES && fresh.every((t) => t.some((s) => s.name === 'servedns'))) break;
      await sleep(100);
    }
    await sleep(300); // anything late would show up as an extra trace
    fresh = (await traces(zipkin)).filter((t) => !known.has(t[0]!.traceId));
    for (const t of fresh) known.add(t[0]!.traceId);
    assert.ok(!/WARNING|ERROR\] plugin\/trace/.test(out), `${side} logged trace warnings:\n${out}`);
    return { port, traces: fresh };
  } finally {
    proc.kill('SIGTERM');
    await exited;
  }
}

test('trace: nodens and CoreDNS 1.15.0 send the same spans to a real Zipkin', { timeout: 900_000 }, async () => {
  const coredns = scriptPath('coredns-reference.sh', 900_000);
  const zipkin = await startZipkin();
  const dir = mkdtempSync(join(tmpdir(), 'nodens-trace-'));
  try {
    const known = new Set<string>((await traces(zipkin.port)).map((t) => t[0]!.traceId));
    const ref = await runSide(coredns, zipkin.port, known, dir, 'reference');
    const sub = await runSide(BIN, zipkin.port, known, dir, 'subject');
    const render = (side: { port: number; traces: Span[][] }): Node[] => side.traces.map((t) => tree(t, side.port))
      .sort((a, b) => JSON.stringify(a.tags).localeCompare(JSON.stringify(b.tags)));
    const r = render(ref);
    const s = render(sub);
    assert.equal(r.length, EXPECTED_TRACES, `reference traces: ${JSON.stringify(r, null, 1)}`);
    assert.deepEqual(s, r);

    // What the traces say, so that an empty comparison cannot pass.
    const byName = (n: string, t: string, proto = 'udp'): Node => r.find((x) => x.tags['coredns.io/name'] === n
      && x.tags['coredns.io/type'] === t && x.tags['coredns.io/proto'] === proto)!;
    const a = byName('a.example.org.', 'A');
    assert.equal(a.name, 'servedns');
    assert.equal(a.kind, 'SERVER');
    assert.equal(a.endpoint, JSON.stringify({ serviceName: 'nodens-e2e', ipv4: '127.0.0.1', port: -1 }));
    assert.deepEqual(a.tags, {
      'coredns.io/name': 'a.example.org.', 'coredns.io/proto': 'udp', 'coredns.io/rcode': 'NOERROR',
      'coredns.io/remote': '127.0.0.1', 'coredns.io/type': 'A',
    });
    const chain: string[] = [];
    for (let n: Node | undefined = a.children[0]; n !== undefined; n = n.children[0]) chain.push(n.name);
    assert.deepEqual(chain, ['errors', 'log', 'template', 'hosts'], 'plugin.cfg order; metadata runs before trace');
    // The lookup template makes for the CNAME target runs the block's chain again inside template's span:
    // metadata hands it to trace (a span), trace sees the query's span and traces nothing new.
    const lookup: string[] = [];
    for (let n: Node | undefined = byName('cname.example.org.', 'A').children[0]; n !== undefined; n = n.children[0]) lookup.push(n.name);
    assert.deepEqual(lookup, ['errors', 'log', 'template', 'trace', 'errors', 'log', 'template', 'hosts']);
    const nothing = byName('nothing.example.org.', 'A');
    assert.equal(nothing.tags['coredns.io/rcode'], 'SERVFAIL');
    assert.equal(nothing.tags['error'], 'true');
    assert.deepEqual(nothing.annotations, ['error.object:plugin/hosts: no next plugin found', 'event:error']);
    assert.equal(byName('mx.example.org.', 'MX').tags['coredns.io/rcode'], 'NXDOMAIN');
    assert.equal(byName('a.example.org.', 'A', 'tcp').tags['coredns.io/rcode'], 'NOERROR', 'the name is lower-cased');
    const sampled = r.filter((x) => x.tags['coredns.io/name']!.endsWith('.sampled.test.')).map((x) => x.tags['coredns.io/name']);
    assert.deepEqual(sampled.sort(), ['four.sampled.test.', 'two.sampled.test.']);
    assert.equal(byName('two.sampled.test.', 'A').endpoint, JSON.stringify({ serviceName: 'coredns', ipv4: '127.0.0.1', port: -1 }));
  } finally {
    zipkin.proc.kill('SIGTERM');
    await new Promise((r) => { zipkin.proc.once('exit', r); setTimeout(r, 10_000).unref(); });
  }
});

test('trace: with the collector away, nodens warns as CoreDNS 1.15.0 does (backlog disposal, refused POST)', { timeout: 900_000 }, async () => {
  const coredns = scriptPath('coredns-reference.sh', 900_000);
  const dir = mkdtempSync(join(tmpdir(), 'nodens-trace-away-'));
  const away = await freePort(); // nothing listens there
  const warnings = async (cmd: string, side: string): Promise<string[]> => {
    const port = await freePort();
    const file = join(dir, `${side}.Corefile`);
    writeFileSync(file, `.:${port} {\n  trace 127.0.0.1:${away} {\n    zipkin_max_batch_interval 200ms\n    zipkin_max_backlog_size 2\n  }\n  whoami\n}\n`);
    const proc = spawn(cmd, ['-conf', file], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (d: Buffer) => { out += d.toString(); });
    proc.stderr.on('data', (d: Buffer) => { out += d.toString(); });
    const exited = new Promise<void>((resolve) => { proc.once('exit', () => { resolve(); }); });
    try {
      for (let i = 0; i < 200 && !out.includes('CoreDNS-'); i++) await sleep(25);
      assert.ok(out.includes('CoreDNS-'), `${side} did not start:\n${out}`);
      for (let i = 0; i < 4; i++) {
        const m = newQuery('x.example.', 1);
        m.id = 0x3000 + i;
        await exchange(port, encodeMessage(m), { timeoutMs: 8000 });
      }
      await sleep(1000);
    } finally {
      proc.kill('SIGTERM');
      await exited;
    }
    return [...new Set(out.split('\n').filter((l) => l.includes('plugin/trace')))].sort();
  };
  const ref = await warnings(coredns, 'reference');
  const sub = await warnings(BIN, 'subject');
  assert.deepEqual(ref, [
    '[WARNING] plugin/trace: backlog too long, disposing 1 spans',
    `[WARNING] plugin/trace: failed to send the request: Post "http://127.0.0.1:${away}/api/v2/spans": dial tcp 127.0.0.1:${away}: connect: connection refused`,
  ]);
  assert.deepEqual(sub, ref);
});
