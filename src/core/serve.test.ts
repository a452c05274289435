// serveMessage on its own: a hand-built ServeTable, handlers written here and a
// sink that captures every reply, so each case asserts on the exact bytes or
// rcodes CoreDNS (core/dnsserver/server.go) and miekg/dns (server.go,
// acceptfunc.go, msg_truncate.go) would send — or on their absence.

import { test, describe, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import dnsPacket from 'dns-packet';
import { serveMessage, type ReplySink, type RoutedBlock, type ServeTable } from './serve.ts';
import type { Request, Transport } from './request.ts';
import { Logger, setLogSink } from './log.ts';
import { LineageStore } from './instance.ts';
import { subscribe } from 'node:diagnostics_channel';
import type { DroppedEvent, Handler, HandlerResult, Lineage, PanicEvent, ResponseWriter } from '../plugin/plugin.ts';
import { PluginError, ServeChannels } from '../plugin/plugin.ts';
import { encodeMessage } from '../wire/encode.ts';
import { decodeMessage } from '../wire/decode.ts';
import { newQuery, replyTo } from '../wire/message.ts';
import { Opcode, Rcode, RRClass, RRType } from '../wire/constants.ts';
import type { Edns, EdnsOption, Message } from '../wire/types.ts';

// ---------------------------------------------------------------- helpers

class CaptureSink implements ReplySink {
  readonly sent: Buffer[] = [];
  send(wire: Uint8Array): void { this.sent.push(Buffer.from(wire)); }
}

interface Dropped { rcode: number; size: number; qname: string }

interface TestTable extends ServeTable {
  readonly dropped: Dropped[];
  panics: number;
}

/** A table as instance.ts builds it: zone → block; `null` is a block with no plugins. */
function makeTable(blocks: Record<string, Handler | null>, opts: { name?: string; classChaos?: boolean; stacktrace?: boolean; debug?: boolean } = {}): TestTable {
  const zones = new Map<string, RoutedBlock>();
  for (const [zone, chain] of Object.entries(blocks)) zones.set(zone, { zone, chain: chain ?? undefined, filters: [], view: '', collect: undefined, next: undefined });
  const t: TestTable = {
    name: opts.name ?? 'dns://:53',
    zones,
    zoneLengths: new Set([...zones.keys()].map((z) => z.length)),
    classChaos: opts.classChaos ?? false,
    debug: opts.debug ?? false,
    stacktrace: opts.stacktrace ?? false,
    log: new Logger(),
    lineage: new LineageStore(),
    ednsSupported: new Set<number>(),
    dropped: [],
    panics: 0,
  };
  tables.set(t.lineage, t);
  return t;
}

// The server reports dropped replies and recovered panics on diagnostics channels, each event naming its
// server (lineage): route them to the table that served them.
const tables = new Map<Lineage, TestTable>();
subscribe(ServeChannels.dropped, (m) => {
  const ev = m as DroppedEvent;
  tables.get(ev.lineage)?.dropped.push({ rcode: ev.rcode, size: ev.replySize, qname: ev.req.qname });
});
subscribe(ServeChannels.panic, (m) => {
  const t = tables.get((m as PanicEvent).lineage);
  if (t !== undefined) t.panics++;
});

interface Served { sink: CaptureSink; result: void | Promise<void> }

function serve(table: ServeTable, wire: Uint8Array, opts: { proto?: Transport; remote?: string } = {}): Served {
  const sink = new CaptureSink();
  const remote = opts.remote ?? '127.0.0.1';
  const local = remote.includes(':') ? '::1' : '127.0.0.1';
  const result = serveMessage(table, Buffer.from(wire), opts.proto ?? 'udp', remote, 40000, local, 53, sink);
  return { sink, result };
}

/** The one reply sent, decoded. */
function only(s: Served): Message {
  assert.equal(s.sink.sent.length, 1, `expected exactly one reply, got ${s.sink.sent.length}`);
  return decodeMessage(s.sink.sent[0]!);
}

interface QueryOpts {
  id?: number;
  cls?: number;
  edns?: Partial<Edns>;
  opcode?: number;
  rd?: boolean;
  cd?: boolean;
  ad?: boolean;
}

function queryMsg(name: string, type: number = RRType.A, o: QueryOpts = {}): Message {
  const m = newQuery(name, type, o.cls ?? RRClass.IN);
  m.id = o.id ?? 0x1234;
  if (o.opcode !== undefined) m.opcode = o.opcode;
  if (o.rd !== undefined) m.rd = o.rd;
  if (o.cd !== undefined) m.cd = o.cd;
  if (o.ad !== undefined) m.ad = o.ad;
  if (o.edns) m.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [], ...o.edns };
  return m;
}

function query(name: string, type: number = RRType.A, o: QueryOpts = {}): Buffer {
  return encodeMessage(queryMsg(name, type, o));
}

/** Wire form of an uncompressed name, e.g. `example.org.` → 07 example 03 org 00. */
function wname(name: string): Buffer {
  const parts: Buffer[] = [];
  for (const label of name.split('.').filter((l) => l !== '')) parts.push(Buffer.from([label.length]), Buffer.from(label, 'latin1'));
  parts.push(Buffer.from([0]));
  return Buffer.concat(parts);
}

function header(id: number, flags: number, qd: number, an: number, ns: number, ar: number): Buffer {
  const b = Buffer.alloc(12);
  b.writeUInt16BE(id, 0);
  b.writeUInt16BE(flags, 2);
  b.writeUInt16BE(qd, 4);
  b.writeUInt16BE(an, 6);
  b.writeUInt16BE(ns, 8);
  b.writeUInt16BE(ar, 10);
  return b;
}

function u16(n: number): Buffer { const b = Buffer.alloc(2); b.writeUInt16BE(n); return b; }

const A_IN = Buffer.from([0, 1, 0, 1]);

/** What dns-packet (the independent decoder used as an oracle) reports. */
interface OraclePacket {
  type: string;
  rcode: string;
  flag_aa: boolean; flag_tc: boolean; flag_rd: boolean; flag_ra: boolean; flag_ad: boolean; flag_cd: boolean;
  questions: Array<{ name: string; type: string; class: string }>;
  answers: Array<{ type: string }>;
  additionals: Array<{ type: string; udpPayloadSize: number; extendedRcode: number; ednsVersion: number; flag_do: boolean; options: Array<{ code: number }> }>;
}

function oracle(wire: Buffer): OraclePacket {
  return dnsPacket.decode(wire) as unknown as OraclePacket;
}

interface Seen { label: string; zone: string; plugin: string; qname: string; name: string; proto: string; server: string; remoteAddress: string; remotePort: number; opcode: number }

/** Answers with one TXT record holding `label`, so a test sees which block served. */
function answering(label: string, seen: Seen[] = []): Handler {
  return {
    name: 'answer',
    serveDNS(req: Request, w: ResponseWriter): HandlerResult {
      seen.push({
        label, zone: req.zone, plugin: req.plugin, qname: req.qname, name: req.name, proto: req.proto,
        server: req.server, remoteAddress: req.remoteAddress, remotePort: req.remotePort, opcode: req.msg.opcode,
      });
      const r = replyTo(req.msg);
      r.aa = true;
      r.answer.push({ name: req.qname, type: RRType.TXT, class: RRClass.IN, ttl: 0, data: { strings: [Buffer.from(label)] } });
      w.writeMsg(r);
      return Rcode.NOERROR;
    },
  };
}

/** An OPT in comparable form: options as `code:hex`. */
function ednsView(e: Edns | undefined): { udpSize: number; version: number; do: boolean; z: number; options: string[] } | undefined {
  if (e === undefined) return undefined;
  return { udpSize: e.udpSize, version: e.version, do: e.do, z: e.z, options: e.options.map((o) => `${o.code}:${Buffer.from(o.data).toString('hex')}`) };
}

function txtLabel(m: Message): string {
  assert.equal(m.answer.length, 1);
  const d = m.answer[0]!.data as { strings: Uint8Array[] };
  return Buffer.from(d.strings[0]!).toString();
}

/** Which block answered `name`/`type` (label of its TXT), or the rcode the server wrote. */
function servedBy(t: ServeTable, name: string, type: number = RRType.A): string {
  const m = only(serve(t, query(name, type)));
  return m.rcode === Rcode.NOERROR ? txtLabel(m) : `rcode ${m.rcode}`;
}

/** Writes `n` A records for the query name. */
function manyA(n: number): Handler {
  return {
    name: 'many',
    serveDNS(req, w) {
      const r = replyTo(req.msg);
      for (let i = 0; i < n; i++) {
        r.answer.push({ name: req.qname, type: RRType.A, class: RRClass.IN, ttl: 300, data: { address: `10.0.${i >> 8}.${i & 255}` } });
      }
      w.writeMsg(r);
      return Rcode.NOERROR;
    },
  };
}

function returning(result: () => HandlerResult): Handler & { calls: number } {
  const h = { name: 'ret', calls: 0, serveDNS: () => { h.calls++; return result(); } };
  return h;
}

let logLines: string[] = [];
let prevSink: ((line: string) => void) | undefined;
beforeEach(() => { logLines = []; prevSink = setLogSink((l) => { logLines.push(l); }); });
afterEach(() => { if (prevSink) setLogSink(prevSink); });

// ---------------------------------------------------------------- routing

