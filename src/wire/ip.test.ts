import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  cidrContains, formatIPv4Number, formatIPv6Go, formatIPv6Groups, ipEqual, ipv4Of, parseCidr, parseIP, plainAddress,
} from './ip.ts';

test('parseIP keeps the family of the text (Go net.ParseIP validity)', () => {
  assert.deepEqual(parseIP('10.0.0.1'), Uint8Array.of(10, 0, 0, 1));
  assert.equal(parseIP('::ffff:10.0.0.1')!.length, 16);
  assert.equal(formatIPv6Go(parseIP('2001:DB8::1')!, 0), '2001:db8::1');
  for (const bad of ['', '01.2.3.4', '1.2.3', '1.2.3.4.5', '256.0.0.1', '1.2.3.4::', '1:2:3:4:5:6:7:8::', 'fe80::1%eth0', ':1', '1:', 'x']) {
    assert.equal(parseIP(bad), undefined, bad);
  }
  assert.equal(formatIPv4Number(0x7f000001), '127.0.0.1');
});

test('ipv4Of, ipEqual (Go To4 / IP.Equal)', () => {
  assert.deepEqual(ipv4Of(parseIP('::ffff:1.2.3.4')!), Uint8Array.of(1, 2, 3, 4));
  assert.equal(ipv4Of(parseIP('::1')!), undefined);
  assert.ok(ipEqual(parseIP('1.2.3.4')!, parseIP('::ffff:1.2.3.4')!));
  assert.ok(!ipEqual(parseIP('1.2.3.4')!, parseIP('::1.2.3.4')!));
  assert.ok(ipEqual(parseIP('::0001')!, parseIP('::1')!));
});

test('formatIPv6Groups prints IPv4-mapped addresses in hex groups', () => {
  assert.equal(formatIPv6Groups(parseIP('::ffff:127.0.0.1')!, 0), '::ffff:7f00:1');
  assert.equal(formatIPv6Groups(parseIP('fe80:0:0:0:1:0:0:0')!, 0), 'fe80::1:0:0:0');
});

test('plainAddress', () => {
  assert.equal(plainAddress('::ffff:127.0.0.1'), '127.0.0.1');
  assert.equal(plainAddress('::ffff:7f00:1'), '::ffff:7f00:1');
  assert.equal(plainAddress('10.0.0.1'), '10.0.0.1');
});

test('parseCidr (Go net.ParseCIDR) and cidrContains', () => {
  assert.deepEqual(parseCidr('10.1.2.3/23'), { bytes: Uint8Array.of(10, 1, 2, 0), bits: 23 });
  assert.deepEqual(parseCidr('10.0.0.0/0'), { bytes: Uint8Array.of(0, 0, 0, 0), bits: 0 });
  assert.equal(parseCidr('::ffff:10.0.0.0/104')!.bytes.length, 16);
  assert.equal(parseCidr('10.0.0.0/032')!.bits, 32); // leading zeros in the length are fine (dtoi)
  for (const bad of ['10.0.0.0', '10.0.0.0/', '10.0.0.0/33', '::/129', '10.0.0.0/+8', '10.0.0.0/8/8', 'fe80::%eth0/64', '010.0.0.0/8']) {
    assert.equal(parseCidr(bad), undefined, bad);
  }
  const net = parseCidr('172.16.0.0/12')!;
  assert.ok(cidrContains(net, parseIP('172.31.255.255')!));
  assert.ok(!cidrContains(net, parseIP('172.32.0.0')!));
  assert.ok(cidrContains(net, parseIP('::ffff:172.16.0.1')!), 'IPv4-mapped counts as IPv4');
  const net6 = parseCidr('2001:db8::/32')!;
  assert.ok(cidrContains(net6, parseIP('2001:db8:ffff::1')!));
  assert.ok(!cidrContains(net6, parseIP('10.0.0.1')!));
  assert.ok(cidrContains(parseCidr('0.0.0.0/0')!, parseIP('192.0.2.1')!));
});
