import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import { Request, type SubQueryRouter } from '../../core/request.ts';
import type { EdnsOption, Message, ResourceRecord } from '../../wire/types.ts';
import { replyTo, newQuery } from '../../wire/message.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { EdnsOption as OptionCode, Rcode, RRClass, RRType } from '../../wire/constants.ts';
import { CaptureWriter, StubHandler, captureLog, makeRequest, runSetup, settle } from '../pkg/testing.ts';
import { plugin } from './setup.ts';
import { sizeAndDo } from '../../core/serve.ts';

const A = (name: string, ip: string, ttl = 3600): ResourceRecord => ({ name, type: RRType.A, class: RRClass.IN, ttl, data: { address: ip } });

/** A backend that answers every question with one A record for the name it was asked, and remembers the request. */
function answering(ttl = 3600): StubHandler & { seen: Request[] } {
  const seen: Request[] = [];
  const h = new StubHandler('hosts', (req, w) => {
    seen.push(req);
    const r = replyTo(req.msg);
    r.aa = true;
    r.answer = [A(req.qname, '10.0.0.1', ttl)];
    w.writeMsg(r);
    return Rcode.NOERROR;
  });
  return Object.assign(h, { seen });
}

async function chain(rules: string, last: Handler | undefined): Promise<Handler> {
  const r = await runSetup(plugin, `. {\n${rules}\n}`);
  return r.chain(last);
}

/**
 * The server's writer as far as the OPT goes: its SizeAndDo (src/core/serve.ts) over the query as the
 * chain left it, echoing the codes rewrite registered (0xffee and the 0xffeN of these tests).
 */
class ServerWriter extends CaptureWriter {
  private readonly req: Request;
  constructor(req: Request) {
    super();
    this.req = req;
  }

  override writeMsg(m: Message): void {
    const out: Message = { ...m, edns: m.edns === undefined ? undefined : { ...m.edns } };
    sizeAndDo(this.req, out, REGISTERED);
    super.writeMsg(out);
  }
}
const REGISTERED: ReadonlySet<number> = new Set([0xffee, 0xffe1, 0xffe2, 0xffe3, 0xffe4, 0xffe5, 0xffe6, 0xffe7, 0xffe8, 0xffe9]);

async function serve(h: Handler, req: Request): Promise<{ rcode: number; w: CaptureWriter }> {
  const w = new ServerWriter(req);
  const rcode = await settle(h.serveDNS(req, w));
  return { rcode, w };
}

const opt = (code: number, data: string): EdnsOption => ({ code, data: Buffer.from(data) });

/** A request carrying EDNS options (makeRequest gives an empty OPT). */
function withOptions(name: string, options: EdnsOption[], o: Parameters<typeof makeRequest>[1] = {}): Request {
  const base = makeRequest(name, { edns: { udpSize: 1232 }, ...o });
  base.msg.edns!.options.push(...options);
  const wire = encodeMessage(base.msg);
  return new Request(decodeMessage(wire), wire, base.proto, base.remoteAddress, base.remotePort, base.localAddress,
    base.localPort, base.server, base.start);
}

test('exact: the chain sees the new name; the reply has the question and owner names of the query', async () => {
  const next = answering();
  const h = await chain(' rewrite name exact a.example.org b.example.org', next);
  const req = makeRequest('A.Example.org.');
  const { rcode, w } = await serve(h, req);
  assert.equal(rcode, Rcode.NOERROR);
  assert.equal(next.seen[0]!.qname, 'b.example.org.');
  assert.equal(req.qname, 'A.Example.org.', 'the client request is never changed');
  assert.deepEqual(w.last!.question, [{ name: 'A.Example.org.', type: RRType.A, class: RRClass.IN }]);
  // The auto revert maps the rewritten name back to the lower-cased query name.
  assert.equal(w.last!.answer[0]!.name, 'a.example.org.');
});