describe('routing', () => {
  const t = makeTable({
    'example.org.': answering('example.org'),
    'sub.example.org.': answering('sub'),
    'org.': answering('org'),
    '.': answering('root'),
  });

  test('the longest matching zone wins', () => {
    assert.equal(servedBy(t, 'a.b.sub.example.org.'), 'sub');
    assert.equal(servedBy(t, 'sub.example.org.'), 'sub');
    assert.equal(servedBy(t, 'xsub.example.org.'), 'example.org');
    assert.equal(servedBy(t, 'example.org.'), 'example.org');
    assert.equal(servedBy(t, 'other.org.'), 'org');
    assert.equal(servedBy(t, 'example.net.'), 'root');
  });

  test('matching is case-insensitive and the question keeps the client\'s case', () => {
    const seen: Seen[] = [];
    const t2 = makeTable({ 'sub.example.org.': answering('sub', seen), '.': answering('root', seen) });
    const m = only(serve(t2, query('WwW.SuB.ExAmPlE.OrG.')));
    assert.equal(txtLabel(m), 'sub');
    assert.equal(m.question[0]!.name, 'WwW.SuB.ExAmPlE.OrG.');
    assert.equal(seen[0]!.qname, 'WwW.SuB.ExAmPlE.OrG.');
    assert.equal(seen[0]!.name, 'www.sub.example.org.');
    assert.equal(seen[0]!.zone, 'sub.example.org.');
  });

  test('an escaped dot does not end a label', () => {
    const t2 = makeTable({
      'b.example.org.': answering('b'),
      'a\\.b.example.org.': answering('a.b'),
      'example.org.': answering('example.org'),
    });
    // `a\.b` is one label: its parent is example.org., not b.example.org.
    assert.equal(servedBy(t2, 'x.a\\.b.example.org.'), 'a.b');
    assert.equal(servedBy(t2, 'a\\.b.example.org.'), 'a.b');
    assert.equal(servedBy(t2, 'xa\\.b.example.org.'), 'example.org');
    // `a\\` is a label ending in a backslash: the dot after it does separate labels.
    assert.equal(servedBy(t2, 'a\\\\.b.example.org.'), 'b');
  });

  test('the question name as it arrived on the wire (a literal dot in a label) routes like its escaped form', () => {
    const t2 = makeTable({ 'b.example.org.': answering('b'), 'example.org.': answering('example.org') });
    const wire = Buffer.concat([header(7, 0x0100, 1, 0, 0, 0), Buffer.from([3, 0x61, 0x2e, 0x62]), wname('example.org.'), A_IN]);
    assert.equal(txtLabel(only(serve(t2, wire))), 'example.org');
  });

  test('DS goes to the shallowest matching zone (the parent), other types to the deepest', () => {
    const seen: Seen[] = [];
    const t2 = makeTable({
      'example.org.': answering('example.org', seen),
      'sub.example.org.': answering('sub', seen),
      '.': answering('root', seen),
    });
    assert.equal(servedBy(t2, 'sub.example.org.', RRType.DS), 'example.org');
    assert.equal(seen.at(-1)!.zone, 'example.org.');
    assert.equal(servedBy(t2, 'a.sub.example.org.', RRType.DS), 'example.org');
    assert.equal(servedBy(t2, 'sub.example.org.', RRType.DNSKEY), 'sub');
    // The walk never counts `.`: with only a child zone matching, the child answers the DS.
    const t3 = makeTable({ 'sub.example.org.': answering('sub'), '.': answering('root') });
    assert.equal(servedBy(t3, 'sub.example.org.', RRType.DS), 'sub');
    assert.equal(servedBy(t3, 'example.org.', RRType.DS), 'root');
  });

  test('the DS rule applies to QUERY only: a NOTIFY for a DS goes to the deepest zone (CoreDNS 1.15.0)', () => {
    const t2 = makeTable({ 'example.org.': answering('example.org'), 'sub.example.org.': answering('sub') });
    const m = only(serve(t2, query('sub.example.org.', RRType.DS, { opcode: 4 })));
    assert.equal(txtLabel(m), 'sub');
  });

  test('`.` is the last resort; a name under no zone and no `.` block is REFUSED', () => {
    assert.equal(servedBy(makeTable({ 'example.org.': answering('e'), '.': answering('root') }), 'example.com.'), 'root');
    assert.equal(servedBy(makeTable({ '.': answering('root') }), 'anything.test.'), 'root');
    assert.equal(servedBy(makeTable({ '.': answering('root') }), '.', RRType.NS), 'root');
    assert.equal(servedBy(makeTable({ 'example.org.': answering('e') }), 'example.com.'), `rcode ${Rcode.REFUSED}`);
  });

  test('a zone with no plugins answers REFUSED, even for DS, and a pluginless `.` is skipped', () => {
    const t2 = makeTable({ 'example.org.': answering('example.org'), 'sub.example.org.': null, '.': answering('root') });
    assert.equal(servedBy(t2, 'a.sub.example.org.'), `rcode ${Rcode.REFUSED}`);
    assert.equal(servedBy(t2, 'sub.example.org.', RRType.DS), `rcode ${Rcode.REFUSED}`);
    assert.equal(servedBy(t2, 'a.example.org.'), 'example.org');
    // A pluginless parent stops the DS walk too (CoreDNS refuses as soon as it meets it).
    const t3 = makeTable({ 'example.org.': null, 'sub.example.org.': answering('sub') });
    assert.equal(servedBy(t3, 'sub.example.org.', RRType.DS), `rcode ${Rcode.REFUSED}`);
    assert.equal(servedBy(t3, 'sub.example.org.', RRType.A), 'sub');
    const t4 = makeTable({ 'example.org.': answering('e'), '.': null });
    assert.equal(servedBy(t4, 'example.com.'), `rcode ${Rcode.REFUSED}`);
    assert.equal(servedBy(t4, 'x.example.org.'), 'e');
  });

  test('no match: REFUSED built like CoreDNS\'s SetRcode — id, RD, CD and question copied, no AA/RA/AD, counted as dropped', () => {
    const t2 = makeTable({ 'example.org.': answering('e') });
    const s = serve(t2, query('NoMatch.Example.NET.', RRType.MX, { id: 0xbeef, rd: true, cd: true, ad: true }));
    const expected = Buffer.concat([
      header(0xbeef, 0x8100 | 0x10 | Rcode.REFUSED, 1, 0, 0, 0),
      Buffer.from([7]), Buffer.from('NoMatch'), Buffer.from([7]), Buffer.from('Example'), Buffer.from([3]), Buffer.from('NET'), Buffer.from([0]),
      u16(RRType.MX), u16(RRClass.IN),
    ]);
    assert.deepEqual(s.sink.sent, [expected]);
    assert.deepEqual(t2.dropped, [{ rcode: Rcode.REFUSED, size: expected.length, qname: 'NoMatch.Example.NET.' }]);
    // Oracle: dns-packet reads the same reply.
    const p = oracle(s.sink.sent[0]!);
    assert.equal(p.rcode, 'REFUSED');
    assert.equal(p.type, 'response');
    assert.deepEqual([p.flag_aa, p.flag_ra, p.flag_rd, p.flag_cd, p.flag_ad], [false, false, true, true, false]);
    assert.deepEqual(p.questions, [{ name: 'NoMatch.Example.NET', type: 'MX', class: 'IN' }]);
  });

  test('a NOTIFY is routed like a query; the server\'s error reply keeps opcode NOTIFY and does not copy RD', () => {
    const seen: Seen[] = [];
    const t2 = makeTable({ 'example.org.': answering('e', seen) });
    assert.equal(txtLabel(only(serve(t2, query('example.org.', RRType.SOA, { opcode: 4 })))), 'e');
    assert.equal(seen[0]!.opcode, 4);
    const s = serve(t2, query('example.com.', RRType.SOA, { opcode: 4, rd: true, id: 9 }));
    assert.deepEqual(s.sink.sent[0]!.subarray(0, 12), header(9, 0x8000 | (4 << 11) | Rcode.REFUSED, 1, 0, 0, 0));
  });

  test('the handler sees the block\'s zone, its own name as req.plugin, the server name and the transport', () => {
    const seen: Seen[] = [];
    const t2 = makeTable({ 'example.org.': answering('e', seen), '.': answering('root', seen) }, { name: 'dns://127.0.0.1:1053' });
    serve(t2, query('x.example.org.'), { proto: 'tcp', remote: '192.0.2.7' });
    serve(t2, query('x.example.com.'));
    assert.deepEqual(seen.map((s) => [s.zone, s.plugin, s.server, s.proto, s.remoteAddress, s.remotePort]), [
      ['example.org.', 'answer', 'dns://127.0.0.1:1053', 'tcp', '192.0.2.7', 40000],
      ['.', 'answer', 'dns://127.0.0.1:1053', 'udp', '127.0.0.1', 40000],
    ]);
  });

  test('a table swapped in takes effect for the next message (what a reload does)', () => {
    const t1 = makeTable({ '.': answering('old') });
    const t2 = makeTable({ '.': answering('new') });
    assert.equal(servedBy(t1, 'a.test.'), 'old');
    assert.equal(servedBy(t2, 'a.test.'), 'new');
  });
});

// ---------------------------------------------------------------- library-level checks

