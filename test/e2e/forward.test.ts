// forward end to end: real sockets, in-test upstreams that misbehave in
// specific ways, and Debian's unbound as a well-behaved upstream.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { startInProcess, startProcess, freePort, logLines } from '../helpers/server.ts';
import { corednsBinary } from '../helpers/reference.ts';
import { exchange } from '../helpers/client.ts';
import { FakeUpstream, query, decode, startUnbound, type Unbound } from './forward-upstreams.ts';
import { registry } from '../../src/plugin/pkg/metrics.ts';

async function metric(name: string): Promise<string> {
  const text = await registry.metrics();
  return text.split('\n').filter((l) => l.startsWith(name)).join('\n');
}

describe('forward with unbound as upstream', () => {
  let ub: Unbound;
  before(async () => {
    ub = await startUnbound('example.test.', [
      'example.test. 300 IN SOA ns.example.test. h.example.test. 1 3600 600 86400 60',
      'www.example.test. 300 IN A 10.0.0.1',
      'big.example.test. 300 IN TXT "' + 'x'.repeat(200) + '"',
      ...Array.from({ length: 40 }, (_, i) => `many.example.test. 300 IN A 10.9.0.${i + 1}`),
    ]);
  });
  after(async () => { await ub.stop(); });

  test('answers through unbound over UDP and TCP, ID restored', async () => {
    const s = await startInProcess(`.:0 {\n forward . 127.0.0.1:${ub.port}\n}\n`);
    try {
      for (const tcp of [false, true]) {
        const q = query('www.example.test', 1, { id: 4321 });
        const r = decode(await exchange(s.port, q, { tcp }));
        assert.equal(r.id, 4321);
        assert.equal(r.rcode, 0);
        assert.deepEqual(r.answer.map((a) => (a.data as { address: string }).address), ['10.0.0.1']);
      }
      const nx = decode(await exchange(s.port, query('nope.example.test')));
      assert.equal(nx.rcode, 3);
    } finally { await s.stop(); }
  });

  test('a UDP reply too big for the client comes back truncated; prefer_udp retries TCP for TCP clients', async () => {
    const s = await startInProcess(`.:0 {\n forward . 127.0.0.1:${ub.port} {\n  prefer_udp\n }\n}\n`);
    try {
      const udp = decode(await exchange(s.port, query('many.example.test', 1, { edns: false })));
      assert.equal(udp.tc, true);
      const tcp = decode(await exchange(s.port, query('many.example.test', 1, { edns: false }), { tcp: true }));
      assert.equal(tcp.tc, false);
      assert.equal(tcp.answer.length, 40);
    } finally { await s.stop(); }
  });

  test('resolv.conf as TO: nameserver lines used, file changes followed without restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nodens-resolv-'));
    const file = join(dir, 'resolv.conf');
    const dead = await FakeUpstream.start(() => ({ kind: 'answer', addresses: ['192.0.2.99'] }));
    // Port is always 53 in resolv.conf; point at an address we can serve: 127.0.0.1 port 53 is not ours,
    // so use the nodens-specific file watcher with a second forward through a local block instead.
    writeFileSync(file, `# comment\nsearch example.test\nnameserver 127.0.0.2\n`);
    const s = await startInProcess(`.:0 {\n forward . ${file} {\n  resolvconf_reload 100ms\n }\n}\n`);
    try {
      const fwd = s.runtime.instance.blockConfigs?.()[0]?.handlers.find((h) => h.name === 'forward') as unknown as { upstreams(): { addr: string; origin: { file: string; line: number; source: string } }[] };
      assert.deepEqual(fwd.upstreams().map((u) => [u.addr, u.origin.file, u.origin.line, u.origin.source]), [['127.0.0.2:53', file, 3, 'resolvconf']]);
      writeFileSync(file, `nameserver 127.0.0.3\nnameserver 127.0.0.4 # x\n`);
      const t = new Date(Date.now() + 2000);
      utimesSync(file, t, t);
      const deadline = Date.now() + 3000;
      while (Date.now() < deadline && fwd.upstreams()[0]!.addr !== '127.0.0.3:53') await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual(fwd.upstreams().map((u) => [u.addr, u.origin.line]), [['127.0.0.3:53', 1], ['127.0.0.4:53', 2]]);
      assert.ok(logLines.some((l) => l.includes('[INFO] plugin/forward: Upstreams changed from [127.0.0.2:53] to [127.0.0.3:53, 127.0.0.4:53]')));
    } finally { await s.stop(); await dead.stop(); }
  });
});

