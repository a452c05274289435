import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  addressToReverse, asciiLower, classToString, countLabels, fqdn, isDomainName, isFqdn, isSubdomain, lowerName,
  nameEqual, nextLabel, opcodeToString, parentName, rcodeToString, reverseToAddress, splitLabels, stringToClass, stringToRcode,
  stringToType, typeToString, RRType, Rcode,
} from './index.ts';

test('type/class/rcode/opcode names use miekg spellings', () => {
  assert.equal(typeToString(1), 'A');
  assert.equal(typeToString(23), 'NSAP-PTR');
  assert.equal(typeToString(11), 'TYPE11'); // WKS is not in miekg's TypeToString
  assert.equal(typeToString(65), 'HTTPS');
  assert.equal(typeToString(0), 'None');
  assert.equal(typeToString(65535), 'Reserved');
  assert.equal(typeToString(4242), 'TYPE4242');
  assert.equal(stringToType('aaaa'), 28);
  assert.equal(stringToType('TYPE4242'), 4242);
  assert.equal(stringToType('type65'), 65);
  assert.equal(stringToType('nsap-ptr'), 23);
  assert.equal(stringToType('BOGUS'), undefined);
  assert.equal(stringToType('TYPE70000'), undefined);
  assert.equal(classToString(1), 'IN');
  assert.equal(classToString(3), 'CH');
  assert.equal(classToString(42), 'CLASS42');
  assert.equal(stringToClass('class42'), 42);
  assert.equal(stringToClass('hs'), 4);
  assert.equal(rcodeToString(3), 'NXDOMAIN');
  assert.equal(rcodeToString(16), 'BADSIG');
  assert.equal(rcodeToString(23), 'BADCOOKIE');
  assert.equal(rcodeToString(12), 'RCODE12');
  assert.equal(stringToRcode('badvers'), 16);
  assert.equal(stringToRcode('NOTIMP'), 4);
  assert.equal(opcodeToString(4), 'NOTIFY');
  assert.equal(opcodeToString(3), 'OPCODE3');
  assert.equal(RRType.HTTPS, 65);
  assert.equal(Rcode.BADVERS, 16);
});

test('fqdn, equality, labels', () => {
  assert.equal(fqdn('a.b'), 'a.b.');
  assert.equal(fqdn('a.b.'), 'a.b.');
  assert.equal(isFqdn('a\\.'), false);
  assert.equal(isFqdn('a\\\\.'), true);
  assert.equal(isFqdn('a.'), true);
  assert.equal(isFqdn(''), false);
  assert.equal(fqdn('a'), 'a.');
  assert.equal(fqdn('a\\.'), 'a\\..');
  assert.ok(nameEqual('ExAmple.ORG.', 'example.org.'));
  assert.ok(!nameEqual('example.org.', 'example.com.'));
  assert.equal(countLabels('.'), 0);
  assert.equal(countLabels('a.b.c.'), 3);
  assert.equal(countLabels('a\\.b.c.'), 2);
  assert.deepEqual(splitLabels('a\\.b.c.'), ['a\\.b', 'c']);
  assert.deepEqual(splitLabels('.'), []);
  assert.equal(parentName('a.b.c.'), 'b.c.');
  assert.equal(parentName('c.'), '.');
  assert.equal(parentName('.'), undefined);
  assert.equal(parentName('a\\.b.c.'), 'c.');
  assert.equal(nextLabel('a.b.', 0), 2);
  assert.equal(nextLabel('a\\.b.', 0), 5);
  assert.equal(nextLabel('a.b.', 2), 4);
  assert.equal(nextLabel('a.b.', 4), 4);
  assert.equal(nextLabel('ab', 0), 2);
  assert.equal(nextLabel('a\\', 0), 2);
});

test('asciiLower folds A-Z only (RFC 4343)', () => {
  const s = 'example.org.';
  assert.equal(asciiLower(s), s);
  assert.equal(asciiLower('WwW.ExAmPlE.oRg.'), 'www.example.org.');
  assert.equal(asciiLower('\\065B.ÄÖ.'), '\\065b.ÄÖ.');
  assert.equal(asciiLower('K\u212A.'), 'k\u212A.'); // the Kelvin sign is not folded to k
  assert.equal(lowerName, asciiLower);
});

