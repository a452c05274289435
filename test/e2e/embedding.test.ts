// The contracts a plugin and an embedding application rely on, through real
// sockets: internal sub-queries (req.lookup) routed through the server's own
// zones, two servers in one process that do not see each other's logs or
// identities, and a [FATAL] line that stops an embedded server without ending
// the host process.

import { test } from 'node:test';
import { spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { startServer, wire, type ExternalPlugin, type Handler, type Request, type ResponseWriter } from '../../src/index.ts';
import { exchange } from '../helpers/client.ts';
import { freePort } from '../helpers/server.ts';
import { get, parseMetrics } from './prometheus-util.ts';

/** An external plugin that answers `<x>.via.test.` with what req.lookup gives for the name after `via`. */
function lookupPlugin(): ExternalPlugin {
  return {
    after: 'hosts',
    plugin: {
      name: 'lookuptest',
      setup(c) {
        c.addPlugin((next): Handler => ({
          name: 'lookuptest',
          async serveDNS(req: Request, w: ResponseWriter): Promise<number> {
            const name = req.name;
            if (!name.endsWith('.via.test.')) {
              if (next === undefined) return 5; // REFUSED, written by the server
              return next.serveDNS(req, w);
            }
            const target = name.slice(0, -'.via.test.'.length) + '.';
            let sub: wire.Message | undefined;
            try {
              sub = await req.lookup(target, req.qtype);
            } catch {
              return 2; // SERVFAIL
            }
            const reply = wire.replyTo(req.msg);
            reply.rcode = sub?.rcode ?? 2;
            reply.answer = sub?.answer ?? [];
            w.writeMsg(reply);
            return reply.rcode;
          },
        }));
      },
    },
  };
}

async function ask(port: number, name: string, type = 1): Promise<wire.Message> {
  return wire.decodeMessage(await exchange(port, wire.encodeMessage(wire.newQuery(name, type))));
}

test('req.lookup routes through the listener\'s zones: longest zone, root as last resort, REFUSED when nothing matches', async () => {
  const lines: string[] = [];
  const srv = await startServer({
    corefile: `
.:0 {
    lookuptest
}
example.org:0 {
    hosts {
        10.0.0.1 target.example.org
    }
}
sub.example.org:0 {
    hosts {
        10.0.0.2 target.sub.example.org
    }
}
`,
    plugins: [lookupPlugin()],
    log: { sink: (l) => { lines.push(l); } },
  });
  try {
    const a = await ask(srv.port, 'target.example.org.via.test.');
    assert.equal(a.rcode, 0);
    assert.deepEqual(a.answer.map((r) => [r.name, r.data]), [['target.example.org.', { address: '10.0.0.1' }]]);
    const b = await ask(srv.port, 'target.sub.example.org.via.test.');
    assert.deepEqual(b.answer.map((r) => r.data), [{ address: '10.0.0.2' }]);
    // Not in any zone but `.`: the root block's chain answers (lookuptest passes on, nothing after it: REFUSED).
    const c = await ask(srv.port, 'elsewhere.example.net.via.test.');
    assert.equal(c.rcode, 5);
    assert.deepEqual(c.answer, []);
    // A name that looks itself up: nested lookups stop at the bound and the plugin answers SERVFAIL.
    const d = await ask(srv.port, 'x.via.test.via.test.via.test.via.test.via.test.via.test.via.test.via.test.via.test.via.test.');
    assert.equal(d.rcode, 2);
    assert.deepEqual(lines, []);
  } finally {
    await srv.stop();
  }
});

test('two embedded servers keep their logs apart', async () => {
  const linesA: string[] = [];
  const linesB: string[] = [];
  const a = await startServer({ corefile: '.:0 {\n log . "A {name}"\n whoami\n}\n', log: { sink: (l) => { linesA.push(l); } } });
  const b = await startServer({ corefile: '.:0 {\n log . "B {name}"\n whoami\n}\n', log: { sink: (l) => { linesB.push(l); } } });
  try {
    await ask(a.port, 'one.example.');
    await ask(b.port, 'two.example.');
    assert.deepEqual(linesA, ['[INFO] A one.example.']);
    assert.deepEqual(linesB, ['[INFO] B two.example.']);
  } finally {
    await a.stop();
    await b.stop();
  }
});

/** Sum of a family's samples on a /metrics endpoint. */
async function scrapeSum(port: number, family: string): Promise<number> {
  const f = parseMetrics((await get(port, '/metrics')).body).get(family);
  return (f?.samples ?? []).reduce((a, s) => a + s.value, 0);
}

test('two embedded servers with different Corefiles keep their metrics and log formats apart; a loop FATAL in a third stops only it', { timeout: 30_000 }, async () => {
  const [ma, mb] = [await freePort(), await freePort()];
  const linesA: string[] = [];
  const linesB: string[] = [];
  // Both keys are `.:0`: the same server label (dns://:0), so one shared registry would mix their series.
  const a = await startServer({
    corefile: `.:0 {\n bind 127.0.0.1\n prometheus 127.0.0.1:${ma}\n log\n whoami\n}\n`,
    log: { sink: (l) => { linesA.push(l); }, format: 'json' },
  });
  const b = await startServer({
    corefile: `.:0 {\n bind 127.0.0.1\n prometheus 127.0.0.1:${mb}\n log . "B {name}"\n cache 30\n whoami\n}\n`,
    log: { sink: (l) => { linesB.push(l); } },
  });
  try {
    assert.notEqual(a.metrics, b.metrics);
    for (let i = 0; i < 3; i++) await ask(a.port, `a${i}.example.`);
    for (let i = 0; i < 5; i++) await ask(b.port, `b${i}.example.`);
    assert.equal(await scrapeSum(ma, 'coredns_dns_requests_total'), 3);
    assert.equal(await scrapeSum(mb, 'coredns_dns_requests_total'), 5);
    assert.equal(await scrapeSum(ma, 'coredns_cache_requests_total'), 0, 'A has no cache: no cache series');
    assert.equal(await scrapeSum(mb, 'coredns_cache_requests_total'), 5);
    // Each endpoint lists the families CoreDNS always has, and the Node runtime's.
    for (const port of [ma, mb]) {
      const families = parseMetrics((await get(port, '/metrics')).body);
      for (const f of ['coredns_build_info', 'coredns_reload_failed_total', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes']) {
        assert.ok(families.has(f), `${f} on :${port}`);
      }
    }
    // A logs JSON records, B text lines.
    assert.deepEqual(linesA.map((l) => (JSON.parse(l) as { plugin: string; qname: string }).qname), ['a0.example.', 'a1.example.', 'a2.example.']);
    assert.deepEqual(linesB, ['[INFO] B b0.example.', '[INFO] B b1.example.', '[INFO] B b2.example.', '[INFO] B b3.example.', '[INFO] B b4.example.']);

    // A third server that forwards to itself: its plain loop FATAL stops it alone.
    const port = await freePort();
    const linesC: string[] = [];
    const c = await startServer({ corefile: `.:${port} {\n bind 127.0.0.1\n loop\n forward . 127.0.0.1:${port}\n}\n`, log: { sink: (l) => { linesC.push(l); } } });
    await Promise.race([c.stopped, new Promise((_r, reject) => setTimeout(() => { reject(new Error(`no FATAL stop: ${linesC.join('\n')}`)); }, 15_000))]);
    assert.ok(linesC.some((l) => l.startsWith('[FATAL] plugin/loop: Loop (')), linesC.join('\n'));
    assert.equal((await ask(a.port, 'after.example.')).rcode, 0);
    assert.equal((await ask(b.port, 'after.example.')).rcode, 0);
    assert.equal(await scrapeSum(ma, 'coredns_dns_requests_total'), 4);
    assert.equal(await scrapeSum(mb, 'coredns_dns_requests_total'), 6);
    assert.ok(!linesA.concat(linesB).some((l) => l.includes('FATAL')), 'the fatal line went to its own server only');
  } finally {
    await a.stop();
    await b.stop();
  }
});

test('a plain loop FATAL stops the embedded server, not the host process', { timeout: 20_000 }, async () => {
  const lines: string[] = [];
  // The block forwards to itself: CoreDNS's loop plugin sees its probe come back three times.
  const port = await freePort();
  const looping = await startServer({
    corefile: `.:${port} {\n bind 127.0.0.1\n loop\n forward . 127.0.0.1:${port}\n}\n`,
    log: { sink: (l) => { lines.push(l); } },
  });
  await Promise.race([
    looping.stopped,
    new Promise((_r, reject) => setTimeout(() => { reject(new Error(`no FATAL stop; log: ${lines.join('\n')}`)); }, 15_000)),
  ]);
  assert.ok(lines.some((l) => l.startsWith('[FATAL] plugin/loop: Loop (127.0.0.1:') && l.includes(`-> 127.0.0.1:${port}) detected for zone "."`)), lines.join('\n'));
  // The process is still here and the port is free again.
  const again = await startServer({ corefile: `.:${port} {\n bind 127.0.0.1\n whoami\n}\n`, log: { sink: () => {} } });
  assert.equal((await ask(port, 'x.example.')).rcode, 0);
  await again.stop();
});

test('importing the library changes nothing in the host process (environment, handles, listeners)', () => {
  const script = `
    const env = JSON.stringify(process.env);
    const listeners = process.eventNames().map(String).sort().join(',');
    await import(${JSON.stringify(new URL('../../src/index.ts', import.meta.url).href)});
    const changed = [];
    if (JSON.stringify(process.env) !== env) changed.push('env');
    if (process.eventNames().map(String).sort().join(',') !== listeners) changed.push('process listeners');
    // stdio handles are Node's own (importing node:http opens stderr); timers, sockets and servers would be ours.
    const ours = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap' && r !== 'PipeWrap');
    if (ours.length > 0) changed.push('handles: ' + ours.join(','));
    process.stdout.write(JSON.stringify(changed));
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000, env: cleanEnv() });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), []);
});

/** The test runner's environment without its own markers (a child that sees NODE_TEST_CONTEXT reports to the runner). */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  delete env.NODENS_LOOP_SECRET;
  return env;
}