describe('header checks (miekg/dns acceptfunc and serveDNS)', () => {
  const h = returning(() => Rcode.NOERROR);
  const t = makeTable({ '.': h });
  beforeEach(() => { h.calls = 0; t.dropped.length = 0; });

  test('a response (QR set) is ignored: no reply, no handler', () => {
    const wire = query('example.org.');
    wire[2]! |= 0x80;
    const s = serve(t, wire);
    assert.deepEqual(s.sink.sent, []);
    assert.equal(s.result, undefined);
    assert.equal(h.calls, 0);
  });

  test('a message shorter than the header is dropped silently', () => {
    for (const len of [0, 1, 11]) {
      const s = serve(t, query('example.org.').subarray(0, len));
      assert.deepEqual(s.sink.sent, [], `length ${len}`);
    }
    assert.equal(h.calls, 0);
  });

  test('opcodes other than QUERY and NOTIFY: NOTIMP from the header alone, opcode kept, AA and Z cleared', () => {
    // id 1234, opcode UPDATE, AA TC RD, RA Z AD CD, rcode 3 — then a question nobody reads.
    const wire = Buffer.concat([Buffer.from([0x12, 0x34, 0x2f, 0xf3, 0, 1, 0, 0, 0, 0, 0, 0]), wname('example.org.'), A_IN]);
    // Bytes CoreDNS 1.14.7 sent for this exact query.
    assert.deepEqual(serve(t, wire).sink.sent, [Buffer.from('1234abb40000000000000000', 'hex')]);
    for (const opcode of [1, 2, 3, 6, 15]) {
      const w = query('example.org.', RRType.A, { opcode, id: 77 });
      const s = serve(t, w);
      assert.deepEqual(s.sink.sent, [header(77, 0x8100 | (opcode << 11) | Rcode.NOTIMP, 0, 0, 0, 0)], `opcode ${opcode}`);
    }
    assert.equal(h.calls, 0);
    assert.deepEqual(t.dropped, []);
  });

  test('QDCOUNT other than 1: FORMERR from the header alone, opcode forced to QUERY, other bits kept', () => {
    // NOTIFY with AA TC RD / RA Z AD CD and two questions.
    const wire = Buffer.concat([Buffer.from([0x12, 0x34, 0x27, 0xf3, 0, 2, 0, 0, 0, 0, 0, 0]), wname('example.org.'), A_IN, wname('example.org.'), A_IN]);
    assert.deepEqual(serve(t, wire).sink.sent, [Buffer.from('123483b10000000000000000', 'hex')]);
    const zero = header(5, 0x0100, 0, 0, 0, 0);
    assert.deepEqual(serve(t, zero).sink.sent, [header(5, 0x8101, 0, 0, 0, 0)]);
    assert.equal(h.calls, 0);
  });

  test('ANCOUNT > 1, NSCOUNT > 1 or ARCOUNT > 2: FORMERR from the header alone', () => {
    const body = Buffer.concat([wname('example.org.'), A_IN]);
    for (const [an, ns, ar] of [[2, 0, 0], [0, 2, 0], [0, 0, 3], [0xffff, 0, 0]] as const) {
      const s = serve(t, Buffer.concat([header(3, 0x0100, 1, an, ns, ar), body]));
      assert.deepEqual(s.sink.sent, [header(3, 0x8101, 0, 0, 0, 0)], `counts ${an}/${ns}/${ar}`);
    }
    assert.equal(h.calls, 0);
  });

  test('one answer, one authority and two additional records are accepted (NOTIFY with SOA, IXFR)', () => {
    const m = queryMsg('example.org.', RRType.SOA, { opcode: 4 });
    m.answer.push({ name: 'example.org.', type: RRType.A, class: RRClass.IN, ttl: 1, data: { address: '192.0.2.1' } });
    m.authority.push({ name: 'example.org.', type: RRType.A, class: RRClass.IN, ttl: 1, data: { address: '192.0.2.2' } });
    m.additional.push({ name: 'example.org.', type: RRType.A, class: RRClass.IN, ttl: 1, data: { address: '192.0.2.3' } });
    m.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [] };
    serve(t, encodeMessage(m));
    assert.equal(h.calls, 1);
  });

  test('a header with QDCOUNT 1 and nothing after it has no question: SERVFAIL, counted as dropped', () => {
    // miekg unpacks a header-only message without error; CoreDNS answers SERVFAIL (1.14.7 sent exactly this).
    const s = serve(t, header(0x1234, 0x0100, 1, 0, 0, 0));
    assert.deepEqual(s.sink.sent, [Buffer.from('123481020000000000000000', 'hex')]);
    assert.deepEqual(t.dropped.map((d) => d.rcode), [Rcode.SERVFAIL]);
    // NOTIFY: opcode kept, RD not copied (SetReply copies RD only for QUERY).
    assert.deepEqual(serve(t, header(0x1234, 0x2100, 1, 0, 0, 0)).sink.sent, [Buffer.from('1234a0020000000000000000', 'hex')]);
    assert.equal(h.calls, 0);
  });

  test('an undecodable question: FORMERR with the header bits kept and no question', () => {
    // Label type 0x40 is reserved.
    const bad = Buffer.concat([header(0x4321, 0x0110 & 0xffff, 1, 0, 0, 0), Buffer.from([0x41, 0x61, 0]), A_IN]);
    assert.deepEqual(serve(t, bad).sink.sent, [header(0x4321, 0x8110 | Rcode.FORMERR, 0, 0, 0, 0)]);
    // Name, qtype and half a qclass (miekg: "bad question qclass"): same.
    const cut = Buffer.concat([header(0x1234, 0x0100, 1, 0, 0, 0), wname('example.org.'), Buffer.from([0, 1, 0])]);
    assert.deepEqual(serve(t, cut).sink.sent, [Buffer.from('123481010000000000000000', 'hex')]);
    assert.equal(h.calls, 0);
  });

  test('a question cut short after its name or its qtype: class/type 0, so REFUSED with that question (CoreDNS 1.14.7 bytes)', () => {
    // miekg's unpackQuestion stops where the message ends and leaves the rest of the question 0;
    // CoreDNS then refuses class 0. The replies are what 1.14.7 sent for these exact queries.
    const nameOnly = Buffer.concat([header(0x1234, 0x0100, 1, 0, 0, 0), wname('example.org.')]);
    assert.deepEqual(serve(t, nameOnly).sink.sent, [Buffer.from('123481050001000000000000076578616d706c65036f72670000000000', 'hex')]);
    const withType = Buffer.concat([nameOnly, u16(RRType.A)]);
    assert.deepEqual(serve(t, withType).sink.sent, [Buffer.from('123481050001000000000000076578616d706c65036f72670000010000', 'hex')]);
    assert.deepEqual(t.dropped.map((d) => d.rcode), [Rcode.REFUSED, Rcode.REFUSED]);
    // Half a qtype, or a name running past the end, is still FORMERR without a question.
    for (const cut of [Buffer.concat([nameOnly, Buffer.from([0])]), nameOnly.subarray(0, nameOnly.length - 3)]) {
      assert.deepEqual(serve(t, cut).sink.sent, [Buffer.from('123481010000000000000000', 'hex')]);
    }
    // With chaos/forward loaded, class 0 passes the class check: the chain sees type 0, class 0.
    const seen: Seen[] = [];
    const chaos = makeTable({ '.': answering('chaos', seen) }, { classChaos: true });
    const r = only(serve(chaos, nameOnly));
    assert.deepEqual(r.question, [{ name: 'example.org.', type: 0, class: 0 }]);
    assert.equal(seen.length, 1);
    assert.equal(h.calls, 0);
  });

  test('section counts above the records present: ignored when the message ends after a whole record (CoreDNS 1.15.0 bytes)', () => {
    // example.org is under no zone: the server's REFUSED shows what was decoded (question, OPT echo).
    const net = makeTable({ 'example.net.': answering('net') });
    const q = Buffer.concat([wname('example.org.'), A_IN]);
    const opt = Buffer.from('00002904d000008000000400030000', 'hex'); // 1232, DO, NSID
    const refused = '123481050001000000000000076578616d706c65036f72670000010001';
    const cases: Array<[Buffer, string]> = [
      [Buffer.concat([header(0x1234, 0x0100, 1, 1, 0, 0), q]), refused],
      [Buffer.concat([header(0x1234, 0x0100, 1, 1, 1, 2), q]), refused],
      // ARCOUNT 2, one OPT: used, so echoed (size and DO; NSID is not echoed since 1.15.0).
      [Buffer.concat([header(0x1234, 0x0100, 1, 0, 0, 2), q, opt]),
        '123481050001000000000001076578616d706c65036f7267000001000100002904d0000080000000'],
      // NSCOUNT 1: the OPT is read as the authority record, so there is no EDNS.
      [Buffer.concat([header(0x1234, 0x0100, 1, 0, 1, 2), q, opt]), refused],
      [Buffer.concat([header(0x1234, 0x0100, 1, 1, 0, 1), q, opt]), refused],
    ];
    const formerr = '123481010001000000000000076578616d706c65036f72670000010001';
    const half: Array<[Buffer, string]> = [
      // A count that runs into half a record: FORMERR with the question.
      [Buffer.concat([header(0x1234, 0x0100, 1, 0, 0, 2), q, opt, Buffer.from([0])]), formerr],
      [Buffer.concat([header(0x1234, 0x0100, 1, 0, 0, 2), q, opt, Buffer.from('0000010001000000', 'hex')]), formerr],
      [Buffer.concat([header(0x1234, 0x0100, 1, 1, 0, 0), q, Buffer.from([0xc0, 12])]), formerr],
    ];
    for (const [wire, want] of [...cases, ...half]) {
      assert.deepEqual(serve(net, wire).sink.sent, [Buffer.from(want, 'hex')], wire.toString('hex'));
    }
    // And the chain runs for such a query.
    const seen: Seen[] = [];
    const org = makeTable({ 'example.org.': answering('org', seen) });
    const r = only(serve(org, Buffer.concat([header(0x1234, 0x0100, 1, 0, 0, 2), q, opt])));
    assert.equal(txtLabel(r), 'org');
    assert.deepEqual(ednsView(r.edns), { udpSize: 1232, version: 0, do: true, z: 0, options: [] });
  });

  test('two OPT records: the last one is used — size, DO, version (CoreDNS 1.15.0 bytes)', () => {
    const net = makeTable({ 'example.net.': answering('net') });
    const q = Buffer.concat([header(0x1234, 0x0100, 1, 0, 0, 2), wname('example.org.'), A_IN]);
    const a = Buffer.from('00002910000000800000040003' + '0000', 'hex'); // 4096, DO, NSID
    const b = Buffer.from('00002904d000000000000c000a00080102030405060708', 'hex'); // 1232, COOKIE
    const v1 = Buffer.from('0000290200000100000000', 'hex'); // 512, version 1
    const cases: Array<[Buffer[], string]> = [
      [[a, b], '123481050001000000000001076578616d706c65036f7267000001000100002904d0000000000000'],
      [[b, a], '123481050001000000000001076578616d706c65036f726700000100010000291000000080000000'],
      [[v1, b], '123481050001000000000001076578616d706c65036f7267000001000100002904d0000000000000'],
      // The last OPT has version 1: BADVERS.
      [[b, v1], '123481000001000000000001076578616d706c65036f726700000100010000290000010000000000'],
    ];
    for (const [opts, want] of cases) {
      assert.deepEqual(serve(net, Buffer.concat([q, ...opts])).sink.sent, [Buffer.from(want, 'hex')], want);
    }
    // The chain sees the last OPT as the request's EDNS; the reply carries only that one.
    const seen: Seen[] = [];
    let size = 0;
    const org = makeTable({ 'example.org.': { name: 'size', serveDNS(req, w) { size = req.size; return answering('org', seen).serveDNS(req, w); } } });
    const r = only(serve(org, Buffer.concat([q, b, a])));
    assert.equal(size, 4096);
    assert.deepEqual(ednsView(r.edns), { udpSize: 4096, version: 0, do: true, z: 0, options: [] });
    assert.deepEqual(r.additional, []);
  });

  test('a record that fails to unpack: FORMERR with the question parsed so far, no other records', () => {
    const question = Buffer.concat([wname('Example.org.'), A_IN]);
    // An answer record whose rdlength runs past the end of the message.
    const badAnswer = Buffer.concat([Buffer.from([0xc0, 12]), A_IN, Buffer.from([0, 0, 0, 60, 0, 4, 10, 0])]);
    const s = serve(t, Buffer.concat([header(0x5555, 0x0130, 1, 1, 0, 0), question, badAnswer]));
    // RD, AD, CD kept; question echoed as sent; counts 1/0/0/0.
    assert.deepEqual(s.sink.sent, [Buffer.concat([header(0x5555, 0x8131, 1, 0, 0, 0), question])]);
    const p = oracle(s.sink.sent[0]!);
    assert.equal(p.rcode, 'FORMERR');
    assert.deepEqual(p.questions, [{ name: 'Example.org', type: 'A', class: 'IN' }]);
    assert.equal(h.calls, 0);
    assert.deepEqual(t.dropped, []);
  });

  test('a FORMERR reply leaves the OPT of the query out', () => {
    const m = queryMsg('example.org.', RRType.A, { edns: { udpSize: 4096 } });
    const wire = encodeMessage(m);
    // Corrupt the OPT's rdlength so it runs past the end.
    wire[wire.length - 1] = 9;
    const r = only(serve(t, wire));
    assert.equal(r.rcode, Rcode.FORMERR);
    assert.equal(r.edns, undefined);
    assert.equal(r.question.length, 1);
  });
});

