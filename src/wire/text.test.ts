import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  charString, charStringToText, decodeMessage, encodeMessage, formatMessage, formatRecord, newQuery, parseRecord,
  WireError,
} from './index.ts';

// Expected strings checked by hand against miekg/dns String() methods (tab-separated header,
// rdata as dig prints it).
const CASES: [string, string][] = [
  ['example.org. 300 IN A 192.0.2.1', 'example.org.\t300\tIN\tA\t192.0.2.1'],
  ['example.org. 300 IN AAAA 2001:0DB8:0000:0000:0000:0000:0000:0001', 'example.org.\t300\tIN\tAAAA\t2001:db8::1'],
  ['example.org. 300 IN AAAA ::ffff:192.0.2.1', 'example.org.\t300\tIN\tAAAA\t::ffff:192.0.2.1'],
  ['example.org. 300 IN NS ns1.example.org.', 'example.org.\t300\tIN\tNS\tns1.example.org.'],
  ['www.example.org. 300 IN CNAME example.org.', 'www.example.org.\t300\tIN\tCNAME\texample.org.'],
  ['example.org. 3600 IN SOA ns.icann.org. noc.dns.icann.org. 2024081400 7200 3600 1209600 3600',
    'example.org.\t3600\tIN\tSOA\tns.icann.org. noc.dns.icann.org. 2024081400 7200 3600 1209600 3600'],
  ['example.org. 300 IN MX 10 mail.example.org.', 'example.org.\t300\tIN\tMX\t10 mail.example.org.'],
  ['example.org. 300 IN TXT "v=spf1 -all" "x\\"y"', 'example.org.\t300\tIN\tTXT\t"v=spf1 -all" "x\\"y"'],
  ['example.org. 300 IN TXT "caf\\195\\169"', 'example.org.\t300\tIN\tTXT\t"caf\\195\\169"'],
  ['example.org. 300 IN HINFO "Generic PC" "Linux"', 'example.org.\t300\tIN\tHINFO\t"Generic PC" "Linux"'],
  ['_sip._tcp.example.org. 300 IN SRV 10 60 5060 sip.example.org.', '_sip._tcp.example.org.\t300\tIN\tSRV\t10 60 5060 sip.example.org.'],
  ['example.org. 300 IN CAA 0 issue "letsencrypt.org"', 'example.org.\t300\tIN\tCAA\t0 issue "letsencrypt.org"'],
  ['example.org. 300 IN NAPTR 100 50 "s" "SIP+D2U" "" _sip._udp.example.org.',
    'example.org.\t300\tIN\tNAPTR\t100 50 "s" "SIP+D2U" "" _sip._udp.example.org.'],
  ['example.org. 300 IN DS 370 13 2 be74359954660069d5c63d200c39f5603827d7dd02b56f120ee9f3a86764247c',
    'example.org.\t300\tIN\tDS\t370 13 2 BE74359954660069D5C63D200C39F5603827D7DD02B56F120EE9F3A86764247C'],
  ['example.org. 300 IN DNSKEY 257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0d xCjjnopKl+GqJxpVXckHAeF+KkxLbxIL fDLUT0rAK9iUzy1L53eKGQ==',
    'example.org.\t300\tIN\tDNSKEY\t257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ=='],
  ['example.org. 300 IN RRSIG A 13 2 300 20240101000000 20231215000000 370 example.org. AAECAw==',
    'example.org.\t300\tIN\tRRSIG\tA 13 2 300 20240101000000 20231215000000 370 example.org. AAECAw=='],
  ['example.org. 300 IN NSEC www.example.org. A NS SOA MX TXT AAAA RRSIG NSEC DNSKEY',
    'example.org.\t300\tIN\tNSEC\twww.example.org. A NS SOA MX TXT AAAA RRSIG NSEC DNSKEY'],
  ['x.example.org. 300 IN NSEC3 1 1 12 AABBCCDD 2T7B4G4VSA5SMI47K61MV5BV1A22BOJR A RRSIG',
    'x.example.org.\t300\tIN\tNSEC3\t1 1 12 AABBCCDD 2T7B4G4VSA5SMI47K61MV5BV1A22BOJR A RRSIG'],
  ['example.org. 0 IN NSEC3PARAM 1 0 0 -', 'example.org.\t0\tIN\tNSEC3PARAM\t1 0 0 -'],
  ['_443._tcp.example.org. 300 IN TLSA 3 1 1 0123ABCD', '_443._tcp.example.org.\t300\tIN\tTLSA\t3 1 1 0123abcd'],
  ['example.org. 300 IN HTTPS 1 . alpn="h2,h3" port=443 ipv4hint=192.0.2.1,192.0.2.2 ipv6hint=2001:db8::1',
    'example.org.\t300\tIN\tHTTPS\t1 . alpn="h2,h3" port=443 ipv4hint=192.0.2.1,192.0.2.2 ipv6hint=2001:db8::1'],
  ['example.org. 300 IN SVCB 0 svc.example.net.', 'example.org.\t300\tIN\tSVCB\t0 svc.example.net.'],
  ['example.org. 300 IN TYPE65400 \\# 3 ABCDEF', 'example.org.\t300\tIN\tTYPE65400\t\\# 3 abcdef'],
  ['example.org. 300 CH TXT "x"', 'example.org.\t300\tCH\tTXT\t"x"'],
  ['example.org. 300 CLASS9 TYPE1 \\# 4 01020304', 'example.org.\t300\tCLASS9\tA\t1.2.3.4'],
];

