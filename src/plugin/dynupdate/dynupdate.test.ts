import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setupError, captureLog } from '../pkg/testing.ts';
import { startServer } from '../../index.ts';
import { plugin } from './setup.ts';
import { bumpSerial, sameRR, serialGreater } from './rules.ts';
import { decodeDatabase, encodeDatabase, readSeed } from './store.ts';
import { withDefaults } from './rules.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { newMessage } from '../../wire/message.ts';
import { Opcode, RRClass, RRType, Rcode } from '../../wire/constants.ts';
import type { Message, ResourceRecord, SOAData } from '../../wire/types.ts';
import { TsigSigner, nameWire, tsigKey, tsigRecord, type TsigFields } from '../pkg/tsig.ts';

const dir = mkdtempSync(join(tmpdir(), 'nodens-dynupdate-'));
const file = (name: string, text: string): string => { const p = join(dir, name); writeFileSync(p, text); return p; };
const SEED = '$ORIGIN example.org.\n@ 60 IN SOA ns.example.org. hostmaster.example.org. 1 3600 600 86400 60\n@ 60 IN NS ns.example.org.\n'
  + 'ns 60 IN A 192.0.2.53\nwww 60 IN A 192.0.2.80\n';
const seed = file('example.org.zone', SEED);
const badZone = file('bad.zone', 'garbage here\n');
const noSoa = file('nosoa.zone', '$ORIGIN example.org.\nwww 60 IN A 192.0.2.1\n');
const dnssec = file('dnssec.zone', '$ORIGIN example.org.\n@ 60 IN SOA ns hm 1 2 3 4 5\nwww 60 IN DS 1 8 1 abcd\n');
const cname = file('cname.zone', '$ORIGIN example.org.\n@ 60 IN SOA ns hm 1 2 3 4 5\nwww 60 IN CNAME x\nwww 60 IN A 192.0.2.1\n');
const serial0 = file('serial0.zone', '$ORIGIN example.org.\n@ 60 IN SOA ns hm 0 2 3 4 5\n');
const badDb = file('bad.db', 'not a database');

const E = (line: number) => `plugin/dynupdate: Corefile:${line} - Error during parsing: `;
const block = (body: string, keys = 'example.org') => `${keys} {\n dynupdate {\n${body} }\n}`;
const ok = (extra = '') => block(`  file ${seed}\n  allow k. @ A\n${extra}`);

