import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { Pattern, type LogLevel } from './errors.ts';
import { GoRegexp } from '../pkg/regexp.ts';
import { CaptureWriter, StubHandler, captureLog, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { PluginError } from '../plugin.ts';

const E = 'plugin/errors: Corefile:3 - Error during parsing: ';

const M = 60_000_000_000n;
const pattern = (period: bigint, src: string, level: LogLevel = 'error', showFirst = false): Pattern =>
  new Pattern(period, src, GoRegexp.compile(src), level, showFirst);

test('errors parse', async () => {
  await parseTable('errors', parse, [
    ['. {\n errors\n}', { stacktrace: false, patterns: [] }],
    ['. {\n errors stdout\n}', { stacktrace: false, patterns: [] }],
    ['. {\n errors {\n  stacktrace\n }\n}', { stacktrace: true, patterns: [] }],
    ['. {\n errors {\n  consolidate 1m ^a\n  consolidate 5m "^read udp .* i/o timeout$" warning show_first\n  consolidate 1h b debug\n  consolidate 2s c show_first\n }\n}', {
      stacktrace: false,
      patterns: [pattern(M, '^a'), pattern(5n * M, '^read udp .* i/o timeout$', 'warning', true), pattern(60n * M, 'b', 'debug'),
        pattern(2_000_000_000n, 'c', 'error', true)],
    }],
    ['. {\n errors {\n  consolidate 1m a info\n  consolidate 1m a error\n }\n}', { stacktrace: false, patterns: [pattern(M, 'a', 'info'), pattern(M, 'a')] }],
    ['. {\n errors stderr\n}', 'plugin/errors: Corefile:2 - Error during parsing: invalid log file: stderr'],
    ['. {\n errors a b\n}', "plugin/errors: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'b'"],
    ['. {\n errors\n errors\n}', 'plugin/errors: this plugin can only be used once per Server Block'],
    ['. {\n errors {\n  foo\n }\n}', "plugin/errors: Corefile:3 - Syntax error: Unexpected token 'foo', expecting 'Unknown field foo'"],
    ['. {\n errors {\n  consolidate 1m\n }\n}', E + "Wrong argument count or unexpected line ending after '1m'"],
    ['. {\n errors {\n  consolidate 1m a info show_first x\n }\n}', E + "Wrong argument count or unexpected line ending after 'x'"],
    ['. {\n errors {\n  consolidate 1x .*\n }\n}', E + 'time: unknown unit "x" in duration "1x"'],
    ['. {\n errors {\n  consolidate 1m (\n }\n}', E + 'error parsing regexp: missing closing ): `(`'],
    ['. {\n errors {\n  consolidate 1m .* info warning\n }\n}', E + 'multiple log levels specified in consolidate'],
    ['. {\n errors {\n  consolidate 1m .* show_first info\n }\n}', E + 'log level must come before show_first in consolidate'],
    ['. {\n errors {\n  consolidate 1m .* loud\n }\n}', E + 'unknown option in consolidate: loud'],
    [`. {\n errors {\n  consolidate 1m ${'a'.repeat(10001)}\n }\n}`, E + 'regex pattern too long: 10001 > 10000'],
  ]);
});

test('errors setup: stacktrace is a setting of the block; consolidation stops on shutdown', async () => {
  let r = await runSetup(plugin, '. {\n errors {\n  stacktrace\n }\n}');
  assert.equal(r.config.stacktrace, true);
  assert.equal(r.factories.length, 1);
  r = await runSetup(plugin, '. {\n errors\n}');
  assert.equal(r.config.stacktrace, false);
  assert.equal(r.hooks.shutdown.length, 1);
  assert.deepEqual(await r.stop(), []);
});

function failing(msg: string, rcode = 2) {
  return new StubHandler('forward', () => { throw new PluginError(rcode, msg); });
}

async function serve(h: { serveDNS: (...a: never[]) => unknown }, name: string, type = 1): Promise<void> {
  try {
    await settle((h as never as { serveDNS: (r: unknown, w: unknown) => number }).serveDNS(makeRequest(name, { type }), new CaptureWriter()));
  } catch { /* rethrown */ }
}

test('errors logs reported errors and rethrows them', async () => {
  const h = (await runSetup(plugin, '. {\n errors\n}')).chain(failing('read udp 10.0.0.1:53->8.8.8.8:53: i/o timeout'));
  const lines = await captureLog(() => {
    assert.throws(() => h.serveDNS(makeRequest('Example.ORG.', { type: 28 }), new CaptureWriter()), PluginError);
  });
  assert.deepEqual(lines, ['[ERROR] plugin/errors: 2 example.org. AAAA: read udp 10.0.0.1:53->8.8.8.8:53: i/o timeout']);
  const ok = (await runSetup(plugin, '. {\n errors\n}')).chain(new StubHandler('x', () => 0));
  assert.deepEqual(await captureLog(() => serve(ok, 'a.')), []);
  const panic = (await runSetup(plugin, '. {\n errors\n}')).chain(new StubHandler('x', () => { throw new Error('bug'); }));
  assert.deepEqual(await captureLog(() => serve(panic, 'a.')), []);
  const none = (await runSetup(plugin, '. {\n errors\n}')).chain();
  assert.deepEqual(await captureLog(() => serve(none, 'a.')), ['[ERROR] plugin/errors: 2 a. A: plugin/errors: no next plugin found']);
});

test('errors: async rejection is logged', async () => {
  const h = (await runSetup(plugin, '. {\n errors\n}')).chain(new StubHandler('f', async () => { throw new PluginError(5, 'nope'); }));
  assert.deepEqual(await captureLog(() => serve(h, 'a.')), ['[ERROR] plugin/errors: 5 a. A: nope']);
});

test('errors consolidate: counted, summarised at the level, flushed on shutdown', async () => {
  const r = await runSetup(plugin, '. {\n errors {\n  consolidate 5m "^read udp .* i/o timeout$" warning\n  consolidate 1h timeout\n }\n}');
  const h = r.chain(failing('read udp 1.2.3.4:53->8.8.8.8:53: i/o timeout'));
  const lines = await captureLog(async () => {
    await serve(h, 'a.');
    await serve(h, 'b.');
    await serve(h, 'c.');
    for (const fn of r.hooks.shutdown) await fn();
    await serve(h, 'd.');
  });
  assert.deepEqual(lines, [
    "[WARNING] plugin/errors: 3 errors like '^read udp .* i/o timeout$' occurred in last 5m0s",
    '[WARNING] plugin/errors: 2 d. A: read udp 1.2.3.4:53->8.8.8.8:53: i/o timeout',
  ]);
});

test('errors consolidate show_first: first printed at the level, summary only from two', async () => {
  const r = await runSetup(plugin, '. {\n errors {\n  consolidate 30ms timeout info show_first\n }\n}');
  const h = r.chain(failing('a timeout'));
  const lines = await captureLog(async () => {
    await serve(h, 'a.');
    await new Promise((res) => setTimeout(res, 80));
    await serve(h, 'b.');
    await serve(h, 'c.');
    await new Promise((res) => setTimeout(res, 80));
  });
  assert.deepEqual(lines, [
    '[INFO] plugin/errors: 2 a. A: a timeout',
    '[INFO] plugin/errors: 2 b. A: a timeout',
    "[INFO] plugin/errors: 2 errors like 'timeout' occurred in last 30ms",
  ]);
});

test('errors consolidate debug level only shows with debug on', async () => {
  const r = await runSetup(plugin, '. {\n errors {\n  consolidate 1h x debug show_first\n }\n}');
  const h = r.chain(failing('x'));
  assert.deepEqual(await captureLog(() => serve(h, 'a.')), []);
  r.setDebug(true);
  for (const fn of r.hooks.shutdown) await fn();
  assert.deepEqual(await captureLog(() => serve(h, 'b.')), ['[DEBUG] plugin/errors: 2 b. A: x']);
});

test('consolidate patterns are Go RE2: POSIX classes, Unicode classes, named groups', async () => {
  const lines = await captureLog(async () => {
    const r = await runSetup(plugin, '. {\n errors {\n  consolidate 1h ^[[:digit:]]+-(?P<word>\\pL+)$\n }\n}');
    const h = r.chain(failing('123-héllo'));
    await serve(h, 'a.');
    await serve(h, 'b.');
    await r.stop();
  });
  assert.deepEqual(lines, ['[ERROR] plugin/errors: 2 errors like \'^[[:digit:]]+-(?P<word>\\pL+)$\' occurred in last 1h0m0s']);
});
