import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { CaptureWriter, StubHandler, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import type { Request } from '../../core/request.ts';
import { replyTo } from '../../wire/message.ts';
import { sizeAndDo } from '../../core/serve.ts';

const E = "plugin/bufsize: plugin/bufsize: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after";

test('bufsize parse', async () => {
  await parseTable('bufsize', parse, [
    ['. {\n bufsize\n}', { size: 1232 }],
    ['. {\n bufsize 1220\n}', { size: 1220 }],
    ['. {\n bufsize "1220"\n}', { size: 1220 }],
    ['. {\n bufsize 512\n}', { size: 512 }],
    ['. {\n bufsize 4096\n}', { size: 4096 }],
    ['. {\n bufsize +600\n}', { size: 600 }],
    // Only the first line is read (CoreDNS returns on it).
    ['. {\n bufsize 600\n bufsize 700\n}', { size: 600 }],
    ['. {\n bufsize 5000\n}', `${E} '5000'`],
    ['. {\n bufsize 511\n}', `${E} '511'`],
    ['. {\n bufsize abc123\n}', `${E} 'abc123'`],
    ['. {\n bufsize 1.5\n}', `${E} '1.5'`],
    ['. {\n bufsize 512 512\n}', `${E} '512'`],
  ]);
});

function capture(): { next: StubHandler; seen: Request[] } {
  const seen: Request[] = [];
  const next = new StubHandler('whoami', (req, w) => { seen.push(req); w.writeMsg(replyTo(req.msg)); return 0; });
  return { next, seen };
}

test('bufsize lowers a larger EDNS size for the rest of the chain and for the reply', async () => {
  const { next, seen } = capture();
  const h = (await runSetup(plugin, '. {\n bufsize 1024\n}')).chain(next);
  const req = makeRequest('example.org.', { edns: { udpSize: 1152 } });
  const w = new CaptureWriter();
  assert.equal(await settle(h.serveDNS(req, w)), 0);
  assert.equal(seen[0]!.msg.edns!.udpSize, 1024, 'the chain sees the new size');
  assert.equal(seen[0]!.size, 1024);
  // The server's writer (it holds the original request) fits and advertises the new size, as CoreDNS does.
  assert.equal(req.size, 1024);
  assert.equal(req.udpSize, 1024);
  assert.equal(req.msg.edns!.udpSize, 1152, 'the original message is not changed');
  const reply = w.last!;
  sizeAndDo(req, reply, new Set());
  assert.equal(reply.edns!.udpSize, 1024);
});

test('bufsize never raises a smaller size and leaves queries without EDNS alone', async () => {
  const { next, seen } = capture();
  const h = (await runSetup(plugin, '. {\n bufsize 1024\n}')).chain(next);
  const small = makeRequest('example.org.', { edns: { udpSize: 896 } });
  await settle(h.serveDNS(small, new CaptureWriter()));
  assert.equal(seen[0], small, 'the request itself goes on');
  assert.equal(small.size, 896);
  const plain = makeRequest('example.org.');
  await settle(h.serveDNS(plain, new CaptureWriter()));
  assert.equal(seen[1], plain);
  assert.equal(plain.msg.edns, undefined);
  assert.equal(plain.size, 512);
});

test('bufsize at the end of the chain: no next plugin', async () => {
  const h = (await runSetup(plugin, '. {\n bufsize\n}')).chain();
  assert.throws(() => h.serveDNS(makeRequest('example.org.', { edns: { udpSize: 4096 } }), new CaptureWriter()), /plugin\/bufsize: no next plugin found/);
});