// ---------------------------------------------------------------- class and EDNS version

describe('opcodes a block allowed (CoreDNS 1.15.0 AllowOpcode: dynupdate\'s UPDATE)', () => {
  /** example.org. allows UPDATE; example.net. does not; the address accepts UPDATE because of example.org. */
  function updateTable(): { t: TestTable; calls: Message[] } {
    const calls: Message[] = [];
    const h: Handler = {
      name: 'dynupdate',
      serveDNS(req: Request, w: ResponseWriter): HandlerResult {
        calls.push(req.msg);
        const r = replyTo(req.msg);
        r.aa = true;
        w.writeMsg(r);
        return Rcode.NOERROR;
      },
    };
    const base = makeTable({ 'example.org.': h, 'example.net.': h, 'empty.test.': null });
    const zones = base.zones as Map<string, RoutedBlock>;
    zones.set('example.org.', { ...zones.get('example.org.')!, opcodes: new Set([Opcode.UPDATE]) });
    const t: TestTable = Object.assign(base, { opcodes: new Set([Opcode.UPDATE]) });
    return { t, calls };
  }

  /** An UPDATE of `zone` with `an` prerequisite and `ns` update records (all `x.ZONE A 192.0.2.1`). */
  function update(zone: string, an: number, ns: number, id = 9): Buffer {
    const m = queryMsg(zone, RRType.SOA, { opcode: Opcode.UPDATE, id });
    m.rd = false;
    const rr = { name: `x.${zone}`, type: RRType.A, class: RRClass.IN, ttl: 0, data: { address: '192.0.2.1' } };
    m.answer = Array.from({ length: an }, () => ({ ...rr }));
    m.authority = Array.from({ length: ns }, () => ({ ...rr, ttl: 60 }));
    return encodeMessage(m);
  }

  test('the allowing block gets the UPDATE whatever its section counts', () => {
    const { t, calls } = updateTable();
    const s = serve(t, update('example.org.', 3, 40));
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.answer.length, 3);
    assert.equal(calls[0]!.authority.length, 40);
    const r = decodeMessage(s.sink.sent[0]!);
    assert.equal(r.opcode, Opcode.UPDATE);
    assert.equal(r.rcode, Rcode.NOERROR);
  });

  test('another block of the address: NOTIMP written by the server (question kept, counted as dropped); no block: REFUSED', () => {
    const { t, calls } = updateTable();
    const r = decodeMessage(serve(t, update('example.net.', 0, 2)).sink.sent[0]!);
    assert.equal(r.rcode, Rcode.NOTIMP);
    assert.equal(r.opcode, Opcode.UPDATE);
    assert.deepEqual(r.question, [{ name: 'example.net.', type: RRType.SOA, class: RRClass.IN }]);
    assert.equal(decodeMessage(serve(t, update('nowhere.test.', 0, 1)).sink.sent[0]!).rcode, Rcode.REFUSED);
    // A zone without plugins refuses before the opcode is looked at, as CoreDNS's nil pluginChain check.
    assert.equal(decodeMessage(serve(t, update('empty.test.', 0, 1)).sink.sent[0]!).rcode, Rcode.REFUSED);
    assert.equal(calls.length, 0);
    assert.deepEqual(t.dropped.map((d) => d.rcode), [Rcode.NOTIMP, Rcode.REFUSED, Rcode.REFUSED]);
  });

  test('header checks still apply: one question (FORMERR), other opcodes NOTIMP, undecodable FORMERR', () => {
    const { t, calls } = updateTable();
    const none = Buffer.from(update('example.org.', 0, 1));
    none.writeUInt16BE(0, 4);
    assert.deepEqual(serve(t, none).sink.sent, [header(9, 0x8001, 0, 0, 0, 0)]);
    const status = query('example.org.', RRType.SOA, { opcode: 2, id: 9 });
    assert.deepEqual(serve(t, status).sink.sent, [header(9, 0x8100 | (2 << 11) | Rcode.NOTIMP, 0, 0, 0, 0)]);
    const cut = update('example.org.', 0, 2).subarray(0, 40);
    assert.equal(decodeMessage(serve(t, cut).sink.sent[0]!).rcode, Rcode.FORMERR);
    assert.equal(calls.length, 0);
  });

  test('an address where no block allowed it answers NOTIMP from the header, as before', () => {
    const { t, calls } = updateTable();
    const plain: ServeTable = { ...t, opcodes: undefined };
    assert.deepEqual(serve(plain, update('example.org.', 0, 1)).sink.sent, [header(9, 0x8000 | (Opcode.UPDATE << 11) | Rcode.NOTIMP, 0, 0, 0, 0)]);
    assert.equal(calls.length, 0);
  });
});

describe('class and EDNS version', () => {
  test('a class other than IN is REFUSED (question kept, counted as dropped) unless chaos/forward is loaded', () => {
    for (const cls of [RRClass.CH, RRClass.HS, RRClass.ANY]) {
      const h = returning(() => Rcode.NOERROR);
      const t = makeTable({ '.': h });
      const r = only(serve(t, query('version.bind.', RRType.TXT, { cls })));
      assert.equal(r.rcode, Rcode.REFUSED);
      assert.deepEqual(r.question, [{ name: 'version.bind.', type: RRType.TXT, class: cls }]);
      assert.deepEqual(t.dropped.map((d) => d.rcode), [Rcode.REFUSED]);
      assert.equal(h.calls, 0);
    }
    const seen: Seen[] = [];
    const chaos = makeTable({ '.': answering('chaos', seen) }, { classChaos: true });
    assert.equal(txtLabel(only(serve(chaos, query('version.bind.', RRType.TXT, { cls: RRClass.CH })))), 'chaos');
    assert.equal(seen.length, 1);
  });

  test('the class check comes before the EDNS version check, and its REFUSED carries a version-0 OPT', () => {
    const h = returning(() => Rcode.NOERROR);
    const r = only(serve(makeTable({ '.': h }), query('version.bind.', RRType.TXT, { cls: RRClass.CH, edns: { version: 1, udpSize: 2048 } })));
    assert.equal(r.rcode, Rcode.REFUSED);
    assert.deepEqual(ednsView(r.edns), { udpSize: 2048, version: 0, do: false, z: 0, options: [] });
  });

  test('EDNS version above 0: BADVERS (header rcode 0, OPT extended rcode 1, size 0), no plugin, not dropped', () => {
    const h = returning(() => Rcode.NOERROR);
    const t = makeTable({ '.': h });
    const cookie: EdnsOption = { code: 10, data: Buffer.from('0102030405060708', 'hex') };
    const s = serve(t, query('example.org.', RRType.A, { id: 0xabcd, cd: true, edns: { version: 1, udpSize: 4096, do: true, options: [cookie] } }));
    const expected = Buffer.concat([
      header(0xabcd, 0x8110, 1, 0, 0, 1),
      wname('example.org.'), A_IN,
      Buffer.from([0, 0, 41, 0, 0, 1, 0, 0, 0, 0, 0]),
    ]);
    assert.deepEqual(s.sink.sent, [expected]);
    assert.equal(decodeMessage(s.sink.sent[0]!).rcode, Rcode.BADVERS);
    const p = oracle(s.sink.sent[0]!);
    const opt = p.additionals[0]!;
    assert.deepEqual([opt.type, opt.udpPayloadSize, opt.extendedRcode, opt.ednsVersion, opt.flag_do], ['OPT', 0, 1, 0, false]);
    assert.equal(h.calls, 0);
    assert.deepEqual(t.dropped, []);
  });
});