describe('forward with misbehaving upstreams', () => {
  test('failover under every policy: a dropping upstream is skipped, the query answered by the other', async () => {
    for (const policy of ['random', 'round_robin', 'sequential']) {
      const bad = await FakeUpstream.start(() => ({ kind: 'drop' }));
      const good = await FakeUpstream.start(() => ({ kind: 'answer', addresses: ['192.0.2.7'] }));
      const s = await startInProcess(`.:0 {\n forward . ${bad.addr} ${good.addr} {\n  policy ${policy}\n  read_timeout 300ms\n }\n}\n`);
      try {
        for (let i = 0; i < 4; i++) {
          const r = decode(await exchange(s.port, query(`p${i}.${policy.replace('_', '')}.example`), { timeoutMs: 3000 }));
          assert.equal(r.rcode, 0, policy);
          assert.equal((r.answer[0]!.data as { address: string }).address, '192.0.2.7');
        }
        if (policy === 'sequential') assert.equal(bad.seen.filter((x) => x.type === 1).length, 4, 'sequential tries the first upstream first, always');
        assert.equal(good.seen.filter((x) => x.type === 1).length, 4);
      } finally { await s.stop(); await bad.stop(); await good.stop(); }
    }
  });

  test('round_robin starts at the second upstream and rotates', async () => {
    const ups = await Promise.all([0, 1, 2].map((i) => FakeUpstream.start(() => ({ kind: 'answer', addresses: [`192.0.2.${i}`] }))));
    const s = await startInProcess(`.:0 {\n forward . ${ups.map((u) => u.addr).join(' ')} {\n  policy round_robin\n  coalesce off\n }\n}\n`);
    try {
      const got: string[] = [];
      for (let i = 0; i < 6; i++) got.push((decode(await exchange(s.port, query(`rr${i}.example`))).answer[0]!.data as { address: string }).address);
      assert.deepEqual(got, ['192.0.2.1', '192.0.2.2', '192.0.2.0', '192.0.2.1', '192.0.2.2', '192.0.2.0']);
    } finally { await s.stop(); await Promise.all(ups.map((u) => u.stop())); }
  });

  test('all upstreams down: SERVFAIL within the 5 s deadline, error logged as an i/o timeout', async () => {
    const a = await FakeUpstream.start(() => ({ kind: 'drop' }));
    const b = await FakeUpstream.start(() => ({ kind: 'drop' }));
    const c = await FakeUpstream.start(() => ({ kind: 'drop' }));
    const s = await startInProcess(`.:0 {\n errors\n forward . ${a.addr} ${b.addr} ${c.addr}\n}\n`);
    try {
      const t0 = Date.now();
      const r = decode(await exchange(s.port, query('down.example'), { timeoutMs: 8000 }));
      const took = Date.now() - t0;
      assert.equal(r.rcode, 2);
      assert.ok(took <= 5300, `took ${took} ms`);
      assert.ok(took >= 4500, `took ${took} ms (deadline not used)`);
      assert.ok(logLines.some((l) => /\[ERROR\] plugin\/errors: 2 down\.example\. A: read udp 127\.0\.0\.1:\d+->127\.0\.0\.1:\d+: i\/o timeout/.test(l)), 'timeout logged');
      assert.match(await metric('nodens_proxy_timeouts_total'), /nodens_proxy_timeouts_total\{proxy_name="forward",to="127\.0\.0\.1:\d+",proto="udp"\} [1-9]/);
    } finally { await s.stop(); await Promise.all([a.stop(), b.stop(), c.stop()]); }
  });

  test('single dropping upstream: two attempts of read_timeout, then SERVFAIL', async () => {
    const a = await FakeUpstream.start(() => ({ kind: 'drop' }));
    const s = await startInProcess(`.:0 {\n forward . ${a.addr} {\n  read_timeout 400ms\n }\n}\n`);
    try {
      const t0 = Date.now();
      const r = decode(await exchange(s.port, query('two.example'), { timeoutMs: 5000 }));
      assert.equal(r.rcode, 2);
      assert.equal(a.count('two.example.'), 2);
      assert.ok(Date.now() - t0 < 1500);
    } finally { await s.stop(); await a.stop(); }
  });

  test('failfast_all_unhealthy_upstreams: SERVFAIL at once when every upstream is down', async () => {
    const closed = await freePort(); // nothing listens: ICMP port unreachable, checks fail at once
    const s = await startInProcess(`.:0 {\n forward . 127.0.0.1:${closed} {\n  max_fails 1\n  health_check 50ms\n  failfast_all_unhealthy_upstreams\n }\n}\n`);
    try {
      assert.equal(decode(await exchange(s.port, query('x1.example'), { timeoutMs: 6000 })).rcode, 2);
      await new Promise((r) => setTimeout(r, 300)); // health checks fail meanwhile
      const t0 = Date.now();
      const r = decode(await exchange(s.port, query('x2.example'), { timeoutMs: 3000 }));
      assert.equal(r.rcode, 2);
      assert.ok(Date.now() - t0 < 100, 'failed fast');
      assert.match(await metric('coredns_forward_healthcheck_broken_total'), /coredns_forward_healthcheck_broken_total [1-9]/);
      assert.match(await metric('coredns_proxy_healthcheck_failures_total'), new RegExp(`to="127.0.0.1:${closed}"\\} [2-9]`));
    } finally { await s.stop(); }
  });

  test('health checks: `. IN NS` probes after a failure, RD as configured; periodic checks when asked', async () => {
    const a = await FakeUpstream.start((q) => (q.question[0]!.type === 2 ? { kind: 'answer' } : { kind: 'drop' }));
    const s = await startInProcess(`.:0 {\n forward . ${a.addr} {\n  read_timeout 100ms\n  health_check 100ms no_rec domain probe.example periodic 150ms\n }\n}\n`);
    try {
      await new Promise((r) => setTimeout(r, 400));
      const probes = a.seen.filter((x) => x.type === 2);
      assert.ok(probes.length >= 2, 'periodic probes sent before any failure');
      assert.equal(probes[0]!.name, 'probe.example.');
      assert.equal(probes[0]!.rd, false);
    } finally { await s.stop(); await a.stop(); }
  });

  test('failover RCODE: SERVFAIL from one upstream makes forward try the next', async () => {
    const sf = await FakeUpstream.start(() => ({ kind: 'answer', rcode: 2 }));
    const ok = await FakeUpstream.start(() => ({ kind: 'answer', addresses: ['192.0.2.8'] }));
    const s = await startInProcess(`.:0 {\n forward . ${sf.addr} ${ok.addr} {\n  policy sequential\n  failover SERVFAIL\n }\n}\n`);
    const s2 = await startInProcess(`.:0 {\n forward . ${sf.addr} ${ok.addr} {\n  policy sequential\n }\n}\n`);
    try {
      assert.equal(decode(await exchange(s.port, query('fo.example'))).rcode, 0);
      assert.equal(decode(await exchange(s2.port, query('fo2.example'))).rcode, 2, 'without failover the SERVFAIL is passed on');
    } finally { await s.stop(); await s2.stop(); await sf.stop(); await ok.stop(); }
  });

  test('next RCODE hands the query to the following forward', async () => {
    const nx = await FakeUpstream.start(() => ({ kind: 'answer', rcode: 3, soa: true }));
    const ok = await FakeUpstream.start(() => ({ kind: 'answer', addresses: ['192.0.2.9'] }));
    const s = await startInProcess(`.:0 {\n forward . ${nx.addr} {\n  next NXDOMAIN\n }\n forward . ${ok.addr}\n}\n`);
    try {
      const r = decode(await exchange(s.port, query('nx.example')));
      assert.equal(r.rcode, 0);
      assert.equal((r.answer[0]!.data as { address: string }).address, '192.0.2.9');
    } finally { await s.stop(); await nx.stop(); await ok.stop(); }
  });

  test('RFC 5452: replies with a wrong ID, from a wrong port or for another question are not accepted', async () => {
    let mode: 'id' | 'port' | 'question' = 'id';
    const up = await FakeUpstream.start(() => {
      if (mode === 'id') return { kind: 'answer', idDelta: 1, addresses: ['6.6.6.6'] };
      if (mode === 'port') return { kind: 'answer', fromOtherPort: true, addresses: ['6.6.6.6'] };
      return { kind: 'answer', otherName: 'evil.example.', addresses: ['6.6.6.6'] };
    });
    // servfail 0: CoreDNS 1.15.0 caches the SERVFAIL of a failed upstream; here only what the upstream sent may be cached.
    const s = await startInProcess(`.:0 {\n cache 30 {\n  servfail 0\n }\n forward . ${up.addr} {\n  read_timeout 300ms\n }\n}\n`);
    try {
      for (const m of ['id', 'port', 'question'] as const) {
        mode = m;
        const r = decode(await exchange(s.port, query(`spoof-${m}.example`), { timeoutMs: 4000 }));
        assert.ok(r.answer.every((a) => (a.data as { address: string }).address !== '6.6.6.6'), `${m}: spoofed answer returned`);
        assert.ok(r.rcode === 2 || r.rcode === 1, `${m}: rcode ${r.rcode}`);
      }
      // nothing spoofed went into the cache either: a good upstream answer shows up next
      up.behave = () => ({ kind: 'answer', addresses: ['192.0.2.10'] });
      for (const m of ['id', 'port', 'question']) {
        const r = decode(await exchange(s.port, query(`spoof-${m}.example`), { timeoutMs: 4000 }));
        assert.equal((r.answer[0]!.data as { address: string }).address, '192.0.2.10');
      }
    } finally { await s.stop(); await up.stop(); }
  });

  test('every upstream query uses a fresh random ID and source port', async () => {
    const ids = new Set<number>();
    const up = await FakeUpstream.start((q) => { ids.add(q.id); return { kind: 'answer' }; });
    const s = await startInProcess(`.:0 {\n forward . ${up.addr} {\n  expire 0s\n }\n}\n`);
    try {
      for (let i = 0; i < 20; i++) {
        const r = decode(await exchange(s.port, query(`id${i}.example`, 1, { id: 1000 })));
        assert.equal(r.id, 1000);
      }
      assert.ok(ids.size >= 19, `ids not random: ${[...ids].join(',')}`);
      const ports = new Set(up.seen.filter((x) => x.type === 1).map((x) => x.srcPort));
      assert.ok(ports.size >= 19, `source ports reused: ${[...ports].join(',')}`);
      assert.ok(!ids.has(1000) || ids.size > 1);
    } finally { await s.stop(); await up.stop(); }
  });

  test('truncated UDP reply with prefer_udp is retried over TCP', async () => {
    const up = await FakeUpstream.start(() => ({ kind: 'answer', tc: true, addresses: ['192.0.2.11'] }));
    const s = await startInProcess(`.:0 {\n forward . ${up.addr} {\n  prefer_udp\n }\n}\n`);
    try {
      const r = decode(await exchange(s.port, query('tc.example'), { tcp: true }));
      assert.equal(r.tc, false);
      assert.equal((r.answer[0]!.data as { address: string }).address, '192.0.2.11');
      // UDP twice: a truncated reply to the 0x20 query is asked for again as spelled, before prefer_udp's TCP retry
      assert.deepEqual(up.seen.filter((x) => x.name === 'tc.example.').map((x) => x.proto), ['udp', 'udp', 'tcp']);
    } finally { await s.stop(); await up.stop(); }
  });

  test('a TCP upstream that resets the connection fails over; force_tcp uses TCP', async () => {
    const rst = await FakeUpstream.start(() => ({ kind: 'reset' }));
    const ok = await FakeUpstream.start(() => ({ kind: 'answer', addresses: ['192.0.2.12'] }));
    const s = await startInProcess(`.:0 {\n forward . ${rst.addr} ${ok.addr} {\n  force_tcp\n  policy sequential\n }\n}\n`);
    try {
      const r = decode(await exchange(s.port, query('rst.example')));
      assert.equal(r.rcode, 0);
      assert.equal(ok.seen[0]!.proto, 'tcp');
      assert.ok(rst.count('rst.example.') >= 1);
    } finally { await s.stop(); await rst.stop(); await ok.stop(); }
  });

  test('TCP connections are reused between queries', async () => {
    const up = await FakeUpstream.start(() => ({ kind: 'answer' }));
    const s = await startInProcess(`.:0 {\n forward . ${up.addr} {\n  force_tcp\n }\n}\n`);
    try {
      for (let i = 0; i < 5; i++) await exchange(s.port, query(`reuse${i}.example`));
      assert.match(await metric('coredns_proxy_conn_cache_hits_total'), new RegExp(`to="${up.addr}",proto="tcp"\\} [4-9]`));
    } finally { await s.stop(); await up.stop(); }
  });

  test('coalescing: 100 identical concurrent queries make exactly 1 upstream query', async () => {
    const up = await FakeUpstream.start(() => ({ kind: 'answer', delayMs: 200, addresses: ['192.0.2.13'] }));
    const s = await startInProcess(`.:0 {\n forward . ${up.addr}\n}\n`);
    try {
      const rs = await Promise.all(Array.from({ length: 100 }, (_, i) => exchange(s.port, query('Same.Example', 1, { id: i + 1 }), { timeoutMs: 4000 })));
      assert.equal(up.count('same.example.'), 1);
      rs.forEach((b, i) => {
        const r = decode(b);
        assert.equal(r.id, i + 1);
        assert.equal(r.question[0]!.name, 'Same.Example.');
        assert.equal((r.answer[0]!.data as { address: string }).address, '192.0.2.13');
      });
    } finally { await s.stop(); await up.stop(); }
  });

  test('max_concurrent: excess queries are REFUSED and counted', async () => {
    const up = await FakeUpstream.start(() => ({ kind: 'answer', delayMs: 300 }));
    const s = await startInProcess(`.:0 {\n forward . ${up.addr} {\n  max_concurrent 2\n  coalesce off\n }\n}\n`);
    try {
      const rs = await Promise.all([0, 1, 2, 3].map((i) => exchange(s.port, query(`mc${i}.example`), { timeoutMs: 3000 })));
      const rcodes = rs.map((b) => decode(b).rcode).sort();
      assert.deepEqual(rcodes, [0, 0, 5, 5]);
      assert.match(await metric('coredns_forward_max_concurrent_rejects_total'), /coredns_forward_max_concurrent_rejects_total [1-9]/);
    } finally { await s.stop(); await up.stop(); }
  });

  test('except: names below an excepted zone go to the next plugin', async () => {
    const up = await FakeUpstream.start(() => ({ kind: 'answer' }));
    const s = await startInProcess(`.:0 {\n forward . ${up.addr} {\n  except skip.example\n }\n whoami\n}\n`);
    try {
      const r = decode(await exchange(s.port, query('a.skip.example')));
      assert.equal(up.count('a.skip.example.'), 0);
      assert.equal(r.additional.length > 0 || r.answer.length === 0, true);
    } finally { await s.stop(); await up.stop(); }
  });

  test('setup errors use CoreDNS messages', async () => {
    await assert.rejects(startInProcess('.:0 {\n forward . 127.0.0.1 {\n  policy foo\n }\n}\n'), /plugin\/forward: Corefile:3 - Error during parsing: unknown policy 'foo'/);
    await assert.rejects(startInProcess('.:0 {\n forward . 127.0.0.1 {\n  failover NOERROR\n }\n}\n'), /plugin\/forward: NoError cannot be used in failover/);
    await assert.rejects(startInProcess('.:0 {\n forward . 127.0.0.1 {\n  next FOO\n }\n}\n'), /plugin\/forward: FOO is not a valid rcode/);
    await assert.rejects(startInProcess('.:0 {\n forward . grpc://127.0.0.1\n}\n'), /'grpc' is not supported as a destination protocol in forward/);
    await assert.rejects(startInProcess('.:0 {\n forward . 127.0.0.1 {\n  bogus\n }\n}\n'), /unknown property 'bogus'/);
    await assert.rejects(startInProcess(`.:0 {\n forward . ${Array.from({ length: 16 }, (_, i) => `127.0.0.${i + 1}`).join(' ')}\n}\n`), /more than 15 TOs configured: 16/);
    await assert.rejects(startInProcess('.:0 {\n forward . 127.0.0.1 {\n  max_concurrent -1\n }\n}\n'), /max_concurrent can't be negative: -1/);
  });
});

describe('source ports (RFC 5452)', () => {
  test('every upstream UDP query leaves from a fresh source port with a fresh ID by default', async () => {
    const up = await FakeUpstream.start(() => ({ kind: 'answer', addresses: ['192.0.2.5'] }));
    const s = await startInProcess(`.:0 {\n forward . 127.0.0.1:${up.port}\n}\n`);
    try {
      for (let i = 0; i < 30; i++) await exchange(s.port, query(`n${i}.ports.example`));
      const udp = up.seen.filter((x) => x.proto === 'udp');
      assert.equal(udp.length, 30);
      // A port drawn again at random by chance: 1 in 60 among 30 queries with the kernel's 28232 ports (no addon),
      // 1 in 140 over the addon's 64512; two repeats, under 1 in 10^4.
      assert.ok(new Set(udp.map((x) => x.srcPort)).size >= 29, `ports: ${udp.map((x) => x.srcPort).join(',')}`);
      assert.ok(new Set(udp.map((x) => x.id)).size >= 29);
    } finally { await s.stop(); await up.stop(); }
  });

  test('reuse_udp_sockets pools UDP sockets as CoreDNS does', async () => {
    const up = await FakeUpstream.start(() => ({ kind: 'answer', addresses: ['192.0.2.5'] }));
    const s = await startInProcess(`.:0 {\n forward . 127.0.0.1:${up.port} {\n  reuse_udp_sockets\n }\n}\n`);
    try {
      for (let i = 0; i < 30; i++) await exchange(s.port, query(`n${i}.ports.example`));
      const udp = up.seen.filter((x) => x.proto === 'udp');
      assert.equal(udp.length, 30);
      assert.equal(new Set(udp.map((x) => x.srcPort)).size, 1);
    } finally { await s.stop(); await up.stop(); }
  });
});

/** The rcode the reference CoreDNS gives for www.dot.example with `corefile` ({PORT} replaced) and `env` added. */
async function corednsRcode(corefile: string, env: Record<string, string>): Promise<number> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'nodens-coredns-'));
  writeFileSync(join(dir, 'Corefile'), corefile.replaceAll('{PORT}', String(port)));
  const proc = spawn(corednsBinary(), ['-conf', 'Corefile'], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  try {
    // Up once it prints its version banner (after every listener is open).
    await new Promise<void>((resolve, reject) => {
      let out = '';
      proc.stdout.on('data', (b: Buffer) => { out += b.toString(); if (out.includes('CoreDNS-')) resolve(); });
      proc.once('exit', (code) => reject(new Error(`CoreDNS exited ${code}: ${out}`)));
    });
    return decode(await exchange(port, query('www.dot.example'), { timeoutMs: 8000 })).rcode;
  } finally { proc.kill(); }
}

