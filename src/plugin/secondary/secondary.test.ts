import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Message, ResourceRecord } from '../../wire/types.ts';
import { Opcode, Rcode, RRType } from '../../wire/constants.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { replyTo } from '../../wire/message.ts';
import type { ServerLogger } from '../plugin.ts';
import { Fall } from '../pkg/fall.ts';
import { isTransferer, NotAuthoritativeError } from '../pkg/transfer.ts';
import { zoneFromText } from '../pkg/zone/load.ts';
import { CaptureWriter, StubHandler, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { parse, plugin, type SecondaryOptions } from './setup.ts';
import { Secondary, SecondaryZone, serialLess, type SecondaryEnv } from './secondary.ts';
import { parseCatalog } from './catalog.ts';
import { parseRecord } from '../../wire/text.ts';

const E = 'plugin/secondary: Corefile:3 - Error during parsing: ';
type View = { zones: Record<string, string[]>; fall: Fall; catalogs: Record<string, string[]> };
const view = (o: SecondaryOptions): View => ({ zones: Object.fromEntries(o.zones), fall: o.fall, catalogs: Object.fromEntries(o.catalogs) });
const fall = (...zones: string[]): Fall => {
  const f = new Fall();
  if (zones.length > 0) f.setZonesFromArgs(zones[0] === '.' ? [] : zones);
  return f;
};

test('secondary parse', async () => {
  await parseTable<SecondaryOptions, View>('secondary', parse, [
    ['example.org {\n secondary {\n  transfer from 10.0.0.1\n }\n}', { zones: { 'example.org.': ['10.0.0.1:53'] }, fall: fall(), catalogs: {} }],
    ['. {\n secondary Example.ORG example.net {\n  transfer from 10.0.0.1:5300 ::1 [::2]:54 1.2.3.4:x\n  transfer from 10.0.0.2\n  fallthrough\n }\n}', {
      zones: {
        'example.org.': ['10.0.0.1:5300', '[::1]:53', '[::2]:54', '1.2.3.4:x', '10.0.0.2:53'],
        'example.net.': ['10.0.0.1:5300', '[::1]:53', '[::2]:54', '1.2.3.4:x', '10.0.0.2:53'],
      },
      fall: fall('.'),
      catalogs: {},
    }],
    // catalog: member zones normalised (a CIDR expands), merged over lines; one without zones accepts any
    ['. {\n secondary cat.example {\n  transfer from 10.0.0.1\n  catalog Example.ORG 10.0.0.0/23\n  catalog example.org b.test\n }\n secondary any.example {\n  transfer from 10.0.0.1\n  catalog a.test\n  catalog\n }\n}', {
      zones: { 'cat.example.': ['10.0.0.1:53'], 'any.example.': ['10.0.0.1:53'] },
      fall: fall(),
      catalogs: { 'cat.example.': ['example.org.', '0.0.10.in-addr.arpa.', '1.0.10.in-addr.arpa.', 'b.test.'], 'any.example.': [] },
    }],
    ['example.org {\n secondary {\n  transfer from 10.0.0.1\n  catalog a..b\n }\n}', 'plugin/secondary: invalid catalog member zone "a..b"'],
    ['. {\n secondary a.org {\n  transfer from 10.0.0.1\n }\n secondary b.org {\n  transfer from 10.0.0.2\n  fallthrough b.org\n }\n}',
      { zones: { 'a.org.': ['10.0.0.1:53'], 'b.org.': ['10.0.0.2:53'] }, fall: fall('b.org'), catalogs: {} }],
    ['example.org {\n secondary {\n  transfer from fe80::1%eth0 [fe80::2%lo]:5300\n }\n}', { zones: { 'example.org.': ['[fe80::1%eth0]:53', '[fe80::2%lo]:5300'] }, fall: fall(), catalogs: {} }],
    ['example.org {\n secondary\n}', 'plugin/secondary: Corefile:2 - Error during parsing: secondary zones require a transfer from property'],
    ['example.org {\n secondary {\n  fallthrough\n }\n}', 'plugin/secondary: Corefile:4 - Error during parsing: secondary zones require a transfer from property'],
    ['example.org {\n secondary {\n  transfer to 1.2.3.4\n }\n}', E + 'unknown property to'],
    ['example.org {\n secondary {\n  transfer from *\n }\n}', "plugin/secondary: can't use '*' in transfer from"],
    ['example.org {\n secondary {\n  transfer from foo\n }\n}', 'plugin/secondary: must specify an IP address: `foo\''],
    ['example.org {\n secondary {\n  transfer from foo:53\n }\n}', 'plugin/secondary: must specify an IP address: `foo\''],
    ['example.org {\n secondary {\n  transfer\n }\n}', E + "Wrong argument count or unexpected line ending after 'transfer'"],
    ['example.org {\n secondary {\n  transfer from\n }\n}', E + "Wrong argument count or unexpected line ending after 'from'"],
    ['example.org {\n secondary {\n  foo\n }\n}', E + "unknown property 'foo'"],
  ], { view });
});

test('serial arithmetic (RFC 1982)', () => {
  assert.equal(serialLess(1, 2), true);
  assert.equal(serialLess(2, 1), false);
  assert.equal(serialLess(2, 2), false);
  assert.equal(serialLess(4294967295, 1), true);
  assert.equal(serialLess(1, 4294967295), false);
});

function testLog(lines: string[], prefix: string): ServerLogger {
  return {
    debugEnabled: false,
    debug: (m) => { lines.push(`[DEBUG] ${prefix}${m}`); }, info: (m) => { lines.push(`[INFO] ${prefix}${m}`); },
    warning: (m) => { lines.push(`[WARNING] ${prefix}${m}`); }, error: (m) => { lines.push(`[ERROR] ${prefix}${m}`); },
    fatal: (m) => { lines.push(`[FATAL] ${prefix}${m}`); },
  };
}

function env(lines: string[]): SecondaryEnv {
  return { log: testLog(lines, 'plugin/secondary: '), fileLog: testLog(lines, 'plugin/file: '), random: () => 0 };
}

const zoneOf = (serial: number, refresh = 3600, retry = 600, expire = 86400, extra = ''): string =>
  `$TTL 300\n@ SOA ns1 hostmaster ${serial} ${refresh} ${retry} ${expire} 300\n@ NS ns1\nns1 A 192.0.2.53\nwww A 192.0.2.1\n${extra}`;

/** A primary on a loopback TCP port serving `text` (SOA queries and AXFR, 2 records a message). */
class Primary {
  text: string;
  /** Other zones by origin (the default one is example.org.). */
  readonly others = new Map<string, string>();
  axfrs = 0;
  soaQueries = 0;
  /** Answer AXFR with this rcode instead. */
  axfrRcode = 0;
  private readonly server: Server;
  constructor(text: string) {
    this.text = text;
    this.server = createServer((s) => { this.serve(s); });
  }
  async listen(): Promise<string> {
    await new Promise<void>((r) => { this.server.listen(0, '127.0.0.1', r); });
    return `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  close(): Promise<void> {
    return new Promise((r) => { this.server.close(() => { r(); }); });
  }
  private send(s: Socket, m: Message): void {
    const w = encodeMessage(m);
    const b = Buffer.alloc(w.length + 2);
    b.writeUInt16BE(w.length, 0);
    w.copy(b, 2);
    s.write(b);
  }
  private serve(s: Socket): void {
    let buf = Buffer.alloc(0);
    s.on('error', () => { /* the client hung up */ });
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length < 2 || buf.length < buf.readUInt16BE(0) + 2) return;
      const q = decodeMessage(buf.subarray(2, buf.readUInt16BE(0) + 2));
      const qn = q.question[0]!.name.toLowerCase();
      const text = qn === 'example.org.' ? this.text : this.others.get(qn);
      if (text === undefined) {
        const r = replyTo(q);
        r.rcode = Rcode.REFUSED;
        this.send(s, r);
        return;
      }
      const z = zoneFromText(text, qn, 'db');
      const all: ResourceRecord[] = [z.soa!, ...z.ns];
      for (const e of z.elems()) all.push(...e.all());
      all.push(z.soa!);
      const r = replyTo(q);
      if (q.question[0]!.type === RRType.SOA) {
        this.soaQueries++;
        r.answer = [z.soa!];
        this.send(s, r);
        return;
      }
      this.axfrs++;
      if (this.axfrRcode !== 0) {
        r.rcode = this.axfrRcode;
        this.send(s, r);
        return;
      }
      for (let i = 0; i < all.length; i += 2) {
        const m = replyTo(q);
        m.answer = all.slice(i, i + 2);
        this.send(s, m);
      }
    });
  }
}

async function until(fn: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('transfer in over several messages; serial check; failures logged as CoreDNS does', async () => {
  const p = new Primary(zoneOf(5, 3600, 600, 86400, 'a A 192.0.2.2\nb A 192.0.2.3\n'));
  const addr = await p.listen();
  const lines: string[] = [];
  const z = new SecondaryZone('example.org.', ['127.0.0.1:1', addr], env(lines));
  assert.equal(await z.shouldTransfer(), true);
  await z.transferIn();
  assert.equal(z.zone.serial, 5);
  assert.deepEqual([...z.zone.elems()].map((e) => e.name), ['a.example.org.', 'b.example.org.', 'ns1.example.org.', 'www.example.org.']);
  assert.deepEqual(lines, [
    "[ERROR] plugin/file: Failed to setup transfer `example.org.' with `\"127.0.0.1:1\"': dial tcp 127.0.0.1:1: connect: connection refused",
    `[INFO] plugin/file: Transferred: example.org. from ${addr}`,
  ]);
  assert.equal(await z.shouldTransfer(), false);
  p.text = zoneOf(6);
  assert.equal(await z.shouldTransfer(), true);
  lines.length = 0;
  p.axfrRcode = Rcode.REFUSED;
  const only = new SecondaryZone('example.org.', [addr], env(lines));
  await assert.rejects(only.transferIn(), { message: 'dns: bad xfr rcode: 5' });
  assert.deepEqual(lines, [`[ERROR] plugin/file: Failed to transfer \`example.org.' from "${addr}": dns: bad xfr rcode: 5`]);
  await assert.rejects(new SecondaryZone('example.org.', ['127.0.0.1:1'], env([])).shouldTransfer(), { message: 'dial tcp 127.0.0.1:1: connect: connection refused' });
  // ports as Go's dialer resolves them
  await assert.rejects(new SecondaryZone('example.org.', ['127.0.0.1:99999'], env([])).transferIn(), { message: 'dial tcp: address 99999: invalid port' });
  await assert.rejects(new SecondaryZone('example.org.', ['127.0.0.1:nosuchservice'], env([])).transferIn(), { message: 'dial tcp: lookup tcp/nosuchservice: unknown port' });
  await p.close();
});