test('no rule matches: the request passes untouched, the writer is the client writer', async () => {
  let gotReq: Request | undefined;
  let gotW: ResponseWriter | undefined;
  const h = await chain(' rewrite name exact a.example.org b.example.org', new StubHandler('x', (req, w) => { gotReq = req; gotW = w; return Rcode.NOERROR; }));
  const req = makeRequest('c.example.org.');
  const w = new CaptureWriter();
  assert.equal(h.serveDNS(req, w), Rcode.NOERROR);
  assert.equal(gotReq, req);
  assert.equal(gotW, w);
});

test('prefix without answer auto keeps the rewritten owner; with it the owner is mapped back', async () => {
  let h = await chain(' rewrite name prefix pre www', answering());
  let { w } = await serve(h, makeRequest('pre.example.org.'));
  assert.equal(w.last!.question[0]!.name, 'pre.example.org.');
  assert.equal(w.last!.answer[0]!.name, 'www.example.org.');
  h = await chain(' rewrite name prefix pre www answer auto', answering());
  ({ w } = await serve(h, makeRequest('pre.example.org.')));
  assert.equal(w.last!.answer[0]!.name, 'pre.example.org.');
});

test('regex with {N} groups and answer name/value rules', async () => {
  const next = new StubHandler('b', (req, w) => {
    const r = replyTo(req.msg);
    r.answer = [
      { name: req.qname, type: RRType.CNAME, class: 1, ttl: 5, data: { target: 'web.default.svc.cluster.local.' } },
      { name: 'web.default.svc.cluster.local.', type: RRType.SRV, class: 1, ttl: 5, data: { priority: 0, weight: 0, port: 80, target: 'x.default.svc.cluster.local.' } },
      { name: 'web.default.svc.cluster.local.', type: RRType.MX, class: 1, ttl: 5, data: { preference: 1, exchange: 'mx.default.svc.cluster.local.' } },
      { name: 'web.default.svc.cluster.local.', type: RRType.TXT, class: 1, ttl: 5, data: { strings: [] } },
    ];
    r.authority = [{ name: 'default.svc.cluster.local.', type: RRType.SOA, class: 1, ttl: 5, data: { mname: 'ns.default.svc.cluster.local.', rname: 'h.', serial: 1, refresh: 1, retry: 1, expire: 1, minimum: 1 } }];
    w.writeMsg(r);
    return Rcode.NOERROR;
  });
  const h = await chain(' rewrite stop {\n  name regex (.*)\\.example\\.com {1}.default.svc.cluster.local\n  answer name (.*)\\.default\\.svc\\.cluster\\.local {1}.example.com\n  answer value (.*)\\.default\\.svc\\.cluster\\.local\\. {1}.example.com\n }', next);
  const { w } = await serve(h, makeRequest('web.example.com.'));
  const m = w.last!;
  assert.deepEqual(m.answer.map((r) => r.name), ['web.example.com.', 'web.example.com.', 'web.example.com.', 'web.example.com.']);
  assert.equal((m.answer[0]!.data as { target: string }).target, 'web.example.com.');
  assert.equal((m.answer[1]!.data as { target: string }).target, 'x.example.com.');
  assert.equal((m.answer[2]!.data as { exchange: string }).exchange, 'mx.example.com.');
  assert.equal(m.authority[0]!.name, 'default.svc.cluster.local.', 'the regex needs a label before the suffix');
  assert.equal((m.authority[0]!.data as { mname: string }).mname, 'ns.example.com.');
});

test('the reply a backend wrote is never changed (a cache may hold it)', async () => {
  const reply = replyTo(newQuery('b.example.org.', RRType.A));
  reply.answer = [A('b.example.org.', '10.0.0.1', 100)];
  const h = await chain(' rewrite continue name exact a.example.org b.example.org\n rewrite ttl b.example.org 5', new StubHandler('c', (_req, w) => { w.writeMsg(reply); return 0; }));
  const { w } = await serve(h, makeRequest('a.example.org.'));
  assert.equal(w.last!.answer[0]!.ttl, 5);
  assert.equal(w.last!.answer[0]!.name, 'a.example.org.');
  assert.equal(reply.answer[0]!.ttl, 100);
  assert.equal(reply.answer[0]!.name, 'b.example.org.');
  assert.equal(reply.question[0]!.name, 'b.example.org.');
});

