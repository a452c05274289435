// ready end to end: 200 OK when nothing reports readiness, 503 with the sorted
// names of the plugins that are not ready (and CoreDNS's log line), the two
// monitor modes, setup errors, "Shutting down", and the port across reloads.

import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import type { PluginDefinition } from '../../src/index.ts';
import { startInProcess, freePort, logLines } from '../helpers/server.ts';
import { boundPort } from '../../src/plugin/pkg/httpserver.ts';
import { ReadyList } from '../../src/plugin/ready/list.ts';
import { get, sleep } from './prometheus-util.ts';

/** Switches the test plugins' readiness. */
const state = new Map<string, boolean>();
let asked = new Map<string, number>();

/** A chain plugin that reports readiness from `state` (name given by the directive). */
function readinessPlugin(name: string): PluginDefinition {
  return {
    name,
    setup(c) {
      c.addPlugin((next) => ({
        name,
        serveDNS: (req, w) => next!.serveDNS(req, w),
        ready: () => {
          asked.set(name, (asked.get(name) ?? 0) + 1);
          return state.get(name) ?? false;
        },
      }));
    },
  };
}

const plugins = [
  { plugin: readinessPlugin('zeta'), before: 'whoami' },
  { plugin: readinessPlugin('alpha'), before: 'whoami' },
];

describe('ready', () => {
  test('200 OK when no plugin reports readiness (whoami, hosts, ... do not)', async () => {
    const s = await startInProcess('.:0 {\n ready 127.0.0.1:0\n whoami\n}\n');
    try {
      const r = await get(boundPort(s.runtime.instance, '127.0.0.1:0')!, '/ready');
      assert.equal(r.status, 200);
      assert.equal(r.body, 'OK');
      assert.equal((await get(boundPort(s.runtime.instance, '127.0.0.1:0')!, '/health')).status, 404);
    } finally {
      await s.stop();
    }
  });

  test('503 with the sorted names of the plugins not ready, logged; until-ready stops asking a ready plugin', async () => {
    state.set('zeta', false);
    state.set('alpha', false);
    asked = new Map();
    const s = await startInProcess('.:0 {\n ready 127.0.0.1:0\n zeta\n alpha\n whoami\n}\n', { plugins });
    try {
      const port = boundPort(s.runtime.instance, '127.0.0.1:0')!;
      const from = logLines.length;
      let r = await get(port, '/ready');
      assert.equal(r.status, 503);
      assert.equal(r.body, 'alpha,zeta');
      assert.ok(logLines.slice(from).includes('[INFO] plugin/ready: Plugins not ready: "alpha,zeta"'));
      state.set('alpha', true);
      r = await get(port, '/ready');
      assert.equal(r.status, 503);
      assert.equal(r.body, 'zeta');
      state.set('zeta', true);
      r = await get(port, '/ready');
      assert.equal(r.status, 200);
      assert.equal(r.body, 'OK');
      // until-ready: once ready, never asked again, even if it would say otherwise now.
      const n = asked.get('alpha');
      state.set('alpha', false);
      r = await get(port, '/ready');
      assert.equal(r.status, 200);
      assert.equal(asked.get('alpha'), n);
    } finally {
      await s.stop();
    }
  });

  test('monitor continuously asks on every request', async () => {
    state.set('zeta', true);
    state.set('alpha', true);
    const s = await startInProcess('.:0 {\n ready 127.0.0.1:0 {\n  monitor continuously\n }\n zeta\n alpha\n whoami\n}\n', { plugins });
    try {
      const port = boundPort(s.runtime.instance, '127.0.0.1:0')!;
      assert.equal((await get(port, '/ready')).status, 200);
      state.set('zeta', false);
      const r = await get(port, '/ready');
      assert.equal(r.status, 503);
      assert.equal(r.body, 'zeta');
    } finally {
      await s.stop();
    }
  });

  test('only blocks that contain ready count', async () => {
    state.set('zeta', false);
    const s = await startInProcess(`.:0 {\n ready 127.0.0.1:0\n whoami\n}\nexample.org:${await freePort()} {\n zeta\n whoami\n}\n`, { plugins });
    try {
      assert.equal((await get(boundPort(s.runtime.instance, '127.0.0.1:0')!, '/ready')).status, 200);
    } finally {
      await s.stop();
    }
  });

  test('setup errors carry CoreDNS\'s texts', async () => {
    await assert.rejects(startInProcess('.:0 {\n ready 8181\n}\n'), /plugin\/ready: address 8181: missing port in address/);
    await assert.rejects(startInProcess('.:0 {\n ready 127.0.0.1:0\n ready 127.0.0.1:0\n}\n'), /plugin\/ready: this plugin can only be used once per Server Block/);
    await assert.rejects(startInProcess('.:0 {\n ready 127.0.0.1:0 {\n  monitor sometimes\n }\n}\n'),
      /plugin\/ready: Corefile:3 - Error during parsing: monitor type 'sometimes' not supported/);
    await assert.rejects(startInProcess('.:0 {\n ready 127.0.0.1:0 {\n  foo\n }\n}\n'), /unknown property 'foo'/);
  });

  test('a listener error is ignored: the server starts without the endpoint', async () => {
    const port = await freePort();
    const net = await import('node:net');
    const blocker = await new Promise<import('node:net').Server>((resolve) => {
      const srv = net.createServer();
      srv.listen(port, '127.0.0.1', () => { resolve(srv); });
    });
    try {
      const s = await startInProcess(`.:0 {\n ready 127.0.0.1:${port}\n whoami\n}\n`);
      await s.stop();
    } finally {
      blocker.close();
    }
  });

  test('the port survives reloads; removed from the Corefile, it closes', async () => {
    const rp = await freePort();
    const s = await startInProcess(`.:0 {\n ready 127.0.0.1:${rp}\n whoami\n}\n`);
    try {
      for (let i = 0; i < 3; i++) {
        assert.equal(await s.reload(`.:0 {\n ready 127.0.0.1:${rp}\n ${i % 2 ? 'whoami' : 'chaos'}\n}\n`), undefined);
        assert.equal((await get(rp, '/ready')).status, 200);
      }
      assert.equal(await s.reload('.:0 {\n whoami\n}\n'), undefined);
      await assert.rejects(get(rp, '/ready', 500), /ECONNREFUSED/);
    } finally {
      await s.stop();
    }
  });
});

