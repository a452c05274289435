// deploy/grafana/nodens.json against a live bin/nodens: every metric name that
// a panel's (or a template variable's) PromQL names must be on /metrics after
// traffic that exercises what the dashboard covers (queries, cache, forward
// with a silent upstream, a forwarding loop, the Node runtime); then a real
// Prometheus scrapes that nodens and every panel query must return data.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import net from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { wire } from '../../src/index.ts';
import { ROOT, freePort, startProcess } from '../helpers/server.ts';
import { get, query, until } from './prometheus-util.ts';

const DASHBOARD = join(ROOT, 'deploy/grafana/nodens.json');

interface Panel { title?: string; type?: string; targets?: Array<{ expr?: string }>; panels?: Panel[] }
interface Dashboard { panels: Panel[]; templating: { list: Array<{ query?: unknown; definition?: string }> } }

/** [where, PromQL] for every panel target and query variable. */
function queries(d: Dashboard): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const walk = (ps: Panel[]): void => {
    for (const p of ps) {
      for (const t of p.targets ?? []) if (t.expr !== undefined) out.push([`panel "${p.title ?? '?'}"`, t.expr]);
      walk(p.panels ?? []);
    }
  };
  walk(d.panels);
  for (const v of d.templating.list) {
    const q = typeof v.query === 'object' && v.query !== null ? (v.query as { query?: string }).query : v.definition;
    const m = /^label_values\((\w+),\s*\w+\)$/.exec(q ?? '');
    if (m !== null) out.push(['template variable', m[1]!]);
  }
  return out;
}

const PROMQL_WORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan']);

/** The metric names a PromQL expression selects: identifiers outside strings, matchers, ranges and grouping lists that are not function calls. */
export function metricNames(expr: string): string[] {
  const s = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of s.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const after = s.slice(m.index + m[0].length).trimStart();
    if (after.startsWith('(') || PROMQL_WORDS.has(m[0].toLowerCase())) continue;
    names.add(m[0]);
  }
  return [...names];
}

test('metricNames finds the selected metrics only', () => {
  assert.deepEqual(metricNames('histogram_quantile(0.99, sum by (le, to) (rate(coredns_proxy_request_duration_seconds_bucket{instance=~"$instance", x="a(b)"}[$__rate_interval])))'),
    ['coredns_proxy_request_duration_seconds_bucket']);
  assert.deepEqual(metricNames('sum(rate(a_total[5m])) / on (x) group_left sum(b) or vector(0)'), ['a_total', 'b']);
});

function answer(m: Uint8Array): Uint8Array {
  const q = wire.decodeMessage(m);
  const reply = wire.replyTo(q);
  reply.answer = [{ name: q.question[0]!.name, type: 1, class: 1, ttl: 300, data: { address: '192.0.2.1' } }] as typeof reply.answer;
  return wire.encodeMessage(reply);
}

/** An upstream answering every query with one A record, on UDP and on TCP (same port; TCP connections stay open for reuse). */
async function answeringUpstream(): Promise<{ port: number; close(): void }> {
  const tcp = net.createServer((c) => {
    let buf = Buffer.alloc(0);
    c.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        const out = answer(buf.subarray(2, 2 + buf.readUInt16BE(0)));
        buf = buf.subarray(2 + buf.readUInt16BE(0));
        const framed = Buffer.alloc(out.length + 2);
        framed.writeUInt16BE(out.length, 0);
        framed.set(out, 2);
        c.write(framed);
      }
    });
    c.on('error', () => { /* the forwarder closed it */ });
  });
  await new Promise<void>((resolve) => { tcp.listen(0, '127.0.0.1', resolve); });
  const port = (tcp.address() as net.AddressInfo).port;
  const udp = dgram.createSocket('udp4');
  udp.on('message', (m, r) => { udp.send(answer(m), r.port, r.address); });
  await new Promise<void>((resolve) => { udp.bind(port, '127.0.0.1', resolve); });
  return { port, close() { udp.close(); tcp.close(); } };
}

/** A UDP upstream that never answers (timeouts, failed health checks). */
function silentUpstream(): Promise<dgram.Socket> {
  const s = dgram.createSocket('udp4');
  s.on('message', () => { /* dropped */ });
  return new Promise((resolve) => { s.bind(0, '127.0.0.1', () => { resolve(s); }); });
}

function sampleNames(text: string): Set<string> {
  const out = new Set<string>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    out.add(/^[A-Za-z_:][A-Za-z0-9_:]*/.exec(line)![0]);
  }
  return out;
}

