import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as dnsPacket from 'dns-packet';
import {
  decodeMessage, decodeQuestionFast, encodeMessage, messageLength, newMessage, newQuery, replyTo,
  parseRecord, formatRecord, WireError,
} from './index.ts';
import { formatIPv6, parseIPv6 } from './ip.ts';
import { scanQuery } from './decode.ts';
import { questionEnd } from './scan.ts';
import type { Message, ResourceRecord } from './types.ts';

const ORIGIN = 'example.org.';
const LINES = [
  'example.org. 300 IN A 1.2.3.4',
  'www 60 IN AAAA 2001:db8::1',
  'v4m 60 IN AAAA ::ffff:1.2.3.4',
  '@ IN 3600 SOA ns1 hostmaster.example.org. 2024010101 3600 900 604800 300',
  '@ NS ns1.example.org.',
  'md MD a.example.org.', 'mf MF a.example.org.', 'c CNAME www', 'mb MB a', 'mg MG a', 'mr MR a',
  'p PTR host.example.net.', 'd DNAME example.net.',
  'example.org. MX 10 mail',
  'example.org. TXT "v=spf1 -all" "a\\"b\\\\c" "\\000\\255"',
  'example.org. SPF "v=spf1 -all"',
  'x HINFO "INTEL" "Linux"',
  '_sip._tcp SRV 10 5 5060 sip.example.org.',
  'example.org. CAA 128 issue "letsencrypt.org"',
  'x NAPTR 100 10 "S" "SIP+D2U" "!^.*$!sip:info@example.org!" _sip._udp.example.org.',
  'example.org. DS 12345 8 2 49FD46E6C4B45C55D4AC69CBD3CD34AC1AFE51DE',
  'example.org. CDS 12345 8 2 49FD46E6C4B45C55D4AC69CBD3CD34AC1AFE51DE',
  'example.org. DNSKEY 257 3 8 AwEAAag=',
  'example.org. CDNSKEY 257 3 8 AwEAAag=',
  'example.org. RRSIG A 8 2 300 20240101000000 20231201000000 12345 example.org. AAAAAAAA',
  'example.org. NSEC a.example.org. A NS SOA RRSIG NSEC DNSKEY CAA TYPE1234',
  'x NSEC3 1 1 10 AABB 2VPTU5TIMAMQTTGL4LUU9KG21E0AOR3S A RRSIG',
  'x NSEC3 1 0 0 - 2VPTU5TIMAMQTTGL4LUU9KG21E0AOR3S',
  'x NSEC3PARAM 1 0 0 -',
  '_443._tcp TLSA 3 1 1 abcdef',
  '_443._tcp SMIMEA 3 1 1 abcdef',
  'x HTTPS 1 . alpn="h2,h3" port=443 ipv4hint=1.2.3.4,5.6.7.8 ipv6hint=2001:db8::1',
  'x SVCB 0 svc.example.org.',
  'x TYPE65280 \\# 4 0a000001',
  'x SSHFP 1 1 ABCDEF',
  'x URI 10 1 "https://example.org/"',
  'x RP mbox.example.org. txt.example.org.',
  'x AFSDB 1 afs.example.org.',
  'esc PTR host\\.with\\.dots\\ and\\"quotes\\255.example.',
];

function allRecords(): ResourceRecord[] {
  return LINES.map((l) => parseRecord(l, ORIGIN));
}

function withRecords(rrs: ResourceRecord[]): Message {
  const m = newQuery('example.org.', 255);
  m.qr = true;
  m.answer = rrs.slice(0, 20);
  m.authority = rrs.slice(20, 30);
  m.additional = rrs.slice(30);
  m.edns = { udpSize: 1232, version: 0, do: true, z: 0, options: [{ code: 10, data: Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8) }] };
  return m;
}

test('round trip of every structured type, compressed and not', () => {
  const m = withRecords(allRecords());
  for (const compress of [false, true]) {
    const w = encodeMessage(m, { compress });
    assert.equal(messageLength(m, compress), w.length);
    const d = decodeMessage(w);
    assert.deepEqual(d, m);
    // and once more: the decoded message re-encodes to the same bytes
    assert.deepEqual(encodeMessage(d, { compress }), w);
  }
  assert.ok(encodeMessage(m, { compress: true }).length < encodeMessage(m).length);
});

test('text form survives format → parse', () => {
  for (const rr of allRecords()) {
    const s = formatRecord(rr);
    assert.deepEqual(parseRecord(s), rr, s);
  }
});

