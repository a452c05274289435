// prometheus end to end: the server metrics with CoreDNS's names, types, labels
// and buckets after real queries, the zone/type/plugin label rules, dropped
// queries, plugin_enabled across reloads, setup errors, and the endpoint.

import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import type { PluginDefinition } from '../../src/index.ts';
import { PluginError } from '../../src/index.ts';
import { startInProcess, freePort, logLines } from '../helpers/server.ts';
import { boundPort } from '../../src/plugin/pkg/httpserver.ts';
import { TIME_BUCKETS } from '../../src/plugin/pkg/metrics.ts';
import { qTypeLabel } from '../../src/plugin/prometheus/vars.ts';
import { get, query, scrape, value, type Family } from './prometheus-util.ts';
import { COREDNS_VERSION } from '../../src/version.ts';

/** `fail` returns SERVFAIL with an error, writing nothing. */
const fail: PluginDefinition = {
  name: 'fail',
  setup(c) {
    c.addPlugin(() => ({ name: 'fail', serveDNS: () => { throw new PluginError(2, 'plugin/fail: nope'); } }));
  },
};

function labelNames(f: Family | undefined): string[] {
  const names = new Set<string>();
  for (const s of f?.samples ?? []) for (const k of Object.keys(s.labels)) if (k !== 'le') names.add(k);
  return [...names].sort();
}

