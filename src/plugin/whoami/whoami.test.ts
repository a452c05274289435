import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { CaptureWriter, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';

test('whoami parse', async () => {
  await parseTable('whoami', parse, [
    ['. {\n whoami\n}', {}],
    // Only the first line of a block is read (CoreDNS).
    ['. {\n whoami\n whoami x\n}', {}],
    ['. {\n whoami x\n}', "plugin/whoami: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'x'"],
    ['. {\n whoami {\n }\n}', "plugin/whoami: Corefile:2 - Error during parsing: Unexpected token '{', expecting argument"],
  ]);
});

test('whoami answers with the client address (IPv4, UDP)', async () => {
  const h = (await runSetup(plugin, '. {\n whoami\n}')).chain();
  const w = new CaptureWriter();
  const req = makeRequest('Example.ORG.', { type: 15, remote: '10.1.2.3', port: 40000, cd: true });
  assert.equal(await settle(h.serveDNS(req, w)), 0);
  const m = w.last!;
  assert.equal(m.aa, true);
  assert.equal(m.rd, true);
  assert.equal(m.cd, true);
  assert.equal(m.rcode, 0);
  assert.deepEqual(m.answer, []);
  assert.deepEqual(m.additional, [
    { name: 'Example.ORG.', type: 1, class: 1, ttl: 0, data: { address: '10.1.2.3' } },
    { name: '_udp.Example.ORG.', type: 33, class: 1, ttl: 0, data: { priority: 0, weight: 0, port: 40000, target: '.' } },
  ]);
});

test('whoami: IPv6 over TCP, root name, CH class', async () => {
  const h = (await runSetup(plugin, '. {\n whoami\n}')).chain();
  const w = new CaptureWriter();
  await h.serveDNS(makeRequest('.', { remote: '::1', port: 53000, proto: 'tcp', class: 3 }), w);
  assert.deepEqual(w.last!.additional, [
    { name: '.', type: 28, class: 3, ttl: 0, data: { address: '::1' } },
    { name: '_tcp.', type: 33, class: 3, ttl: 0, data: { priority: 0, weight: 0, port: 53000, target: '.' } },
  ]);
});
