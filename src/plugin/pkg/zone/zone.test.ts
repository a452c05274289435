import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Message, RRSIGData, ResourceRecord } from '../../../wire/types.ts';
import { Rcode, RRType, stringToType, typeToString } from '../../../wire/constants.ts';
import { formatRdata } from '../../../wire/text.ts';
import { Result, Zone, canonicalEscape, canonicalKey, compareKeys } from './zone.ts';
import { LOOP_KEY, lookup, type LookupAnswer, type Upstream } from './lookup.ts';
import { SerialUnchangedError, zoneFromText } from './load.ts';
import { parseZone, stringToTtl } from './zonefile.ts';

const here = join(import.meta.dirname, 'testdata');
const dbOrg = join(here, 'db.example.org');
const dbSigned = join(here, 'db.signed.example');
const tmp = mkdtempSync(join(tmpdir(), 'nodens-file-'));

function load(file: string, origin: string): Zone {
  return zoneFromText(readFileSync(file, 'utf8'), origin, file);
}

/** `name TYPE rdata`, RRSIGs as `name RRSIG(COVERED)`. */
function show(rr: ResourceRecord): string {
  if (rr.type === RRType.RRSIG) return `${rr.name} RRSIG(${typeToString((rr.data as RRSIGData).typeCovered)})`;
  return `${rr.name} ${rr.ttl} ${typeToString(rr.type)} ${formatRdata(rr)}`;
}

const RESULT_NAMES = ['Success', 'NameError', 'Delegation', 'NoData', 'ServerFailure'];

interface Shown { result: string; answer: string[]; ns: string[]; extra: string[] }

function shown(a: LookupAnswer): Shown {
  return { result: RESULT_NAMES[a.result]!, answer: a.answer.map(show), ns: a.ns.map(show), extra: a.extra.map(show) };
}

/** An upstream answering from a map `name/TYPE` → reply; what it saw is recorded. */
class FakeUpstream implements Upstream {
  readonly asked: string[] = [];
  readonly values = new Map<string, string>();
  private readonly replies: Map<string, Message | Error>;
  constructor(replies: Map<string, Message | Error>) {
    this.replies = replies;
  }
  setValue(key: string, value: string): void { this.values.set(key, value); }
  lookup(name: string, type: number): Promise<Message | undefined> {
    this.asked.push(`${name}/${typeToString(type)}`);
    const r = this.replies.get(`${name}/${typeToString(type)}`);
    if (r instanceof Error) return Promise.reject(r);
    return Promise.resolve(r);
  }
}

function reply(rcode: number, answer: ResourceRecord[] = []): Message {
  return {
    id: 0, qr: true, opcode: 0, aa: true, tc: false, rd: true, ra: false, z: false, ad: false, cd: false, rcode,
    question: [], answer, authority: [], additional: [],
  };
}

const netA: ResourceRecord = { name: 'www.example.net.', type: RRType.A, class: 1, ttl: 600, data: { address: '198.51.100.1' } };
const upstreamReplies = new Map<string, Message | Error>([
  ['www.example.net./A', reply(Rcode.NOERROR, [netA])],
  ['www.example.net./AAAA', reply(Rcode.NOERROR)],
  ['www.nowhere.test./A', reply(Rcode.REFUSED)],
  ['missing.example.org./A', reply(Rcode.NXDOMAIN)],
  ['broken.example.net./A', new Error('boom')],
]);

async function ask(z: Zone, qname: string, type: string, dnssecOk = false, up: Upstream = new FakeUpstream(upstreamReplies)): Promise<Shown> {
  return shown(await lookup(z, { qname, qtype: stringToType(type)!, dnssecOk, loop: 0, upstream: up }));
}

const SOA = 'example.org. 3600 SOA ns1.example.org. hostmaster.example.org. 2024010101 7200 3600 1209600 300';
const NS = ['example.org. 3600 NS ns1.example.org.', 'example.org. 3600 NS ns2.example.net.'];
const GLUE = ['ns1.example.org. 3600 A 192.0.2.53', 'ns1.example.org. 3600 AAAA 2001:db8::53'];