describe('prometheus', () => {
  test('server metrics after real queries: names, types, labels, rules', async () => {
    const other = await freePort();
    const s = await startInProcess(
      `.:0 {\n prometheus 127.0.0.1:0\n log\n whoami\n}\n` +
      `example.org:0 sub.example.org:0 {\n prometheus 127.0.0.1:0\n fail\n}\n` +
      `example.net:${other} {\n whoami\n}\n`, { plugins: [{ plugin: fail, before: 'whoami' }] });
    try {
      const port = boundPort(s.runtime.instance, '127.0.0.1:0')!;
      const dns = s.port;
      const server = 'dns://:0'; // the configured address, as CoreDNS labels it
      await query(dns, 'a.example.com.', 'A');
      await query(dns, 'a.example.com.', 'AAAA', { tcp: true });
      await query(dns, 'a.example.com.', 'NAPTR', { dnssec: true });
      await query(dns, 'x.sub.example.org.', 'A');
      await query(dns, 'x.example.org.', 'MX');
      await query(dns, 'a.example.com.', 'TXT', { klass: 'CH' }); // refused by the server: zone `dropped`
      const m = await scrape(port);

      const types: Record<string, string> = {
        coredns_dns_requests_total: 'counter', coredns_dns_responses_total: 'counter',
        coredns_dns_request_duration_seconds: 'histogram', coredns_dns_request_size_bytes: 'histogram',
        coredns_dns_response_size_bytes: 'histogram', coredns_dns_do_requests_total: 'counter',
        coredns_plugin_enabled: 'gauge', coredns_build_info: 'gauge', coredns_panics_total: 'counter',
        coredns_reload_failed_total: 'counter', coredns_health_request_duration_seconds: 'histogram',
        coredns_health_request_failures_total: 'counter', process_cpu_seconds_total: 'counter',
        process_resident_memory_bytes: 'gauge', process_open_fds: 'gauge', process_max_fds: 'gauge',
        process_start_time_seconds: 'gauge', process_virtual_memory_bytes: 'gauge',
      };
      for (const [name, type] of Object.entries(types)) assert.equal(m.get(name)?.type, type, name);
      assert.deepEqual(labelNames(m.get('coredns_dns_requests_total')), ['family', 'proto', 'server', 'type', 'view', 'zone']);
      assert.deepEqual(labelNames(m.get('coredns_dns_responses_total')), ['plugin', 'rcode', 'server', 'view', 'zone']);
      assert.deepEqual(labelNames(m.get('coredns_dns_request_duration_seconds')), ['server', 'view', 'zone']);
      assert.deepEqual(labelNames(m.get('coredns_dns_request_size_bytes')), ['proto', 'server', 'view', 'zone']);
      assert.deepEqual(labelNames(m.get('coredns_dns_response_size_bytes')), ['proto', 'server', 'view', 'zone']);
      assert.deepEqual(labelNames(m.get('coredns_dns_do_requests_total')), ['server', 'view', 'zone']);
      assert.deepEqual(labelNames(m.get('coredns_plugin_enabled')), ['name', 'server', 'view', 'zone']);
      assert.deepEqual(labelNames(m.get('coredns_build_info')), ['goversion', 'revision', 'version']);

      const req = (want: Record<string, string>) => value(m, 'coredns_dns_requests_total', { server, view: '', ...want });
      assert.equal(req({ zone: '.', proto: 'udp', family: '1', type: 'A' }), 1);
      assert.equal(req({ zone: '.', proto: 'tcp', family: '1', type: 'AAAA' }), 1);
      assert.equal(req({ zone: '.', proto: 'udp', type: 'other' }), 1); // NAPTR is not a monitored type
      assert.equal(req({ zone: 'sub.example.org.', type: 'A' }), 1); // longest zone of the block
      assert.equal(req({ zone: 'example.org.', type: 'MX' }), 1);
      assert.equal(req({ zone: 'dropped', type: 'TXT' }), 1);
      assert.equal(value(m, 'coredns_dns_do_requests_total', { zone: '.' }), 1);

      const resp = (want: Record<string, string>) => value(m, 'coredns_dns_responses_total', { server, ...want });
      // The plugin after prometheus in the chain (log) is what CoreDNS reports for whoami's replies.
      assert.equal(resp({ zone: '.', rcode: 'NOERROR', plugin: 'log' }), 3);
      // Nothing written, the chain returned SERVFAIL: rcode from the status, no plugin.
      assert.equal(resp({ zone: 'example.org.', rcode: 'SERVFAIL', plugin: '' }), 1);
      assert.equal(resp({ zone: 'sub.example.org.', rcode: 'SERVFAIL', plugin: '' }), 1);
      assert.equal(resp({ zone: 'dropped', rcode: 'REFUSED', plugin: '' }), 1);
      // Unwritten replies have size 0 (CoreDNS measures what the chain wrote).
      assert.equal(value(m, 'coredns_dns_response_size_bytes_sum', { zone: 'example.org.' }), 0);
      assert.ok((value(m, 'coredns_dns_response_size_bytes_sum', { zone: '.', proto: 'udp' }) ?? 0) > 0);
      assert.equal(value(m, 'coredns_dns_request_size_bytes_count', { zone: '.' }), 3);

      const les = m.get('coredns_dns_request_duration_seconds')!.samples
        .filter((x) => x.name.endsWith('_bucket') && x.labels.zone === '.').map((x) => x.labels.le);
      assert.deepEqual(les, [...TIME_BUCKETS.map(String), '+Inf']);
      assert.equal(les[15], '8.192');
      const sizeLes = m.get('coredns_dns_request_size_bytes')!.samples
        .filter((x) => x.name.endsWith('_bucket') && x.labels.zone === '.' && x.labels.proto === 'udp').map((x) => x.labels.le);
      assert.deepEqual(sizeLes, ['0', '100', '200', '300', '400', '511', '1023', '2047', '4095', '8291', '16000', '32000', '48000', '64000', '+Inf']);

      // plugin_enabled: chain plugins of the blocks with prometheus, zone = first zone of the block.
      const enabled = m.get('coredns_plugin_enabled')!.samples.map((x) => `${x.labels.server} ${x.labels.zone} ${x.labels.name}`).sort();
      assert.deepEqual(enabled, [
        'dns://:0 . log', 'dns://:0 . prometheus', 'dns://:0 . whoami',
        'dns://:0 example.org. fail', 'dns://:0 example.org. prometheus',
      ].sort());
      assert.equal(value(m, 'coredns_build_info', { version: COREDNS_VERSION }), 1);
    } finally {
      await s.stop();
    }
  });

  test('coredns_plugin_enabled follows reloads; series of a removed prometheus go', async () => {
    const s = await startInProcess('.:0 {\n prometheus 127.0.0.1:0\n whoami\n}\n');
    try {
      const port = boundPort(s.runtime.instance, '127.0.0.1:0')!;
      const names = async () => (await scrape(port)).get('coredns_plugin_enabled')!.samples.map((x) => x.labels.name).sort();
      assert.deepEqual(await names(), ['prometheus', 'whoami']);
      assert.equal(await s.reload('.:0 {\n prometheus 127.0.0.1:0\n chaos\n whoami\n}\n'), undefined);
      assert.equal(boundPort(s.runtime.instance, '127.0.0.1:0'), port, 'same listener after reload');
      assert.deepEqual(await names(), ['chaos', 'prometheus', 'whoami']);
      // A failed reload leaves the old series.
      assert.ok(await s.reload('.:0 {\n prometheus 127.0.0.1:0\n nosuch\n}\n') instanceof Error);
      assert.deepEqual(await names(), ['chaos', 'prometheus', 'whoami']);
    } finally {
      await s.stop();
    }
  });

  test('the type label: monitored types by name, others "other"', () => {
    assert.equal(qTypeLabel(1), 'A');
    assert.equal(qTypeLabel(65), 'HTTPS');
    assert.equal(qTypeLabel(64), 'SVCB');
    assert.equal(qTypeLabel(252), 'AXFR');
    assert.equal(qTypeLabel(255), 'ANY');
    assert.equal(qTypeLabel(35), 'other');
    assert.equal(qTypeLabel(99), 'other');
  });

  test('setup errors carry CoreDNS\'s texts', async () => {
    await assert.rejects(startInProcess('.:0 {\n prometheus 9153\n}\n'), /plugin\/prometheus: address 9153: missing port in address/);
    await assert.rejects(startInProcess('.:0 {\n prometheus 127.0.0.1:0\n prometheus 127.0.0.1:0\n}\n'), /plugin\/prometheus: this plugin can only be used once per Server Block/);
    await assert.rejects(startInProcess('.:0 {\n prometheus 127.0.0.1:0 {\n  foo\n }\n}\n'), /plugin\/prometheus: Corefile:3 - Error during parsing: unknown option: foo/);
    await assert.rejects(startInProcess('.:0 {\n prometheus a:1 b:2\n}\n'), /Wrong argument count/);
    const s = await startInProcess('.:0 {\n prometheus 127.0.0.1:0 {\n  runtime_metrics\n }\n whoami\n}\n');
    await s.stop();
  });

  test('prometheus 0.0.0.0:PORT answers over IPv4 and IPv6, as Go listens on the IPv4 wildcard (dual stack)', async () => {
    const port = await freePort();
    const s = await startInProcess(`.:0 {\n prometheus 0.0.0.0:${port}\n whoami\n}\n`);
    try {
      assert.equal((await get(port, '/metrics', 3000, '127.0.0.1')).status, 200);
      assert.equal((await get(port, '/metrics', 3000, '::1')).status, 200);
    } finally {
      await s.stop();
    }
  });

  test('a listener error is logged and the server starts without the endpoint', async () => {
    const port = await freePort();
    const net = await import('node:net');
    const blocker = await new Promise<import('node:net').Server>((resolve) => {
      const srv = net.createServer();
      srv.listen(port, '127.0.0.1', () => { resolve(srv); });
    });
    const from = logLines.length;
    try {
      const s = await startInProcess(`.:0 {\n prometheus 127.0.0.1:${port}\n whoami\n}\n`);
      await s.stop();
      assert.ok(logLines.slice(from).some((l) => l.startsWith('[ERROR] Failed to start metrics handler: ') && l.includes('address already in use')),
        logLines.slice(from).join('\n'));
    } finally {
      blocker.close();
    }
  });

  test('/metrics only: other paths 404; the content type is the text format', async () => {
    const s = await startInProcess('.:0 {\n prometheus 127.0.0.1:0\n whoami\n}\n');
    try {
      const port = boundPort(s.runtime.instance, '127.0.0.1:0')!;
      const r = await get(port, '/metrics');
      assert.equal(r.status, 200);
      assert.match(String(r.headers['content-type']), /^text\/plain; version=0\.0\.4/);
      assert.equal((await get(port, '/')).status, 404);
    } finally {
      await s.stop();
    }
  });
});
