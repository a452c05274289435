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

// Types whose text form the codec reads into wire bytes (printed as RFC 3597); each checked against
// CoreDNS 1.15.0 serving the same record from a zone file (test/conformance/cases/file-types).
const OPAQUE_TEXT: [string, string][] = [
  ["x. 1 IN LOC 52 22 23.000 N 4 53 32.000 E -2.00m 0.00m 10000m 10m", "\\# 16 000016138b3cf018810cbce0009895b8"],
  ["x. 1 IN LOC 42 21 54 N 71 06 18 W -24m 30m", "\\# 16 0033161389172dd070be15f000988d20"],
  ["x. 1 IN CERT PGP 0 0 aGVsbG8gd29ybGQ=", "\\# 16 000300000068656c6c6f20776f726c64"],
  ["x. 1 IN CERT 1 12345 RSASHA256 aGVsbG8=", "\\# 10 000130390868656c6c6f"],
  ["x. 1 IN DHCID AAIBY2/AuCccgoJbsaxcQc9TUapptP69lOjxfNuVAA2kjEA=", "\\# 35 000201636fc0b8271c82825bb1ac5c41cf5351aa69b4febd94e8f17cdb95000da48c40"],
  ["x. 1 IN OPENPGPKEY aGVsbG8gd29ybGQ=", "\\# 11 68656c6c6f20776f726c64"],
  ["x. 1 IN CSYNC 66 3 A NS AAAA", "\\# 12 000000420003000460000008"],
  ["x. 1 IN ZONEMD 2018031500 1 1 FEBE3D4CE2EC", "\\# 12 7848b78c0101febe3d4ce2ec"],
  ["x. 1 IN EUI48 00-00-5e-00-53-2a", "\\# 6 00005e00532a"],
  ["x. 1 IN EUI64 00-00-5e-ef-10-00-00-2a", "\\# 8 00005eef1000002a"],
  ["x. 1 IN NID 10 0014:4fff:ff20:ee64", "\\# 10 000a00144fffff20ee64"],
  ["x. 1 IN L32 10 10.1.2.0", "\\# 6 000a0a010200"],
  ["x. 1 IN L64 10 2001:0DB8:1140:1000", "\\# 10 000a20010db811401000"],
  ["x. 1 IN LP 10 l64.example.", "\\# 15 000a036c3634076578616d706c6500"],
  ["x. 1 IN PX 10 map822.example. mapx400.example.", "\\# 35 000a066d6170383232076578616d706c6500076d617078343030076578616d706c6500"],
  ["x. 1 IN TALINK a.example. b.example.", "\\# 22 0161076578616d706c65000162076578616d706c6500"],
  ["x. 1 IN X25 311061700956", "\\# 13 0c333131303631373030393536"],
  ["x. 1 IN ISDN 150862028003217 004", "\\# 20 0f31353038363230323830303332313703303034"],
  ["x. 1 IN GPOS -32.6882 116.8652 10.0", "\\# 23 082d33322e36383832083131362e383635320431302e30"],
  ["x. 1 IN IPSECKEY 10 3 2 gw.example. AQNR", "\\# 18 0a0302026777076578616d706c6500010351"],
  ["x. 1 IN IPSECKEY 10 1 2 192.0.2.38 AQNR", "\\# 10 0a0102c0000226010351"],
  ["x. 1 IN AMTRELAY 10 0 1 203.0.113.15", "\\# 6 0a01cb00710f"],
  ["x. 1 IN AMTRELAY 10 1 3 amtrelays.example.com.", "\\# 2 0a83"],
  ["x. 1 IN AMTRELAY 128 0 0 .", "\\# 2 8000"],
  ["x. 1 IN APL 1:192.168.32.0/21 !1:192.168.38.0/28 2:ff00::/8", "\\# 19 00011503c0a82000011c83c0a82600020801ff"],
  ["x. 1 IN HIP 2 200100107B1A74DF365639CC39F1D578 AwEAAbdx rvs.example.com.", "\\# 43 10020006200100107b1a74df365639cc39f1d57803010001b77103727673076578616d706c6503636f6d00"],
  ["x. 1 IN SVCB 1 svc.example. port=8443 alpn=h2 mandatory=alpn,port", "1 svc.example. mandatory=alpn,port alpn=\"h2\" port=8443"],
];

test('parseRecord: the rest of the types with a text form (LOC, CERT, APL, HIP, ...); SvcParams in key order', () => {
  for (const [line, rdata] of OPAQUE_TEXT) assert.equal(formatRecord(parseRecord(line)).split('\t')[4], rdata, line);
  assert.throws(() => parseRecord('x. 1 IN EUI48 00-00-5e-00-53'), /bad EUI48 Address/);
  assert.throws(() => parseRecord('x. 1 IN LOC 52 N 4 E x'), /bad LOC Altitude/);
  assert.throws(() => parseRecord('x. 1 IN CERT FOO 0 0 aGVsbG8='), /bad CERT Type/);
  assert.throws(() => parseRecord('x. 1 IN APL 3:1.2.3.4/8'), /bad APL prefix/);
});