test('lookup: the cases of CoreDNS file (exact, CNAME, delegation, wildcard, ENT, DNAME)', async () => {
  const z = load(dbOrg, 'example.org.');
  const rows: [string, string, Partial<Shown>][] = [
    ['example.org.', 'SOA', { result: 'Success', answer: [SOA], ns: NS, extra: [] }],
    ['example.org.', 'NS', { result: 'Success', answer: NS, ns: [], extra: GLUE }],
    ['example.org.', 'MX', { answer: ['example.org. 3600 MX 10 mail.example.org.', 'example.org. 3600 MX 20 mail.example.org.'], extra: ['mail.example.org. 3600 A 192.0.2.25'] }],
    ['example.org.', 'A', { result: 'NoData', answer: [], ns: [SOA] }],
    ['example.org.', 'ANY', { result: 'NoData', ns: [SOA] }],
    ['www.example.org.', 'A', { result: 'Success', answer: ['www.example.org. 300 A 192.0.2.1', 'www.example.org. 300 A 192.0.2.2'], ns: NS }],
    ['www.example.org.', 'MX', { result: 'NoData', ns: [SOA] }],
    ['nope.example.org.', 'A', { result: 'NameError', ns: [SOA] }],
    ['mixed.case.example.org.', 'A', { answer: ['mixed.case.example.org. 3600 A 192.0.2.77'] }],
    ['_sip._udp.example.org.', 'SRV', { extra: ['mail.example.org. 3600 A 192.0.2.25'] }],
    ['alias2.example.org.', 'A', {
      result: 'Success',
      answer: ['alias2.example.org. 3600 CNAME alias.example.org.', 'alias.example.org. 3600 CNAME www.example.org.',
        'www.example.org. 300 A 192.0.2.1', 'www.example.org. 300 A 192.0.2.2'],
    }],
    ['alias.example.org.', 'CNAME', { result: 'Success', answer: ['alias.example.org. 3600 CNAME www.example.org.'] }],
    ['outside.example.org.', 'A', { result: 'Success', answer: ['outside.example.org. 3600 CNAME www.example.net.', 'www.example.net. 600 A 198.51.100.1'], ns: NS }],
    ['outside.example.org.', 'AAAA', { result: 'NoData', answer: ['outside.example.org. 3600 CNAME www.example.net.'], ns: [SOA] }],
    ['nowhere.example.org.', 'A', { result: 'Success', answer: ['nowhere.example.org. 3600 CNAME www.nowhere.test.'], ns: NS }],
    ['dangling.example.org.', 'A', { result: 'NameError', answer: ['dangling.example.org. 3600 CNAME missing.example.org.'], ns: [SOA] }],
    ['self.example.org.', 'A', { result: 'ServerFailure', answer: [] }],
    ['to-deleg.example.org.', 'A', {
      result: 'Delegation', answer: ['to-deleg.example.org. 3600 CNAME host.sub.example.org.'],
      ns: ['sub.example.org. 3600 NS ns.sub.example.org.', 'sub.example.org. 3600 NS ns.other.test.'], extra: ['ns.sub.example.org. 3600 A 192.0.2.100'],
    }],
    ['host.sub.example.org.', 'A', {
      result: 'Delegation', answer: [], ns: ['sub.example.org. 3600 NS ns.sub.example.org.', 'sub.example.org. 3600 NS ns.other.test.'],
      extra: ['ns.sub.example.org. 3600 A 192.0.2.100'],
    }],
    ['sub.example.org.', 'DS', { result: 'Success', answer: ['sub.example.org. 3600 DS 12345 13 2 3490A6806D47F17A34C29E2CE80E8A999FFBE4BE36E2C2D1C2B7C2B6F5A8B2C0'] }],
    ['anything.wild.example.org.', 'A', { result: 'Success', answer: ['anything.wild.example.org. 3600 A 192.0.2.200'] }],
    ['anything.wild.example.org.', 'MX', { result: 'NoData', ns: [SOA] }],
    ['host.wild.example.org.', 'TXT', { result: 'NoData' }],
    ['wild.example.org.', 'A', { result: 'Success', answer: [], ns: [SOA] }],
    ['x.wc.example.org.', 'A', { answer: ['x.wc.example.org. 3600 CNAME www.example.org.', 'www.example.org. 300 A 192.0.2.1', 'www.example.org. 300 A 192.0.2.2'] }],
    ['x.wcout.example.org.', 'A', { answer: ['x.wcout.example.org. 3600 CNAME www.example.net.', 'www.example.net. 600 A 198.51.100.1'] }],
    ['y.ent.example.org.', 'A', { result: 'NoData', ns: [SOA] }],
    ['foo.enc.example.org.', 'A', { answer: ['foo.enc.example.org. 3600 A 192.0.2.5'] }],
    ['foo.mid.enc.example.org.', 'A', { result: 'NameError' }],
    ['b.c.example.org.', 'A', { result: 'Success', answer: [], ns: [SOA] }],
    ['www.dn.example.org.', 'A', {
      answer: ['dn.example.org. 3600 DNAME example.net.', 'www.dn.example.org. 3600 CNAME www.example.net.', 'www.example.net. 600 A 198.51.100.1'],
    }],
    ['www.dn.example.org.', 'CNAME', { answer: ['dn.example.org. 3600 DNAME example.net.', 'www.dn.example.org. 3600 CNAME www.example.net.'], ns: NS }],
    ['host.dnin.example.org.', 'A', {
      answer: ['dnin.example.org. 3600 DNAME sub2.example.org.', 'host.dnin.example.org. 3600 CNAME host.sub2.example.org.', 'host.sub2.example.org. 3600 A 192.0.2.9'],
    }],
    ['leaf.deeper.inc.example.org.', 'A', { answer: ['leaf.deeper.inc.example.org. 3600 A 192.0.2.92'] }],
    ['short.example.org.', 'A', { answer: ['short.example.org. 60 A 192.0.2.60'] }],
  ];
  for (const [name, type, want] of rows) {
    const got = await ask(z, name, type);
    const picked = Object.fromEntries(Object.keys(want).map((k) => [k, got[k as keyof Shown]]));
    assert.deepEqual(picked, want, `${name} ${type}`);
  }
});