test('continue rules without response rules: the question is not restored', async () => {
  const h = await chain(' rewrite continue name prefix c1 c2\n rewrite continue type TXT A', answering());
  const { w } = await serve(h, makeRequest('c1.example.org.', { type: RRType.TXT }));
  assert.deepEqual(w.last!.question[0], { name: 'c2.example.org.', type: RRType.A, class: RRClass.IN });
});

test('stop: the first rule that rewrites ends the rules; continue goes on', async () => {
  let next = answering();
  let h = await chain(' rewrite name exact a.org b.org\n rewrite name exact b.org c.org', next);
  await serve(h, makeRequest('a.org.'));
  assert.equal(next.seen[0]!.qname, 'b.org.');
  next = answering();
  h = await chain(' rewrite continue name exact a.org b.org\n rewrite name exact b.org c.org', next);
  const { w } = await serve(h, makeRequest('a.org.'));
  assert.equal(next.seen[0]!.qname, 'c.org.');
  // Response rules run last rule first: c → b, then b → a.
  assert.equal(w.last!.answer[0]!.name, 'a.org.');
});

test('class and type rules', async () => {
  const next = answering();
  const h = await chain(' rewrite continue class CH IN\n rewrite type AAAA A', next);
  const { w } = await serve(h, makeRequest('x.org.', { class: RRClass.CH, type: RRType.AAAA }));
  assert.equal(next.seen[0]!.qclass, RRClass.IN);
  assert.equal(next.seen[0]!.qtype, RRType.A);
  assert.deepEqual(w.last!.question[0], { name: 'x.org.', type: RRType.AAAA, class: RRClass.CH });
});

test('ttl: values and ranges on every section, and on the OPT record as miekg sees it', async () => {
  const rows: [string, number, number][] = [
    ['30-300', 10, 30], ['30-300', 100, 100], ['30-300', 1000, 300], ['-30', 100, 30], ['30-', 5, 30], ['30-', 99999, 99999], ['7', 100, 7],
  ];
  for (const [spec, ttl, want] of rows) {
    const h = await chain(` rewrite ttl x.org ${spec}`, answering(ttl));
    const { w } = await serve(h, makeRequest('x.org.'));
    assert.equal(w.last!.answer[0]!.ttl, want, spec);
  }
  const withOpt = new StubHandler('o', (req, w) => {
    const r = replyTo(req.msg);
    r.edns = { udpSize: 4096, version: 0, do: true, z: 0, options: [] };
    w.writeMsg(r);
    return 0;
  });
  const h = await chain(' rewrite ttl x.org 0-300', withOpt);
  const { w } = await serve(h, makeRequest('x.org.'));
  // The OPT's TTL field (DO = 0x8000) is clamped to 300 = 0x12c: DO cleared, Z bits set.
  assert.equal(w.last!.edns!.do, false);
  assert.equal(w.last!.edns!.z, 300);
});

test('rcode: on a reply with records, and once on a reply without any', async () => {
  const nx = new StubHandler('nx', (req, w) => {
    const r = replyTo(req.msg);
    r.rcode = Rcode.NXDOMAIN;
    w.writeMsg(r);
    return Rcode.NXDOMAIN;
  });
  let h = await chain(' rewrite rcode x.org NXDOMAIN REFUSED', nx);
  let { w } = await serve(h, makeRequest('x.org.'));
  assert.equal(w.last!.rcode, Rcode.REFUSED);
  h = await chain(' rewrite continue rcode x.org 0 3\n rewrite rcode x.org 3 2', answering());
  ({ w } = await serve(h, makeRequest('x.org.')));
  // Per record, last rule first: 0 is not 3, then 0 → 3.
  assert.equal(w.last!.rcode, Rcode.NXDOMAIN);
});

test('a chain that writes nothing: rewrite writes the error reply through its response rules', async () => {
  const fail = new StubHandler('f', () => Rcode.SERVFAIL);
  const h = await chain(' rewrite rcode x.org SERVFAIL NOERROR', fail);
  const { rcode, w } = await serve(h, makeRequest('x.org.', { edns: { udpSize: 1232 } }));
  assert.equal(rcode, Rcode.NOERROR);
  assert.equal(w.msgs.length, 1);
  assert.equal(w.last!.rcode, Rcode.NOERROR);
  assert.equal(w.last!.edns!.udpSize, 1232);
});