// ---------------------------------------------------------------- rcode contract

describe('the rcode contract', () => {
  test('SERVFAIL, REFUSED, FORMERR, NOTIMP returned without writing: the server writes that rcode (not as dropped)', () => {
    for (const rc of [Rcode.SERVFAIL, Rcode.REFUSED, Rcode.FORMERR, Rcode.NOTIMP]) {
      const t = makeTable({ 'example.org.': returning(() => rc) });
      const s = serve(t, query('www.example.org.', RRType.AAAA, { id: 42 }));
      assert.equal(s.result, undefined);
      assert.deepEqual(s.sink.sent, [Buffer.concat([header(42, 0x8100 | rc, 1, 0, 0, 0), wname('www.example.org.'), u16(RRType.AAAA), u16(RRClass.IN)])], `rcode ${rc}`);
      assert.deepEqual(t.dropped, []);
    }
  });

  test('any other rcode means "already written": nothing is sent when the handler did not write', () => {
    for (const rc of [Rcode.NOERROR, Rcode.NXDOMAIN, Rcode.YXDOMAIN, Rcode.NOTAUTH, Rcode.BADVERS, Rcode.BADCOOKIE]) {
      const t = makeTable({ '.': returning(() => rc) });
      const s = serve(t, query('example.org.'));
      assert.deepEqual(s.sink.sent, [], `rcode ${rc}`);
      assert.deepEqual(t.dropped, []);
    }
  });

  test('a handler that writes and then returns SERVFAIL makes the client get two messages', () => {
    const t = makeTable({
      '.': {
        name: 'twice',
        serveDNS(req, w) {
          const r = replyTo(req.msg);
          r.rcode = Rcode.NXDOMAIN;
          w.writeMsg(r);
          return Rcode.SERVFAIL;
        },
      },
    });
    const s = serve(t, query('example.org.'));
    assert.deepEqual(s.sink.sent.map((b) => decodeMessage(b).rcode), [Rcode.NXDOMAIN, Rcode.SERVFAIL]);
  });

  test('an async handler: serveMessage returns a promise, the reply comes when it settles', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const t = makeTable({ '.': { name: 'slow', serveDNS: async () => { await gate; return Rcode.REFUSED; } } });
    const s = serve(t, query('example.org.'));
    assert.ok(s.result instanceof Promise);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(s.sink.sent, []);
    release();
    await s.result;
    assert.equal(only(s).rcode, Rcode.REFUSED);
  });

  test('an async handler that writes and returns NOERROR: exactly its reply', async () => {
    const inner = answering('async');
    const t = makeTable({ '.': { name: 'async', serveDNS: async (req, w) => { await Promise.resolve(); return inner.serveDNS(req, w); } } });
    const s = serve(t, query('example.org.'));
    await s.result;
    assert.equal(txtLabel(only(s)), 'async');
  });

  test('an async handler returning NXDOMAIN without writing: nothing sent', async () => {
    const t = makeTable({ '.': { name: 'nx', serveDNS: async () => Rcode.NXDOMAIN } });
    const s = serve(t, query('example.org.'));
    await s.result;
    assert.deepEqual(s.sink.sent, []);
  });

  test('a thrown PluginError: its rcode decides, nothing is logged, no panic', async () => {
    const cases: Array<[string, Handler, number | undefined]> = [
      ['sync REFUSED', { name: 'p', serveDNS: () => { throw new PluginError(Rcode.REFUSED, 'no'); } }, Rcode.REFUSED],
      ['sync SERVFAIL', { name: 'p', serveDNS: () => { throw new PluginError(Rcode.SERVFAIL, 'upstream down'); } }, Rcode.SERVFAIL],
      ['sync NXDOMAIN', { name: 'p', serveDNS: () => { throw new PluginError(Rcode.NXDOMAIN, 'written already'); } }, undefined],
      ['async SERVFAIL', { name: 'p', serveDNS: async () => { throw new PluginError(Rcode.SERVFAIL, 'x'); } }, Rcode.SERVFAIL],
      ['async NOERROR', { name: 'p', serveDNS: async () => { throw new PluginError(Rcode.NOERROR, 'x'); } }, undefined],
    ];
    for (const [label, handler, rc] of cases) {
      const t = makeTable({ '.': handler });
      const s = serve(t, query('example.org.'));
      await s.result;
      assert.deepEqual(s.sink.sent.map((b) => decodeMessage(b).rcode), rc === undefined ? [] : [rc], label);
      assert.equal(t.panics, 0, label);
      assert.deepEqual(t.dropped, [], label);
    }
    assert.deepEqual(logLines, []);
  });

  test('a thrown exception is recovered: SERVFAIL, CoreDNS\'s log line, a panic event, counted as dropped', async () => {
    const cases: Array<[string, Handler]> = [
      ['sync Error', { name: 'p', serveDNS: () => { throw new Error('boom'); } }],
      ['sync string', { name: 'p', serveDNS: () => { throw 'boom'; } }],
      ['async Error', { name: 'p', serveDNS: async () => { throw new TypeError('boom'); } }],
    ];
    for (const [label, handler] of cases) {
      logLines = [];
      const t = makeTable({ '.': handler }, { name: 'dns://:53' });
      const s = serve(t, query('example.org.', RRType.A, { id: 99, edns: { udpSize: 1400 } }));
      await s.result;
      const r = only(s);
      assert.equal(r.rcode, Rcode.SERVFAIL, label);
      assert.equal(r.edns?.udpSize, 1400, label);
      assert.deepEqual(logLines, ['[ERROR] Recovered from panic in server: "dns://:53" boom'], label);
      assert.equal(t.panics, 1, label);
      assert.deepEqual(t.dropped.map((d) => d.rcode), [Rcode.SERVFAIL], label);
    }
  });

  test('the server name in the panic line is quoted as Go\'s %q does', () => {
    const t = makeTable({ '.': { name: 'p', serveDNS: () => { throw new Error('x'); } } }, { name: 'dns://[::1]:1053' });
    serve(t, query('example.org.'));
    assert.deepEqual(logLines, ['[ERROR] Recovered from panic in server: "dns://[::1]:1053" x']);
  });

  test('errors { stacktrace }: the recovered line is followed by the stack', () => {
    const err = new Error('boom');
    const t = makeTable({ '.': { name: 'p', serveDNS: () => { throw err; } } }, { stacktrace: true });
    serve(t, query('example.org.'));
    assert.equal(logLines.length, 1);
    assert.equal(logLines[0], `[ERROR] Recovered from panic in server: "dns://:53" boom\n${err.stack}`);
    assert.match(logLines[0]!, /\n.*Error: boom\n\s+at /);
  });

  test('with debug on, an exception is not recovered: no reply, no log line, the process dies', () => {
    // Run in a child: the exception escapes to the event loop on purpose.
    const serveUrl = new URL('./serve.ts', import.meta.url).href;
    const script = `
      import { serveMessage } from ${JSON.stringify(serveUrl)};
      const sent = [];
      const t = { name: 'dns://:53', zones: new Map([['.', { zone: '.', chain: { name: 'p', serveDNS() { throw new Error('debug-boom'); } } }]]),
        zoneLengths: new Set([1]), classChaos: false, debug: true, stacktrace: false };
      const q = Buffer.from('123401000001000000000000076578616d706c65036f72670000010001', 'hex');
      serveMessage(t, q, 'udp', '127.0.0.1', 1, '127.0.0.1', 53, { send(w) { sent.push(w); } });
      process.on('exit', () => { process.stdout.write('sent=' + sent.length); });
    `;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 10000 });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /Error: debug-boom/);
    assert.equal(r.stdout, 'sent=0');
  });
});

// ---------------------------------------------------------------- SizeAndDo