test('formatRecord prints dig/miekg presentation for every structured type', () => {
  for (const [input, want] of CASES) {
    assert.equal(formatRecord(parseRecord(input)), want, input);
    // through the wire as well
    const m = newQuery('example.org.', 255);
    m.answer.push(parseRecord(input));
    assert.equal(formatRecord(decodeMessage(encodeMessage(m, { compress: true })).answer[0]), want);
  }
});

test('parseRecord: origin, @, optional ttl/class in either order, defaults, comments, parentheses', () => {
  const a = parseRecord('www IN 60 A 192.0.2.1 ; comment', 'example.org');
  assert.deepEqual(a, { name: 'www.example.org.', type: 1, class: 1, ttl: 60, data: { address: '192.0.2.1' } });
  const b = parseRecord('@ 1h MX 10 mail', 'example.org.', 99);
  assert.equal(b.ttl, 3600);
  assert.equal(formatRecord(b), 'example.org.\t3600\tIN\tMX\t10 mail.example.org.');
  const c = parseRecord('example.org. SOA ns hm ( 1 2 3\n 4 5 )', 'example.org.', 42);
  assert.equal(c.ttl, 42);
  assert.equal(formatRecord(c), 'example.org.\t42\tIN\tSOA\tns.example.org. hm.example.org. 1 2 3 4 5');
  assert.equal(parseRecord('a A 1.2.3.4').name, 'a.');
  assert.throws(() => parseRecord('a IN BOGUS x'), WireError);
  assert.throws(() => parseRecord('a IN A 300.1.1.1'), WireError);
  assert.throws(() => parseRecord('a IN TXT "unterminated'), WireError);
});

test('charString and charStringToText', () => {
  assert.deepEqual(charString('é'), Uint8Array.of(0xc3, 0xa9));
  assert.equal(charStringToText(Uint8Array.of(0x41, 0x22, 0x5c, 0x0a, 0xff)), '"A\\"\\\\\\010\\255"');
});

test('formatMessage lays out like miekg Msg.String()', () => {
  const m = newQuery('example.org.', 1);
  m.id = 4242;
  m.qr = true;
  m.ra = true;
  m.answer.push(parseRecord('example.org. 300 IN A 192.0.2.1'));
  m.edns = { udpSize: 1232, version: 0, do: true, z: 0, options: [] };
  assert.equal(formatMessage(m), [
    ';; opcode: QUERY, status: NOERROR, id: 4242',
    ';; flags: qr rd ra; QUERY: 1, ANSWER: 1, AUTHORITY: 0, ADDITIONAL: 1',
    '',
    ';; OPT PSEUDOSECTION:',
    '; EDNS: version 0; flags: do; udp: 1232',
    '',
    ';; QUESTION SECTION:',
    ';example.org.\tIN\t A',
    '',
    ';; ANSWER SECTION:',
    'example.org.\t300\tIN\tA\t192.0.2.1',
    '',
  ].join('\n'));
});