test('startup backoff, then refresh on the SOA timer picks up a new serial', async () => {
  const p = new Primary(zoneOf(1, 1, 1, 3));
  p.axfrRcode = Rcode.SERVFAIL;
  const addr = await p.listen();
  const lines: string[] = [];
  const z = new SecondaryZone('example.org.', [addr], env(lines));
  void z.run();
  await until(() => lines.some((l) => l.startsWith('[WARNING] plugin/secondary: All')));
  assert.ok(lines.includes(`[WARNING] plugin/secondary: All 'example.org.' masters failed to transfer, retrying in 250ms: dns: bad xfr rcode: 2`));
  p.axfrRcode = 0;
  await until(() => z.zone.serial === 1);
  p.text = zoneOf(2, 1, 1, 3);
  await until(() => z.zone.serial === 2, 4000);
  // the primary goes away: retry arms, expire marks the zone expired
  await p.close();
  await until(() => z.zone.expired, 8000);
  assert.ok(lines.some((l) => l.startsWith('[WARNING] plugin/file: Failed refresh check dial tcp')));
  z.stop();
});

test('handler: SERVFAIL before the first transfer, NOTIFY from primaries only, expired zones, fallthrough, Transferer', async () => {
  const p = new Primary(zoneOf(7));
  const addr = await p.listen();
  const lines: string[] = [];
  const e = env(lines);
  const z = new SecondaryZone('example.org.', [addr], e);
  const next = new StubHandler('whoami', () => Rcode.NOERROR);
  const s = new Secondary(new Map([['example.org.', z]]), fall(), e).withNext(next);
  const run = async (name: string, o: { type?: number; opcode?: number; remote?: string } = {}): Promise<{ rc: number; w: CaptureWriter }> => {
    const w = new CaptureWriter();
    return { rc: await settle(s.serveDNS(makeRequest(name, o), w)), w };
  };
  assert.equal((await run('www.example.org.')).rc, Rcode.SERVFAIL);
  let r = await run('example.org.', { type: RRType.SOA, opcode: Opcode.NOTIFY, remote: '192.0.2.9' });
  assert.equal(r.w.msgs.length, 0);
  assert.deepEqual(lines, ['[INFO] plugin/file: Dropping notify from 192.0.2.9 for example.org.']);
  lines.length = 0;
  r = await run('example.org.', { type: RRType.SOA, opcode: Opcode.NOTIFY });
  assert.equal(r.w.last!.aa, true);
  assert.equal(r.w.last!.opcode, Opcode.NOTIFY);
  assert.deepEqual(lines, [
    '[INFO] plugin/file: Notify from 127.0.0.1 for example.org.: checking transfer',
    `[INFO] plugin/file: Transferred: example.org. from ${addr}`,
  ]);
  r = await run('www.example.org.');
  assert.deepEqual(r.w.last!.answer.map((a) => a.data), [{ address: '192.0.2.1' }]);
  lines.length = 0;
  await run('example.org.', { type: RRType.SOA, opcode: Opcode.NOTIFY });
  assert.deepEqual(lines, [
    '[INFO] plugin/file: Notify from 127.0.0.1 for example.org.: checking transfer',
    '[INFO] plugin/file: Notify from 127.0.0.1 for example.org.: no SOA serial increase seen',
  ]);
  assert.equal((await run('example.org.', { type: RRType.AXFR })).rc, Rcode.REFUSED);
  assert.equal((await run('www.example.com.')).rc, Rcode.NOERROR);
  assert.equal(next.calls, 1);
  // fallthrough: NXDOMAIN goes on
  const f = new Secondary(new Map([['example.org.', z]]), fall('.'), e).withNext(next);
  await settle(f.serveDNS(makeRequest('nope.example.org.'), new CaptureWriter()));
  assert.equal(next.calls, 2);
  // Transferer
  assert.ok(isTransferer(s));
  const got: number[] = [];
  for await (const b of s.transfer('example.org.', 0)) got.push(...b.map((x) => x.type));
  assert.deepEqual(got, [RRType.SOA, RRType.NS, RRType.A, RRType.A, RRType.SOA]);
  assert.throws(() => s.transfer('example.com.', 0), NotAuthoritativeError);
  // expired
  lines.length = 0;
  z.zone.expired = true;
  assert.equal((await run('www.example.org.')).rc, Rcode.SERVFAIL);
  assert.deepEqual(lines, ['[ERROR] plugin/file: Zone example.org. is expired']);
  await p.close();
});