// Every message below was printed by CoreDNS 1.15.0 for the same Corefile (paths aside).
test('setup errors are CoreDNS 1.15.0\'s, with file:line where it gives one', async () => {
  const rows: Array<[string, string]> = [
    [block(`  file ${seed}\n`), `${E(4)}at least one allow rule is required`],
    [block('  allow k. @ A\n'), `${E(4)}file is required`],
    [block(`  file ${seed}\n  file ${seed}\n  allow k. @ A\n`), `${E(4)}file specified more than once`],
    [block(`  file ${seed}\n  allow k. @\n`), 'plugin/dynupdate: allow requires KEY NAME and at least one RR type'],
    [block(`  file ${seed}\n  allow * @ A\n`), 'plugin/dynupdate: invalid TSIG key "*"'],
    [block(`  file ${seed}\n  allow bad..key @ A\n`), 'plugin/dynupdate: invalid TSIG key "bad..key"'],
    [block(`  file ${seed}\n  allow k. www.example.com. A\n`), 'plugin/dynupdate: allow name "www.example.com." is outside zone "example.org."'],
    [block(`  file ${seed}\n  allow k. @ A *\n`), 'plugin/dynupdate: wildcard RR type must be the only type in an allow rule'],
    [block(`  file ${seed}\n  allow k. @ DS\n`), 'plugin/dynupdate: invalid RR type "DS" in allow rule'],
    [block(`  file ${seed}\n  allow k. @ AXFR\n`), 'plugin/dynupdate: invalid RR type "AXFR" in allow rule'],
    [block(`  file ${seed}\n  allow k. @ TYPE0\n`), 'plugin/dynupdate: invalid RR type "TYPE0" in allow rule'],
    [block(`  file ${seed}\n  allow k. @ BOGUS\n`), 'plugin/dynupdate: invalid RR type "BOGUS" in allow rule'],
    [ok('  max_records 0\n'), `${E(5)}max_records requires a positive integer`],
    [ok('  max_bytes x\n'), `${E(5)}max_bytes requires a positive integer`],
    [ok('  max_bytes 1 2\n'), `${E(5)}Wrong argument count or unexpected line ending after '2'`],
    [ok('  bogus\n'), `${E(5)}unknown property "bogus"`],
    [ok('  database\n'), `${E(5)}Wrong argument count or unexpected line ending after 'database'`],
    [ok(`  database ${seed}\n`), 'plugin/dynupdate: database and seed must be different files'],
    [ok(`  database ${badDb}\n`), `plugin/dynupdate: opening database ${JSON.stringify(badDb)}: invalid database`],
    [ok('  max_records 2\n'), `plugin/dynupdate: zone file ${JSON.stringify(seed)} exceeds configured limits`],
    [ok('  max_bytes 50\n'), `plugin/dynupdate: zone file ${JSON.stringify(seed)} exceeds configured limits`],
    [block('  file /nonexistent/x.zone\n  allow k. @ A\n'),
      'plugin/dynupdate: opening zone file "/nonexistent/x.zone": open /nonexistent/x.zone: no such file or directory'],
    [block(`  file ${badZone}\n  allow k. @ A\n`),
      `plugin/dynupdate: parsing zone file ${JSON.stringify(badZone)}: ${badZone}: dns: not a TTL: "here" at line: 1:12`],
    [block(`  file ${noSoa}\n  allow k. @ A\n`), 'plugin/dynupdate: zone "example.org." has no SOA'],
    [block(`  file ${dnssec}\n  allow k. @ A\n`), 'plugin/dynupdate: invalid zone "example.org.": zone contains unsupported RR type DS'],
    [block(`  file ${cname}\n  allow k. @ A\n`),
      'plugin/dynupdate: invalid zone "example.org.": zone contains CNAME data conflict at www.example.org.'],
    [block(`  file ${serial0}\n  allow k. @ A\n`), 'plugin/dynupdate: invalid zone "example.org.": zone contains an SOA with serial zero'],
    [`example.org {\n dynupdate example.org example.net {\n  file ${seed}\n  allow k. @ A\n }\n}`, 'plugin/dynupdate: exactly one zone is allowed'],
    [block(`  file ${seed}\n  allow k. @ A\n`, 'example.org example.net'),
      'plugin/dynupdate: zone is required when the server block does not define exactly one zone'],
    [`example.org {\n dynupdate example.net {\n  file ${seed}\n  allow k. @ A\n }\n}`,
      'plugin/dynupdate: invalid zone "example.net.": zone contains an out-of-zone record'],
    [`example.org {\n dynupdate {\n  file ${seed}\n  allow k. @ A\n }\n dynupdate {\n  file ${seed}\n  allow k. @ A\n }\n}`,
      'plugin/dynupdate: this plugin can only be used once per Server Block'],
  ];
  for (const [corefile, want] of rows) assert.equal(await setupError(plugin, corefile), want, corefile);
  // Accepted: a database whose directory does not exist yet (validation creates nothing; the first use fails).
  assert.equal(await setupError(plugin, ok('  database /nonexistent/dir/x.db\n')), '');
  assert.equal(await setupError(plugin, block(`  file ${seed}\n  allow k. * *\n  allow k. @ ANY A TYPE65\n  max_update_records 3\n`)), '');
});

test('rules: RFC 1982 serials, the serial bump skips zero, RR identity ignores TTL and name case', () => {
  assert.ok(serialGreater(2, 1));
  assert.ok(serialGreater(0, 0xffffffff));
  assert.ok(!serialGreater(1, 2));
  assert.ok(!serialGreater(0x80000001, 1)); // the half-space distance is undefined: not greater
  const soa = (serial: number): ResourceRecord => ({
    name: 'example.org.', type: RRType.SOA, class: RRClass.IN, ttl: 60,
    data: { mname: 'ns.', rname: 'h.', serial, refresh: 1, retry: 1, expire: 1, minimum: 1 },
  });
  const rrs = [soa(0xffffffff)];
  bumpSerial(rrs);
  assert.equal((rrs[0]!.data as SOAData).serial, 1);
  const a = (name: string, ttl: number, address: string): ResourceRecord => ({ name, type: RRType.A, class: RRClass.IN, ttl, data: { address } });
  assert.ok(sameRR(a('WWW.example.org.', 60, '192.0.2.1'), a('www.example.org.', 300, '192.0.2.1')));
  assert.ok(!sameRR(a('www.example.org.', 60, '192.0.2.1'), a('www.example.org.', 60, '192.0.2.2')));
  const cn = (target: string): ResourceRecord => ({ name: 'x.example.org.', type: RRType.CNAME, class: RRClass.IN, ttl: 1, data: { target } });
  assert.ok(sameRR(cn('Target.Example.'), cn('target.example.')));
});