test('no next plugin: the error reply is written, the error still reported (with rcode 0)', async () => {
  const h = await chain(' rewrite name exact a.org b.org', undefined);
  const w = new CaptureWriter();
  assert.throws(() => h.serveDNS(makeRequest('a.org.'), w), (e: unknown) => e instanceof PluginError && e.rcode === Rcode.NOERROR && e.message === 'plugin/rewrite: no next plugin found');
  assert.equal(w.last!.rcode, Rcode.SERVFAIL);
  assert.equal(w.last!.question[0]!.name, 'a.org.');
});

test('an asynchronous chain', async () => {
  const slow = new StubHandler('slow', async (req, w) => {
    await new Promise((r) => setTimeout(r, 5));
    const r = replyTo(req.msg);
    r.answer = [A(req.qname, '10.0.0.9')];
    w.writeMsg(r);
    return 0;
  });
  const h = await chain(' rewrite name suffix .a.org .b.org answer auto', slow);
  const { w } = await serve(h, makeRequest('x.a.org.'));
  assert.equal(w.last!.answer[0]!.name, 'x.a.org.');
});

test('a name that is no domain name after the rewrite is an error (SERVFAIL)', async () => {
  const h = await chain(' rewrite name substring bad a..b', answering());
  assert.throws(() => h.serveDNS(makeRequest('x.bad.org.'), new CaptureWriter()),
    (e: unknown) => e instanceof PluginError && e.rcode === Rcode.SERVFAIL && e.message === 'invalid name after rewrite: x.a..b.org.');
});

test('edns0 local: set, append, replace, unset; the option reaches the chain and is echoed', async () => {
  const cases: [string, EdnsOption[], string[]][] = [
    ['set 0xffee abcd', [], ['abcd']],
    ['set 0xffee abcd', [opt(0xffee, '12')], ['abcd']],
    ['append 0xffee ab', [opt(0xffee, '12')], ['12', 'ab']],
    ['replace 0xffee cd', [], []],
    ['replace 0xffee cd', [opt(0xffee, '12')], ['cd']],
    ['unset 0xffee', [opt(0xffee, '12'), opt(0xffee, '34')], []],
    ['set 0xffee abcd revert', [], []],
    ['set 0xffee abcd revert', [opt(0xffee, '12')], ['12']],
  ];
  for (const [rule, options, want] of cases) {
    const next = answering();
    const h = await chain(` rewrite edns0 local ${rule}`, next);
    const { w } = await serve(h, withOptions('x.org.', options));
    const seen = next.seen[0]!.msg.edns!.options.filter((o) => o.code === 0xffee).map((o) => Buffer.from(o.data).toString());
    if (!rule.includes('revert')) assert.deepEqual(seen, want, rule);
    assert.deepEqual(w.last!.edns!.options.map((o) => Buffer.from(o.data).toString()), want, rule);
  }
});

test('edns0 on a query without EDNS adds an OPT of 4096 bytes, even when the rule does not apply', async () => {
  const next = answering();
  const h = await chain(' rewrite edns0 local replace 0xffee cd', next);
  const { w } = await serve(h, makeRequest('x.org.'));
  assert.equal(next.seen[0]!.msg.edns!.udpSize, 4096);
  assert.equal(next.seen[0]!.size, 4096);
  assert.equal(w.last!.edns!.udpSize, 4096);
});

