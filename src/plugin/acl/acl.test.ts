import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin, type AclOptions } from './setup.ts';
import { CaptureWriter, StubHandler, captureLog, makeRequest, metricValue, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { replyTo } from '../../wire/message.ts';
import { parseCidr } from '../../wire/ip.ts';
import { Rcode, RRType } from '../../wire/constants.ts';
import { Request } from '../../core/request.ts';

const E3 = 'plugin/acl: Corefile:3 - Error during parsing: ';
const ALL = [parseCidr('0.0.0.0/0')!, parseCidr('::/0')!];
const nets = (...l: string[]) => l.map((c) => parseCidr(c)!);

test('acl parse', async () => {
  await parseTable<AclOptions>('acl', parse, [
    ['. {\n acl\n}', { rules: [{ zones: ['.'], policies: [] }] }],
    ['. {\n acl {\n  block type A net 192.168.0.0/16\n }\n}',
      { rules: [{ zones: ['.'], policies: [{ action: 'block', types: [RRType.A], nets: nets('192.168.0.0/16') }] }] }],
    // Omitted sections and `*` mean all; what follows `*` is not read.
    ['. {\n acl {\n  filter\n  drop type * FOO net * bogus\n }\n}', { rules: [{ zones: ['.'], policies: [
      { action: 'filter', types: [0], nets: ALL }, { action: 'drop', types: [0], nets: ALL }] }] }],
    // Single addresses become /32 and /128; host bits are cleared; sections and actions are case-insensitive.
    ['. {\n acl {\n  ALLOW TYPE TXT ANY CNAME Net 10.1.2.3 2001:db8::1 192.168.7.9/16\n }\n}', { rules: [{ zones: ['.'], policies: [
      { action: 'allow', types: [RRType.TXT, RRType.ANY, RRType.CNAME], nets: nets('10.1.2.3/32', '2001:db8::1/128', '192.168.0.0/16') }] }] }],
    // Several sections of one kind add up; miekg's `None` mnemonic is type 0 (all types).
    ['. {\n acl {\n  block type A net 10.0.0.0/8 type None net ::1\n }\n}', { rules: [{ zones: ['.'], policies: [
      { action: 'block', types: [RRType.A, 0], nets: nets('10.0.0.0/8', '::1/128') }] }] }],
    // Zones: arguments (normalised), else the block's keys; one rule per directive.
    ['example.org:1053 example.net {\n acl\n acl A.Example.ORG. b.example.org\n}',
      { rules: [{ zones: ['example.org.', 'example.net.'], policies: [] }, { zones: ['a.example.org.', 'b.example.org.'], policies: [] }] }],
    ['. {\n acl {\n  blck type A\n }\n}', E3 + `unexpected token "blck"; expect 'allow', 'block', 'filter' or 'drop'`],
    ['. {\n acl {\n  block A net 192.168.0.0/16\n }\n}', E3 + `unexpected token "A"; expect 'type | net'`],
    ['. {\n acl {\n  block foo\n }\n}', E3 + `unexpected token "foo"; expect 'type | net'`],
    ['. {\n acl {\n  block type net 192.168.0.0/16\n }\n}', E3 + 'no token specified in "type" section'],
    ['. {\n acl {\n  block net\n }\n}', E3 + 'no token specified in "net" section'],
    ['. {\n acl {\n  block type A NET\n }\n}', E3 + 'no token specified in "net" section'],
    ['. {\n acl {\n  block type ABC\n }\n}', E3 + 'unexpected token "ABC"; expect legal QTYPE'],
    ['. {\n acl {\n  block type a\n }\n}', E3 + 'unexpected token "a"; expect legal QTYPE'],
    ['. {\n acl {\n  block type TYPE65\n }\n}', E3 + 'unexpected token "TYPE65"; expect legal QTYPE'],
    ['. {\n acl {\n  block type A net 192.168.0/16\n }\n}', E3 + 'illegal CIDR notation "192.168.0/16"'],
    ['. {\n acl {\n  block type A net 192.168.0.0/33\n }\n}', E3 + 'illegal CIDR notation "192.168.0.0/33"'],
    ['. {\n acl {\n  block net 010.0.0.1\n }\n}', E3 + 'illegal CIDR notation "010.0.0.1/32"'],
    ['. {\n acl {\n  block net 2001::85a3::8a2e:370:7334\n }\n}', E3 + 'illegal CIDR notation "2001::85a3::8a2e:370:7334/128"'],
    ['. {\n acl {\n  block net fe80::1%eth0/64\n }\n}', E3 + 'illegal CIDR notation "fe80::1%eth0/64"'],
  ]);
});

interface Case {
  config: string;
  zones?: string;
  name: string;
  remote: string;
  type: number;
  /** 'next' (passed on), 'drop', or the rcode and EDE code written. */
  want: 'next' | 'drop' | [number, number];
}

const BLOCKED: [number, number] = [Rcode.REFUSED, 15];
const FILTERED: [number, number] = [Rcode.NOERROR, 17];

// CoreDNS's acl_test.go table, as answers.
const CASES: Case[] = [
  { config: 'block type A net 192.168.0.0/16', name: 'www.example.org.', remote: '192.168.0.2', type: RRType.A, want: BLOCKED },
  { config: 'block type A net 192.168.0.0/16', name: 'www.example.org.', remote: '192.167.0.2', type: RRType.A, want: 'next' },
  { config: 'block type * net 192.168.0.0/16', name: 'www.example.org.', remote: '192.168.0.2', type: RRType.AAAA, want: BLOCKED },
  { config: 'block type A', name: 'www.example.org.', remote: '10.1.0.2', type: RRType.A, want: BLOCKED },
  { config: 'block type A', name: 'www.example.org.', remote: '10.1.0.2', type: RRType.AAAA, want: 'next' },
  { config: 'block type A net 192.168.1.2', name: 'www.example.org.', remote: '192.168.1.2', type: RRType.A, want: BLOCKED },
  { config: 'block type A net 192.168.1.2', name: 'www.example.org.', remote: '192.168.1.3', type: RRType.A, want: 'next' },
  { config: 'filter type A net 192.168.0.0/16', name: 'www.example.org.', remote: '192.168.0.2', type: RRType.A, want: FILTERED },
  { config: 'filter type A net 192.168.0.0/16', name: 'www.example.org.', remote: '192.167.0.2', type: RRType.A, want: 'next' },
  { config: 'allow net 192.168.0.0/16\n block', name: 'www.example.org.', remote: '192.168.0.2', type: RRType.A, want: 'next' },
  { config: 'allow type * net 192.168.0.0/16\n block', name: 'www.example.org.', remote: '10.1.0.2', type: RRType.A, want: BLOCKED },
  { config: 'drop net 192.168.0.0/16', name: 'www.example.org.', remote: '192.168.0.2', type: RRType.A, want: 'drop' },
  { config: 'block net 192.168.1.0/24\n drop net 192.168.0.0/16', name: 'www.example.org.', remote: '192.168.1.2', type: RRType.A, want: BLOCKED },
  { config: 'drop net 192.168.0.0/16\n block net 192.168.1.0/24', name: 'www.example.org.', remote: '192.168.1.1', type: RRType.A, want: 'drop' },
  { config: 'drop type A\n allow net 192.168.0.0/16', name: 'www.example.org.', remote: '192.168.1.1', type: RRType.A, want: 'drop' },
  { config: 'drop type A\n allow net 192.168.0.0/16', name: 'www.example.org.', remote: '192.168.1.1', type: RRType.AAAA, want: 'next' },
  // IPv6.
  { config: 'block type A net 2001:db8:abcd:0012::0/64', name: 'www.example.org.', remote: '2001:db8:abcd:0012::1230', type: RRType.A, want: BLOCKED },
  { config: 'block type A net 2001:db8:abcd:0012::0/64', name: 'www.example.org.', remote: '2001:db8:abcd:0013::0', type: RRType.A, want: 'next' },
  { config: 'block type A', name: 'www.example.org.', remote: '2001:0db8:85a3:0000:0000:8a2e:0370:7334', type: RRType.A, want: BLOCKED },
  { config: 'block type A net 2001:0db8:85a3:0000:0000:8a2e:0370:7334', name: 'www.example.org.', remote: '2001:db8:85a3::8a2e:370:7334', type: RRType.A, want: BLOCKED },
  { config: 'block type A net 2001:0db8:85a3:0000:0000:8a2e:0370:7334', name: 'www.example.org.', remote: '2001:db8:85a3::8a2e:370:7335', type: RRType.A, want: 'next' },
  { config: 'block type AAAA net 2001:db8::1', name: 'www.example.org.', remote: '2001:db8::1%eth0', type: RRType.AAAA, want: BLOCKED },
  { config: 'drop net 2001:0db8:85a3:0000:0000:8a2e:0370:7334', name: 'www.example.org.', remote: '2001:db8:85a3::8a2e:370:7334', type: RRType.AAAA, want: 'drop' },
  { config: 'block net 2001:db8:abcd:0012:8000::/66\n drop net 2001:db8:abcd:0012::0/64', name: 'www.example.org.', remote: '2001:db8:abcd:12:8000::1', type: RRType.AAAA, want: BLOCKED },
  { config: 'drop net 2001:db8:abcd:0012::0/64\n block net 2001:db8:abcd:0012:8000::/66', name: 'www.example.org.', remote: '2001:db8:abcd:12:8000::1', type: RRType.AAAA, want: 'drop' },
  // IPv4 networks never match IPv6 clients and the reverse; an IPv4-mapped client is its IPv4 address.
  { config: 'block net ::/0', name: 'www.example.org.', remote: '10.0.0.1', type: RRType.A, want: 'next' },
  { config: 'block net 0.0.0.0/0', name: 'www.example.org.', remote: '::1', type: RRType.A, want: 'next' },
  { config: 'block net 10.0.0.0/8', name: 'www.example.org.', remote: '::ffff:10.0.0.1', type: RRType.A, want: BLOCKED },
  { config: 'block net ::ffff:10.0.0.1', name: 'www.example.org.', remote: '10.0.0.1', type: RRType.A, want: 'next' },
  { config: 'block net ::ffff:10.0.0.1', name: 'www.example.org.', remote: '::ffff:10.0.0.1', type: RRType.A, want: 'next' },
  { config: 'block net 0.0.0.0/0', name: 'www.example.org.', remote: '255.255.255.255', type: RRType.A, want: BLOCKED },
];

async function run(corefile: string, name: string, remote: string, type: number, edns = false) {
  const r = await runSetup(plugin, corefile);
  const next = new StubHandler('next', (_req, w) => {
    w.writeMsg(replyTo(_req.msg));
    return Rcode.NOERROR;
  });
  const w = new CaptureWriter();
  const req = makeRequest(name, { type, remote, edns: edns ? { udpSize: 1232 } : undefined });
  const rc = await settle(r.chain(next).serveDNS(req, w));
  return { rc, w, next };
}

test('acl answers: allow, block, filter, drop by type and source', async () => {
  for (const c of CASES) {
    const corefile = `${c.zones ?? 'example.org'} {\n acl example.org {\n ${c.config}\n }\n}`;
    const { rc, w, next } = await run(corefile, c.name, c.remote, c.type);
    const label = JSON.stringify(c);
    assert.equal(rc, Rcode.NOERROR, label);
    if (c.want === 'next') {
      assert.equal(next.calls, 1, label);
      continue;
    }
    assert.equal(next.calls, 0, label);
    if (c.want === 'drop') {
      assert.equal(w.msgs.length, 0, label);
      continue;
    }
    const m = w.last!;
    assert.equal(m.rcode, c.want[0], label);
    assert.deepEqual(m.edns, { udpSize: 4096, version: 0, do: true, z: 0, options: [{ code: 15, data: Uint8Array.of(0, c.want[1]) }] }, label);
    assert.deepEqual([m.answer, m.authority, m.additional], [[], [], []], label);
  }
});

test('acl zones: fine-grained rules, longest zone, rule order', async () => {
  const cases: [string, string, string, 'next' | number][] = [
    ['example.org {\n acl a.example.org {\n  block type * net 192.168.1.0/24\n }\n}', 'a.example.org.', '192.168.1.2', Rcode.REFUSED],
    ['example.org {\n acl a.example.org {\n  block net 192.168.1.0/24\n }\n}', 'www.example.org.', '192.168.1.2', 'next'],
    ['example.org {\n acl example.org {\n  block net 192.168.1.0/24\n }\n}', 'a.example.org.', '192.168.1.2', Rcode.REFUSED],
    ['example.org {\n acl {\n  block net 192.168.1.0/24\n }\n}', 'a.example.com.', '192.168.1.2', 'next'],
    ['example.org {\n acl a.example.org {\n  block net 192.168.1.0/24\n }\n acl b.example.org {\n  block type * net 192.168.2.0/24\n }\n}', 'b.example.org.', '192.168.2.2', Rcode.REFUSED],
    ['example.org {\n acl a.example.org {\n  block net 192.168.1.0/24\n }\n acl b.example.org {\n  block net 192.168.2.0/24\n }\n}', 'b.example.org.', '192.168.1.2', 'next'],
    // A rule's allow ends the checks: later rules are not looked at.
    ['example.org {\n acl {\n  allow type A\n }\n acl {\n  block\n }\n}', 'x.example.org.', '10.0.0.1', 'next'],
    ['example.org {\n acl {\n  allow type A\n }\n acl {\n  block\n }\n}', 'X.Example.ORG.', '10.0.0.1', 'next'],
    ['example.org {\n acl {\n  allow type AAAA\n }\n acl {\n  filter\n }\n}', 'x.example.org.', '10.0.0.1', Rcode.NOERROR],
  ];
  for (const [corefile, name, remote, want] of cases) {
    const { w, next } = await run(corefile, name, remote, RRType.A);
    if (want === 'next') {
      assert.equal(next.calls, 1, corefile);
    } else {
      assert.equal(next.calls, 0, corefile);
      assert.equal(w.last!.rcode, want, corefile);
    }
  }
});

test('acl reply keeps the query id, flags and question', async () => {
  const { w } = await run('. {\n acl {\n  block\n }\n}', 'Www.Example.ORG.', '10.0.0.1', RRType.MX, true);
  const m = w.last!;
  assert.equal(m.id, 4242);
  assert.equal(m.qr, true);
  assert.equal(m.rd, true);
  assert.equal(m.aa, false);
  assert.deepEqual(m.question, [{ name: 'Www.Example.ORG.', type: RRType.MX, class: 1 }]);
});

test('acl without a next plugin: no next plugin found', async () => {
  const r = await runSetup(plugin, '. {\n acl\n}');
  assert.throws(() => r.chain().serveDNS(makeRequest('x.'), new CaptureWriter()), { message: 'plugin/acl: no next plugin found' });
});

test('acl blocks a client whose address cannot be parsed, and logs it', async () => {
  const r = await runSetup(plugin, '. {\n acl {\n  allow\n }\n}');
  const q = makeRequest('x.');
  const req = new Request(q.msg, q.wire, 'udp', 'not-an-ip', 1, '127.0.0.1', 53, 'dns://:53', 0n);
  const w = new CaptureWriter();
  const lines = await captureLog(() => r.chain(new StubHandler('next', () => 0)).serveDNS(req, w));
  assert.deepEqual(lines, ['[ERROR] plugin/acl: Blocking request. Unable to parse source address: not-an-ip']);
  assert.equal(w.last!.rcode, Rcode.REFUSED);
});

test('acl metrics: blocked, filtered, dropped by server and zone; allowed by server', async () => {
  const corefile = 'metrics.test {\n acl m1.metrics.test m2.metrics.test {\n  block type A\n  filter type AAAA\n  drop type TXT\n }\n}';
  const before = {
    b: await metricValue('coredns_acl_blocked_requests_total', { server: 'dns://:53', zone: 'm1.metrics.test.', view: '' }),
    f: await metricValue('coredns_acl_filtered_requests_total', { server: 'dns://:53', zone: 'm2.metrics.test.', view: '' }),
    d: await metricValue('coredns_acl_dropped_requests_total', { server: 'dns://:53', zone: 'm1.metrics.test.', view: '' }),
    a: await metricValue('coredns_acl_allowed_requests_total', { server: 'dns://:53', view: '' }),
  };
  await run(corefile, 'x.m1.metrics.test.', '10.0.0.1', RRType.A);
  await run(corefile, 'x.m2.metrics.test.', '10.0.0.1', RRType.AAAA);
  await run(corefile, 'm1.metrics.test.', '10.0.0.1', RRType.TXT);
  await run(corefile, 'm1.metrics.test.', '10.0.0.1', RRType.MX);
  await run(corefile, 'other.metrics.test.', '10.0.0.1', RRType.A);
  assert.equal(await metricValue('coredns_acl_blocked_requests_total', { server: 'dns://:53', zone: 'm1.metrics.test.', view: '' }), before.b + 1);
  assert.equal(await metricValue('coredns_acl_filtered_requests_total', { server: 'dns://:53', zone: 'm2.metrics.test.', view: '' }), before.f + 1);
  assert.equal(await metricValue('coredns_acl_dropped_requests_total', { server: 'dns://:53', zone: 'm1.metrics.test.', view: '' }), before.d + 1);
  assert.equal(await metricValue('coredns_acl_allowed_requests_total', { server: 'dns://:53', view: '' }), before.a + 2);
});