describe('SizeAndDo: the reply OPT', () => {
  const opts: EdnsOption[] = [
    { code: 3, data: Buffer.alloc(0) },                              // NSID
    { code: 8, data: Buffer.from('00011800c00002', 'hex') },         // ECS
    { code: 10, data: Buffer.from('0102030405060708', 'hex') },      // COOKIE
    { code: 15, data: Buffer.from('0000', 'hex') },                  // EDE from a client
    { code: 9, data: Buffer.alloc(0) },                              // EXPIRE
    { code: 65001, data: Buffer.from('ff', 'hex') },                 // local use
    { code: 11, data: Buffer.alloc(0) },                             // TCP-KEEPALIVE
    { code: 12, data: Buffer.alloc(4) },                             // PADDING
  ];
  // CoreDNS 1.15.0 echoes none of them unless a plugin registered the code (1.14.7 echoed 3, 10, 9, 11, 12);
  // the registered case is the last describe of this file, as a registration lasts for the whole process.
  const echoed: number[] = [];

  test('a server-written reply gets the query\'s OPT: same size, version 0, DO kept, low flag bits cleared, no unregistered option', () => {
    const t = makeTable({ 'example.org.': answering('e') });
    const s = serve(t, query('example.com.', RRType.A, { id: 1, edns: { udpSize: 1232, do: true, z: 0x7fff, options: opts } }));
    const optRdata = Buffer.concat(opts.filter((o) => echoed.includes(o.code)).map((o) => Buffer.concat([u16(o.code), u16(o.data.length), Buffer.from(o.data)])));
    const expected = Buffer.concat([
      header(1, 0x8100 | Rcode.REFUSED, 1, 0, 0, 1),
      wname('example.com.'), A_IN,
      Buffer.from([0, 0, 41]), u16(1232), Buffer.from([0, 0, 0xff, 0x00]), u16(optRdata.length), optRdata,
    ]);
    assert.deepEqual(s.sink.sent, [expected]);
    const p = oracle(s.sink.sent[0]!);
    const opt = p.additionals[0]!;
    assert.equal(opt.udpPayloadSize, 1232);
    assert.equal(opt.flag_do, true);
    assert.deepEqual(opt.options.map((o) => o.code), echoed);
  });

  test('a plugin reply without OPT gets the query\'s (filtered) OPT', () => {
    const t = makeTable({ '.': answering('x') });
    const r = only(serve(t, query('example.org.', RRType.A, { edns: { udpSize: 4000, do: false, options: opts } })));
    assert.equal(txtLabel(r), 'x');
    assert.deepEqual(ednsView(r.edns), { udpSize: 4000, version: 0, do: false, z: 0, options: [] });
  });

  test('options left out of the echoed OPT no longer count in the request\'s length (log\'s {size}), as CoreDNS strips them from the request', () => {
    for (const via of ['msg', 'wire', 'own-opt'] as const) {
      let seen: Request | undefined;
      const t = makeTable({
        '.': {
          name: 'p',
          serveDNS(req, w) {
            seen = req;
            const r = replyTo(req.msg);
            if (via === 'own-opt') r.edns = { udpSize: 512, version: 0, do: false, z: 0, options: [] };
            if (via === 'wire') w.writeWire(encodeMessage(r)); else w.writeMsg(r);
            return Rcode.NOERROR;
          },
        },
      });
      const q = query('example.org.', RRType.A, { edns: { udpSize: 1232, do: false, options: [opts[2]!, opts[0]!] } });
      serve(t, q);
      // COOKIE (4 + 8) and NSID (4 + 0) are not echoed; a reply with its own OPT echoes nothing and strips nothing
      assert.equal(seen!.length, via === 'own-opt' ? q.length : q.length - 16, via);
    }
  });

  test('a plugin reply with its own OPT: normalised to the query\'s size and DO, its options kept as they are', () => {
    const ede: EdnsOption = { code: 15, data: Buffer.from('0012', 'hex') };
    const t = makeTable({
      '.': {
        name: 'upstream',
        serveDNS(req, w) {
          const r = replyTo(req.msg);
          r.rcode = Rcode.BADCOOKIE; // an extended rcode survives the normalisation
          r.edns = { udpSize: 512, version: 0, do: false, z: 0x00ff, options: [ede, { code: 65001, data: Buffer.from('aa', 'hex') }] };
          w.writeMsg(r);
          return Rcode.NOERROR;
        },
      },
    });
    const r = only(serve(t, query('example.org.', RRType.A, { edns: { udpSize: 1400, do: true, options: [opts[2]!] } })));
    assert.equal(r.rcode, Rcode.BADCOOKIE);
    assert.deepEqual(ednsView(r.edns), { udpSize: 1400, version: 0, do: true, z: 0, options: ['15:0012', '65001:aa'] });
  });

  test('a query without OPT: the reply is left as the plugin built it', () => {
    const withOpt: Handler = {
      name: 'o',
      serveDNS(req, w) {
        const r = replyTo(req.msg);
        r.edns = { udpSize: 4096, version: 0, do: false, z: 0, options: [] };
        w.writeMsg(r);
        return 0;
      },
    };
    assert.deepEqual(ednsView(only(serve(makeTable({ '.': withOpt }), query('example.org.'))).edns), { udpSize: 4096, version: 0, do: false, z: 0, options: [] });
    assert.equal(only(serve(makeTable({ '.': answering('x') }), query('example.org.'))).edns, undefined);
    assert.equal(only(serve(makeTable({}), query('example.org.'))).edns, undefined);
  });
});

// ---------------------------------------------------------------- truncation

describe('fitting the reply to the client (Scrub)', () => {
  // example.org. A: header 12 + question 17; a compressed A record is 16 bytes, uncompressed 27; OPT 11.
  function big(n: number, o: QueryOpts = {}, proto: Transport = 'udp', remote = '127.0.0.1'): { wire: Buffer; msg: Message } {
    const s = serve(makeTable({ '.': manyA(n) }), query('example.org.', RRType.A, o), { proto, remote });
    assert.equal(s.sink.sent.length, 1);
    return { wire: s.sink.sent[0]!, msg: decodeMessage(s.sink.sent[0]!) };
  }

  test('UDP without EDNS: cut to 512 bytes, whole records in order, TC set', () => {
    const { wire, msg } = big(40);
    assert.equal(wire.length, 12 + 17 + 30 * 16);
    assert.equal(msg.tc, true);
    assert.equal(msg.answer.length, 30);
    assert.equal((msg.answer[29]!.data as { address: string }).address, '10.0.0.29');
    const p = oracle(wire);
    assert.equal(p.flag_tc, true);
    assert.equal(p.answers.length, 30);
  });

  test('UDP: a reply that fits only compressed is sent compressed, complete, without TC', () => {
    const { wire, msg } = big(25);
    assert.equal(wire.length, 12 + 17 + 25 * 16);
    assert.equal(msg.tc, false);
    assert.equal(msg.answer.length, 25);
  });

  test('UDP with EDNS: cut to the advertised size, the OPT kept at the end', () => {
    const { wire, msg } = big(100, { edns: { udpSize: 1232 } });
    assert.equal(msg.answer.length, Math.floor((1232 - 11 - 29) / 16));
    assert.equal(wire.length, 29 + 74 * 16 + 11);
    assert.equal(msg.tc, true);
    assert.equal(msg.edns?.udpSize, 1232);
  });

  test('UDP with an EDNS size below 512: 512 is used', () => {
    const { wire, msg } = big(40, { edns: { udpSize: 100 } });
    assert.equal(msg.answer.length, Math.floor((512 - 11 - 29) / 16));
    assert.ok(wire.length <= 512);
    assert.equal(msg.tc, true);
  });

  test('UDP with a large EDNS size: the whole reply, uncompressed below 1480 bytes for IPv4, compressed above', () => {
    const small = big(50, { edns: { udpSize: 4096 } });
    assert.equal(small.wire.length, 29 + 50 * 27 + 11);
    assert.equal(small.msg.tc, false);
    const larger = big(55, { edns: { udpSize: 4096 } });
    assert.equal(larger.wire.length, 29 + 55 * 16 + 11);
    assert.equal(larger.msg.answer.length, 55);
    assert.equal(larger.msg.tc, false);
  });

  test('UDP from an IPv6 client: compressed above 1220 bytes', () => {
    const { wire, msg } = big(50, { edns: { udpSize: 4096 } }, 'udp', '::1');
    assert.equal(wire.length, 29 + 50 * 16 + 11);
    assert.equal(msg.answer.length, 50);
    assert.equal(msg.tc, false);
  });

  test('TCP: no 512/EDNS limit and no compression while it fits 65535', () => {
    const { wire, msg } = big(60, {}, 'tcp');
    assert.equal(wire.length, 29 + 60 * 27);
    assert.equal(msg.tc, false);
    assert.equal(msg.answer.length, 60);
    const edns = big(100, { edns: { udpSize: 512 } }, 'tcp');
    assert.equal(edns.msg.answer.length, 100);
    assert.equal(edns.msg.tc, false);
  });

  // The replies CoreDNS 1.14.7 sent for `hosts` files giving big.example.org 4500 and mid.example.org
  // 3000 addresses (10.0.0.0, 10.0.0.1, …): length, counts and the SHA-256 of the whole reply.
  // Query: id 0x1234, RD, one question, with or without OPT (version 0, no flags, no options).
  function hostsLike(n: number): Handler {
    return {
      name: 'hosts',
      serveDNS(req, w) {
        const r = replyTo(req.msg);
        r.aa = true;
        for (let i = 0; i < n; i++) {
          r.answer.push({ name: req.qname, type: RRType.A, class: RRClass.IN, ttl: 3600, data: { address: `10.0.${i >> 8}.${i & 255}` } });
        }
        w.writeMsg(r);
        return Rcode.NOERROR;
      },
    };
  }
  function corednsReply(name: string, n: number, proto: Transport, udpSize?: number): { wire: Buffer; msg: Message; sha: string } {
    const t = makeTable({ '.': hostsLike(n) });
    const s = serve(t, query(name, RRType.A, udpSize === undefined ? {} : { edns: { udpSize } }), { proto });
    assert.equal(s.sink.sent.length, 1);
    assert.equal(t.panics, 0);
    assert.deepEqual(logLines, []);
    const wire = s.sink.sent[0]!;
    return { wire, msg: decodeMessage(wire), sha: createHash('sha256').update(wire).digest('hex') };
  }

  test('a reply over 65535 octets uncompressed is truncated, not an error: exactly CoreDNS\'s record count and bytes', () => {
    // dig +tcp: "flags: qr aa tc rd; ANSWER: 4093", 65521 bytes (4092 and 65528 with dig's cookie).
    const tcp = corednsReply('big.example.org.', 4500, 'tcp');
    assert.equal(tcp.wire.length, 65521);
    assert.equal(tcp.msg.answer.length, 4093);
    assert.equal(tcp.msg.tc, true);
    assert.equal(tcp.sha, 'e29545a61fb446e3b8fcf83bd4f0d3558325411856bd549ac6e678b6da032b2e');
    const tcpEdns = corednsReply('big.example.org.', 4500, 'tcp', 65535);
    assert.equal(tcpEdns.wire.length, 65532);
    assert.equal(tcpEdns.msg.answer.length, 4093);
    assert.equal(tcpEdns.sha, '1d7657de9a67f0bf9470f8ca451aa34d7855ea2218b661a56de5ec8c792cd686');
    // UDP with a large EDNS size: cut to that size (kdig +bufsize=65000: ANSWER 4059, 64988 bytes).
    const udp = corednsReply('big.example.org.', 4500, 'udp', 65000);
    assert.equal(udp.wire.length, 64988);
    assert.equal(udp.msg.answer.length, 4059);
    assert.equal(udp.msg.tc, true);
    assert.equal(udp.sha, 'ef5a30bc10e98814130e8b4b478efce960cbc72897c3212177b9df725a561606');
    // EDNS 65535 over UDP: the same reply as over TCP, which no UDP socket can send (EMSGSIZE: neither
    // CoreDNS nor nodens delivers it; kdig +bufsize=65535 times out against both).
    assert.equal(corednsReply('big.example.org.', 4500, 'udp', 65535).sha, tcpEdns.sha);
  });

  test('a reply that fits 65535 octets only compressed goes out compressed and whole (CoreDNS bytes)', () => {
    const tcp = corednsReply('mid.example.org.', 3000, 'tcp');
    assert.equal(tcp.wire.length, 48033);
    assert.equal(tcp.msg.answer.length, 3000);
    assert.equal(tcp.msg.tc, false);
    assert.equal(tcp.sha, '33d3ec1a70908840e1ba57e3f3067a44f093f5c153c686e649aeb12c1c48d135');
    const udp = corednsReply('mid.example.org.', 3000, 'udp', 65535);
    assert.equal(udp.wire.length, 48044);
    assert.equal(udp.msg.answer.length, 3000);
    assert.equal(udp.msg.tc, false);
    assert.equal(udp.sha, 'd11cc3c5fab554d6a397bb23dd9f9035519d63ba362e917a584dda025a23a0d3');
  });


});