test('database: records round-trip; a wrong zone, a foreign file and over-limit data are refused', () => {
  const l = withDefaults({ records: 0, bytes: 0, updateRecords: 0 });
  const records = readSeed(seed, 'example.org.', l);
  const data = encodeDatabase('example.org.', records);
  assert.deepEqual(decodeDatabase(data, 'example.org.', l), records);
  assert.throws(() => decodeDatabase(data, 'example.net.', l), /database belongs to a different zone/);
  assert.throws(() => decodeDatabase(Buffer.from('SQLite format 3\0'), 'example.org.', l), /invalid database/);
  assert.throws(() => decodeDatabase(data, 'example.org.', { ...l, records: 2 }), /stored zone exceeds max_records \(2\)/);
  assert.throws(() => decodeDatabase(data.subarray(0, data.length - 3), 'example.org.', l), /invalid stored record length/);
});

const SECRET = 'c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0';

/** An UPDATE for example.org. with these prerequisite and update records, TSIG-signed with `key` unless undefined. */
function updateMsg(id: number, prereq: ResourceRecord[], updates: ResourceRecord[], key: string | undefined = 'update-key.'): Buffer {
  const m: Message = newMessage();
  m.id = id;
  m.opcode = Opcode.UPDATE;
  m.question.push({ name: 'example.org.', type: RRType.SOA, class: RRClass.IN });
  m.answer = prereq;
  m.authority = updates;
  const wire = encodeMessage(m);
  if (key === undefined) return wire;
  const now = Math.floor(Date.now() / 1000);
  const fields: TsigFields = {
    algorithm: nameWire('hmac-sha256.'), timeSigned: now, fudge: 300, mac: new Uint8Array(0), origId: id, error: 0, other: new Uint8Array(0),
  };
  const signer = new TsigSigner(new Map([[key, tsigKey(SECRET)]]), new Uint8Array(0), () => now);
  return Buffer.from(signer.sign(wire, tsigRecord(key, fields))!);
}

const A = (name: string, address: string, ttl = 60): ResourceRecord => ({ name, type: RRType.A, class: RRClass.IN, ttl, data: { address } });

function ask(port: number, wire: Uint8Array): Promise<Message> {
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket('udp4');
    const t = setTimeout(() => { s.close(); reject(new Error('timeout')); }, 3000);
    s.on('message', (b) => { clearTimeout(t); s.close(); resolve(decodeMessage(b)); });
    s.send(wire, port, '127.0.0.1');
  });
}

function query(port: number, name: string, type: number): Promise<Message> {
  const m = newMessage();
  m.id = 7;
  m.question.push({ name, type, class: RRClass.IN });
  return ask(port, encodeMessage(m));
}

function serialOf(m: Message): number {
  return (m.answer[0]!.data as SOAData).serial;
}

test('concurrent updates are applied one at a time: every one answered, one serial step per change', async () => {
  const corefile = `example.org:0 {\n tsig {\n  secret update-key. ${SECRET}\n }\n dynupdate {\n  file ${seed}\n  allow update-key. * A\n }\n}`;
  const server = await startServer({ corefile, file: 'Corefile' });
  try {
    const port = server.port;
    const N = 64;
    const replies = await Promise.all(Array.from({ length: N }, (_, i) => ask(port, updateMsg(1000 + i, [], [A(`h${i}.example.org.`, `192.0.2.${i}`)]))));
    for (const r of replies) {
      assert.equal(r.rcode, Rcode.NOERROR);
      assert.equal(r.opcode, Opcode.UPDATE);
      assert.ok(r.aa);
    }
    assert.equal(serialOf(await query(port, 'example.org.', RRType.SOA)), 1 + N);
    // The same records again change nothing: the serial stays.
    await Promise.all(Array.from({ length: 8 }, (_, i) => ask(port, updateMsg(2000 + i, [], [A(`h${i}.example.org.`, `192.0.2.${i}`)]))));
    assert.equal(serialOf(await query(port, 'example.org.', RRType.SOA)), 1 + N);
    const h5 = await query(port, 'h5.example.org.', RRType.A);
    assert.deepEqual(h5.answer.map((r) => (r.data as { address: string }).address), ['192.0.2.5']);
  } finally {
    await server.stop();
  }
});