test('lookup: CNAME loops stop after 8 hops; the server-wide hop count is handed on and enforced', async () => {
  const z = load(dbOrg, 'example.org.');
  const loop = await ask(z, 'loop1.example.org.', 'A');
  assert.equal(loop.result, 'Success');
  assert.equal(loop.answer.length, 10);
  const up = new FakeUpstream(upstreamReplies);
  await lookup(z, { qname: 'outside.example.org.', qtype: RRType.A, dnssecOk: false, loop: 3, upstream: up });
  assert.equal(up.values.get(LOOP_KEY), '4');
  const deep = await lookup(z, { qname: 'www.example.org.', qtype: RRType.A, dnssecOk: false, loop: 9, upstream: up });
  assert.equal(deep.result, Result.ServerFailure);
  // no reply from the server (nothing written): the CNAME alone, NOERROR
  const silent = await lookup(z, { qname: 'x.wcout.example.org.', qtype: RRType.MX, dnssecOk: false, loop: 0, upstream: up });
  assert.equal(silent.result, Result.Success);
  assert.equal(silent.answer.length, 1);
  // a failed lookup: SERVFAIL with the CNAME
  const broken: ResourceRecord = { name: 'broken.example.org.', type: RRType.CNAME, class: 1, ttl: 1, data: { target: 'broken.example.net.' } };
  z.insert(broken);
  const failed = await lookup(z, { qname: 'broken.example.org.', qtype: RRType.A, dnssecOk: false, loop: 0, upstream: up });
  assert.equal(failed.result, Result.ServerFailure);
  assert.equal(failed.answer.length, 1);
  const noUp = await lookup(z, { qname: 'outside.example.org.', qtype: RRType.A, dnssecOk: false, loop: 0, upstream: undefined });
  assert.equal(noUp.result, Result.ServerFailure);
});

