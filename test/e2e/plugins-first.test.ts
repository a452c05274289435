// The first plugins end to end through real sockets: whoami, any, chaos, hosts,
// minimal, log and errors (log lines as the in-process logger records them).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { wire, PluginError, type Handler } from '../../src/index.ts';
import { startInProcess, logLines } from '../helpers/server.ts';
import { exchange } from '../helpers/client.ts';
import type { NodensServer } from '../../src/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'nodens-e2e-'));
const hostsFile = join(dir, 'hosts');
writeFileSync(hostsFile, '10.0.0.1 foo.example.org\n::1 foo.example.org\n10.0.0.5 *.w.example.org\n');

let srv: NodensServer;

before(async () => {
  srv = await startInProcess(`
.:0 {
    errors
    log . "LOG {name} {type} {class} {rcode} {>rflags}"
    any
    chaos Test-1 a@example b@example
    hosts ${hostsFile} example.org {
        10.0.0.2 bar.example.org
    }
    whoami
}
`);
});

after(async () => { await srv.stop(); });

async function ask(name: string, type: number, opts: { cls?: number; tcp?: boolean } = {}) {
  const q = wire.newQuery(name, type, opts.cls ?? 1);
  return wire.decodeMessage(await exchange(srv.port, wire.encodeMessage(q), { tcp: opts.tcp }));
}

test('hosts answers from the file and inline entries, PTR and wildcards', async () => {
  let m = await ask('FOO.example.org', 1);
  assert.equal(m.aa, true);
  assert.deepEqual(m.answer.map((r) => [r.name, r.data]), [['foo.example.org.', { address: '10.0.0.1' }]]);
  m = await ask('bar.example.org', 1);
  assert.deepEqual(m.answer.map((r) => r.data), [{ address: '10.0.0.2' }]);
  m = await ask('x.w.example.org', 1);
  assert.deepEqual(m.answer.map((r) => r.data), [{ address: '10.0.0.5' }]);
  m = await ask('1.0.0.10.in-addr.arpa', 12);
  assert.deepEqual(m.answer.map((r) => r.data), [{ target: 'foo.example.org.' }]);
  m = await ask('nope.example.org', 1);
  assert.equal(m.rcode, 2);
  assert.equal(m.aa, false);
});

test('names outside the hosts zones reach whoami', async () => {
  const m = await ask('example.net', 1, { tcp: true });
  assert.equal(m.aa, true);
  assert.equal(m.additional[0].type, 1);
  assert.deepEqual(m.additional[0].data, { address: '127.0.0.1' });
  assert.equal(m.additional[1].name, '_tcp.example.net.');
});

test('any and chaos', async () => {
  let m = await ask('example.net', 255);
  assert.equal(m.answer[0].type, 13);
  assert.equal(m.answer[0].ttl, 8482);
  m = await ask('version.bind', 16, { cls: 3 });
  assert.equal(Buffer.from((m.answer[0].data as { strings: Uint8Array[] }).strings[0]).toString(), 'Test-1');
  m = await ask('authors.bind', 16, { cls: 3 });
  assert.equal(m.answer.length, 2);
});

test('log lines for answered, synthetic SERVFAIL and CH queries', async () => {
  const from = logLines.length;
  await ask('foo.example.org', 1);
  await ask('nope.example.org', 28);
  await ask('id.server', 16, { cls: 3 });
  const lines = logLines.slice(from).filter((l) => l.includes('LOG '));
  assert.deepEqual(lines, [
    '[INFO] LOG foo.example.org. A IN NOERROR qr,aa,rd',
    '[INFO] LOG nope.example.org. AAAA IN SERVFAIL qr,rd',
    '[INFO] LOG id.server. TXT CH NOERROR qr,rd',
  ]);
});

test('errors logs a reported error; minimal strips extra sections', async () => {
  const glue: Handler = {
    name: 'glue',
    serveDNS(req, w) {
      if (req.name.startsWith('fail.')) throw new PluginError(2, 'upstream went away');
      const r = wire.replyTo(req.msg);
      r.answer = [{ name: req.qname, type: 1, class: 1, ttl: 5, data: { address: '192.0.2.1' } }];
      r.additional = [{ name: 'x.' + req.qname, type: 1, class: 1, ttl: 5, data: { address: '192.0.2.2' } }];
      w.writeMsg(r);
      return 0;
    },
  };
  const s = await startInProcess('.:0 {\n errors\n minimal\n glue\n}', {
    plugins: [{ plugin: { name: 'glue', setup(c) { c.dispenser.next(); c.addPlugin(() => glue); } }, before: 'whoami' }],
  });
  try {
    const q = wire.newQuery('ok.example', 1);
    q.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [] };
    const m = wire.decodeMessage(await exchange(s.port, wire.encodeMessage(q)));
    assert.equal(m.answer.length, 1);
    assert.deepEqual(m.additional, []);
    assert.equal(m.edns?.udpSize, 1232);
    const from = logLines.length;
    const f = wire.decodeMessage(await exchange(s.port, wire.encodeMessage(wire.newQuery('fail.example', 28))));
    assert.equal(f.rcode, 2);
    assert.deepEqual(logLines.slice(from), ['[ERROR] plugin/errors: 2 fail.example. AAAA: upstream went away']);
  } finally {
    await s.stop();
  }
});