test('ReadyList: Shutting down, sorted names, until-ready', () => {
  const l = new ReadyList();
  let b = false;
  l.add('b', { ready: () => b });
  l.add('a', { ready: () => false });
  assert.deepEqual(l.check(), { ready: false, notReady: 'a,b', shuttingDown: false });
  b = true;
  assert.deepEqual(l.check(), { ready: false, notReady: 'a', shuttingDown: false });
  b = false;
  assert.deepEqual(l.check(), { ready: false, notReady: 'a', shuttingDown: false });
  l.shuttingDown = true;
  assert.deepEqual(l.check(), { ready: false, notReady: '', shuttingDown: true });
});

test('ready answers 503 Shutting down during final shutdown, then closes', async () => {
  const s = await startInProcess('.:0 {\n ready 127.0.0.1:0\n health 127.0.0.1:0 {\n  lameduck 300ms\n }\n whoami\n}\n');
  const port = boundPort(s.runtime.instance, '127.0.0.1:0')!;
  assert.equal((await get(port, '/ready')).status, 200);
  const stopping = s.stop();
  await sleep(100);
  // ready shares the listener with health, which is in lameduck: /ready now says so.
  const r = await get(port, '/ready');
  assert.equal(r.status, 503);
  assert.equal(r.body, 'Shutting down');
  assert.equal((await get(port, '/health')).status, 200);
  await stopping;
  await assert.rejects(get(port, '/ready', 500), /ECONNREFUSED/);
});