test('lookup: a signed zone with DO gives RRSIGs, NSEC denial and DS at the cut', async () => {
  const z = load(dbSigned, 'signed.example.');
  const www = await ask(z, 'www.signed.example.', 'A', true);
  assert.deepEqual(www.answer, ['www.signed.example. 3600 A 192.0.2.1', 'www.signed.example. RRSIG(A)']);
  assert.deepEqual(www.ns, ['signed.example. 3600 NS ns1.signed.example.', 'signed.example. RRSIG(NS)']);
  const plain = await ask(z, 'www.signed.example.', 'A', false);
  assert.deepEqual(plain.answer, ['www.signed.example. 3600 A 192.0.2.1']);
  const nx = await ask(z, 'nope.signed.example.', 'A', true);
  assert.equal(nx.result, 'NameError');
  assert.deepEqual(nx.ns.map((s) => s.split(' ').slice(0, 3).join(' ')), [
    'signed.example. 3600 SOA', 'signed.example. RRSIG(SOA)', 'mail.signed.example. 300 NSEC', 'mail.signed.example. RRSIG(NSEC)',
    'signed.example. 300 NSEC', 'signed.example. RRSIG(NSEC)',
  ]);
  const nodata = await ask(z, 'www.signed.example.', 'TXT', true);
  assert.equal(nodata.result, 'NoData');
  assert.deepEqual(nodata.ns.filter((s) => s.includes('NSEC')).length, 2);
  const wild = await ask(z, 'x.wild.signed.example.', 'A', true);
  assert.deepEqual(wild.answer, ['x.wild.signed.example. 3600 A 192.0.2.200', 'x.wild.signed.example. RRSIG(A)']);
  assert.ok(wild.ns.some((s) => s.includes('RRSIG(NSEC)')));
  const ref = await ask(z, 'host.sub.signed.example.', 'A', true);
  assert.equal(ref.result, 'Delegation');
  assert.ok(ref.ns.some((s) => s.includes(' DS ')));
  assert.ok(ref.ns.some((s) => s.includes('RRSIG(DS)')));
});

test('lookup: a zone without SOA (file not read yet) fails', async () => {
  const z = new Zone('example.org.');
  assert.equal((await ask(z, 'www.example.org.', 'A')).result, 'ServerFailure');
});

test('zone store: canonical order, prev/next, descendants, insert/delete, apex, glue', () => {
  const z = load(dbOrg, 'example.org.');
  const names = [...z.elems()].map((e) => e.name);
  const sorted = [...names].sort((a, b) => compareKeys(canonicalKey(a), canonicalKey(b)));
  assert.deepEqual(names, sorted);
  assert.equal(names[0], 'example.org.');
  assert.ok(names.indexOf('*.wild.example.org.') < names.indexOf('host.wild.example.org.'));
  assert.equal(z.prev('b.c.example.org.')?.name, 'alias2.example.org.');
  assert.equal(z.next('b.c.example.org.')?.name, 'a.b.c.example.org.');
  assert.equal(z.search('WWW.example.org.')?.name, 'www.example.org.');
  assert.ok(z.hasDescendant('c.example.org.'));
  assert.ok(!z.hasDescendant('a.b.c.example.org.'));
  assert.equal(z.serial, 2024010101);
  assert.deepEqual(z.apexRecords()!.map((r) => typeToString(r.type)), ['SOA', 'NS', 'NS']);
  const before = z.size;
  z.insert({ name: 'New.Example.org.', type: RRType.A, class: 1, ttl: 5, data: { address: '192.0.2.99' } });
  assert.equal(z.size, before + 1);
  assert.equal(z.search('new.example.org.')?.type(RRType.A)?.[0]?.name, 'new.example.org.');
  z.delete({ name: 'new.example.org.', type: RRType.A, class: 1, ttl: 5, data: { address: '192.0.2.99' } });
  assert.equal(z.size, before);
  assert.equal(z.search('new.example.org.'), undefined);
  assert.throws(() => { z.insert({ name: 'x.example.org.', type: RRType.NSEC3PARAM, class: 1, ttl: 5, data: { hashAlgorithm: 1, flags: 0, iterations: 0, salt: new Uint8Array() } }); },
    /^Error: NSEC3 zone is not supported, dropping RR: x\.example\.org\. for zone: example\.org\.$/);
  assert.ok(z.mayHaveWildcards);
  const plain = zoneFromText('$TTL 1\n@ SOA ns h 1 2 3 4 5\nb.a A 192.0.2.1\n', 'example.org.', 'db');
  assert.ok(!plain.mayHaveWildcards);
  assert.ok(plain.hasDescendant('a.example.org.'));
  assert.equal(canonicalEscape('has\\046dot.example.'), 'has\\.dot.example.');
  assert.equal(canonicalEscape('a\\065b.example.'), 'aAb.example.');
  assert.ok(compareKeys(canonicalKey('a.example.'), canonicalKey('Z.a.example.')) < 0);
  assert.ok(compareKeys(canonicalKey('z.example.'), canonicalKey('\\001.z.example.')) < 0);
  assert.ok(compareKeys(canonicalKey('yljkjljk.a.example.'), canonicalKey('Z.a.example.')) < 0);
});

