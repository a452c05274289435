import { test } from 'node:test';
import assert from 'node:assert/strict';
import { networkInterfaces } from 'node:os';
import { parse, plugin } from './setup.ts';
import { listIP } from './bind.ts';
import { parseTable, runSetup } from '../pkg/testing.ts';

test('bind parse', async () => {
  await parseTable('bind', parse, [
    ['. {\n bind 127.0.0.1 ::1\n}', { hosts: ['127.0.0.1', '::1'] }],
    // Several lines concatenate; except works per line.
    ['. {\n bind 127.0.0.1 127.0.0.2 {\n  except 127.0.0.2\n }\n bind 127.0.0.3 127.0.0.2\n}', { hosts: ['127.0.0.1', '127.0.0.3', '127.0.0.2'] }],
    ['. {\n bind 127.0.0.1 {\n  except 127.0.0.9\n }\n}', { hosts: ['127.0.0.1'] }],
    ['. {\n bind\n}', 'plugin/bind: at least one address or interface name is expected'],
    ['. {\n bind nope0\n}', 'plugin/bind: not a valid IP address or interface name: "nope0"'],
    ['. {\n bind 127.0.0.1 {\n  except\n }\n}', 'plugin/bind: at least one address or interface must be given to except subdirective'],
    ['. {\n bind 127.0.0.1 {\n  only 1.2.3.4\n }\n}', 'plugin/bind: invalid option "only"'],
    ['. {\n bind 127.0.0.1 {\n  except nope0\n }\n}', 'plugin/bind: not a valid IP address or interface name: "nope0"'],
    ['. {\n bind fe80::1%eth0\n}', 'plugin/bind: not a valid IP address or interface name: "fe80::1%eth0"'],
  ]);
});

test('bind sets the listen hosts; several lines concatenate; except works per line', async () => {
  let r = await runSetup(plugin, '. {\n bind 127.0.0.1 ::1\n}');
  assert.deepEqual(r.config.listenHosts, ['127.0.0.1', '::1']);
  r = await runSetup(plugin, '. {\n bind 127.0.0.1 127.0.0.2 {\n  except 127.0.0.2\n }\n bind 127.0.0.3\n}');
  assert.deepEqual(r.config.listenHosts, ['127.0.0.1', '127.0.0.3']);
  assert.equal(r.factories.length, 0);
});

test('bind expands interface names; link-local IPv6 gets a zone', () => {
  const ifaces = {
    eth9: [
      { address: '192.0.2.1', netmask: '255.255.255.0', family: 'IPv4' as const, mac: '', internal: false, cidr: null },
      { address: 'fe80::1', netmask: 'ffff:ffff:ffff:ffff::', family: 'IPv6' as const, mac: '', internal: false, cidr: null, scopeid: 2 },
      { address: '2001:db8::1', netmask: 'ffff:ffff:ffff:ffff::', family: 'IPv6' as const, mac: '', internal: false, cidr: null, scopeid: 0 },
    ],
  };
  assert.deepEqual(listIP(['eth9', '10.0.0.1'], ifaces), ['192.0.2.1', 'fe80::1%eth9', '2001:db8::1', '10.0.0.1']);
  const lo = Object.keys(networkInterfaces()).find((n) => n === 'lo');
  if (lo !== undefined) assert.ok(listIP([lo], networkInterfaces()).includes('127.0.0.1'));
});
