import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_ADDR, parse, plugin } from './setup.ts';
import { boundPort } from '../pkg/httpserver.ts';
import { parseTable, runSetup } from '../pkg/testing.ts';

const E3 = 'plugin/ready: Corefile:3 - Error during parsing: ';

test('ready parse', async () => {
  await parseTable('ready', parse, [
    ['. {\n ready\n}', { addr: DEFAULT_ADDR, monitor: 'until-ready' }],
    ['. {\n ready localhost:8182\n}', { addr: 'localhost:8182', monitor: 'until-ready' }],
    ['. {\n ready [::1]:8182 {\n  monitor continuously\n }\n}', { addr: '[::1]:8182', monitor: 'continuously' }],
    ['. {\n ready {\n  monitor continuously\n  monitor until-ready\n }\n}', { addr: DEFAULT_ADDR, monitor: 'until-ready' }],
    ['. {\n ready a b\n}', "plugin/ready: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'b'"],
    ['. {\n ready 8181\n}', 'plugin/ready: address 8181: missing port in address'],
    ['. {\n ready\n ready\n}', 'plugin/ready: this plugin can only be used once per Server Block'],
    ['. {\n ready {\n  monitor\n }\n}', E3 + "Wrong argument count or unexpected line ending after 'monitor'"],
    ['. {\n ready {\n  monitor sometimes\n }\n}', E3 + "monitor type 'sometimes' not supported"],
    ['. {\n ready {\n  foo\n }\n}', E3 + "unknown property 'foo'"],
  ]);
});

test('ready start-up opens /ready on its address; final shutdown closes it', async () => {
  const addr = '127.0.0.1:0';
  const r = await runSetup(plugin, `. {\n ready ${addr}\n whoami\n}`);
  assert.equal(r.factories.length, 0);
  assert.equal(boundPort(r.instance, addr), undefined);
  await r.start();
  const port = boundPort(r.instance, addr);
  assert.ok(port !== undefined && port > 0);
  // No handler of the block reports readiness (whoami's setup is not run here): ready.
  const res = await fetch(`http://127.0.0.1:${port}/ready`);
  assert.equal(res.status, 200);
  assert.equal(await res.text(), 'OK');
  assert.deepEqual(await r.stop(), []);
  assert.equal(boundPort(r.instance, addr), undefined);
});