/** Records of `text` as `name ttl TYPE rdata`, or the error text. */
function records(text: string, origin = 'example.org.', file = 'db'): string[] | string {
  const out: string[] = [];
  try {
    parseZone(text, origin, file, (rr) => out.push(show(rr)));
  } catch (e) {
    return (e as Error).message;
  }
  return out;
}

test('master files: directives, owners, TTLs, parentheses, comments, quoting', () => {
  writeFileSync(join(tmp, 'inc.db'), 'host A 192.0.2.2\n$TTL 5\nother A 192.0.2.3\n');
  writeFileSync(join(tmp, 'loop.db'), '$INCLUDE loop.db\n');
  const main = join(tmp, 'main.db');
  const rows: [string, string[] | string][] = [
    ['$TTL 1h\n@ IN SOA ns h ( 1 2 3\n 4 5 ) ; comment\n', ['example.org. 3600 SOA ns.example.org. h.example.org. 1 2 3 4 5']],
    ['$ORIGIN sub.example.org.\nwww 60 IN A 192.0.2.1\n  IN AAAA ::1\n', ['www.sub.example.org. 60 A 192.0.2.1', 'www.sub.example.org. 60 AAAA ::1']],
    ['a 60 A 192.0.2.1\nb A 192.0.2.2\n$TTL 10\nc A 192.0.2.3\nd 20 A 192.0.2.4\ne A 192.0.2.5\n',
      ['a.example.org. 60 A 192.0.2.1', 'b.example.org. 60 A 192.0.2.2', 'c.example.org. 10 A 192.0.2.3', 'd.example.org. 20 A 192.0.2.4', 'e.example.org. 10 A 192.0.2.5']],
    ['a IN 60 A 192.0.2.1\nb 1h30m CH A 192.0.2.1\n', ['a.example.org. 60 A 192.0.2.1', 'b.example.org. 5400 A 192.0.2.1']],
    ['abs.example.net. 1 TXT "a b;c" d\n', ['abs.example.net. 1 TXT "a b;c" "d"']],
    ['@ 1 MX 10 @\n', ['example.org. 1 MX 10 example.org.']],
    ['@ IN SOA ns h 1 2 3 4 5\n', ['example.org. 0 SOA ns.example.org. h.example.org. 1 2 3 4 5']],
    [`$TTL 1\n$INCLUDE ${join(tmp, 'inc.db')} inc.example.org.\nafter A 192.0.2.4\n`,
      ['host.inc.example.org. 1 A 192.0.2.2', 'other.inc.example.org. 5 A 192.0.2.3', 'after.example.org. 1 A 192.0.2.4']],
    ['@ SOA ns h 1 2 3 4 5\n', 'db: dns: missing TTL with no previous value: "SOA" at line: 1:6'],
    ['$TTL 1h\nwww IN A 1.2.3\n', 'db: dns: bad A A: "1.2.3" at line: 2:14'],
    ['$TTL 1h\nwww IN FOO 1\n', 'db: dns: not a TTL: "FOO" at line: 2:11'],
    ['$TTL 1h\nwww IN IN A 1.2.3.4\n', 'db: dns: expecting RR type or TTL, not this...: "IN" at line: 2:10'],
    ['$TTL 1h\nwww 1 2 A 1.2.3.4\n', 'db: dns: expecting RR type or class, not this...: "2" at line: 2:8'],
    ['$TTL 1h\nwww 1 IN CH A 1.2.3.4\n', 'db: dns: unknown RR type: "CH" at line: 2:12'],
    ['$TTL 1h\nwww IN MX x y\n', 'db: dns: bad MX Pref: "x" at line: 2:12'],
    ['$TTL 1h\nwww IN A 1.2.3.4 5.6.7.8\n', 'db: dns: garbage after rdata: "5.6.7.8" at line: 2:24'],
    ['$TTL\n', 'db: dns: not a TTL: "$TTL" at line: 1:4'],
    ['$TTL abc\n', 'db: dns: expecting $TTL value, not this...: "abc" at line: 1:8'],
    ['$ORIGIN\n', 'db: dns: not a TTL: "$ORIGIN" at line: 1:7'],
    ['$INCLUDE nothere.db\n', `${main}: dns: failed to open \`nothere.db' as \`${join(tmp, 'nothere.db')}': open ${join(tmp, 'nothere.db')}: no such file or directory: "nothere.db" at line: 1:19`],
    ['$INCLUDE loop.db\n', `${join(tmp, 'loop.db')}: dns: too deeply nested $INCLUDE: "loop.db" at line: 1:16`],
    ['k 1 IPSECKEY 10 1 2 192.0.2.38 AQNR\nwww 1 A 192.0.2.1\n', 'db: dns: garbage after rdata: "www" at line: 2:4'],
    ['k 1 IPSECKEY 10 1 2 192.0.2.38 AQNR\n\nwww 1 A 192.0.2.1\n', ['k.example.org. 1 IPSECKEY \\# 10 0a0102c0000226010351', 'www.example.org. 1 A 192.0.2.1']],
    ['$TTL 5\n$GENERATE 1-2 a$ A 192.0.2.$\n', ['a1.example.org. 3600 A 192.0.2.1', 'a2.example.org. 3600 A 192.0.2.2']],
    ['$GENERATE 8-16/8 h${2,3,x}.${-8,2,X} 5 IN TXT "$$\\$"\n', ['h00a.00.example.org. 5 TXT "$$"', 'h012.08.example.org. 5 TXT "$$"']],
    ['$GENERATE 5-1 a$ A 1.2.3.$\n', 'db: dns: bad range in $GENERATE range: "5-1" at line: 1:14'],
    ['$GENERATE 1-2/0 a$ A 1.2.3.$\n', 'db: dns: bad step in $GENERATE range: "1-2/0" at line: 1:16'],
    ['$GENERATE 1-2 a${1,2,z} A 1.2.3.4\n', 'db: dns: bad base in $GENERATE: "${1,2,z}" at line: 1:16'],
    ['$GENERATE 1-2 a${1 A 1.2.3.4\n', 'db: dns: bad modifier in $GENERATE: "${1 A 1.2.3.4" at line: 1:16'],
    ['$GENERATE 1-2 a${-2} A 1.2.3.4\n', 'db: dns: bad offset in $GENERATE: "${-2}" at line: 1:16'],
  ];
  for (const [text, want] of rows) {
    const file = text.startsWith('$INCLUDE') ? main : 'db';
    assert.deepEqual(records(text, 'example.org.', file), want, text);
  }
  assert.equal(stringToTtl('1W'), 604800);
  assert.equal(stringToTtl('1x'), undefined);
});