test('isSubdomain', () => {
  assert.ok(isSubdomain('www.Example.org.', 'example.ORG.'));
  assert.ok(isSubdomain('example.org.', 'example.org.'));
  assert.ok(isSubdomain('anything.', '.'));
  assert.ok(!isSubdomain('wwwexample.org.', 'example.org.'));
  assert.ok(!isSubdomain('org.', 'example.org.'));
  // `a\.example` is one label under org.
  assert.ok(!isSubdomain('a\\.example.org.', 'example.org.'));
  assert.ok(isSubdomain('a\\.example.org.', 'org.'));
  assert.ok(isSubdomain('x.a\\\\.example.org.', 'example.org.'));
});

test('reverse names', () => {
  assert.equal(reverseToAddress('1.0.0.127.in-addr.arpa.'), '127.0.0.1');
  assert.equal(reverseToAddress('1.0.0.127.IN-ADDR.ARPA.'), '127.0.0.1');
  assert.equal(reverseToAddress('0.0.127.in-addr.arpa.'), undefined);
  assert.equal(reverseToAddress('1.0.0.300.in-addr.arpa.'), undefined);
  const v6 = '1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.';
  assert.equal(reverseToAddress(v6), '2001:db8::1');
  assert.equal(reverseToAddress(v6.slice(2)), undefined);
  assert.equal(addressToReverse('2001:db8::1'), v6);
  assert.equal(addressToReverse('10.1.2.3'), '3.2.1.10.in-addr.arpa.');
  assert.equal(reverseToAddress(addressToReverse('fe80:0:0:1:0:0:0:0')), 'fe80:0:0:1::');
  assert.equal(reverseToAddress(addressToReverse('fe80:0:0:0:1:0:0:0')), 'fe80::1:0:0:0'); // tie: leftmost
  assert.equal(reverseToAddress(addressToReverse('::ffff:1.2.3.4')), '1.2.3.4'); // as Go prints it
  assert.equal(reverseToAddress(addressToReverse('::')), '::');
});

test('isDomainName (miekg IsDomainName)', () => {
  for (const ok of ['.', 'a', 'a.', 'example.org', 'a b', 'a\\.b', 'a\\065', '*.x', '_srv._tcp', 'x'.repeat(63), 'ä.example', 'a{', '\\\\']) {
    assert.equal(isDomainName(ok), true, ok);
  }
  for (const bad of ['', '..', 'a..b', '.a', 'x'.repeat(64), 'a\\', 'a.\\', ('a'.repeat(63) + '.').repeat(4) + 'a']) {
    assert.equal(isDomainName(bad), false, bad);
  }
  // 63+63+63+61 labels: 254 octets is fine
  assert.equal(isDomainName(('a'.repeat(63) + '.').repeat(3) + 'a'.repeat(61)), true);
  // miekg counts the wire length without the root label and allows up to 256 (not 255)
  assert.equal(isDomainName(('a'.repeat(63) + '.').repeat(3) + 'a'.repeat(63)), true);
  assert.ok(isDomainName('example.org'));
  assert.ok(isDomainName('.'));
  assert.ok(isDomainName('_srv._tcp.example.org.'));
  assert.ok(isDomainName('a b.example.'));
  assert.ok(isDomainName('a\\.b.'));
  assert.ok(!isDomainName(''));
  assert.ok(!isDomainName('a..b'));
  assert.ok(!isDomainName('.a'));
  assert.ok(!isDomainName('a\\'));
  assert.ok(!isDomainName('a'.repeat(64) + '.'));
  assert.ok(isDomainName('a'.repeat(63) + '.'));
  const long = ('a'.repeat(63) + '.').repeat(3) + 'a'.repeat(61) + '.';
  assert.ok(isDomainName(long));
  assert.ok(!isDomainName('b' + long));
});