test('setup: a primary that cannot be reached does not stop the start; shutdown stops the retries', async () => {
  const s = await runSetup(plugin, 'example.org {\n secondary {\n  transfer from 127.0.0.1:1\n }\n}');
  const h = s.chain() as Secondary;
  await s.start();
  assert.equal(await settle(h.serveDNS(makeRequest('www.example.org.'), new CaptureWriter())), Rcode.SERVFAIL);
  assert.deepEqual(await s.stop(), []);
});

const rr = (line: string): ResourceRecord => parseRecord(line, 'cat.example.', 300);
const catBase = ['cat.example. SOA ns h 1 1 1 1 1', 'cat.example. NS invalid.', 'version.cat.example. TXT "2"'];

test('catalog parse (RFC 9432 version 2, CoreDNS errors)', () => {
  const c = parseCatalog('Cat.Example', [...catBase,
    'm2.zones.cat.example. PTR Example.COM.', 'm1.zones.cat.example. PTR example.org.',
    'group.m1.zones.cat.example. TXT "b"', 'group.m1.zones.cat.example. TXT "a"', 'coo.m2.zones.cat.example. PTR other.example.',
    'x.m1.zones.cat.example. TXT "ignored"', 'www.cat.example. A 192.0.2.1'].map(rr));
  assert.deepEqual(c, {
    origin: 'cat.example.',
    members: [
      { id: 'm1', zone: 'example.org.', groups: ['a', 'b'], changeOfOwnership: '' },
      { id: 'm2', zone: 'example.com.', groups: [], changeOfOwnership: 'other.example.' },
    ],
  });
  const bad = (lines: string[], msg: string): void => { assert.throws(() => parseCatalog('cat.example.', lines.map(rr)), { message: msg }); };
  bad(catBase.slice(1), 'catalog zone cat.example. has no SOA record');
  bad([catBase[0]!, catBase[2]!], 'catalog zone cat.example. has no NS record');
  bad(catBase.slice(0, 2), 'catalog zone cat.example. must have exactly one version TXT record');
  bad([...catBase, 'version.cat.example. TXT "1"'], 'catalog zone cat.example. must have exactly one version TXT record');
  bad([...catBase.slice(0, 2), 'version.cat.example. TXT "1"'], 'catalog zone cat.example. has unsupported version "1"');
  bad([...catBase, 'm.zones.cat.example. PTR a.', 'm.zones.cat.example. PTR b.'], 'catalog member m.zones.cat.example. must have exactly one PTR record');
  bad([...catBase, 'a.zones.cat.example. PTR x.', 'b.zones.cat.example. PTR x.'], 'catalog member zone x. is listed by both a and b');
  bad([...catBase, 'a.zones.cat.example. PTR x.', 'coo.a.zones.cat.example. PTR c.', 'coo.a.zones.cat.example. PTR d.'], 'catalog member a has more than one coo PTR record');
  const ch = rr('cat.example. TXT "x"');
  ch.class = 3;
  assert.throws(() => parseCatalog('cat.example.', [...catBase.map(rr), ch]), { message: /^catalog zone cat\.example\. contains non-IN record cat\.example\.\t300\tCH\tTXT\t"x"$/ });
});

