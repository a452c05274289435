import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin, type Dns64Options } from './setup.ts';
import { embedIPv4 } from '../pkg/rfc6052.ts';
import { CaptureWriter, StubHandler, chainRouter, captureLog, makeRequest, metricValue, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { PluginError } from '../plugin.ts';
import { Request } from '../../core/request.ts';
import type { ResourceRecord } from '../../wire/types.ts';
import { replyTo } from '../../wire/message.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { formatIPv6, parseCidr, parseIPv4 } from '../../wire/ip.ts';
import { Rcode, RRType } from '../../wire/constants.ts';

const E2 = 'plugin/dns64: Corefile:2 - Error during parsing: ';
const E3 = 'plugin/dns64: Corefile:3 - Error during parsing: ';
const WKP = parseCidr('64:ff9b::/96')!;
const opts = (prefix = WKP, translateAll = false, allowIPv4 = false): Dns64Options => ({ prefix, translateAll, allowIPv4 });

test('dns64 parse', async () => {
  await parseTable<Dns64Options>('dns64', parse, [
    ['. {\n dns64\n}', opts()],
    ['. {\n dns64 64:1337::/96\n}', opts(parseCidr('64:1337::/96'))],
    ['. {\n dns64 {\n  prefix 2001:db8::/32\n  translate_all\n  allow_ipv4\n }\n}', opts(parseCidr('2001:db8::/32'), true, true)],
    ['. {\n dns64 2001:db8:122:344::1/64\n}', opts(parseCidr('2001:db8:122:344::/64'))],
    ['. {\n dns64 ::ffff:0:0/96\n}', opts(parseCidr('::ffff:0:0/96'))],
    // After PREFIX the block is not read as options: its lines are further directive lines
    // (one argument: a prefix; none: ignored).
    ['. {\n dns64 64:ff9b::/96 {\n  translate_all\n  allow_ipv4\n }\n}', opts()],
    ['. {\n dns64 64:ff9b::/96 {\n  foo\n }\n}', opts()],
    ['. {\n dns64 2001:db8:1::/96 {\n  prefix 2001:db8:2::/96\n }\n}', opts(parseCidr('2001:db8:2::/96'))],
    // Every line is read; later settings win, options stay set.
    ['. {\n dns64 {\n  translate_all\n }\n dns64 2001:db8::/48\n}', opts(parseCidr('2001:db8::/48'), true)],
    ['. {\n dns64 foo\n}', 'plugin/dns64: invalid CIDR address: foo'],
    ['. {\n dns64 64:ff9b::\n}', 'plugin/dns64: invalid CIDR address: 64:ff9b::'],
    ['. {\n dns64 10.0.0.0/8\n}', E2 + 'invalid netmask 32 IPv6 address: "10.0.0.0/8"'],
    ['. {\n dns64 64:ff9b::/80\n}', E2 + 'invalid prefix length "64:ff9b::/80"'],
    ['. {\n dns64 64:ff9b::1/80\n}', E2 + 'invalid prefix length "64:ff9b::/80"'],
    ['. {\n dns64 ::ffff:1.2.3.4/120\n}', E2 + 'invalid prefix length "1.2.3.0/24"'],
    ['. {\n dns64 64:ff9b::/128\n}', E2 + 'invalid prefix length "64:ff9b::/128"'],
    ['. {\n dns64 a b\n}', E2 + "Wrong argument count or unexpected line ending after 'b'"],
    ['. {\n dns64 {\n  prefix\n }\n}', E3 + "Wrong argument count or unexpected line ending after 'prefix'"],
    ['. {\n dns64 {\n  prefix a b\n }\n}', 'plugin/dns64: invalid CIDR address: a'],
    ['. {\n dns64 {\n  prefix 64:ff9b::/97\n }\n}', E3 + 'invalid prefix length "64:ff9b::/97"'],
    ['. {\n dns64 {\n  foo\n }\n}', E3 + "unknown property 'foo'"],
    ['. {\n dns64 {\n  translate_all bar\n }\n}', E3 + "unknown property 'bar'"],
    ['. {\n dns64 64:ff9b::/96 {\n  foo bar\n }\n}', 'plugin/dns64: invalid CIDR address: bar'],
    ['. {\n dns64 64:ff9b::/96 {\n  translate_all x y\n }\n}', E3 + "Wrong argument count or unexpected line ending after 'y'"],
  ]);
});

test('dns64 RFC 6052 embedding for every prefix length (RFC 6052 2.4 examples)', () => {
  const v4 = parseIPv4('192.0.2.33');
  const rows: [string, string][] = [
    ['2001:db8::/32', '2001:db8:c000:221::'],
    ['2001:db8:100::/40', '2001:db8:1c0:2:21::'],
    ['2001:db8:122::/48', '2001:db8:122:c000:2:2100::'],
    ['2001:db8:122:300::/56', '2001:db8:122:3c0:0:221::'],
    ['2001:db8:122:344::/64', '2001:db8:122:344:c0:2:2100:0'],
    ['2001:db8:122:344::/96', '2001:db8:122:344::c000:221'],
    ['64:ff9b::/96', '64:ff9b::c000:221'],
  ];
  for (const [p, want] of rows) assert.equal(formatIPv6(embedIPv4(parseCidr(p)!, v4), 0), want, p);
});

const a = (name: string, ip: string, ttl = 300): ResourceRecord => ({ name, type: RRType.A, class: 1, ttl, data: { address: ip } });
const aaaa = (name: string, ip: string, ttl = 300): ResourceRecord => ({ name, type: RRType.AAAA, class: 1, ttl, data: { address: ip } });
const soa = (name: string, ttl: number): ResourceRecord => ({
  name, type: RRType.SOA, class: 1, ttl,
  data: { mname: 'ns.' + name, rname: 'h.' + name, serial: 1, refresh: 2, retry: 3, expire: 4, minimum: 5 },
});

/** Records per type for one name, and an rcode; answers as a zone would. */
interface Zone {
  [type: number]: ResourceRecord[] | undefined;
  rcode?: number;
  authority?: ResourceRecord[];
  /** Drop A queries (no reply). */
  dropA?: boolean;
  /** Answer with wire bytes (as a cache hit does). */
  wire?: boolean;
  tc?: boolean;
}

function backend(z: Zone): StubHandler {
  return new StubHandler('backend', (req, w) => {
    if (req.qtype === RRType.A && z.dropA === true) return Rcode.NOERROR;
    const m = replyTo(req.msg);
    m.rcode = z.rcode ?? Rcode.NOERROR;
    m.aa = true;
    m.answer = z[req.qtype] ?? [];
    m.authority = m.answer.length === 0 ? (z.authority ?? []) : [];
    m.tc = z.tc === true;
    const e = req.msg.edns;
    if (e !== undefined) m.edns = { udpSize: e.udpSize, version: 0, do: false, z: 0, options: [] };
    if (z.wire === true) w.writeWire(encodeMessage(m));
    else w.writeMsg(m);
    return m.rcode;
  });
}

async function query(corefile: string, z: Zone, o: { remote?: string; type?: number; name?: string } = {}) {
  const r = await runSetup(plugin, corefile);
  const back = backend(z);
  const chain = r.chain(back);
  const base = makeRequest(o.name ?? 'Host.Example.', { type: o.type ?? RRType.AAAA, edns: { udpSize: 1232 } });
  const req = new Request(base.msg, base.wire, 'udp', o.remote ?? '2001:db8::99', 5353, '::1', 53, 'dns://:53', 0n, chainRouter(() => chain));
  const w = new CaptureWriter();
  const rc = await settle(chain.serveDNS(req, w));
  return { rc, m: w.last, back };
}

test('dns64 synthesises AAAA from A for an IPv6 client; TTL min(A, SOA of the NODATA)', async () => {
  const { rc, m } = await query('. {\n dns64\n}', {
    [RRType.A]: [a('host.example.', '192.0.2.1', 900), a('host.example.', '192.0.2.2', 60)],
    authority: [soa('example.', 300)],
  });
  assert.equal(rc, Rcode.NOERROR);
  assert.deepEqual(m!.answer, [aaaa('host.example.', '64:ff9b::c000:201', 300), aaaa('host.example.', '64:ff9b::c000:202', 60)]);
  // The header is the query's (no AA, no RA), the question as asked.
  assert.equal(m!.aa, false);
  assert.equal(m!.ra, false);
  assert.deepEqual(m!.question, [{ name: 'Host.Example.', type: RRType.AAAA, class: 1 }]);
  // Without an SOA the TTL is capped at 600.
  const r2 = await query('. {\n dns64\n}', { [RRType.A]: [a('host.example.', '192.0.2.1', 900)] });
  assert.equal(r2.m!.answer[0]!.ttl, 600);
});

test('dns64 leaves alone: IPv4 clients (without allow_ipv4), other types, AAAA answers, NXDOMAIN', async () => {
  const zone: Zone = { [RRType.A]: [a('host.example.', '192.0.2.1')] };
  let r = await query('. {\n dns64\n}', zone, { remote: '192.0.2.200' });
  assert.deepEqual(r.m!.answer, []);
  assert.equal(r.back.calls, 1);
  r = await query('. {\n dns64\n}', zone, { remote: '10.0.0.1' });
  assert.deepEqual(r.m!.answer, []);
  r = await query('. {\n dns64 {\n  allow_ipv4\n }\n}', zone, { remote: '192.0.2.200' });
  assert.deepEqual(r.m!.answer, [aaaa('host.example.', '64:ff9b::c000:201', 300)]);
  r = await query('. {\n dns64\n}', zone, { type: RRType.A });
  assert.deepEqual(r.m!.answer, [a('host.example.', '192.0.2.1')]);
  r = await query('. {\n dns64\n}', { ...zone, [RRType.AAAA]: [aaaa('host.example.', '2001:db8::1')] });
  assert.deepEqual(r.m!.answer, [aaaa('host.example.', '2001:db8::1')]);
  assert.equal(r.m!.aa, true);
  r = await query('. {\n dns64\n}', { ...zone, rcode: Rcode.NXDOMAIN, authority: [soa('example.', 30)] });
  assert.equal(r.m!.rcode, Rcode.NXDOMAIN);
  assert.equal(r.back.calls, 1);
});

test('dns64 translate_all replaces AAAA answers; other records of the A reply pass unchanged', async () => {
  const cname: ResourceRecord = { name: 'host.example.', type: RRType.CNAME, class: 1, ttl: 10, data: { target: 't.example.' } };
  const { m } = await query('. {\n dns64 {\n  translate_all\n  prefix 2001:db8::/32\n }\n}', {
    [RRType.A]: [cname, a('t.example.', '192.0.2.33', 20)],
    [RRType.AAAA]: [aaaa('host.example.', '2001:db8::1')],
  });
  assert.deepEqual(m!.answer, [cname, aaaa('t.example.', '2001:db8:c000:221::', 20)]);
});

test('dns64 keeps the A reply rcode, TC, authority and OPT; the reply of a wire-writing plugin is read', async () => {
  const { m } = await query('. {\n dns64\n}', { wire: true, rcode: Rcode.SERVFAIL, tc: true, authority: [soa('example.', 30)] });
  assert.equal(m!.rcode, Rcode.SERVFAIL);
  assert.equal(m!.tc, true);
  assert.deepEqual(m!.answer, []);
  assert.deepEqual(m!.authority, [soa('example.', 30)]);
  assert.equal(m!.edns!.udpSize, 1232);
  const r = await query('. {\n dns64\n}', { wire: true, [RRType.A]: [a('host.example.', '192.0.2.1', 30)] });
  assert.deepEqual(r.m!.answer, [aaaa('host.example.', '64:ff9b::c000:201', 30)]);
});

test('dns64: no reply to the A query is SERVFAIL with an error; nothing from next passes the rcode on', async () => {
  await assert.rejects(query('. {\n dns64\n}', { dropA: true }), (e: unknown) => {
    assert.ok(e instanceof PluginError);
    assert.equal(e.rcode, Rcode.SERVFAIL);
    assert.equal(e.message, 'dns64: upstream returned no response');
    return true;
  });
  const r = await runSetup(plugin, '. {\n dns64\n}');
  const w = new CaptureWriter();
  const req = makeRequest('x.', { type: RRType.AAAA, remote: '::1' });
  assert.equal(await settle(r.chain(new StubHandler('n', () => Rcode.REFUSED)).serveDNS(req, w)), Rcode.REFUSED);
  assert.equal(w.msgs.length, 0);
  // An error of the rest of the chain is passed on.
  const failing = new StubHandler('n', () => { throw new PluginError(Rcode.SERVFAIL, 'boom'); });
  assert.throws(() => r.chain(failing).serveDNS(req, w), { message: 'boom' });
  // Without a server to route the A query through: SERVFAIL with the lookup's error.
  await assert.rejects(Promise.resolve(r.chain(backend({})).serveDNS(req, w)), { message: 'no full server is running' });
});

test('dns64 as the last plugin: a recovered nil dereference, as in CoreDNS; other queries: no next plugin found', async () => {
  const r = await runSetup(plugin, '. {\n dns64\n}');
  const h = r.chain();
  assert.throws(() => h.serveDNS(makeRequest('x.', { type: RRType.AAAA, remote: '::1' }), new CaptureWriter()),
    { message: 'runtime error: invalid memory address or nil pointer dereference' });
  assert.throws(() => h.serveDNS(makeRequest('x.', { type: RRType.A, remote: '::1' }), new CaptureWriter()),
    { message: 'plugin/dns64: no next plugin found' });
});

test('dns64 metric: coredns_dns64_requests_translated_total{server}', async () => {
  const before = await metricValue('coredns_dns64_requests_translated_total', { server: 'dns://:53' });
  await query('. {\n dns64\n}', { [RRType.A]: [a('host.example.', '192.0.2.1')] });
  await query('. {\n dns64\n}', { [RRType.A]: [a('host.example.', '192.0.2.1')] }, { remote: '10.0.0.1' });
  assert.equal(await metricValue('coredns_dns64_requests_translated_total', { server: 'dns://:53' }), before + 1);
  const lines = await captureLog(() => query('. {\n dns64\n}', { [RRType.A]: [a('host.example.', '192.0.2.1')] }));
  assert.deepEqual(lines, []);
});
