import { test } from 'node:test';
import assert from 'node:assert/strict';
import { plugin } from './setup.ts';
import { runSetup, setupError } from '../pkg/testing.ts';

test('debug setup', async () => {
  const r = await runSetup(plugin, '. {\n debug\n}');
  assert.equal(r.config.debug, true);
  assert.equal(r.factories.length, 0);
  assert.equal(await setupError(plugin, '. {\n debug on\n}'),
    "plugin/debug: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'on'");
});
