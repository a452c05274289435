// A real Prometheus (Debian's `prometheus` package) scrapes bin/nodens, and its
// HTTP API returns coredns_dns_requests_total for the queries this test sent.
// Bounded to 60 s; Prometheus is killed afterwards.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startProcess, freePort } from '../helpers/server.ts';
import { get, query, until } from './prometheus-util.ts';

const QUERIES = 37;

test('Prometheus scrapes nodens: its API returns coredns_dns_requests_total', { timeout: 60000 }, async () => {
  const metricsPort = await freePort();
  const promPort = await freePort();
  const dns = await startProcess(`.:{PORT} {\n prometheus 127.0.0.1:${metricsPort}\n whoami\n}\n`);
  const dir = mkdtempSync(join(tmpdir(), 'nodens-prometheus-'));
  let prom: ChildProcess | undefined;
  let promOut = '';
  try {
    for (let i = 0; i < QUERIES; i++) await query(dns.port, `q${i}.example.org.`, i % 2 ? 'A' : 'AAAA');
    writeFileSync(join(dir, 'prometheus.yml'), [
      'global:',
      '  scrape_interval: 1s',
      '  evaluation_interval: 1s',
      'scrape_configs:',
      '  - job_name: nodens',
      '    static_configs:',
      `      - targets: ['127.0.0.1:${metricsPort}']`,
      '',
    ].join('\n'));
    try {
      prom = spawn('prometheus', [
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${promPort}`,
        '--log.level=warn',
      ], { stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      throw new Error(`cannot start prometheus (apt-get install -y prometheus): ${String(e)}`);
    }
    prom.on('error', (e) => { promOut += `spawn error: ${e.message} (apt-get install -y prometheus)\n`; });
    prom.stdout!.on('data', (d: Buffer) => { promOut += d.toString(); });
    prom.stderr!.on('data', (d: Buffer) => { promOut += d.toString(); });

    const q = encodeURIComponent('sum(coredns_dns_requests_total{job="nodens"})');
    const total = await until('Prometheus to report the queries', async () => {
      if (prom!.exitCode !== null || promOut.includes('spawn error')) throw new Error(`prometheus exited:\n${promOut}`);
      const r = await get(promPort, `/api/v1/query?query=${q}`, 2000);
      if (r.status !== 200) return undefined;
      const body = JSON.parse(r.body) as { status: string; data: { result: { value: [number, string] }[] } };
      const v = body.data.result[0]?.value[1];
      return v !== undefined && Number(v) === QUERIES ? Number(v) : undefined;
    }, 45000, 500).catch((e: Error) => { throw new Error(`${e.message}\nprometheus output:\n${promOut}`); });
    assert.equal(total, QUERIES);

    // Per-type series exist with CoreDNS's labels.
    const byType = await get(promPort, `/api/v1/query?query=${encodeURIComponent('coredns_dns_requests_total{type="AAAA"}')}`);
    const res = (JSON.parse(byType.body) as { data: { result: { metric: Record<string, string>; value: [number, string] }[] } }).data.result;
    assert.equal(res.length, 1);
    assert.equal(Number(res[0]!.value[1]), Math.ceil(QUERIES / 2));
    assert.deepEqual(
      Object.keys(res[0]!.metric).filter((k) => !['__name__', 'instance', 'job'].includes(k)).sort(),
      ['family', 'proto', 'server', 'type', 'zone'], // Prometheus stores no empty label: view="" is absent, as with CoreDNS
    );
    assert.equal(res[0]!.metric.server, `dns://:${dns.port}`);
  } finally {
    if (prom !== undefined && prom.exitCode === null) {
      const exited = new Promise((r) => { prom!.once('exit', r); });
      prom.kill('SIGTERM');
      const t = setTimeout(() => { prom!.kill('SIGKILL'); }, 5000);
      await exited;
      clearTimeout(t);
    }
    await dns.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