test('edns0 local variables', async () => {
  const next = answering();
  const h = await chain([
    ' rewrite continue edns0 local set 0xffe1 {qname}',
    ' rewrite continue edns0 local set 0xffe2 {qtype}',
    ' rewrite continue edns0 local set 0xffe3 {client_ip}',
    ' rewrite continue edns0 local set 0xffe4 {server_ip}',
    ' rewrite continue edns0 local set 0xffe5 {client_port}',
    ' rewrite continue edns0 local set 0xffe6 {server_port}',
    ' rewrite continue edns0 local set 0xffe7 {protocol}',
    ' rewrite continue edns0 local set 0xffe8 {test/label}',
    ' rewrite continue edns0 local set 0xffe9 {test/missing}',
  ].join('\n'), next);
  const req = makeRequest('Q.org.', { type: RRType.MX, remote: '192.0.2.7', port: 4242, local: '192.0.2.1', proto: 'tcp', edns: {} });
  req.beginMetadata();
  req.setMetadata('test/label', 'meta');
  await serve(h, req);
  const got = new Map(next.seen[0]!.msg.edns!.options.map((o) => [o.code, Buffer.from(o.data).toString('hex')]));
  assert.equal(got.get(0xffe1), Buffer.from('Q.org.').toString('hex'));
  assert.equal(got.get(0xffe2), '000f');
  assert.equal(got.get(0xffe3), 'c0000207');
  assert.equal(got.get(0xffe4), 'c0000201');
  assert.equal(got.get(0xffe5), '1092');
  assert.equal(got.get(0xffe6), '0035');
  assert.equal(got.get(0xffe7), Buffer.from('tcp').toString('hex'));
  assert.equal(got.get(0xffe8), Buffer.from('meta').toString('hex'));
  assert.equal(got.has(0xffe9), false);
  const v6 = answering();
  const h6 = await chain(' rewrite edns0 local set 0xffe3 {client_ip}', v6);
  await serve(h6, makeRequest('x.org.', { remote: '2001:db8::1', local: '2001:db8::53' }));
  assert.equal(Buffer.from(v6.seen[0]!.msg.edns!.options[0]!.data).toString('hex'), '20010db8000000000000000000000001');
});

test('edns0 nsid and subnet', async () => {
  let next = answering();
  let h = await chain(' rewrite edns0 nsid set', next);
  await serve(h, withOptions('x.org.', [opt(OptionCode.NSID, 'abc')]));
  assert.deepEqual(next.seen[0]!.msg.edns!.options, [{ code: OptionCode.NSID, data: new Uint8Array(0) }]);

  next = answering();
  h = await chain(' rewrite edns0 subnet set 24 56', next);
  await serve(h, makeRequest('x.org.', { remote: '192.0.2.77' }));
  assert.equal(Buffer.from(next.seen[0]!.msg.edns!.options[0]!.data).toString('hex'), '00011800c00002');

  next = answering();
  h = await chain(' rewrite edns0 subnet set 24 56', next);
  await serve(h, makeRequest('x.org.', { remote: '2001:db8:1:2:3::1' }));
  assert.equal(Buffer.from(next.seen[0]!.msg.edns!.options[0]!.data).toString('hex'), '00023800' + '20010db8000100');

  next = answering();
  h = await chain(' rewrite edns0 subnet unset', next);
  await serve(h, withOptions('x.org.', [{ code: OptionCode.CLIENT_SUBNET, data: Buffer.from('00011800c00002', 'hex') }]));
  assert.deepEqual(next.seen[0]!.msg.edns!.options, []);
});

test('name regex ... metadata: groups and metadata labels; a missing label leaves the query alone', async () => {
  let next = answering();
  const rules = ' rewrite name regex ^([^.]+)\\.example\\.$ {1}.{kubernetes/client-namespace}.svc.cluster.local. metadata answer auto';
  let h = await chain(rules, next);
  const req = makeRequest('web.example.');
  req.beginMetadata();
  req.setMetadata('kubernetes/client-namespace', 'Prod');
  const { w } = await serve(h, req);
  assert.equal(next.seen[0]!.qname, 'web.prod.svc.cluster.local.');
  assert.equal(w.last!.answer[0]!.name, 'web.example.');
  next = answering();
  h = await chain(rules, next);
  await serve(h, makeRequest('web.example.'));
  assert.equal(next.seen[0]!.qname, 'web.example.');
});

/** A request whose lookups are answered by `answer` (as the server's own zones would). */
function withRouter(name: string, answer: (req: Request) => Message | undefined): Request {
  const base = makeRequest(name);
  const router: SubQueryRouter = { exchange: (r) => Promise.resolve(answer(r)) };
  return new Request(base.msg, base.wire, base.proto, base.remoteAddress, base.remotePort, base.localAddress,
    base.localPort, base.server, base.start, router);
}