test('extended rcode travels in the OPT record', () => {
  const m = newMessage();
  m.rcode = 16;
  m.edns = { udpSize: 512, version: 0, do: false, z: 0, options: [] };
  const d = decodeMessage(encodeMessage(m));
  assert.equal(d.rcode, 16);
  m.edns = undefined;
  assert.throws(() => encodeMessage(m), WireError);
});

test('case is preserved; compression matches only identical suffixes, as miekg', () => {
  const m = newQuery('WwW.ExAmPlE.oRg.', 1);
  m.answer.push({ name: 'www.example.org.', type: 1, class: 1, ttl: 1, data: { address: '1.1.1.1' } });
  m.answer.push({ name: 'other.EXAMPLE.org.', type: 1, class: 1, ttl: 1, data: { address: '1.1.1.1' } });
  const plain = decodeMessage(encodeMessage(m));
  assert.equal(plain.answer[1].name, 'other.EXAMPLE.org.');
  const comp = decodeMessage(encodeMessage(m, { compress: true }));
  assert.equal(comp.question[0].name, 'WwW.ExAmPlE.oRg.');
  assert.equal(comp.answer[0].name, 'www.example.org.');
  assert.equal(comp.answer[1].name, 'other.EXAMPLE.org.');
  // identical suffixes are still shared: 'org.' of answer 2 points at answer 1's
  const same = newQuery('www.example.org.', 1);
  same.answer.push({ name: 'www.example.org.', type: 1, class: 1, ttl: 1, data: { address: '1.1.1.1' } });
  assert.equal(encodeMessage(same, { compress: true }).length, 12 + 17 + 4 + 2 + 10 + 4);
});

test('SRV targets and DNAME are not compressed, NS/MX/CNAME/SOA are', () => {
  const m = newQuery('example.org.', 33);
  m.answer.push(parseRecord('example.org. 1 IN SRV 0 0 1 example.org.'));
  let w = encodeMessage(m, { compress: true });
  // question name 13 bytes + owner pointer 2; target written in full (13)
  assert.equal(w.length, 12 + 13 + 4 + 2 + 10 + 6 + 13);
  m.answer = [parseRecord('example.org. 1 IN MX 0 example.org.')];
  w = encodeMessage(m, { compress: true });
  assert.equal(w.length, 12 + 13 + 4 + 2 + 10 + 2 + 2);
});

test('escaped bytes in names', () => {
  const buf = Buffer.from('000100000001000000000000' + '03612e62' + '0420283b40' + '02005c' + '00' + '00010001', 'hex');
  const m = decodeMessage(buf);
  assert.equal(m.question[0].name, 'a\\.b.\\ \\(\\;\\@.\\000\\\\.');
  assert.deepEqual(encodeMessage(m), buf);
});

test('decodeQuestionFast', () => {
  const q = newQuery('ExAmple.ORG.', 28);
  q.edns = { udpSize: 4096, version: 0, do: true, z: 0, options: [] };
  const w = encodeMessage(q);
  const f = decodeQuestionFast(w)!;
  assert.equal(f.qname, 'example.org.');
  assert.equal(f.qtype, 28);
  assert.equal(f.qclass, 1);
  assert.equal(f.questionEnd, 12 + 13 + 4);
  assert.equal(f.edns, true);
  assert.equal(f.udpSize, 4096);
  assert.equal(f.do, true);
  assert.equal(f.id, q.id);
  q.edns = undefined;
  const g = decodeQuestionFast(encodeMessage(q))!;
  assert.equal(g.edns, false);
  assert.equal(decodeQuestionFast(encodeMessage(newMessage())), undefined);
});

test('replyTo and newQuery', () => {
  const q = newQuery('example.org', 1);
  assert.equal(q.rd, true);
  assert.equal(q.question[0].name, 'example.org.');
  q.cd = true;
  q.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [] };
  const r = replyTo(q);
  assert.equal(r.id, q.id);
  assert.equal(r.qr, true);
  assert.equal(r.rd, true);
  assert.equal(r.cd, true);
  assert.equal(r.edns, undefined);
  assert.deepEqual(r.question, q.question);
  assert.notEqual(r.question[0], q.question[0]);
});

test('header-only message decodes with empty sections (miekg)', () => {
  const buf = Buffer.from('abcd81050001000000000000', 'hex');
  const m = decodeMessage(buf);
  assert.equal(m.id, 0xabcd);
  assert.equal(m.rcode, 5);
  assert.equal(m.question.length, 0);
});

test('trailing bytes are ignored (miekg)', () => {
  const w = Buffer.concat([encodeMessage(newQuery('example.org.', 1)), Buffer.from([1, 2, 3])]);
  assert.equal(decodeMessage(w).question[0].name, 'example.org.');
});