test('loading: SOA owner, no SOA, serial check', () => {
  assert.throws(() => zoneFromText('$TTL 1\nother.org. SOA ns h 1 2 3 4 5\n', 'example.org.', 'db'),
    { message: 'file "db" has SOA owner other.org. that does not match origin example.org.' });
  assert.throws(() => zoneFromText('$TTL 1\nwww A 192.0.2.1\n', 'example.org.', 'db'),
    { message: 'file "db" has no SOA record for origin example.org.' });
  assert.throws(() => zoneFromText('$TTL 1\nwww A 1.2.3\n', 'example.org.', 'db'),
    { message: 'failed to parse file "db" for origin example.org. with error db: dns: bad A A: "1.2.3" at line: 2:11' });
  assert.throws(() => zoneFromText('$TTL 1\n@ SOA ns h 7 2 3 4 5\n', 'example.org.', 'db', 7), SerialUnchangedError);
  assert.equal(zoneFromText('$TTL 1\n@ SOA ns h 8 2 3 4 5\n', 'example.org.', 'db', 7).serial, 8);
  // one file, several origins: @ and relative names follow the origin it is loaded as
  const shared = '$TTL 1\n@ SOA ns h 1 2 3 4 5\nwww A 192.0.2.1\n';
  assert.equal(zoneFromText(shared, 'example.net.', 'db').search('www.example.net.')?.name, 'www.example.net.');
});
