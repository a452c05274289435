// health end to end: the endpoint, its setup errors, the self-check metrics,
// lameduck on SIGTERM (DNS and /health still answer meanwhile), and the
// listener surviving reloads (or moving when the address changes).

import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { startInProcess, startProcess, freePort, logLines } from '../helpers/server.ts';
import { boundPort } from '../../src/plugin/pkg/httpserver.ts';
import { get, query, scrape, sleep, until, value } from './prometheus-util.ts';

describe('health', () => {
  test('/health answers 200 OK, other paths 404 like Go\'s ServeMux', async () => {
    const s = await startInProcess('.:0 {\n health 127.0.0.1:0\n whoami\n}\n');
    try {
      const port = boundPort(s.runtime.instance, '127.0.0.1:0');
      assert.ok(port !== undefined && port > 0);
      const ok = await get(port, '/health');
      assert.equal(ok.status, 200);
      assert.equal(ok.body, 'OK');
      const withQuery = await get(port, '/health?verbose=1');
      assert.equal(withQuery.status, 200);
      const nf = await get(port, '/healthz');
      assert.equal(nf.status, 404);
      assert.equal(nf.body, '404 page not found\n');
    } finally {
      await s.stop();
    }
  });

  test('setup errors carry CoreDNS\'s texts', async () => {
    await assert.rejects(startInProcess('.:0 {\n health 8080\n}\n'), /plugin\/health: address 8080: missing port in address/);
    await assert.rejects(startInProcess('.:0 {\n health :1 :2\n}\n'), /plugin\/health: Corefile:2 - Error during parsing: Wrong argument count/);
    await assert.rejects(startInProcess('.:0 {\n health 127.0.0.1:0 {\n  foo\n }\n}\n'), /plugin\/health: Corefile:3 - Error during parsing: unknown property 'foo'/);
    await assert.rejects(startInProcess('.:0 {\n health 127.0.0.1:0 {\n  lameduck soon\n }\n}\n'),
      /plugin\/health: unable to parse lameduck duration value: 'soon' : time: invalid duration "soon"/);
  });

  test('the listener cannot be created: the start fails', async () => {
    const port = await freePort();
    const blocker = await import('node:net').then((net) => new Promise<import('node:net').Server>((resolve) => {
      const srv = net.createServer();
      srv.listen(port, '127.0.0.1', () => { resolve(srv); });
    }));
    try {
      await assert.rejects(startInProcess(`.:0 {\n health 127.0.0.1:${port}\n whoami\n}\n`), /address already in use/);
    } finally {
      blocker.close();
    }
  });

  test('self-check every second: coredns_health_request_duration_seconds counts', async () => {
    const s = await startInProcess('.:0 {\n health 127.0.0.1:0\n prometheus 127.0.0.1:0\n whoami\n}\n');
    try {
      const port = boundPort(s.runtime.instance, '127.0.0.1:0')!;
      const before = value(await scrape(port), 'coredns_health_request_duration_seconds_count') ?? 0;
      const after = await until('a self-check', async () => {
        const v = value(await scrape(port), 'coredns_health_request_duration_seconds_count') ?? 0;
        return v > before ? v : undefined;
      }, 5000, 200);
      assert.ok(after > before);
      const m = await scrape(port);
      assert.equal(m.get('coredns_health_request_duration_seconds')?.type, 'histogram');
      const les = m.get('coredns_health_request_duration_seconds')!.samples.filter((x) => x.name.endsWith('_bucket')).map((x) => x.labels.le);
      assert.deepEqual(les, ['0.00025', '0.0025', '0.025', '0.25', '2.5', '+Inf']);
      assert.equal(m.get('coredns_health_request_failures_total')?.type, 'counter');
    } finally {
      await s.stop();
    }
  });

  test('the port survives a reload: no probe fails while the configuration is swapped', async () => {
    const hp = await freePort();
    const conf = (answer: string) => `.:0 {\n health 127.0.0.1:${hp}\n ${answer}\n}\n`;
    const s = await startInProcess(conf('whoami'));
    try {
      let failures = 0;
      let probes = 0;
      let stop = false;
      const prober = (async () => {
        while (!stop) {
          try {
            const r = await get(hp, '/health', 1000);
            if (r.status !== 200) failures++;
          } catch {
            failures++;
          }
          probes++;
        }
      })();
      for (let i = 0; i < 5; i++) {
        const err = await s.reload(conf(i % 2 === 0 ? 'chaos' : 'whoami'));
        assert.equal(err, undefined);
        await sleep(50);
      }
      stop = true;
      await prober;
      assert.ok(probes > 5, `only ${probes} probes`);
      assert.equal(failures, 0, `${failures} of ${probes} probes failed`);
    } finally {
      await s.stop();
    }
  });

  test('a reload that changes the address moves the listener', async () => {
    const [a, b] = [await freePort(), await freePort()];
    const s = await startInProcess(`.:0 {\n health 127.0.0.1:${a}\n whoami\n}\n`);
    try {
      assert.equal((await get(a, '/health')).status, 200);
      assert.equal(await s.reload(`.:0 {\n health 127.0.0.1:${b}\n whoami\n}\n`), undefined);
      assert.equal((await get(b, '/health')).status, 200);
      await assert.rejects(get(a, '/health', 500), /ECONNREFUSED/);
    } finally {
      await s.stop();
    }
  });

  test('a failed reload keeps the old endpoint and closes the one it opened', async () => {
    const [a, b] = [await freePort(), await freePort()];
    const s = await startInProcess(`.:0 {\n health 127.0.0.1:${a}\n whoami\n}\n`);
    try {
      // The new configuration opens :b, then fails on its bad ready address.
      const err = await s.reload(`.:0 {\n health 127.0.0.1:${b}\n whoami\n}\n.:0 {\n nosuchplugin\n}\n`);
      assert.ok(err instanceof Error);
      assert.equal((await get(a, '/health')).status, 200);
      await assert.rejects(get(b, '/health', 500), /ECONNREFUSED/);
      const err2 = await s.reload(`.:0 {\n health 127.0.0.1:${b}\n whoami\n}\nexample.org:${await freePort()} {\n bind 192.0.2.1\n whoami\n}\n`);
      assert.ok(err2 instanceof Error, 'binding a foreign address must fail');
      assert.equal((await get(a, '/health')).status, 200);
      await assert.rejects(get(b, '/health', 500), /ECONNREFUSED/);
    } finally {
      await s.stop();
    }
  });

  test('lameduck: SIGTERM waits while DNS and /health keep answering', async () => {
    const hp = await freePort();
    const p = await startProcess(`.:{PORT} {\n health 127.0.0.1:${hp} {\n  lameduck 2s\n }\n whoami\n}\n`);
    try {
      assert.equal((await get(hp, '/health')).status, 200);
      const t0 = Date.now();
      p.proc.kill('SIGTERM');
      await p.waitFor(/^\[INFO\] plugin\/health: Going into lameduck mode for 2s$/, 3000);
      await sleep(300);
      const r = await query(p.port, 'example.org.');
      assert.equal(r.rcode, 'NOERROR');
      assert.equal((await get(hp, '/health')).status, 200);
      const code = await p.exited;
      const took = Date.now() - t0;
      assert.equal(code, 0);
      assert.ok(took >= 1900, `exited after ${took} ms`);
      assert.ok(p.stdout.includes('[INFO] SIGTERM: Shutting down servers then terminating'));
    } finally {
      await p.stop('SIGKILL');
    }
  });
});

test('health logs nothing on its own while the self-check succeeds', async () => {
  const s = await startInProcess('.:0 {\n health 127.0.0.1:0\n whoami\n}\n');
  const from = logLines.length;
  await sleep(1300);
  await s.stop();
  assert.deepEqual(logLines.slice(from).filter((l) => l.includes('plugin/health')), []);
});
