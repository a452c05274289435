import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { parse, plugin } from './setup.ts';
import { COREDNS_VERSION } from '../../core/directives.ts';
import { OWNERS } from './owners.ts';
import { CaptureWriter, StubHandler, makeRequest, parseTable, runSetup } from '../pkg/testing.ts';
import type { TXTData } from '../../wire/types.ts';

const text = (d: unknown): string => Buffer.from((d as TXTData).strings[0]).toString();

test('chaos parse', async () => {
  await parseTable('chaos', parse, [
    ['. {\n chaos\n}', { version: 'CoreDNS-' + COREDNS_VERSION, authors: OWNERS }],
    ['. {\n chaos v1\n}', { version: 'v1', authors: OWNERS }],
    ['. {\n chaos v1 b@x a@x b@x B@x\n}', { version: 'v1', authors: ['B@x', 'a@x', 'b@x'] }],
    // Only the first line of a block counts (CoreDNS).
    ['. {\n chaos v1\n chaos v2 a b\n}', { version: 'v1', authors: OWNERS }],
    ['. {\n chaos v1 {\n  x\n }\n}', "plugin/chaos: Corefile:3 - Error during parsing: unknown property 'x'"],
  ]);
});

test('chaos default version and authors', async () => {
  const h = (await runSetup(plugin, '. {\n chaos\n}')).chain();
  const w = new CaptureWriter();
  assert.equal(h.serveDNS(makeRequest('Version.Bind.', { type: 16, class: 3 }), w), 0);
  const m = w.last!;
  assert.equal(m.aa, false);
  assert.equal(m.answer[0].name, 'Version.Bind.');
  assert.equal(m.answer[0].class, 3);
  assert.equal(m.answer[0].ttl, 0);
  assert.equal(text(m.answer[0].data), 'CoreDNS-' + COREDNS_VERSION);
  await h.serveDNS(makeRequest('authors.bind.', { type: 16, class: 3 }), w);
  assert.deepEqual(w.last!.answer.map((r) => text(r.data)).sort(), [...OWNERS].sort());
  await h.serveDNS(makeRequest('id.server.', { type: 16, class: 3 }), w);
  assert.equal(text(w.last!.answer[0].data), hostname());
});

test('chaos custom version, deduplicated sorted authors; other names and classes pass on', async () => {
  const next = new StubHandler('next', () => 2);
  const h = (await runSetup(plugin, '. {\n chaos CoreDNS-001 z@x a@x z@x\n}')).chain(next);
  const w = new CaptureWriter();
  await h.serveDNS(makeRequest('version.server.', { type: 16, class: 3 }), w);
  assert.equal(text(w.last!.answer[0].data), 'CoreDNS-001');
  await h.serveDNS(makeRequest('authors.bind.', { type: 16, class: 3 }), w);
  assert.deepEqual(w.last!.answer.map((r) => text(r.data)).sort(), ['a@x', 'z@x']);
  assert.equal(h.serveDNS(makeRequest('other.bind.', { type: 16, class: 3 }), w), 2);
  assert.equal(h.serveDNS(makeRequest('version.bind.', { type: 16, class: 1 }), w), 2);
  assert.equal(h.serveDNS(makeRequest('version.bind.', { type: 1, class: 3 }), w), 2);
  assert.equal(next.calls, 3);
});