// ---------------------------------------------------------------- writeWire and EDE

describe('writeWire (ready-made replies) and Extended DNS Errors', () => {
  /** A handler that sends `build(req)` through writeWire. */
  function wireHandler(build: (req: Request) => Uint8Array, before?: (req: Request) => void): Handler {
    return { name: 'cache', serveDNS(req, w) { before?.(req); w.writeWire(build(req)); return Rcode.NOERROR; } };
  }

  function readyReply(req: Request, n = 2, edns?: Edns): Buffer {
    const r = replyTo(req.msg);
    r.ra = true;
    for (let i = 0; i < n; i++) r.answer.push({ name: req.qname, type: RRType.A, class: RRClass.IN, ttl: 30, data: { address: `10.1.${i >> 8}.${i & 255}` } });
    if (edns) r.edns = edns;
    return encodeMessage(r, { compress: true });
  }

  test('a client without EDNS gets the bytes exactly as written', () => {
    let written: Buffer | undefined;
    const t = makeTable({ '.': wireHandler((req) => { written = readyReply(req); return Buffer.from(written); }) });
    const s = serve(t, query('example.org.'));
    assert.deepEqual(s.sink.sent, [written]);
  });

  test('an EDNS client: the query\'s OPT is appended (size, DO, no unregistered option) and ARCOUNT raised', () => {
    let written: Buffer | undefined;
    const t = makeTable({ '.': wireHandler((req) => { written = readyReply(req); return Buffer.from(written); }) });
    const cookie = Buffer.from('0102030405060708', 'hex');
    const s = serve(t, query('example.org.', RRType.A, { edns: { udpSize: 1232, do: true, z: 0x0001, options: [{ code: 8, data: Buffer.from('0001', 'hex') }, { code: 10, data: cookie }] } }));
    const patched = Buffer.from(written!);
    patched.writeUInt16BE(1, 10);
    const expected = Buffer.concat([patched, Buffer.from([0, 0, 41]), u16(1232), Buffer.from([0, 0, 0x80, 0]), u16(0)]);
    assert.deepEqual(s.sink.sent, [expected]);
    // The same result as the structured path would give.
    const viaMsg = only(serve(makeTable({ '.': { name: 'm', serveDNS: (req, w) => { w.writeMsg(decodeMessage(readyReply(req))); return 0; } } }),
      query('example.org.', RRType.A, { edns: { udpSize: 1232, do: true, z: 0x0001, options: [{ code: 8, data: Buffer.from('0001', 'hex') }, { code: 10, data: cookie }] } })));
    assert.deepEqual(ednsView(decodeMessage(expected).edns), ednsView(viaMsg.edns));
    assert.deepEqual(ednsView(viaMsg.edns), { udpSize: 1232, version: 0, do: true, z: 0, options: [] });
  });

  test('a ready-made reply with its own OPT: patched in place (size, version 0, DO, low flag bits), not duplicated', () => {
    let written: Buffer | undefined;
    const own: Edns = { udpSize: 4096, version: 0, do: false, z: 0x0042, options: [{ code: 15, data: Buffer.from('0003', 'hex') }] };
    const t = makeTable({ '.': wireHandler((req) => { written = readyReply(req, 2, own); return Buffer.from(written); }) });
    const s = serve(t, query('example.org.', RRType.A, { edns: { udpSize: 1400, do: true } }));
    assert.equal(s.sink.sent.length, 1);
    const out = s.sink.sent[0]!;
    assert.equal(out.length, written!.length);
    const r = decodeMessage(out);
    assert.deepEqual(ednsView(r.edns), { udpSize: 1400, version: 0, do: true, z: 0, options: ['15:0003'] });
    assert.equal(r.answer.length, 2);
    // Everything before the OPT is untouched.
    const optAt = written!.length - (11 + 6);
    assert.deepEqual(out.subarray(0, optAt), written!.subarray(0, optAt));
  });

  test('a ready-made reply too big for the client is truncated through the codec, TC set', () => {
    const t = makeTable({ '.': wireHandler((req) => readyReply(req, 80)) });
    const r = only(serve(t, query('example.org.')));
    assert.equal(r.tc, true);
    assert.equal(r.answer.length, 30);
    // With the OPT appended it is 29 + 80 × 16 + 11 = 1320 bytes: sent as is to a 1400-byte client, cut for 1232.
    const fits = only(serve(t, query('example.org.', RRType.A, { edns: { udpSize: 1400 } })));
    assert.equal(fits.tc, false);
    assert.equal(fits.answer.length, 80);
    assert.equal(fits.edns?.udpSize, 1400);
    const cut = only(serve(t, query('example.org.', RRType.A, { edns: { udpSize: 1232 } })));
    assert.equal(cut.tc, true);
    assert.equal(cut.answer.length, 74);
  });

  test('a malformed ready-made reply that must be decoded is dropped with an error line naming the plugin', () => {
    const t = makeTable({ '.': wireHandler(() => Buffer.from('1234818000010001000000000165', 'hex')) });
    const s = serve(t, query('example.org.', RRType.A, { edns: { udpSize: 1232 } }));
    assert.deepEqual(s.sink.sent, []);
    assert.equal(logLines.length, 1);
    assert.match(logLines[0]!, /^\[ERROR\] plugin\/cache: wrote a malformed reply: /);
  });

  test('req.addExtendedError reaches an EDNS client through writeWire and writeMsg, once', () => {
    const ede: EdnsOption = { code: 15, data: Buffer.concat([u16(18), Buffer.from('prohibited')]) };
    const viaWire = makeTable({ '.': wireHandler((req) => readyReply(req), (req) => { req.addExtendedError(ede); }) });
    const r1 = only(serve(viaWire, query('example.org.', RRType.A, { edns: { udpSize: 1232, options: [{ code: 10, data: Buffer.alloc(8, 1) }] } })));
    assert.deepEqual(ednsView(r1.edns)?.options, ['15:001270726f68696269746564']);
    assert.equal(r1.answer.length, 2);
    // A reply that already carries the same EDE does not get it twice.
    const viaMsg = makeTable({
      '.': {
        name: 'm',
        serveDNS(req, w) {
          req.addExtendedError(ede);
          const r = replyTo(req.msg);
          r.edns = { udpSize: 512, version: 0, do: false, z: 0, options: [ede] };
          w.writeMsg(r);
          return 0;
        },
      },
    });
    assert.deepEqual(ednsView(only(serve(viaMsg, query('example.org.', RRType.A, { edns: {} }))).edns)?.options, ['15:001270726f68696269746564']);
    // A client without EDNS cannot receive one.
    assert.equal(only(serve(viaWire, query('example.org.'))).edns, undefined);
  });
});

// ---------------------------------------------------------------- options a plugin of the server declared

