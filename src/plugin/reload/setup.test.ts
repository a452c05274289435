import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { serverBlocksSha512 } from '../../corefile/hash.ts';
import { captureLog, parseTable, runSetup } from '../pkg/testing.ts';

const S = 1_000_000_000n;

test('reload parse', async () => {
  await parseTable('reload', parse, [
    ['. {\n reload\n}', { interval: 30n * S, jitter: 15n * S }],
    ['. {\n reload 10s\n}', { interval: 10n * S, jitter: 5n * S }],
    ['. {\n reload 1m 10s\n}', { interval: 60n * S, jitter: 10n * S }],
    ['. {\n reload 2s 0\n}', { interval: 2n * S, jitter: 0n }],
    ['. {\n reload 2s 1s\n}', { interval: 2n * S, jitter: 1n * S }],
    // Only the first line of a block is read (CoreDNS).
    ['. {\n reload 10s\n reload 1s\n}', { interval: 10n * S, jitter: 5n * S }],
    ['. {\n reload 1s 2s 3s\n}', "plugin/reload: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after '3s'"],
    ['. {\n reload 1s\n}', 'plugin/reload: interval value must be greater or equal to 2s'],
    ['. {\n reload 10s 500ms\n}', 'plugin/reload: jitter value must be 0 or greater or equal to 1s'],
    ['. {\n reload soon\n}', 'plugin/reload: time: invalid duration "soon"'],
    ['. {\n reload 10s 1x\n}', 'plugin/reload: time: unknown unit "x" in duration "1x"'],
  ]);
});

/** Let the watcher's asynchronous tick run to its end. */
const settleTick = (): Promise<void> => new Promise((res) => { setImmediate(res); });

test('reload: instance start-up logs the SHA512 and polls the Corefile every INTERVAL; a change reloads', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval'] });
  const corefile = '. {\n reload 2s 0\n}';
  const r = await runSetup(plugin, corefile);
  assert.equal(r.factories.length, 0);
  let contents = corefile;
  const reloads: string[] = [];
  r.instance.reloadControl = {
    readCorefile: () => ({ contents, file: 'Corefile' }),
    reload: (c) => { reloads.push(c); return Promise.resolve(undefined); },
  };
  const lines = await captureLog(() => r.start());
  assert.deepEqual(lines, [`[INFO] plugin/reload: Running configuration SHA512 = ${serverBlocksSha512(r.instance.serverBlocks)}`]);
  t.mock.timers.tick(2000);
  await settleTick();
  assert.deepEqual(reloads, []);
  // Spacing within a line does not change the hash (line numbers do, as in CoreDNS).
  contents = '.   {\n  reload   2s 0   # same\n}\n';
  t.mock.timers.tick(2000);
  await settleTick();
  assert.deepEqual(reloads, []);
  contents = '. {\n reload 2s 0\n whoami\n}';
  t.mock.timers.tick(1999);
  await settleTick();
  assert.deepEqual(reloads, []);
  t.mock.timers.tick(1);
  await settleTick();
  assert.deepEqual(reloads, [contents]);
  // Reloaded: this configuration's watcher is done.
  contents = '. {\n reload 2s 0\n log\n}';
  t.mock.timers.tick(4000);
  await settleTick();
  assert.equal(reloads.length, 1);
  assert.deepEqual(await r.stop(), []);
});

test('reload: shutdown stops the polling', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval'] });
  const r = await runSetup(plugin, '. {\n reload 2s 0\n}');
  let contents = '. {\n reload 2s 0\n}';
  let reloads = 0;
  r.instance.reloadControl = {
    readCorefile: () => ({ contents, file: 'Corefile' }),
    reload: () => { reloads++; return Promise.resolve(undefined); },
  };
  await captureLog(() => r.start());
  assert.deepEqual(await r.stop(), []);
  contents = '. {\n whoami\n}';
  t.mock.timers.tick(10_000);
  await settleTick();
  assert.equal(reloads, 0);
});