describe('tls:// upstream: DNS over TLS to a real unbound', () => {
  let ub: Unbound;
  let tlsPort = 0;
  let certFile = '';
  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nodens-dot-'));
    certFile = join(dir, 'cert.pem');
    const keyFile = join(dir, 'key.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1',
      '-subj', '/CN=dns.example.test', '-addext', 'subjectAltName=DNS:dns.example.test'], { stdio: 'ignore' });
    tlsPort = await freePort();
    ub = await startUnbound('dot.example.', ['www.dot.example. 300 IN A 192.0.2.53'], { port: tlsPort, keyFile, certFile });
  });
  after(async () => { await ub.stop(); });

  test('answers come over TLS with the CA and server name given', async () => {
    const s = await startInProcess(`.:0 {\n forward . tls://127.0.0.1:${tlsPort} {\n  tls ${certFile}\n  tls_servername dns.example.test\n }\n}\n`);
    try {
      const r = decode(await exchange(s.port, query('www.dot.example')));
      assert.equal(r.rcode, 0);
      assert.deepEqual(r.answer.map((a) => (a.data as { address: string }).address), ['192.0.2.53']);
      // a second query reuses the TLS connection
      assert.equal(decode(await exchange(s.port, query('www.dot.example'))).rcode, 0);
      assert.match(await metric('coredns_proxy_conn_cache_hits_total'), /proto="tcp-tls"\} [1-9]/);
    } finally { await s.stop(); }
  });

  // Without a CA in the Corefile the upstream is verified against the system's store, as CoreDNS's Go does:
  // bin/nodens runs Node on OpenSSL's store, which SSL_CERT_FILE names (Node's bundled roots would ignore it).
  test('bin/nodens without a CA trusts the system store that SSL_CERT_FILE names, as CoreDNS', async () => {
    const corefile = `.:{PORT} {\n forward . tls://127.0.0.1:${tlsPort} {\n  tls_servername dns.example.test\n }\n}\n`;
    const trusted = await startProcess(corefile, { env: { SSL_CERT_FILE: certFile, NODE_EXTRA_CA_CERTS: '' } });
    try {
      const r = decode(await exchange(trusted.port, query('www.dot.example'), { timeoutMs: 8000 }));
      assert.equal(r.rcode, 0);
      assert.deepEqual(r.answer.map((a) => (a.data as { address: string }).address), ['192.0.2.53']);
    } finally { await trusted.stop(); }
    // A store without the upstream's issuer: the handshake fails, SERVFAIL.
    const other = join(mkdtempSync(join(tmpdir(), 'nodens-store-')), 'other.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', '/dev/null',
      '-out', other, '-days', '1', '-subj', '/CN=other.example.test'], { stdio: 'ignore' });
    const untrusted = await startProcess(corefile, { env: { SSL_CERT_FILE: other, NODE_EXTRA_CA_CERTS: '' } });
    try {
      const r = decode(await exchange(untrusted.port, query('www.dot.example'), { timeoutMs: 8000 }));
      assert.equal(r.rcode, 2);
    } finally { await untrusted.stop(); }
    // The reference, the same Corefile and stores: the same two answers.
    for (const [store, rcode] of [[certFile, 0], [other, 2]] as const) {
      assert.equal(await corednsRcode(corefile, { SSL_CERT_FILE: store }), rcode, `CoreDNS with SSL_CERT_FILE=${store}`);
    }
  });

  test('a certificate that does not match the server name is refused: SERVFAIL, nothing answered in clear', async () => {
    const s = await startInProcess(`.:0 {\n forward . tls://127.0.0.1:${tlsPort} {\n  tls ${certFile}\n  tls_servername other.example.test\n }\n}\n`);
    try {
      const r = decode(await exchange(s.port, query('www.dot.example'), { timeoutMs: 8000 }));
      assert.equal(r.rcode, 2);
      assert.equal(r.answer.length, 0);
    } finally { await s.stop(); }
  });
});
