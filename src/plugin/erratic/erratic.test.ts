import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin, type ErraticOptions } from './setup.ts';
import { Erratic, transferRecords } from './erratic.ts';
import { CaptureWriter, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { isReadiness } from '../plugin.ts';
import { isAutoPather } from '../pkg/autopath.ts';
import { Rcode, RRType } from '../../wire/constants.ts';
import { startServer } from '../../index.ts';
import { exchange } from '../../../test/helpers/client.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newQuery } from '../../wire/message.ts';
import { createServer } from 'node:net';

const E3 = 'plugin/erratic: Corefile:3 - Error during parsing: ';
const o = (drop: number, delay = 0, duration = 0n, truncate = 0, large = false): ErraticOptions => ({ drop, delay, duration, truncate, large });

test('erratic parse', async () => {
  await parseTable<ErraticOptions>('erratic', parse, [
    ['. {\n erratic\n}', o(2)],
    ['. {\n erratic {\n  drop 3\n }\n}', o(3)],
    // Arguments on the directive line are ignored, as by CoreDNS.
    ['. {\n erratic foo {\n  drop 3\n }\n}', o(3)],
    ['. {\n erratic {\n  drop\n }\n}', o(2)],
    ['. {\n erratic {\n  drop 0\n }\n}', o(0)],
    ['. {\n erratic {\n  delay\n }\n}', o(0, 2, 100_000_000n)],
    ['. {\n erratic {\n  delay 3\n }\n}', o(0, 3, 100_000_000n)],
    ['. {\n erratic {\n  delay 3 50ms\n }\n}', o(0, 3, 50_000_000n)],
    ['. {\n erratic {\n  delay 3 5ms\n  truncate 5\n }\n}', o(0, 3, 5_000_000n, 5)],
    ['. {\n erratic {\n  truncate\n }\n}', o(0, 0, 0n, 2)],
    // A bare drop does not keep the default drop once delay or truncate is given (as CoreDNS).
    ['. {\n erratic {\n  drop\n  truncate 4\n }\n}', o(0, 0, 0n, 4)],
    ['. {\n erratic {\n  drop 2\n  truncate 2\n }\n}', o(2, 0, 0n, 2)],
    ['. {\n erratic {\n  large\n }\n}', o(2, 0, 0n, 0, true)],
    ['. {\n erratic {\n  drop +7\n }\n}', o(7)],
    ['. {\n erratic {\n  drop 1 2\n }\n}', E3 + "Wrong argument count or unexpected line ending after '2'"],
    ['. {\n erratic {\n  truncate 1 2\n }\n}', E3 + "Wrong argument count or unexpected line ending after '2'"],
    ['. {\n erratic {\n  delay 1 2s 3\n }\n}', E3 + "Wrong argument count or unexpected line ending after '3'"],
    ['. {\n erratic {\n  drop x\n }\n}', 'plugin/erratic: strconv.ParseInt: parsing "x": invalid syntax'],
    ['. {\n erratic {\n  drop 2147483648\n }\n}', 'plugin/erratic: strconv.ParseInt: parsing "2147483648": value out of range'],
    ['. {\n erratic {\n  drop -1\n }\n}', 'plugin/erratic: illegal amount value given "-1"'],
    ['. {\n erratic {\n  truncate -2\n }\n}', 'plugin/erratic: illegal amount value given "-2"'],
    ['. {\n erratic {\n  delay -3\n }\n}', 'plugin/erratic: illegal amount value given "-3"'],
    ['. {\n erratic {\n  delay 3 x\n }\n}', 'plugin/erratic: time: invalid duration "x"'],
    ['. {\n erratic {\n  foo\n }\n}', E3 + "unknown property 'foo'"],
  ]);
});

async function ask(h: Erratic, name: string, type: number) {
  const w = new CaptureWriter();
  const rc = await settle(h.serveDNS(makeRequest(name, { type }), w));
  return { rc, m: w.last };
}

test('erratic answers A, AAAA (owner as asked, TTL 0, AA), AXFR; SERVFAIL for other types; drop 1 in N from query 0', async () => {
  const h = new Erratic(o(3));
  let r = await ask(h, 'a.example.', RRType.A);
  assert.equal(r.m, undefined);
  assert.equal(r.rc, Rcode.NOERROR);
  r = await ask(h, 'A.Example.', RRType.A);
  assert.equal(r.m!.aa, true);
  assert.deepEqual(r.m!.answer, [{ name: 'A.Example.', type: RRType.A, class: 1, ttl: 0, data: { address: '192.0.2.53' } }]);
  r = await ask(h, 'a.example.', RRType.AAAA);
  assert.deepEqual(r.m!.answer, [{ name: 'a.example.', type: RRType.AAAA, class: 1, ttl: 0, data: { address: '2001:db8::53' } }]);
  r = await ask(h, 'a.example.', RRType.MX); // query 3: dropped, nothing
  assert.equal(r.m, undefined);
  r = await ask(h, 'a.example.', RRType.MX);
  assert.equal(r.rc, Rcode.SERVFAIL);
  assert.equal(r.m, undefined);
  r = await ask(h, 'example.', RRType.AXFR);
  assert.deepEqual(r.m!.answer, transferRecords('example.', false));
  assert.equal(r.m!.answer.length, 6);
  assert.equal(r.m!.aa, true);
});

test('erratic truncate is CoreDNS\'s bitwise test (queryNr & N == 0); a truncated AXFR lacks the closing SOA', async () => {
  const h = new Erratic(o(0, 0, 0n, 2));
  const tc: boolean[] = [];
  for (let i = 0; i < 10; i++) tc.push((await ask(h, 'a.', RRType.A)).m!.tc);
  assert.deepEqual(tc, [true, true, false, false, true, true, false, false, true, true]);
  const r = await ask(h, 'zone.', RRType.AXFR); // query 10: 10 & 2 != 0
  assert.equal(r.m!.answer.length, 6);
  const t = await ask(new Erratic(o(0, 0, 0n, 2)), 'zone.', RRType.AXFR);
  assert.equal(t.m!.tc, false);
  assert.deepEqual(t.m!.answer.map((x) => x.type), [RRType.SOA, RRType.NS, RRType.NS, RRType.AAAA, RRType.AAAA]);
  assert.deepEqual(t.m!.answer.map((x) => x.name), ['zone.', 'zone.', 'zone.', 'a.zone.', 'b.zone.']);
});

test('erratic delay: 1 in N answers after DURATION; other types SERVFAIL after it', async () => {
  const h = new Erratic(o(0, 2, 150_000_000n));
  let t = performance.now();
  let r = await ask(h, 'a.', RRType.A);
  assert.ok(performance.now() - t >= 140, 'query 0 delayed');
  assert.equal(r.m!.answer.length, 1);
  t = performance.now();
  r = await ask(h, 'a.', RRType.A);
  assert.ok(performance.now() - t < 100, 'query 1 not delayed');
  t = performance.now();
  r = await ask(h, 'a.', RRType.TXT);
  assert.ok(performance.now() - t >= 140, 'query 2 delayed');
  assert.equal(r.rc, Rcode.SERVFAIL);
});

test('erratic large: 30 A records; AAAA unchanged', async () => {
  const h = new Erratic(o(0, 0, 0n, 0, true));
  assert.equal((await ask(h, 'a.', RRType.A)).m!.answer.length, 30);
  assert.equal((await ask(h, 'a.', RRType.AAAA)).m!.answer.length, 1);
});

test('erratic readiness: ready while 3 or 4 queries were seen; its fixed search path', async () => {
  const h = new Erratic(o(0));
  assert.ok(isReadiness(h));
  const seen: boolean[] = [h.ready()];
  for (let i = 0; i < 6; i++) {
    await ask(h, 'a.', RRType.A);
    seen.push(h.ready());
  }
  assert.deepEqual(seen, [false, false, false, true, true, false, false]);
  assert.ok(isAutoPather(h));
  assert.deepEqual(h.autoPath(makeRequest('a.')), ['a.example.org.', 'b.example.org.', '']);
});

test('erratic through setup is the end of the chain', async () => {
  const r = await runSetup(plugin, '. {\n erratic {\n  drop 0\n }\n}');
  const w = new CaptureWriter();
  assert.equal(await settle(r.chain().serveDNS(makeRequest('x.'), w)), Rcode.NOERROR);
  assert.equal(w.last!.answer.length, 1);
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => { resolve(typeof a === 'object' && a !== null ? a.port : 0); });
    });
  });
}

test('erratic in a server with ready: /ready answers 200 only after the 3rd and 4th query', async () => {
  const http = await freePort();
  const server = await startServer({ dnsPort: 0, corefile: `example.org:0 {\n ready 127.0.0.1:${http} {\n  monitor continuously\n }\n erratic {\n  drop 0\n }\n}\n` });
  try {
    const codes: number[] = [];
    for (let i = 0; i < 6; i++) {
      codes.push((await fetch(`http://127.0.0.1:${http}/ready`)).status);
      await exchange(server.port, encodeMessage(newQuery('a.example.org.', 1, 1)));
    }
    assert.deepEqual(codes, [503, 503, 503, 200, 200, 503]);
  } finally {
    await server.stop();
  }
});
