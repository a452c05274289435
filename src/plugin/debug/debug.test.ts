import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { parseTable, runSetup } from '../pkg/testing.ts';

test('debug parse', async () => {
  await parseTable('debug', parse, [
    ['. {\n debug\n}', {}],
    ['. {\n debug\n debug\n}', {}],
    ['. {\n debug on\n}', "plugin/debug: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'on'"],
    ['. {\n debug\n debug on\n}', "plugin/debug: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'on'"],
  ]);
});

test('debug setup turns the block\'s debug mode on, adds no handler', async () => {
  const r = await runSetup(plugin, '. {\n debug\n}');
  assert.equal(r.config.debug, true);
  assert.equal(r.factories.length, 0);
});
