import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { CaptureWriter, StubHandler, makeRequest, parseTable, runSetup } from '../pkg/testing.ts';

test('any parse', async () => {
  await parseTable('any', parse, [
    ['. {\n any\n}', {}],
    // Only the first line of a block is read (CoreDNS).
    ['. {\n any\n any x\n}', {}],
    ['. {\n any x\n}', "plugin/any: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'x'"],
    ['. {\n any {\n  foo\n }\n}', "plugin/any: Corefile:2 - Error during parsing: Unexpected token '{', expecting argument"],
  ]);
});

test('any answers ANY with HINFO, passes other types on', async () => {
  const next = new StubHandler('next', () => 5);
  const h = (await runSetup(plugin, '. {\n any\n}')).chain(next);
  const w = new CaptureWriter();
  assert.equal(h.serveDNS(makeRequest('Example.org.', { type: 255 }), w), 0);
  const m = w.last!;
  assert.equal(m.aa, false);
  assert.equal(m.answer.length, 1);
  const rr = m.answer[0];
  assert.equal(rr.name, 'Example.org.');
  assert.equal(rr.type, 13);
  assert.equal(rr.class, 1);
  assert.equal(rr.ttl, 8482);
  const d = rr.data as { cpu: Uint8Array; os: Uint8Array };
  assert.equal(Buffer.from(d.cpu).toString(), 'ANY obsoleted');
  assert.equal(Buffer.from(d.os).toString(), 'See RFC 8482');
  assert.equal(h.serveDNS(makeRequest('example.org.', { type: 1 }), w), 5);
  assert.equal(next.calls, 1);
});
