import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Health, healthMetrics } from './health.ts';
import { boundPort, splitHostPort, type HttpSite } from '../pkg/httpserver.ts';
import type { PluginLogger } from '../plugin.ts';
import { DEFAULT_ADDR, parse, plugin } from './setup.ts';
import { parseTable, runSetup } from '../pkg/testing.ts';

const S = 1_000_000_000n;

test('health parse', async () => {
  await parseTable('health', parse, [
    ['. {\n health\n}', { addr: DEFAULT_ADDR, lameduck: 0n }],
    ['. {\n health localhost:8091\n}', { addr: 'localhost:8091', lameduck: 0n }],
    ['. {\n health [::1]:8091 {\n  lameduck 5s\n }\n}', { addr: '[::1]:8091', lameduck: 5n * S }],
    // Every line is read; the last address and lameduck win.
    ['. {\n health :8091 {\n  lameduck 1s\n }\n health {\n  lameduck 2s\n }\n}', { addr: ':8091', lameduck: 2n * S }],
    ['. {\n health :8091\n health :8092\n}', { addr: ':8092', lameduck: 0n }],
    ['. {\n health a b\n}', "plugin/health: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'b'"],
    ['. {\n health 8080\n}', 'plugin/health: address 8080: missing port in address'],
    ['. {\n health {\n  lameduck\n }\n}', "plugin/health: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'lameduck'"],
    ['. {\n health {\n  lameduck 1s 2s\n }\n}', "plugin/health: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after '2s'"],
    ['. {\n health {\n  lameduck 5x\n }\n}', 'plugin/health: unable to parse lameduck duration value: \'5x\' : time: unknown unit "x" in duration "5x"'],
    ['. {\n health {\n  foo\n }\n}', "plugin/health: Corefile:3 - Error during parsing: unknown property 'foo'"],
  ]);
});

test('health start-up opens /health on its address, final shutdown closes it', async () => {
  const addr = '127.0.0.1:0';
  const r = await runSetup(plugin, `. {\n health ${addr}\n}`);
  assert.equal(r.factories.length, 0);
  assert.equal(boundPort(r.instance, addr), undefined);
  await r.start();
  const port = boundPort(r.instance, addr);
  assert.ok(port !== undefined && port > 0);
  const res = await fetch(`http://127.0.0.1:${port}/health`);
  assert.equal(res.status, 200);
  assert.equal(await res.text(), 'OK');
  assert.deepEqual(await r.stop(), []);
  assert.equal(boundPort(r.instance, addr), undefined);
});

test('a failing self-check logs CoreDNS\'s warning and counts', async () => {
  const lines: string[] = [];
  const log: PluginLogger = {
    debug() {}, info() {}, error() {},
    warning(m) { lines.push(`[WARNING] plugin/health: ${m}`); },
    fatal(m) { throw new Error(m); },
    debugEnabled: false,
  };
  const before = (await healthMetrics().healthFailures.get()).values[0]?.value ?? 0;
  // Port 1 on loopback: nothing listens there.
  const h = new Health('127.0.0.1:1', { port: () => undefined } as unknown as HttpSite, log);
  h.startSelfCheck();
  await new Promise((r) => setTimeout(r, 1400));
  h.stopSelfCheck();
  assert.equal(lines[0], '[WARNING] plugin/health: Local health request to "http://127.0.0.1:1/health" failed: ' +
    'Get "http://127.0.0.1:1/health": dial tcp 127.0.0.1:1: connect: connection refused');
  assert.equal((await healthMetrics().healthFailures.get()).values[0]?.value, before + 1);
});

test('the self-check URL: localhost when the address has no host', () => {
  const h = new Health(':8080', {} as HttpSite, {} as PluginLogger);
  assert.equal(h.url(), 'http://localhost:8080/health');
  assert.equal(new Health('[::1]:8080', {} as HttpSite, {} as PluginLogger).url(), 'http://[::1]:8080/health');
});

test('Go\'s SplitHostPort errors', () => {
  assert.throws(() => splitHostPort('8080'), /^Error: address 8080: missing port in address$/);
  assert.throws(() => splitHostPort('a:b:c'), /^Error: address a:b:c: too many colons in address$/);
  assert.throws(() => splitHostPort('[::1'), /^Error: address \[::1: missing '\]' in address$/);
  assert.deepEqual(splitHostPort('[::1]:53'), { host: '::1', port: '53' });
  assert.deepEqual(splitHostPort(':8080'), { host: '', port: '8080' });
});
