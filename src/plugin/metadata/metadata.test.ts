import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { Metadata } from './metadata.ts';
import type { MetadataProvider } from '../pkg/metadata.ts';
import { CaptureWriter, StubHandler, captureLog, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import type { Handler, Request } from '../plugin.ts';
import { startServer } from '../../index.ts';
import { exchange } from '../../../test/helpers/client.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newQuery } from '../../wire/message.ts';

test('metadata parse', async () => {
  await parseTable('metadata', parse, [
    ['. {\n metadata\n}', { zones: ['.'] }],
    ['example.org {\n metadata\n}', { zones: ['example.org.'] }],
    ['example.org example.net:53 {\n metadata\n}', { zones: ['example.org.', 'example.net.'] }],
    ['. {\n metadata example.com.\n}', { zones: ['example.com.'] }],
    ['. {\n metadata Example.COM net\n}', { zones: ['example.com.', 'net.'] }],
    ['. {\n metadata {\n }\n}', { zones: ['.'] }],
    ['. {\n metadata example.com. {\n  some_param\n }\n}', "plugin/metadata: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'some_param'"],
    ['. {\n metadata\n metadata\n}', "plugin/metadata: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'metadata'"],
  ]);
});

class Provider extends StubHandler implements MetadataProvider {
  asked = 0;
  private readonly labels: Record<string, string>;
  constructor(labels: Record<string, string>) {
    super('p', () => 0);
    this.labels = labels;
  }
  metadata(req: Request): void {
    this.asked++;
    for (const [k, v] of Object.entries(this.labels)) req.setMetadata(k, () => v);
  }
}

test('metadata: collect begins the metadata, then asks the providers for names in its zones', () => {
  const p1 = new Provider({ 'test/key1': 'one' });
  const p2 = new Provider({ 'test/key2': 'two', 'test/key3': 'three' });
  const m = new Metadata(['example.org.'], undefined);
  m.providers = [p1, p2];
  const inside = makeRequest('a.Example.ORG.');
  m.collect(inside);
  assert.deepEqual(inside.metadataLabels(), ['test/key1', 'test/key2', 'test/key3']);
  assert.equal(inside.metadata('test/key2'), 'two');
  const outside = makeRequest('a.example.net.');
  m.collect(outside);
  assert.deepEqual(outside.metadataLabels(), []);
  assert.equal(outside.setMetadata('other/label', 'x'), true, 'begun even outside the zones');
  assert.equal(p1.asked, 1);
});

test('metadata: setup registers the collector, finds the providers at startup, passes queries on', async () => {
  const r = await runSetup(plugin, '. {\n metadata\n}');
  const provider = new Provider({ 'test/x': 'y' });
  const next = new StubHandler('next', (req) => { assert.equal(req.metadata('test/x'), 'y'); return 0; });
  const h = r.chain(next);
  (r.config.handlers as Handler[]).push(h, provider);
  await r.start();
  const req = makeRequest('a.example.');
  // What the server does at routing time, through the block's collector.
  const collect = (r.config as unknown as { collector: (q: Request) => void }).collector;
  collect(req);
  assert.equal(await settle(h.serveDNS(req, new CaptureWriter())), 0);
  assert.equal(next.calls, 1);
  await assert.rejects(async () => settle(r.chain().serveDNS(makeRequest('a.'), new CaptureWriter())), /plugin\/metadata: no next plugin found/);
});

test('metadata: labels exist only in blocks with the metadata plugin (log prints - elsewhere)', async () => {
  const corefile = `example.org:0 {
  metadata
  view v1 {
    expr true
  }
  log . "{name} view={/view/name} type={/log/type}"
  whoami
}
example.net:0 {
  view v2 {
    expr true
  }
  log . "{name} view={/view/name} type={/log/type}"
  whoami
}
`;
  const lines = await captureLog(async () => {
    const server = await startServer({ dnsPort: 0, corefile });
    try {
      for (const name of ['a.example.org.', 'a.example.net.']) await exchange(server.port, encodeMessage(newQuery(name, 1, 1)));
    } finally {
      await server.stop();
    }
  });
  const logged = lines.filter((l) => l.includes(' view='));
  assert.deepEqual(logged.map((l) => l.replace(/^.*\] /, '')), ['a.example.org. view=v1 type=NOERROR', 'a.example.net. view=- type=-']);
});