test('byte fields are copies, not views of the packet', () => {
  const m = newQuery('example.org.', 16);
  m.answer.push(parseRecord('example.org. 1 IN TXT "hello"'));
  const w = encodeMessage(m);
  const d = decodeMessage(w);
  w.fill(0);
  assert.equal(Buffer.from((d.answer[0].data as { strings: Uint8Array[] }).strings[0]).toString(), 'hello');
});

// ---- dns-packet as an oracle ----

function rnd(n: number): number {
  return Math.floor(Math.random() * n);
}
function rndLabel(): string {
  const chars = 'abcdefghijklmnopqrstuvwxyz0123456789-';
  let s = '';
  const l = 1 + rnd(12);
  for (let i = 0; i < l; i++) s += chars[rnd(chars.length)];
  return s;
}
const POOL = ['example.org', 'a.example.org', 'b.a.example.org', 'example.net', 'x.example.net'];
function rndName(): string {
  const base = POOL[rnd(POOL.length)];
  return rnd(2) ? rndLabel() + '.' + base : base;
}
function rndIPv6(): string {
  const g: string[] = [];
  for (let i = 0; i < 8; i++) g.push(rnd(3) === 0 ? '0' : rnd(65536).toString(16));
  return g.join(':');
}
function rndRecord(): { ours: ResourceRecord; theirs: dnsPacket.Answer } {
  const name = rndName();
  const ttl = rnd(100000);
  switch (rnd(8)) {
    case 0: {
      const a = `${rnd(256)}.${rnd(256)}.${rnd(256)}.${rnd(256)}`;
      return { ours: { name: name + '.', type: 1, class: 1, ttl, data: { address: a } }, theirs: { name, type: 'A', ttl, data: a } };
    }
    case 1: {
      const a = rndIPv6();
      const canon = decodeMessage(encodeMessage({ ...newMessage(), answer: [{ name: '.', type: 28, class: 1, ttl: 0, data: { address: a } }] })).answer[0].data as { address: string };
      return { ours: { name: name + '.', type: 28, class: 1, ttl, data: { address: canon.address } }, theirs: { name, type: 'AAAA', ttl, data: canon.address } };
    }
    case 2: {
      const t = rndName();
      return { ours: { name: name + '.', type: 5, class: 1, ttl, data: { target: t + '.' } }, theirs: { name, type: 'CNAME', ttl, data: t } };
    }
    case 3: {
      const t = rndName();
      const p = rnd(65536);
      return { ours: { name: name + '.', type: 15, class: 1, ttl, data: { preference: p, exchange: t + '.' } }, theirs: { name, type: 'MX', ttl, data: { preference: p, exchange: t } } };
    }
    case 4: {
      const strs = [rndLabel(), rndLabel()];
      return {
        ours: { name: name + '.', type: 16, class: 1, ttl, data: { strings: strs.map((s) => new Uint8Array(Buffer.from(s))) } },
        theirs: { name, type: 'TXT', ttl, data: strs.map((s) => Buffer.from(s)) },
      };
    }
    case 5: {
      const t = rndName();
      const [pr, w, po] = [rnd(65536), rnd(65536), rnd(65536)];
      return {
        ours: { name: name + '.', type: 33, class: 1, ttl, data: { priority: pr, weight: w, port: po, target: t + '.' } },
        theirs: { name, type: 'SRV', ttl, data: { priority: pr, weight: w, port: po, target: t } },
      };
    }
    case 6: {
      const [m, r] = [rndName(), rndName()];
      const nums = [rnd(2 ** 32), rnd(2 ** 31), rnd(2 ** 31), rnd(2 ** 31), rnd(2 ** 31)];
      return {
        ours: { name: name + '.', type: 6, class: 1, ttl, data: { mname: m + '.', rname: r + '.', serial: nums[0], refresh: nums[1], retry: nums[2], expire: nums[3], minimum: nums[4] } },
        theirs: { name, type: 'SOA', ttl, data: { mname: m, rname: r, serial: nums[0], refresh: nums[1], retry: nums[2], expire: nums[3], minimum: nums[4] } },
      };
    }
    default: {
      const t = rndName();
      return { ours: { name: name + '.', type: 2, class: 1, ttl, data: { target: t + '.' } }, theirs: { name, type: 'NS', ttl, data: t } };
    }
  }
}

function normalizeTheirs(p: dnsPacket.Packet): unknown {
  const strip = (rs: dnsPacket.Answer[] | undefined) => (rs ?? []).map((r) => {
    const x = r as unknown as Record<string, unknown>;
    let data = x.data;
    if (Array.isArray(data)) data = data.map((b: Buffer) => b.toString('hex'));
    if (x.type === 'AAAA') data = formatIPv6(parseIPv6(data as string)!, 0);
    return { name: x.name, type: x.type, ttl: x.ttl, data };
  });
  return { id: p.id, q: p.questions, an: strip(p.answers), ns: strip(p.authorities) };
}

