import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Health, healthFailures } from './health.ts';
import { splitHostPort, type HttpSite } from '../pkg/httpserver.ts';
import type { PluginLogger } from '../plugin.ts';

test('a failing self-check logs CoreDNS\'s warning and counts', async () => {
  const lines: string[] = [];
  const log: PluginLogger = {
    debug() {}, info() {}, error() {},
    warning(m) { lines.push(`[WARNING] plugin/health: ${m}`); },
    fatal(m) { throw new Error(m); },
    debugEnabled: false,
  };
  const before = (await healthFailures.get()).values[0]?.value ?? 0;
  // Port 1 on loopback: nothing listens there.
  const h = new Health('127.0.0.1:1', { port: () => undefined } as unknown as HttpSite, log);
  h.startSelfCheck();
  await new Promise((r) => setTimeout(r, 1400));
  h.stopSelfCheck();
  assert.equal(lines[0], '[WARNING] plugin/health: Local health request to "http://127.0.0.1:1/health" failed: ' +
    'Get "http://127.0.0.1:1/health": dial tcp 127.0.0.1:1: connect: connection refused');
  assert.equal((await healthFailures.get()).values[0]?.value, before + 1);
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
