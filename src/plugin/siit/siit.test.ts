import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin, type SiitOptions } from './setup.ts';
import { SYNTHESIS_LOOKUP } from './siit.ts';
import { extractIPv4 } from '../pkg/rfc6052.ts';
import { CaptureWriter, StubHandler, chainRouter, makeRequest, metricValue, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { PluginError } from '../plugin.ts';
import { Request } from '../../core/request.ts';
import type { ResourceRecord } from '../../wire/types.ts';
import { replyTo } from '../../wire/message.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { formatIPv4, parseCidr, parseIPv6 } from '../../wire/ip.ts';
import { Rcode, RRType } from '../../wire/constants.ts';

const E3 = 'plugin/siit: Corefile:3 - Error during parsing: ';
const WKP = parseCidr('64:ff9b::/96')!;
const opts = (prefix = WKP, eam: [string, string][] = []): SiitOptions => ({ prefix, eam: new Map(eam) });

test('siit parse', async () => {
  await parseTable<SiitOptions>('siit', parse, [
    ['. {\n siit\n}', opts()],
    ['. {\n siit {\n  ipv6_prefix 64:1337::/96\n }\n}', opts(parseCidr('64:1337::/96'))],
    ['. {\n siit {\n  ipv6_prefix 2001:db8:122:344::1/64\n }\n}', opts(parseCidr('2001:db8:122:344::/64'))],
    ['. {\n siit {\n  eam 192.0.2.1 2001:DB8::0:1\n  eam 192.0.2.2 2001:db8::2\n  eam 192.0.2.3 2001:db8::1\n }\n}',
      opts(WKP, [['2001:db8::1', '192.0.2.3'], ['2001:db8::2', '192.0.2.2']])],
    ['. {\n siit {\n  eam ::ffff:192.0.2.9 2001:db8::9\n }\n siit {\n  ipv6_prefix 2001:db8::/32\n }\n}',
      opts(parseCidr('2001:db8::/32'), [['2001:db8::9', '192.0.2.9']])],
    ['. {\n siit a\n}', "plugin/siit: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'a'"],
    ['. {\n siit {\n  foo\n }\n}', E3 + "unknown property 'foo'"],
    ['. {\n siit {\n  ipv6_prefix\n }\n}', E3 + "Wrong argument count or unexpected line ending after 'ipv6_prefix'"],
    ['. {\n siit {\n  ipv6_prefix 64:ff9b::/96 x\n }\n}', E3 + "unknown property 'x'"],
    ['. {\n siit {\n  ipv6_prefix foo\n }\n}', 'plugin/siit: invalid CIDR address: foo'],
    ['. {\n siit {\n  ipv6_prefix 10.0.0.0/8\n }\n}', E3 + 'invalid netmask 32 IPv6 address: "10.0.0.0/8"'],
    ['. {\n siit {\n  ipv6_prefix 64:ff9b::/80\n }\n}', E3 + 'invalid prefix length "64:ff9b::/80": must be one of /32, /40, /48, /56, /64, /96'],
    ['. {\n siit {\n  ipv6_prefix 64:ff9b:0:0:100::/96\n }\n}', E3 + 'invalid prefix "64:ff9b:0:0:100::/96": reserved octet (byte 8) must be zero'],
    ['. {\n siit {\n  eam 192.0.2.1\n }\n}', E3 + "Wrong argument count or unexpected line ending after '192.0.2.1'"],
    ['. {\n siit {\n  eam a b c\n }\n}', E3 + "Wrong argument count or unexpected line ending after 'c'"],
    ['. {\n siit {\n  eam foo 2001:db8::1\n }\n}', E3 + 'invalid IP address: "<nil>"'],
    ['. {\n siit {\n  eam 2001:db8::2 2001:db8::1\n }\n}', E3 + 'invalid IPv4 address: "2001:db8::2"'],
    ['. {\n siit {\n  eam 192.0.2.1 foo\n }\n}', E3 + 'invalid IP address: "<nil>"'],
    ['. {\n siit {\n  eam 192.0.2.1 192.0.2.2\n }\n}', E3 + 'invalid IPv6 address: "192.0.2.2"'],
    ['. {\n siit {\n  eam 192.0.2.1 ::ffff:192.0.2.2\n }\n}', E3 + 'invalid IPv6 address: "192.0.2.2"'],
  ]);
});

test('siit RFC 6052 extraction for every prefix length (RFC 6052 2.4 examples)', () => {
  const rows: [number, string][] = [
    [32, '2001:db8:c000:221::'], [40, '2001:db8:1c0:2:21::'], [48, '2001:db8:122:c000:2:2100::'],
    [56, '2001:db8:122:3c0:0:221::'], [64, '2001:db8:122:344:c0:2:2100:0'], [96, '2001:db8:122:344::c000:221'],
  ];
  for (const [bits, v6] of rows) assert.equal(formatIPv4(extractIPv4(parseIPv6(v6)!, bits), 0), '192.0.2.33', v6);
});

const a = (name: string, ip: string, ttl = 300): ResourceRecord => ({ name, type: RRType.A, class: 1, ttl, data: { address: ip } });
const aaaa = (name: string, ip: string, ttl = 300): ResourceRecord => ({ name, type: RRType.AAAA, class: 1, ttl, data: { address: ip } });
const soa = (name: string, ttl: number): ResourceRecord => ({
  name, type: RRType.SOA, class: 1, ttl,
  data: { mname: 'ns.' + name, rname: 'h.' + name, serial: 1, refresh: 2, retry: 3, expire: 4, minimum: 5 },
});

interface Zone {
  [type: number]: ResourceRecord[] | undefined;
  rcode?: number;
  aaaaRcode?: number;
  authority?: ResourceRecord[];
  wire?: boolean;
  tc?: boolean;
  silentAAAA?: boolean;
}

function backend(z: Zone): StubHandler {
  return new StubHandler('backend', (req, w) => {
    if (req.qtype === RRType.AAAA && z.silentAAAA === true) return Rcode.NOERROR;
    const m = replyTo(req.msg);
    m.rcode = (req.qtype === RRType.AAAA ? z.aaaaRcode : undefined) ?? z.rcode ?? Rcode.NOERROR;
    m.aa = true;
    m.ra = req.qtype === RRType.AAAA;
    m.answer = z[req.qtype] ?? [];
    m.authority = m.answer.length === 0 ? (z.authority ?? []) : [];
    m.tc = z.tc === true && req.qtype === RRType.A;
    if (z.wire === true) w.writeWire(encodeMessage(m));
    else w.writeMsg(m);
    return m.rcode;
  });
}

async function query(corefile: string, z: Zone, o: { type?: number; remote?: string } = {}) {
  const r = await runSetup(plugin, corefile);
  const back = backend(z);
  const chain = r.chain(back);
  const base = makeRequest('Host.Example.', { type: o.type ?? RRType.A });
  const req = new Request(base.msg, base.wire, 'udp', o.remote ?? '192.0.2.200', 5353, '127.0.0.1', 53, 'dns://:53', 0n, chainRouter(() => chain));
  const w = new CaptureWriter();
  const rc = await settle(chain.serveDNS(req, w));
  return { rc, m: w.last, back, req };
}

test('siit synthesises A from AAAA in the prefix; TTL min(AAAA, SOA of the NODATA), 600 without; counted', async () => {
  const before = await metricValue('coredns_siit_requests_translated_total', { server: 'dns://:53' });
  const { rc, m } = await query('. {\n siit\n}', {
    [RRType.AAAA]: [aaaa('host.example.', '64:ff9b::c000:201', 900), aaaa('host.example.', '64:ff9b::c000:202', 60), aaaa('host.example.', '2001:db8::1')],
    authority: [soa('example.', 300)],
  });
  assert.equal(rc, Rcode.NOERROR);
  // Addresses outside the prefix are dropped.
  assert.deepEqual(m!.answer, [a('host.example.', '192.0.2.1', 300), a('host.example.', '192.0.2.2', 60)]);
  assert.equal(m!.aa, true);
  assert.equal(m!.ra, true);
  assert.deepEqual(m!.question, [{ name: 'Host.Example.', type: RRType.A, class: 1 }]);
  assert.equal(await metricValue('coredns_siit_requests_translated_total', { server: 'dns://:53' }), before + 1);
  const r2 = await query('. {\n siit\n}', { [RRType.AAAA]: [aaaa('host.example.', '64:ff9b::c000:201', 900)] });
  assert.equal(r2.m!.answer[0]!.ttl, 600);
});

test('siit eam mappings win over the prefix; other prefixes; a non-zero u octet is not translated', async () => {
  let r = await query('. {\n siit {\n  eam 198.51.100.7 2001:db8::7\n  eam 198.51.100.8 64:ff9b::c000:201\n }\n}', {
    [RRType.AAAA]: [aaaa('host.example.', '2001:db8::7'), aaaa('host.example.', '64:ff9b::c000:201'), aaaa('host.example.', '64:ff9b::c000:202')],
  });
  assert.deepEqual(r.m!.answer.map((x) => x.data), [{ address: '198.51.100.7' }, { address: '198.51.100.8' }, { address: '192.0.2.2' }]);
  r = await query('. {\n siit {\n  ipv6_prefix 2001:db8:122:344::/64\n }\n}', {
    [RRType.AAAA]: [aaaa('host.example.', '2001:db8:122:344:c0:2:2100:0'), aaaa('host.example.', '2001:db8:122:344:1c0:2:2100:0')],
  });
  assert.deepEqual(r.m!.answer, [a('host.example.', '192.0.2.33', 300)]);
});

test('siit leaves alone: other types, A answers, NXDOMAIN, TC, synthesis sub-queries; nothing mappable gives the A reply', async () => {
  const zone: Zone = { [RRType.AAAA]: [aaaa('host.example.', '64:ff9b::c000:201')] };
  let r = await query('. {\n siit\n}', zone, { type: RRType.AAAA });
  assert.deepEqual(r.m!.answer, zone[RRType.AAAA]);
  assert.equal(r.back.calls, 1);
  r = await query('. {\n siit\n}', { ...zone, [RRType.A]: [a('host.example.', '192.0.2.9')] });
  assert.deepEqual(r.m!.answer, [a('host.example.', '192.0.2.9')]);
  assert.equal(r.back.calls, 1);
  r = await query('. {\n siit\n}', { ...zone, rcode: Rcode.NXDOMAIN, authority: [soa('example.', 30)] });
  assert.equal(r.m!.rcode, Rcode.NXDOMAIN);
  assert.equal(r.back.calls, 1);
  r = await query('. {\n siit\n}', { ...zone, tc: true });
  assert.equal(r.m!.tc, true);
  assert.deepEqual(r.m!.answer, []);
  assert.equal(r.back.calls, 1);
  // Nothing in the prefix: the A reply as it was (its RA unset), not counted.
  r = await query('. {\n siit\n}', { [RRType.AAAA]: [aaaa('host.example.', '2001:db8::1')], authority: [soa('example.', 30)] });
  assert.deepEqual(r.m!.answer, []);
  assert.equal(r.m!.ra, false);
  assert.deepEqual(r.m!.authority, [soa('example.', 30)]);
  assert.equal(r.back.calls, 2);
  // A query marked as a synthesis sub-query passes.
  const run = await runSetup(plugin, '. {\n siit\n}');
  const back = backend(zone);
  const req = makeRequest('host.example.');
  req.setValue(SYNTHESIS_LOOKUP, '1');
  const w = new CaptureWriter();
  await settle(run.chain(back).serveDNS(req, w));
  assert.deepEqual(w.last!.answer, []);
  assert.equal(back.calls, 1);
});

test('siit: a failed AAAA lookup answers with its rcode and sections under the A question', async () => {
  const r = await query('. {\n siit\n}', { aaaaRcode: Rcode.SERVFAIL, authority: [soa('example.', 30)], wire: true });
  assert.equal(r.rc, Rcode.SERVFAIL);
  assert.equal(r.m!.rcode, Rcode.SERVFAIL);
  assert.deepEqual(r.m!.question, [{ name: 'Host.Example.', type: RRType.A, class: 1 }]);
  assert.deepEqual(r.m!.authority, [soa('example.', 30)]);
  assert.equal(r.m!.ra, true);
});

test('siit: no reply to the AAAA lookup, or no server, is SERVFAIL with an error; the chain error passes', async () => {
  await assert.rejects(query('. {\n siit\n}', { silentAAAA: true }), { message: 'siit: upstream lookup returned no response' });
  const run = await runSetup(plugin, '. {\n siit\n}');
  const w = new CaptureWriter();
  await assert.rejects(Promise.resolve(run.chain(backend({})).serveDNS(makeRequest('x.'), w)), { message: 'no full server is running' });
  assert.equal(await settle(run.chain(new StubHandler('n', () => Rcode.REFUSED)).serveDNS(makeRequest('x.'), w)), Rcode.REFUSED);
  assert.equal(w.msgs.length, 0);
  assert.throws(() => run.chain(new StubHandler('n', () => { throw new Error('boom'); })).serveDNS(makeRequest('x.'), w), { message: 'boom' });
  // The last plugin: CoreDNS dereferences its nil next for A, "no next plugin found" otherwise.
  assert.throws(() => run.chain().serveDNS(makeRequest('x.'), w), /nil pointer dereference/);
});

test('siit: an error of the rest of the chain after its reply: passed on with it, or dropped when translated', async () => {
  const zone: Zone = { [RRType.AAAA]: [aaaa('host.example.', '64:ff9b::c000:201')] };
  const run = await runSetup(plugin, '. {\n siit\n}');
  const back = backend(zone);
  const failing = new StubHandler('f', (req, w) => {
    if (req.qtype === RRType.A && req.name === 'written.example.') {
      const m = replyTo(req.msg);
      m.answer = [a('written.example.', '192.0.2.1')];
      w.writeMsg(m);
      throw new PluginError(Rcode.SERVFAIL, 'after write');
    }
    if (req.qtype === RRType.A) {
      w.writeMsg(replyTo(req.msg));
      throw new PluginError(Rcode.SERVFAIL, 'empty');
    }
    return back.serveDNS(req, w);
  });
  const chain = run.chain(failing);
  const mk = (name: string) => {
    const base = makeRequest(name);
    return new Request(base.msg, base.wire, 'udp', '192.0.2.200', 5353, '127.0.0.1', 53, 'dns://:53', 0n, chainRouter(() => chain));
  };
  let w = new CaptureWriter();
  assert.throws(() => chain.serveDNS(mk('written.example.'), w), { message: 'after write' });
  assert.deepEqual(w.last!.answer, [a('written.example.', '192.0.2.1')]);
  w = new CaptureWriter();
  assert.equal(await settle(chain.serveDNS(mk('host.example.'), w)), Rcode.NOERROR);
  assert.deepEqual(w.last!.answer, [a('host.example.', '192.0.2.1', 300)]);
});