test('property: ours → dns-packet decode, dns-packet encode → ours', () => {
  for (let iter = 0; iter < 500; iter++) {
    const m = newQuery(rndName(), 1);
    const theirs: dnsPacket.Packet = { id: m.id, type: 'query', flags: dnsPacket.RECURSION_DESIRED, questions: [{ name: m.question[0].name.slice(0, -1), type: 'A', class: 'IN' }], answers: [], authorities: [] };
    const n = rnd(12);
    for (let i = 0; i < n; i++) {
      const { ours, theirs: t } = rndRecord();
      if (rnd(3) === 0) {
        m.authority.push(ours);
        theirs.authorities!.push(t);
      } else {
        m.answer.push(ours);
        theirs.answers!.push(t);
      }
    }
    for (const compress of [false, true]) {
      const w = encodeMessage(m, { compress });
      const back = dnsPacket.decode(w);
      assert.deepEqual(normalizeTheirs(back), normalizeTheirs(theirs));
    }
    const theirWire = dnsPacket.encode(theirs);
    assert.equal(theirWire.length, messageLength(m, false), 'dns-packet does not compress: lengths equal ours uncompressed');
    const d = decodeMessage(theirWire);
    assert.deepEqual(d.answer, m.answer);
    assert.deepEqual(d.authority, m.authority);
    assert.deepEqual(d.question, m.question);
  }
});

test('scanQuery: the usual query shapes agree with decodeMessage; any other shape is left to it', () => {
  const hex = (s: string): Buffer => Buffer.from(s.replace(/ /g, ''), 'hex');
  const header = (ar: number): string => `abcd 0110 0001 0000 0000 000${ar}`;
  const question = '03 576177 07 6578616d706c65 03 6f7267 00 001c 0001'; // Waw.example.org. AAAA IN
  const opt = '00 0029 04d0 01 00 8005 0000'; // size 1232, ext-rcode 1, version 0, DO + z 5, no options
  const usual = [
    hex(header(0) + question),
    hex(header(1) + question + opt),
    hex(header(1) + question), // ARCOUNT 1 but the message ends after the question: no OPT (as decodeMessage)
    hex(header(0) + question + 'ffff'), // trailing bytes are ignored
    hex(header(0) + '04 615c2e62 05 5c3030305a 00 0001 0003'), // escapes in the name, class CH
  ];
  for (const w of usual) {
    const s = scanQuery(w);
    assert.ok(s !== undefined, w.toString('hex'));
    const m = decodeMessage(w);
    assert.deepEqual([s.qname, s.qtype, s.qclass, s.questionEnd], [m.question[0]!.name, m.question[0]!.type, m.question[0]!.class, questionEnd(w)]);
    assert.deepEqual(s.edns, m.edns);
    // Decoding with the scan's question gives the same message.
    assert.deepEqual(decodeMessage(w, s), m);
  }
  const other = [
    hex(`abcd 0110 0002 0000 0000 0000` + question + question), // two questions
    hex(`abcd 0110 0001 0001 0000 0000` + question + 'c00c 001c 0001 00000000 0000'), // an answer record
    hex(header(2) + question + opt + opt), // two OPT records
    hex(header(1) + question + '00 0029 04d0 00 00 0000 0004 000a 0000'), // an option (a cookie's code, empty)
    hex(header(1) + question + '00 0001 0001 00000000 0000'), // an additional record that is not an OPT
    hex(header(1) + question + '01 61 00 0029 04d0 00000000 0000'), // an OPT not owned by the root
    hex(header(1) + question + '00 0029 04d0 00 00'), // an OPT cut short
    hex(header(0) + '03 576177 c00c 0001 0001'), // a compression pointer in the question
    hex(header(0) + '03 576177 00 0001'), // a question cut short after its type
    hex(header(0) + '03 5761'), // a name running off the message
    hex(header(0) + '40' + '61'.repeat(64) + '00 0001 0001'), // a 64-octet label
  ];
  for (const w of other) assert.equal(scanQuery(w), undefined, w.toString('hex'));
  // 255 octets of name is the limit: 127 labels of one octet and the root is 255 octets, one more is too long.
  assert.notEqual(scanQuery(hex(header(0) + '0161'.repeat(127) + '00 0001 0001')), undefined);
  assert.equal(scanQuery(hex(header(0) + '0161'.repeat(128) + '00 0001 0001')), undefined);
});