describe('EDNS options a plugin of the server declared are echoed (CoreDNS 1.15.0 supportedOptions)', () => {
  const cookie: EdnsOption = { code: 10, data: Buffer.from('0102030405060708', 'hex') };
  const local: EdnsOption = { code: 65001, data: Buffer.from('ff', 'hex') };
  const ecs: EdnsOption = { code: 8, data: Buffer.from('0001', 'hex') };
  const edns = { udpSize: 1232, options: [cookie, local, ecs] };

  test('before any registration nothing is echoed; after it, only the registered code, as sent', () => {
    const t = makeTable({ '.': answering('x') });
    assert.deepEqual(ednsView(only(serve(t, query('example.org.', RRType.A, { edns }))).edns)?.options, []);
    (t.ednsSupported as Set<number>).add(65001);
    assert.deepEqual(ednsView(only(serve(t, query('example.org.', RRType.A, { edns }))).edns)?.options, ['65001:ff']);
    // Another server of the same process echoes nothing: the set is the server's.
    assert.deepEqual(ednsView(only(serve(makeTable({ '.': answering('x') }), query('example.org.', RRType.A, { edns }))).edns)?.options, []);
    // A server-written error reply too.
    const t2 = makeTable({ 'example.net.': answering('n') });
    (t2.ednsSupported as Set<number>).add(65001);
    const refused = only(serve(t2, query('example.org.', RRType.A, { edns })));
    assert.equal(refused.rcode, Rcode.REFUSED);
    assert.deepEqual(ednsView(refused.edns)?.options, ['65001:ff']);
  });

  test('a ready-made reply gets the same OPT appended as the structured path gives', () => {
    const ready: Handler = {
      name: 'cache',
      serveDNS(req, w) {
        const r = replyTo(req.msg);
        r.answer.push({ name: req.qname, type: RRType.A, class: RRClass.IN, ttl: 30, data: { address: '10.1.0.1' } });
        w.writeWire(encodeMessage(r, { compress: true }));
        return Rcode.NOERROR;
      },
    };
    const t = makeTable({ '.': ready });
    (t.ednsSupported as Set<number>).add(65001);
    const s = serve(t, query('example.org.', RRType.A, { edns }));
    assert.equal(s.sink.sent.length, 1);
    const wire = s.sink.sent[0]!;
    assert.deepEqual(wire.subarray(wire.length - 16), Buffer.concat([Buffer.from([0, 0, 41]), u16(1232), Buffer.from([0, 0, 0, 0]), u16(5), u16(65001), u16(1), Buffer.from('ff', 'hex')]));
    assert.deepEqual(ednsView(decodeMessage(wire).edns)?.options, ['65001:ff']);
  });
});

// ---------------------------------------------------------------- views and metadata collection

describe('routing with views (CoreDNS passAllFilterFuncs)', () => {
  /** A handler that answers NOERROR with an empty reply and records that it served. */
  function named(name: string, log: string[]): Handler {
    return {
      name,
      serveDNS(req: Request, w: ResponseWriter): HandlerResult {
        log.push(`${name}:${req.zone}:${req.view}:${req.metadata('test/who') ?? '-'}`);
        w.writeMsg(replyTo(req.msg));
        return Rcode.NOERROR;
      },
    };
  }
  interface B { chain: Handler | undefined; view?: string; filters?: ((req: Request) => boolean)[]; collect?: (req: Request) => void }
  function viewTable(zones: Record<string, B[]>): ServeTable {
    const t = makeTable({});
    const m = t.zones as Map<string, RoutedBlock>;
    for (const [zone, list] of Object.entries(zones)) {
      let next: RoutedBlock | undefined;
      for (let i = list.length - 1; i >= 0; i--) {
        const b = list[i]!;
        next = { zone, chain: b.chain, view: b.view ?? '', filters: b.filters ?? [], collect: b.collect, next };
      }
      m.set(zone, next!);
    }
    return { ...t, zones: m, zoneLengths: new Set([...m.keys()].map((z) => z.length)), filtered: true };
  }

  test('the first block of a zone whose filters all pass serves; the view name is the request\'s', () => {
    const log: string[] = [];
    const t = viewTable({
      '.': [
        { chain: named('a', log), view: 'va', filters: [(r) => r.qtype === RRType.A] },
        { chain: named('b', log), view: 'vb', filters: [() => true, (r) => r.proto === 'tcp'] },
        { chain: named('c', log) },
      ],
    });
    only(serve(t, query('x.', RRType.A)));
    only(serve(t, query('x.', RRType.MX), { proto: 'tcp' }));
    only(serve(t, query('x.', RRType.MX)));
    assert.deepEqual(log, ['a:.:va:-', 'b:.:vb:-', 'c:.::-']);
  });

  test('the collector runs before the filters of its block, for every candidate; its metadata stays', () => {
    const log: string[] = [];
    const seen: string[] = [];
    const t = viewTable({
      'example.': [
        { chain: named('m', log), view: 'm', collect: (r) => { r.beginMetadata(); r.setMetadata('test/who', 'm'); }, filters: [(r) => { seen.push(r.metadata('test/who') ?? '-'); return r.qtype === RRType.TXT; }] },
        { chain: named('n', log), view: 'n', filters: [(r) => { seen.push(r.metadata('test/who') ?? '-'); return true; }] },
      ],
    });
    only(serve(t, query('a.example.', RRType.TXT)));
    only(serve(t, query('a.example.', RRType.A)));
    assert.deepEqual(seen, ['m', 'm', 'm']);
    assert.deepEqual(log, ['m:example.:m:m', 'n:example.:n:m']);
  });

  test('longest zone first, `.` last; nothing passing is REFUSED; a block without plugins refuses at once', () => {
    const log: string[] = [];
    const t = viewTable({
      'a.example.': [{ chain: named('never', log), filters: [() => false] }],
      'example.': [{ chain: named('ex', log), filters: [(r) => r.name.startsWith('b')] }],
      'empty.': [{ chain: undefined }, { chain: named('unreached', log) }],
      '.': [{ chain: named('root', log), filters: [(r) => r.qtype === RRType.A] }],
    });
    only(serve(t, query('x.a.example.', RRType.A)));
    only(serve(t, query('b.a.example.', RRType.MX)));
    assert.equal(only(serve(t, query('x.a.example.', RRType.MX))).rcode, Rcode.REFUSED);
    assert.equal(only(serve(t, query('x.empty.', RRType.A))).rcode, Rcode.REFUSED);
    assert.deepEqual(log, ['root:.::-', 'ex:example.::-']);
  });

  test('DS: the last passing block is kept while shallower zones are searched', () => {
    const log: string[] = [];
    const t = viewTable({
      'sub.example.': [{ chain: named('sub', log) }],
      'example.': [{ chain: named('ex1', log) }, { chain: named('ex2', log), view: 'v' }, { chain: named('ex3', log), filters: [() => false] }],
      '.': [{ chain: named('root', log) }],
    });
    only(serve(t, query('sub.example.', RRType.DS)));
    only(serve(t, query('sub.example.', RRType.A)));
    only(serve(t, query('other.', RRType.DS)));
    assert.deepEqual(log, ['ex2:example.:v:-', 'sub:sub.example.::-', 'root:.::-']);
  });
});

describe('reply signer (tsig)', () => {
  const tsigRR = (name: string) => ({ name, type: RRType.TSIG, class: 255, ttl: 0, data: { raw: new Uint8Array([0, 0, 0, 0, 0, 0, 0, 1, 0x2c, 0, 0, 0, 0, 0, 0, 0, 0]) } });
  /** A chain that sets a signer recording its calls, then answers `records` A records, with a TSIG last when `signed`. */
  function chainOf(calls: { wire: Buffer; owner: string }[], signed: boolean, records: number, asWire = false): Handler {
    return {
      name: 'tsig',
      serveDNS(req: Request, w: ResponseWriter) {
        req.setReplySigner({
          sign(wire: Uint8Array, tsig) {
            calls.push({ wire: Buffer.from(wire), owner: tsig.name });
            return Buffer.concat([wire, Buffer.from('ff', 'hex')]);
          },
        });
        const r = replyTo(req.msg);
        for (let i = 0; i < records; i++) r.answer.push({ name: req.qname, type: RRType.A, class: 1, ttl: 0, data: { address: `10.0.${i >> 8}.${i & 255}` } });
        if (signed) r.additional.push(tsigRR('k.'));
        if (asWire) w.writeWire(encodeMessage(r)); else w.writeMsg(r);
        return 0;
      },
    };
  }

  test('a reply ending in a TSIG goes through the signer: encoded without it, OPT kept, never truncated', () => {
    const calls: { wire: Buffer; owner: string }[] = [];
    const s = serve(makeTable({ '.': chainOf(calls, true, 100) }), query('example.org.', RRType.A, { edns: { udpSize: 512 } }));
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.owner, 'k.');
    const unsigned = decodeMessage(calls[0]!.wire);
    assert.equal(unsigned.answer.length, 100, 'not truncated');
    assert.equal(unsigned.tc, false);
    assert.equal(unsigned.additional.length, 0, 'the TSIG record is left to the signer');
    assert.equal(unsigned.edns?.udpSize, 512);
    assert.deepEqual(s.sink.sent, [Buffer.concat([calls[0]!.wire, Buffer.from('ff', 'hex')])]);
  });

  test('with a signer, replies without a TSIG and replies written as wire take the usual path (decoded when needed)', () => {
    const calls: { wire: Buffer; owner: string }[] = [];
    const plain = only(serve(makeTable({ '.': chainOf(calls, false, 100) }), query('example.org.', RRType.A, { edns: { udpSize: 512 } })));
    assert.equal(plain.tc, true);
    assert.equal(calls.length, 0);
    serve(makeTable({ '.': chainOf(calls, true, 1, true) }), query('example.org.'));
    assert.equal(calls.length, 1);
  });

  test('a signer that cannot sign sends nothing', () => {
    const table = makeTable({
      '.': {
        name: 'tsig',
        serveDNS(req: Request, w: ResponseWriter) {
          req.setReplySigner({ sign: () => undefined });
          const r = replyTo(req.msg);
          r.additional.push(tsigRR('k.'));
          w.writeMsg(r);
          return 0;
        },
      },
    });
    assert.equal(serve(table, query('example.org.')).sink.sent.length, 0);
  });
});