// The same kinds of bytes, sent to CoreDNS 1.15.0 and to nodens side by side (448 messages), got byte-identical
// replies: FORMERR for what does not decode, SERVFAIL for a header whose question is missing, as CoreDNS answers.
test('malformed UPDATE messages are answered (never a crash), and the server keeps answering', async () => {
  const corefile = `example.org:0 {\n tsig {\n  secret update-key. ${SECRET}\n }\n dynupdate {\n  file ${seed}\n  allow update-key. * *\n }\n}`;
  const server = await startServer({ corefile, file: 'Corefile' });
  try {
    const port = server.port;
    const good = updateMsg(77, [], [A('x.example.org.', '192.0.2.1')], undefined);
    const cases: Buffer[] = [];
    // Counts that promise records which are not there, cut at every length, and random bytes in the sections.
    for (let cut = 12; cut < good.length; cut += 3) {
      const b = Buffer.from(good.subarray(0, cut));
      b.writeUInt16BE(0xffff, 6);
      b.writeUInt16BE(0xffff, 8);
      cases.push(b);
    }
    const noQuestion = Buffer.from(good);
    noQuestion.writeUInt16BE(0, 4);
    cases.push(noQuestion);
    const twoQuestions = Buffer.from(good);
    twoQuestions.writeUInt16BE(2, 4);
    cases.push(twoQuestions);
    let seedN = 12345;
    const rnd = (): number => { seedN = (seedN * 1103515245 + 12345) & 0x7fffffff; return seedN & 0xff; };
    for (let i = 0; i < 40; i++) {
      const b = Buffer.from(good);
      for (let j = 0; j < 6; j++) b[17 + (rnd() % (b.length - 17))] = rnd();
      cases.push(b);
    }
    for (const c of cases) {
      const r = await ask(port, c).catch(() => undefined);
      if (r === undefined) continue;
      assert.equal(r.id, 77, c.toString('hex'));
      assert.ok(r.qr);
    }
    const header = await ask(port, noQuestion);
    assert.equal(header.rcode, Rcode.FORMERR);
    const www = await query(port, 'www.example.org.', RRType.A);
    assert.equal(www.rcode, Rcode.NOERROR);
    assert.equal(www.answer.length, 1);
  } finally {
    await server.stop();
  }
});

test('database: created on first use (0600), updates survive a restart, the seed no longer matters', async () => {
  const db = join(dir, 'persist.db');
  const mySeed = file('persist.zone', SEED);
  const corefile = `example.org:0 {\n tsig {\n  secret update-key. ${SECRET}\n }\n dynupdate {\n  file ${mySeed}\n  database ${db}\n  allow update-key. * A\n }\n}`;
  let server = await startServer({ corefile, file: 'Corefile' });
  let port = server.port;
  try {
    assert.ok(!existsSync(db), 'setup created the database');
    assert.equal((await ask(port, updateMsg(1, [], [A('new.example.org.', '192.0.2.99')]))).rcode, Rcode.NOERROR);
    assert.equal(statSync(db).mode & 0o777, 0o600);
  } finally {
    await server.stop();
  }
  writeFileSync(mySeed, SEED.replace('192.0.2.80', '192.0.2.81')); // ignored from now on
  server = await startServer({ corefile, file: 'Corefile' });
  port = server.port;
  try {
    const n = await query(port, 'new.example.org.', RRType.A);
    assert.deepEqual(n.answer.map((r) => (r.data as { address: string }).address), ['192.0.2.99']);
    const w = await query(port, 'www.example.org.', RRType.A);
    assert.deepEqual(w.answer.map((r) => (r.data as { address: string }).address), ['192.0.2.80']);
    assert.equal(serialOf(await query(port, 'example.org.', RRType.SOA)), 2);
    assert.ok(readFileSync(db).length > 0);
  } finally {
    await server.stop();
  }
});

test('a database that cannot be created: queries SERVFAIL, updates SERVFAIL and log why', async () => {
  const corefile = `example.org:0 {\n tsig {\n  secret update-key. ${SECRET}\n }\n dynupdate {\n  file ${seed}\n  database /nonexistent/dir/x.db\n  allow update-key. * A\n }\n}`;
  const server = await startServer({ corefile, file: 'Corefile' });
  try {
    const port = server.port;
    assert.equal((await query(port, 'www.example.org.', RRType.A)).rcode, Rcode.SERVFAIL);
    const lines = await captureLog(async () => {
      assert.equal((await ask(port, updateMsg(3, [], [A('new.example.org.', '192.0.2.99')]))).rcode, Rcode.SERVFAIL);
    });
    assert.ok(lines.some((l) => l.includes('[ERROR] plugin/dynupdate: UPDATE for example.org. failed: opening database "/nonexistent/dir/x.db": open /nonexistent/dir/x.db: no such file or directory')), lines.join('\n'));
  } finally {
    await server.stop();
  }
});