const catalogText = (serial: number, members: string[]): string =>
  `$ORIGIN cat.example.\n$TTL 300\n@ SOA ns h ${serial} 3600 600 86400 300\n@ NS invalid.\nversion TXT "2"\n${members.join('\n')}\n`;
const memberZone = (origin: string, addr: string): string =>
  `$ORIGIN ${origin}\n$TTL 300\n@ SOA ns1 h 1 3600 600 86400 300\n@ NS ns1\nns1 A 192.0.2.53\nwww A ${addr}\n`;

test('catalog: member zones added, transferred, reset, skipped, restricted and removed', async () => {
  const p = new Primary(memberZone('example.org.', '192.0.2.1'));
  p.others.set('example.net.', memberZone('example.net.', '192.0.2.2'));
  p.others.set('outside.test.', memberZone('outside.test.', '192.0.2.3'));
  p.others.set('static.test.', memberZone('static.test.', '192.0.2.4'));
  p.others.set('cat.example.', catalogText(1, ['m1.zones PTR example.org.', 'm2.zones PTR example.net.', 'm3.zones PTR outside.test.', 'm4.zones PTR static.test.']));
  const addr = await p.listen();
  const lines: string[] = [];
  const e = env(lines);
  const s = new Secondary(new Map([['cat.example.', [addr]], ['static.test.', ['127.0.0.1:1']]]), fall(), e,
    new Map([['cat.example.', ['example.org.', 'example.net.', 'static.test.']]]));
  await s.zones.get('cat.example.')!.transferIn();
  assert.deepEqual(lines, [
    `[INFO] plugin/file: Transferred: cat.example. from ${addr}`,
    '[INFO] plugin/secondary: Added catalog member zone example.org. from catalog cat.example.',
    '[INFO] plugin/secondary: Added catalog member zone example.net. from catalog cat.example.',
    '[WARNING] plugin/secondary: Skipping catalog member zone static.test. from cat.example.: zone already exists',
    '[WARNING] plugin/secondary: Skipped 1 member zones from catalog cat.example.: outside configured member zones',
    '[INFO] plugin/secondary: Parsed catalog zone cat.example. with 4 member zones',
  ]);
  assert.deepEqual(s.names, ['cat.example.', 'static.test.', 'example.org.', 'example.net.']);
  const a = async (name: string): Promise<{ rc: number; w: CaptureWriter }> => {
    const w = new CaptureWriter();
    return { rc: await settle(s.serveDNS(makeRequest(name), w)), w };
  };
  await until(() => s.zones.get('example.net.')!.zone.serial === 1 && s.zones.get('example.org.')!.zone.serial === 1);
  assert.deepEqual((await a('www.example.net.')).w.last!.answer.map((x) => x.data), [{ address: '192.0.2.2' }]);
  assert.equal((await a('www.outside.test.')).rc, Rcode.REFUSED);

  // example.net. leaves the catalog, example.org. gets a new member ID
  lines.length = 0;
  p.others.set('cat.example.', catalogText(2, ['m9.zones PTR example.org.']));
  await s.zones.get('cat.example.')!.transferIn();
  assert.deepEqual(lines.filter((l) => !l.includes('Transferred: example.')), [
    `[INFO] plugin/file: Transferred: cat.example. from ${addr}`,
    '[INFO] plugin/secondary: Reset catalog member zone example.org. from cat.example. after member ID changed from m1 to m9',
    '[INFO] plugin/secondary: Removed catalog member zone example.net. from catalog cat.example.',
    '[INFO] plugin/secondary: Parsed catalog zone cat.example. with 1 member zones',
  ]);
  assert.equal((await a('www.example.net.')).rc, Rcode.REFUSED);
  await until(() => s.zones.get('example.org.')!.zone.serial === 1);

  // a catalog that does not parse keeps the zone and its members
  lines.length = 0;
  p.others.set('cat.example.', catalogText(3, ['a.zones PTR x.', 'b.zones PTR x.']));
  await assert.rejects(s.zones.get('cat.example.')!.transferIn(), { message: 'catalog member zone x. is listed by both a and b' });
  assert.equal(s.zones.get('cat.example.')!.zone.serial, 2);
  assert.deepEqual(lines, []);
  s.stopDynamic();
  await p.close();
});