test('every metric the Grafana dashboard queries is on a live nodens\'s /metrics, and Prometheus evaluates every panel', { timeout: 120_000 }, async () => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
  const all = queries(dashboard);
  assert.ok(all.length >= 20, `only ${all.length} queries in the dashboard`);

  const up = await answeringUpstream();
  const silent = await silentUpstream();
  const metricsPort = await freePort();
  const upAddr = `127.0.0.1:${up.port}`;
  const silentAddr = `127.0.0.1:${(silent.address()).port}`;
  // Block 1: cache + forward (the silent upstream first: timeouts, then failed health checks).
  // Block 2 forwards to nodens itself: the loop guard detects it and quarantines the upstream.
  const dns = await startProcess(`.:{PORT} {
    bind 127.0.0.1
    prometheus 127.0.0.1:${metricsPort}
    errors
    cache 30
    loop {
    }
    forward . ${silentAddr} ${upAddr} {
        policy sequential
        read_timeout 200ms
        health_check 500ms
    }
}
loop.test:{PORT} {
    bind 127.0.0.1
    prometheus 127.0.0.1:${metricsPort}
    loop {
    }
    forward . 127.0.0.1:{PORT}
}
`);
  const dir = mkdtempSync(join(tmpdir(), 'nodens-grafana-'));
  let prom: ChildProcess | undefined;
  let promOut = '';
  let traffic = true;
  let trafficDone: Promise<void> = Promise.resolve();
  try {
    // Traffic: distinct names (misses, upstream queries), repeats (cache hits), a burst of identical
    // queries (coalescing), DO and TCP queries, a name in the looping zone.
    for (let i = 0; i < 6; i++) await query(dns.port, `n${i}.example.org.`, i % 2 ? 'A' : 'AAAA');
    for (let i = 0; i < 6; i++) await query(dns.port, `n${i}.example.org.`, i % 2 ? 'A' : 'AAAA');
    await Promise.all(Array.from({ length: 20 }, () => query(dns.port, 'burst.example.org.', 'A')));
    // With the DO bit; and over TCP, which forward uses upstream too (the second reuses the connection).
    await query(dns.port, 'do.example.org.', 'A', { dnssec: true });
    for (let i = 0; i < 3; i++) await query(dns.port, `tcp${i}.example.org.`, 'A', { tcp: true });
    await query(dns.port, 'x.loop.test.', 'A').catch(() => undefined);

    const missing = await until('every dashboard metric on /metrics', async () => {
      const names = sampleNames((await get(metricsPort, '/metrics')).body);
      const absent = all.flatMap(([where, e]) => metricNames(e).filter((n) => !names.has(n)).map((n) => `${n} (${where})`));
      return absent.length === 0 ? [] : undefined;
    }, 20_000, 250).catch(async () => {
      const names = sampleNames((await get(metricsPort, '/metrics')).body);
      return all.flatMap(([where, e]) => metricNames(e).filter((n) => !names.has(n)).map((n) => `${n} (${where})`));
    });
    assert.deepEqual(missing, [], 'dashboard metrics missing from /metrics');

    // A real Prometheus: every panel query returns a result once a few scrapes are in.
    const promPort = await freePort();
    writeFileSync(join(dir, 'prometheus.yml'), [
      'global:', '  scrape_interval: 1s', '  evaluation_interval: 1s', 'scrape_configs:', '  - job_name: nodens',
      '    static_configs:', `      - targets: ['127.0.0.1:${metricsPort}']`, '',
    ].join('\n'));
    prom = spawn('prometheus', [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${promPort}`, '--log.level=warn'], { stdio: ['ignore', 'pipe', 'pipe'] });
    prom.on('error', (e) => { promOut += `spawn error: ${e.message} (apt-get install -y prometheus)\n`; });
    prom.stdout!.on('data', (d: Buffer) => { promOut += d.toString(); });
    prom.stderr!.on('data', (d: Buffer) => { promOut += d.toString(); });
    // Queries keep coming while Prometheus scrapes (bounded: 60 s at most, one every 50 ms).
    trafficDone = (async () => {
      const end = Date.now() + 60_000;
      for (let i = 0; traffic && Date.now() < end; i++) {
        await query(dns.port, `t${i % 40}.example.org.`, 'A').catch(() => undefined);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const evaluate = async (expr: string): Promise<{ status: string; n: number; error?: string }> => {
      const e = expr.replaceAll('$__rate_interval', '5s').replaceAll('$instance', '.+');
      const r = await get(promPort, `/api/v1/query?query=${encodeURIComponent(e)}`, 3000);
      const body = JSON.parse(r.body) as { status: string; error?: string; data?: { result: unknown[] } };
      return { status: body.status, n: body.data?.result.length ?? 0, error: body.error };
    };
    await until('Prometheus to have a few scrapes of nodens', async () => {
      if (prom!.exitCode !== null || promOut.includes('spawn error')) throw new Error(`prometheus exited:\n${promOut}`);
      const r = await get(promPort, `/api/v1/query?query=${encodeURIComponent('count_over_time(up{job="nodens"}[1m])')}`, 2000).catch(() => undefined);
      if (r?.status !== 200) return undefined;
      const v = (JSON.parse(r.body) as { data: { result: Array<{ value: [number, string] }> } }).data.result[0]?.value[1];
      return v !== undefined && Number(v) >= 4 ? true : undefined;
    }, 45_000, 500).catch((e: Error) => { throw new Error(`${e.message}\nprometheus output:\n${promOut}`); });
    const empty: string[] = [];
    for (const [where, expr] of all) {
      const r = await evaluate(expr);
      assert.equal(r.status, 'success', `${where}: ${expr}: ${r.error ?? ''}`);
      if (r.n === 0) empty.push(`${where}: ${expr}`);
    }
    assert.deepEqual(empty, [], 'panel queries with no result');
  } finally {
    traffic = false;
    await trafficDone;
    if (prom !== undefined && prom.exitCode === null) {
      const exited = new Promise((r) => { prom!.once('exit', r); });
      prom.kill('SIGTERM');
      const t = setTimeout(() => { prom!.kill('SIGKILL'); }, 5000);
      await exited;
      clearTimeout(t);
    }
    await dns.stop();
    up.close();
    silent.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
