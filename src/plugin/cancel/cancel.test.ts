import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { CaptureWriter, StubHandler, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import type { Request } from '../../core/request.ts';

test('cancel parse', async () => {
  await parseTable('cancel', parse, [
    ['. {\n cancel\n}', { timeoutMs: 5001 }],
    ['. {\n cancel 1s\n}', { timeoutMs: 1000 }],
    ['. {\n cancel 250ms\n}', { timeoutMs: 250 }],
    ['. {\n cancel 1m30s\n}', { timeoutMs: 90000 }],
    // Every line is read; the last one wins.
    ['. {\n cancel 1s\n cancel\n}', { timeoutMs: 5001 }],
    ['. {\n cancel 1s\n cancel 2s\n}', { timeoutMs: 2000 }],
    ['. {\n cancel 0s\n}', 'plugin/cancel: invalid negative duration: "0s"'],
    ['. {\n cancel 0\n}', 'plugin/cancel: invalid negative duration: "0"'],
    ['. {\n cancel -1s\n}', 'plugin/cancel: invalid negative duration: "-1s"'],
    ['. {\n cancel abc\n}', 'plugin/cancel: invalid duration: "abc"'],
    ['. {\n cancel 5\n}', 'plugin/cancel: invalid duration: "5"'],
    ['. {\n cancel 1s 2s\n}', "plugin/cancel: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after '2s'"],
  ]);
});

test('cancel gives the rest of the chain a request with a deadline; derived requests and lookups keep it', async () => {
  const seen: Request[] = [];
  const next = new StubHandler('x', (req) => { seen.push(req); return 0; });
  const h = (await runSetup(plugin, '. {\n cancel 300ms\n}')).chain(next);
  const req = makeRequest('example.org.');
  assert.equal(req.deadline, Infinity);
  const t0 = Date.now();
  await settle(h.serveDNS(req, new CaptureWriter()));
  const got = seen[0]!;
  assert.ok(got.deadline >= t0 + 300 && got.deadline <= Date.now() + 300, String(got.deadline - t0));
  assert.equal(got.derive({ name: 'other.' }).deadline, got.deadline);
  // A later deadline never extends an earlier one (as a Go context).
  assert.equal(got.derive({ deadline: got.deadline + 1000 }).deadline, got.deadline);
  assert.equal(got.derive({ deadline: got.deadline - 100 }).deadline, got.deadline - 100);
});

test('cancel at the end of the chain: no next plugin', async () => {
  const h = (await runSetup(plugin, '. {\n cancel\n}')).chain();
  assert.throws(() => h.serveDNS(makeRequest('example.org.'), new CaptureWriter()), /plugin\/cancel: no next plugin found/);
});