test('catalog: a member moves to another catalog only through coo, keeping its data when its ID stays', async () => {
  const p = new Primary(memberZone('example.org.', '192.0.2.1'));
  p.others.set('cat.example.', catalogText(1, ['m1.zones PTR example.org.']));
  p.others.set('new.example.', catalogText(1, ['m1.zones PTR example.org.']).replaceAll('cat.example.', 'new.example.'));
  const addr = await p.listen();
  const lines: string[] = [];
  const s = new Secondary(new Map([['cat.example.', [addr]], ['new.example.', [addr]]]), fall(), env(lines),
    new Map([['cat.example.', []], ['new.example.', []]]));
  await s.zones.get('cat.example.')!.transferIn();
  await until(() => s.zones.get('example.org.')!.zone.serial === 1);
  const before = s.zones.get('example.org.')!;
  lines.length = 0;
  await s.zones.get('new.example.')!.transferIn();
  assert.ok(lines.includes('[WARNING] plugin/secondary: Skipping catalog member zone example.org. from new.example.: zone already exists'));
  p.others.set('cat.example.', catalogText(2, ['m1.zones PTR example.org.', 'coo.m1.zones PTR new.example.']));
  await s.zones.get('cat.example.')!.transferIn();
  lines.length = 0;
  await s.zones.get('new.example.')!.transferIn();
  assert.ok(lines.includes('[INFO] plugin/secondary: Migrated catalog member zone example.org. from catalog cat.example. to new.example., preserving state for member ID m1'));
  const after = s.zones.get('example.org.')!;
  assert.notEqual(after, before);
  assert.equal(after.zone, before.zone);
  s.stopDynamic();
  await p.close();
});

test('SOA timers beyond the Node timer limit (68 years in a generated catalog) never fire early', async () => {
  const p = new Primary(zoneOf(1, 2147483646, 2147483646, 2147483646));
  const addr = await p.listen();
  const z = new SecondaryZone('example.org.', [addr], env([]));
  void z.run();
  await until(() => z.zone.serial === 1);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(p.soaQueries, 0);
  assert.equal(p.axfrs, 1);
  z.stop();
  await p.close();
});
