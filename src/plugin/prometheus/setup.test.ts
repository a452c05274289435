import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_ADDR, parse, plugin } from './setup.ts';
import { boundPort } from '../pkg/httpserver.ts';
import { parseTable, runSetup } from '../pkg/testing.ts';

const E3 = 'plugin/prometheus: Corefile:3 - Error during parsing: ';

test('prometheus parse', async () => {
  await parseTable('prometheus', parse, [
    ['. {\n prometheus\n}', { addr: DEFAULT_ADDR }],
    ['. {\n prometheus :9253\n}', { addr: ':9253' }],
    ['. {\n prometheus [::1]:9253 {\n  runtime_metrics\n }\n}', { addr: '[::1]:9253' }],
    ['. {\n prometheus a b\n}', "plugin/prometheus: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'b'"],
    ['. {\n prometheus 9153\n}', 'plugin/prometheus: address 9153: missing port in address'],
    ['. {\n prometheus\n prometheus\n}', 'plugin/prometheus: this plugin can only be used once per Server Block'],
    ['. {\n prometheus {\n  runtime_metrics on\n }\n}', E3 + "Wrong argument count or unexpected line ending after 'on'"],
    ['. {\n prometheus {\n  tls\n }\n}', E3 + "Wrong argument count or unexpected line ending after 'tls'"],
    ['. {\n prometheus {\n  tls /etc/tls.yaml\n }\n}', E3 + 'tls is not supported by nodens yet'],
    ['. {\n prometheus {\n  foo\n }\n}', E3 + 'unknown option: foo'],
  ]);
});

test('prometheus start-up opens /metrics and sets coredns_plugin_enabled; final shutdown closes it', async () => {
  const addr = '127.0.0.1:0';
  const r = await runSetup(plugin, `. {\n prometheus ${addr}\n}`);
  assert.equal(r.factories.length, 1);
  assert.equal(boundPort(r.instance, addr), undefined);
  await r.start();
  const port = boundPort(r.instance, addr);
  assert.ok(port !== undefined && port > 0);
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(res.status, 200);
  const text = await res.text();
  assert.match(text, /^coredns_build_info\{.*\} 1$/m);
  assert.match(text, /^coredns_plugin_enabled\{server="dns:\/\/:53",zone=".",view="",name="prometheus"\} 1$/m);
  assert.deepEqual(await r.stop(), []);
  assert.equal(boundPort(r.instance, addr), undefined);
});