test('cname: a matching target is rewritten and resolved again through the server', async () => {
  const cnameBackend = new StubHandler('k', (req, w): HandlerResult => {
    const r = replyTo(req.msg);
    r.answer = [
      { name: req.qname, type: RRType.CNAME, class: 1, ttl: 5, data: { target: 'mid.example.' } },
      { name: 'mid.example.', type: RRType.CNAME, class: 1, ttl: 5, data: { target: 'my-app.com.cdn.example.net.' } },
      A('my-app.com.cdn.example.net.', '192.0.2.1'),
    ];
    w.writeMsg(r);
    return 0;
  });
  const h = await chain(' rewrite cname regex (.*).cdn.example.net. {1}.other.cdn.com.', cnameBackend);
  const asked: string[] = [];
  const req = withRouter('my-app.com.', (sub) => {
    asked.push(`${sub.qname} ${sub.qtype}`);
    const r = replyTo(sub.msg);
    r.answer = [A(sub.qname, '198.51.100.1')];
    r.tc = true;
    return r;
  });
  const { w } = await serve(h, req);
  assert.deepEqual(asked, ['my-app.com.other.cdn.com. 1']);
  const m = w.last!;
  assert.deepEqual(m.answer.map((r) => `${r.name} ${r.type === RRType.CNAME ? (r.data as { target: string }).target : (r.data as { address: string }).address}`), [
    'my-app.com. mid.example.',
    'mid.example. my-app.com.other.cdn.com.',
    'my-app.com.other.cdn.com. 198.51.100.1',
  ]);
  assert.equal(m.tc, true);
});

test('cname: a failed lookup is logged and the reply left as it was', async () => {
  const backend = new StubHandler('k', (req, w) => {
    const r = replyTo(req.msg);
    r.answer = [{ name: req.qname, type: RRType.CNAME, class: 1, ttl: 5, data: { target: 'a.example.' } }];
    w.writeMsg(r);
    return 0;
  });
  const h = await chain(' rewrite cname a.example b.example', backend);
  let w: CaptureWriter | undefined;
  const lines = await captureLog(async () => { ({ w } = await serve(h, makeRequest('x.org.'))); });
  assert.deepEqual(lines.filter((l) => l.includes('rewrite')), ['[ERROR] plugin/rewrite: upstream lookup failed: no full server is running']);
  assert.equal((w!.last!.answer[0]!.data as { target: string }).target, 'a.example.');
  const nil = await chain(' rewrite cname a.example b.example', backend);
  const lines2 = await captureLog(async () => { await serve(nil, withRouter('x.org.', () => undefined)); });
  assert.deepEqual(lines2.filter((l) => l.includes('rewrite')), ['[ERROR] plugin/rewrite: upstream lookup returned nil']);
});

test('the query is edited in place: once the chain ran, the client\'s request reads the rewritten type, class, OPT and length (log, prometheus), its name as sent', async () => {
  const next = answering();
  const h = await chain(' rewrite continue type A AAAA\n rewrite continue class IN CH\n rewrite continue name exact a.org. b.org.\n rewrite edns0 local set 0xffee abcd', next);
  const req = makeRequest('a.org.');
  const sent = req.length;
  assert.equal(req.udpSize, undefined);
  const { w } = await serve(h, req);
  assert.equal(req.qtype, RRType.AAAA);
  assert.equal(req.qclass, RRClass.CH);
  assert.equal(req.name, 'a.org.');
  assert.equal(req.udpSize, 4096);
  assert.equal(req.size, 4096);
  assert.equal(req.length, sent + 11 + 4 + 4); // the OPT, and the option with its 4 bytes 'abcd'
  assert.equal(req.wire.length, sent);
  // The reply: the client's question, the rewritten query's OPT echoed with the registered option.
  assert.deepEqual(w.last!.question, [{ name: 'a.org.', type: RRType.A, class: RRClass.IN }]);
  assert.equal(w.last!.edns!.udpSize, 4096);
  assert.deepEqual(w.last!.edns!.options.map((o) => o.code), [0xffee]);
});
