// Unit tests of the cache handler: set up from a Corefile snippet, a StubHandler
// as the next plugin, the cache's clock injected (Cache.now), exact replies.
// (test/e2e/cache.test.ts covers the same plugin in front of forward over sockets.)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { plugin } from './setup.ts';
import { minimalTtl, type Cache } from './cache.ts';
import { ResponseType } from '../pkg/response.ts';
import { CaptureWriter, StubHandler, makeRequest, runSetup, settle, type RequestOptions, metricValue } from '../pkg/testing.ts';
import { PluginError, type HandlerResult, type ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import { replyTo } from '../../wire/message.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import type { Message, ResourceRecord, SOAData } from '../../wire/types.ts';

const T0 = Date.UTC(2025, 0, 1);
const SERVER = 'dns://:53';

// ---- records and replies ------------------------------------------------------------------------

function a(name: string, ttl: number, address = '192.0.2.1'): ResourceRecord {
  return { name, type: 1, class: 1, ttl, data: { address } };
}

function soa(ttl: number, minimum: number, zone = 'example.'): ResourceRecord<SOAData> {
  return { name: zone, type: 6, class: 1, ttl, data: { mname: 'ns.' + zone, rname: 'host.' + zone, serial: 1, refresh: 3600, retry: 600, expire: 86400, minimum } };
}

interface Reply {
  rcode?: number;
  answer?: ResourceRecord[];
  authority?: ResourceRecord[];
  additional?: ResourceRecord[];
  aa?: boolean;
  ad?: boolean;
  tc?: boolean;
  ra?: boolean;
  /** Answer for another name than asked. */
  qname?: string;
}

/** The reply a next plugin would write for `q`. */
function build(q: Message, r: Reply): Message {
  const m = replyTo(q);
  m.ra = r.ra ?? true;
  m.aa = r.aa ?? false;
  m.ad = r.ad ?? false;
  m.tc = r.tc ?? false;
  m.rcode = r.rcode ?? 0;
  if (r.qname !== undefined) m.question = [{ ...m.question[0]!, name: r.qname }];
  const copy = (rrs: ResourceRecord[] | undefined) => (rrs ?? []).map((rr) => ({ ...rr, data: { ...rr.data } }));
  m.answer = copy(r.answer);
  m.authority = copy(r.authority);
  m.additional = copy(r.additional);
  if (q.edns) m.edns = { udpSize: 1232, version: 0, do: q.edns.do, z: 0, options: [] };
  return m;
}

/** A message in the shape the codec produces (for deepEqual against what the writer captured). */
function canon(m: Message): Message {
  return decodeMessage(encodeMessage(m));
}

/** What a hit (or a passed-on miss) must look like: `m` with the given header changes and every TTL = ttl. */
function withTtl(m: Message, ttl: number, hdr: Partial<Message> = {}): Message {
  const out = canon({ ...m, ...hdr });
  for (const sec of [out.answer, out.authority, out.additional]) for (const rr of sec) rr.ttl = ttl;
  return out;
}

const ttls = (m: Message): number[] => [...m.answer, ...m.authority, ...m.additional].map((r) => r.ttl);
const addr = (m: Message): string => (m.answer[0]!.data as { address: string }).address;
const tick = () => new Promise<void>((r) => setImmediate(r));

// ---- the handler under test ---------------------------------------------------------------------

type Fn = (req: Request, w: ResponseWriter) => HandlerResult;

interface Harness {
  cache: Cache;
  stub: StubHandler;
  /** Requests the next plugin saw, with the flags it saw them with. */
  seen: { name: string; ad: boolean; do: boolean; cd: boolean; proto: string }[];
  advance(ms: number): void;
  ask(name: string, o?: RequestOptions & { ad?: boolean }): Promise<Message>;
  /** Like ask, also returns the request (to look at it after the call) and the writer. */
  exchange(name: string, o?: RequestOptions & { ad?: boolean }): Promise<{ req: Request; w: CaptureWriter; rc: number }>;
  /** The next plugin's behaviour; can be swapped mid-test. */
  fn: Fn;
}

/** Reply builder shortcut: the next plugin answers every query with `r` (a function of the query, or fixed). */
function answering(r: Reply | ((req: Request) => Reply)): Fn {
  return (req, w) => {
    w.writeMsg(build(req.msg, typeof r === 'function' ? r(req) : r));
    return 0;
  };
}

async function setup(corefile: string, fn: Fn): Promise<Harness> {
  const result = await runSetup(plugin, corefile);
  const h = { fn } as Harness;
  const seen: Harness['seen'] = [];
  const stub = new StubHandler('stub', (req, w) => {
    seen.push({ name: req.qname, ad: req.msg.ad, do: req.do, cd: req.msg.cd, proto: req.proto });
    return h.fn(req, w);
  });
  const cache = result.chain(stub) as unknown as Cache;
  let now = T0;
  cache.now = () => now;
  const exchange: Harness['exchange'] = async (name, o = {}) => {
    const req = makeRequest(name, o);
    if (o.ad) req.msg.ad = true;
    const w = new CaptureWriter();
    const rc = await settle(cache.serveDNS(req, w));
    return { req, w, rc };
  };
  Object.assign(h, {
    cache, stub, seen, exchange,
    advance(ms: number) { now += ms; },
    async ask(name: string, o?: RequestOptions & { ad?: boolean }) {
      const { w } = await exchange(name, o);
      assert.equal(w.msgs.length, 1, 'exactly one reply written');
      return w.last!;
    },
  });
  return h;
}

// ---- metrics ------------------------------------------------------------------------------------


// ---- tests --------------------------------------------------------------------------------------

test('miss passes the reply on with every TTL set to the cache duration; a hit patches ID, flags and TTLs', async () => {
  const h = await setup('. {\n cache\n}', answering({
    answer: [a('www.example.', 300), a('www.example.', 300, '192.0.2.2')],
    additional: [a('ns.example.', 60, '192.0.2.53')],
  }));
  const { req, w } = await h.exchange('www.example.', { id: 100 });
  const expected = build(req.msg, {
    answer: [a('www.example.', 60), a('www.example.', 60, '192.0.2.2')],
    additional: [a('ns.example.', 60, '192.0.2.53')],
  });
  assert.deepEqual(w.msgs, [canon(expected)], 'the miss: the next plugin\'s reply, every TTL = the lowest (60)');

  h.advance(2500);
  const hit = await h.ask('www.example.', { id: 200, rd: false });
  assert.equal(h.stub.calls, 1, 'answered from the cache');
  // A hit: the client's ID, RD and question; AA, RA and rcode as stored (CoreDNS 1.15.0; 1.14.7 set AA=1 on
  // every hit); TTLs count down by whole seconds.
  assert.deepEqual(hit, withTtl(expected, 58, { id: 200, rd: false }));

  h.advance(499); // 2.999 s after storing: still 58
  assert.deepEqual(ttls(await h.ask('www.example.')), [58, 58, 58]);
  h.advance(1); // 3 s
  assert.deepEqual(ttls(await h.ask('www.example.')), [57, 57, 57]);
  h.advance(56000); // 59 s: the last second
  assert.deepEqual(ttls(await h.ask('www.example.')), [1, 1, 1]);
  assert.equal(h.stub.calls, 1);
  h.advance(1000); // 60 s: expired, asked again
  assert.deepEqual(ttls(await h.ask('www.example.')), [60, 60, 60]);
  assert.equal(h.stub.calls, 2);
});

test('a hit for a mixed-case query echoes the client\'s question; ID/RD come from the request, AA and RA from the stored reply', async () => {
  const h = await setup('. {\n cache\n}', answering({ answer: [a('mixed.example.', 100)], ra: false, aa: true }));
  await h.ask('mixed.example.');
  const hit = await h.ask('MiXeD.Example.', { id: 7, rd: false });
  assert.equal(h.stub.calls, 1, 'the name is compared case-insensitively');
  assert.deepEqual(hit, canon({
    id: 7, qr: true, opcode: 0, aa: true, tc: false, rd: false, ra: false, z: false, ad: false, cd: false, rcode: 0,
    question: [{ name: 'MiXeD.Example.', type: 1, class: 1 }],
    answer: [a('mixed.example.', 100)], authority: [], additional: [],
  }), 'records keep their stored owner name');
});

test('success CAPACITY TTL MINTTL: TTLs capped to TTL, raised to MINTTL, on the miss and on hits', async () => {
  const h = await setup('. {\n cache {\n  success 1000 60 20\n }\n}', answering((req) => ({
    answer: [a(req.qname, req.qname.startsWith('high') ? 86400 : 3)],
  })));
  assert.deepEqual(ttls(await h.ask('high.example.')), [60]);
  assert.deepEqual(ttls(await h.ask('low.example.')), [20]);
  h.advance(15000);
  assert.deepEqual(ttls(await h.ask('high.example.')), [45]);
  assert.deepEqual(ttls(await h.ask('low.example.')), [5], 'a TTL raised to MINTTL is cached that long');
  h.advance(5000);
  await h.ask('low.example.');
  assert.equal(h.stub.calls, 3, 'low expired after 20 s');
});

test('denial CAPACITY TTL MINTTL and `cache TTL`: NXDOMAIN/NODATA durations capped and raised', async () => {
  const nx = (ttl: number) => ({ rcode: 3, authority: [soa(ttl, 86400)] });
  const h = await setup('. {\n cache {\n  denial 1000 30 10\n }\n}', answering((req) => (req.qname.startsWith('long') ? nx(3600) : nx(2))));
  assert.deepEqual(ttls(await h.ask('long.example.')), [30]);
  assert.deepEqual(ttls(await h.ask('short.example.')), [10]);
  h.advance(9000);
  const hit = await h.ask('short.example.');
  assert.equal(hit.rcode, 3);
  assert.deepEqual(ttls(hit), [1]);
  assert.equal(h.stub.calls, 2);

  // `cache 30`: the first argument caps both caches
  const g = await setup('. {\n cache 30\n}', answering((req) => (req.qname.startsWith('nx') ? nx(600) : { answer: [a(req.qname, 600)] })));
  assert.deepEqual(ttls(await g.ask('ok.example.')), [30]);
  assert.deepEqual(ttls(await g.ask('nx.example.')), [30]);
});

test('negative caching is bounded by the SOA MINIMUM (RFC 2308 §5), for NXDOMAIN and NODATA', async () => {
  const h = await setup('. {\n cache\n}', answering((req) => {
    if (req.qname.startsWith('nx')) return { rcode: 3, authority: [soa(300, 45)] };
    if (req.qname.startsWith('nodata')) return { authority: [soa(300, 40)] };
    return { authority: [soa(20, 100)] }; // record TTL lower than MINIMUM: the TTL wins
  }));
  const nx = await h.ask('nx.example.');
  assert.equal(nx.rcode, 3);
  assert.deepEqual(nx.authority, [soa(45, 45)]);
  assert.deepEqual(ttls(await h.ask('nodata.example.', { type: 28 })), [40]);
  assert.deepEqual(ttls(await h.ask('lower.example.', { type: 28 })), [20]);
  h.advance(44000);
  assert.deepEqual(ttls(await h.ask('nx.example.')), [1]);
  h.advance(1000);
  await h.ask('nx.example.');
  assert.equal(h.stub.calls, 4, 'NXDOMAIN expired after the SOA MINIMUM');
});

test('not cached: truncated, REFUSED, NXDOMAIN without SOA, a reply for another question (counted as a drop)', async () => {
  const h = await setup('nocache.example {\n cache\n}', answering((req) => {
    const n = req.qname;
    if (n.startsWith('tc')) return { tc: true, answer: [a(n, 300)] };
    if (n.startsWith('refused')) return { rcode: 5 };
    if (n.startsWith('nxnosoa')) return { rcode: 3 };
    return { qname: 'other.nocache.example.', answer: [a('other.nocache.example.', 300)] };
  }));
  const labels = { server: SERVER, zones: 'nocache.example.' };
  for (const name of ['tc', 'refused', 'nxnosoa', 'wrongq']) {
    const first = await h.ask(`${name}.nocache.example.`);
    const second = await h.ask(`${name}.nocache.example.`);
    assert.deepEqual(second, first, name);
  }
  assert.equal(h.stub.calls, 8, 'every query reached the next plugin');
  const tc = await h.ask('tc.nocache.example.');
  assert.equal(tc.tc, true, 'the truncated reply is passed on as it is');
  assert.deepEqual(ttls(tc), [300]);
  assert.equal(await metricValue('coredns_cache_drops_total', labels), 2, 'only the two replies for another question were drops');
  assert.equal(await metricValue('coredns_cache_entries', { ...labels, type: 'success' }), 0);
  assert.equal(await metricValue('coredns_cache_entries', { ...labels, type: 'denial' }), 0);
});

test('the key holds DO and CD (and name, type, class), as CoreDNS\'s hash does; EDNS without DO shares the plain entry', async () => {
  const h = await setup('. {\n cache\n}', answering((req) => ({ answer: req.qtype === 1 ? [a(req.qname, 300)] : [] , authority: req.qtype === 1 ? [] : [soa(300, 300)] })));
  const variants: [RequestOptions, string][] = [
    [{}, 'plain'],
    [{ edns: { do: true } }, 'DO'],
    [{ cd: true }, 'CD'],
    [{ edns: { do: true }, cd: true }, 'DO+CD'],
    [{ type: 28 }, 'AAAA'],
    [{ class: 3 }, 'CH'],
  ];
  for (const [o] of variants) await h.ask('key.example.', o);
  assert.equal(h.stub.calls, 6, 'six separate entries');
  for (const [o, what] of variants) {
    const before: number = h.stub.calls;
    await h.ask('KEY.example.', o);
    assert.equal(h.stub.calls, before, `${what}: a hit`);
  }
  await h.ask('key.example.', { edns: { do: false, udpSize: 1232 } });
  await h.ask('key.example.', { edns: { do: true, udpSize: 512 } });
  assert.equal(h.stub.calls, 6, 'EDNS without DO is the plain entry, the buffer size is not in the key');
  assert.deepEqual(h.seen.map((s) => [s.do, s.cd]), [[false, false], [true, false], [false, true], [true, true], [false, false], [false, false]]);
});

test('AD: the next plugin sees AD=1, the client\'s query keeps AD=0; the reply\'s AD only for DO or AD clients', async () => {
  let resolveLater: (() => void) | undefined;
  const h = await setup('. {\n cache\n}', (req, w) => {
    const reply = build(req.msg, { ad: true, answer: [a(req.qname, 300)] });
    if (req.qname.startsWith('async')) {
      return new Promise<number>((resolve) => { resolveLater = () => { w.writeMsg(reply); resolve(0); }; });
    }
    w.writeMsg(reply);
    return 0;
  });
  const plain = await h.exchange('sync.example.');
  assert.equal(h.seen[0]!.ad, true, 'the next plugin saw AD=1');
  assert.equal(plain.req.msg.ad, false, 'the client\'s query is not left modified');
  assert.equal(plain.w.last!.ad, false, 'AD cleared for a client that set neither DO nor AD');

  const pending = h.exchange('async.example.');
  await tick();
  assert.equal(h.seen[1]!.ad, true);
  resolveLater!();
  const later = await pending;
  assert.equal(later.req.msg.ad, false, 'restored after an asynchronous next plugin too');
  assert.equal(later.w.last!.ad, false);

  // hits of the same entry: AD as stored (1) for DO or AD clients, else 0
  assert.equal((await h.ask('sync.example.')).ad, false);
  assert.equal((await h.ask('sync.example.', { ad: true })).ad, true, 'RFC 6840 5.7: a client that set AD gets it');
  assert.equal(h.stub.calls, 2, 'AD is not part of the key');
  const doMiss = await h.ask('sync.example.', { edns: { do: true } });
  assert.equal(doMiss.ad, true, 'a DO client gets AD on the miss');
  assert.equal((await h.ask('sync.example.', { edns: { do: true } })).ad, true, 'and on the hit');

  // a client that set AD itself: the query goes on unchanged and its AD stays
  const adq = await h.exchange('ad.example.', { ad: true });
  assert.equal(adq.req.msg.ad, true);
  assert.equal(adq.w.last!.ad, true);
});

test('prefetch AMOUNT DURATION PERCENTAGE: a popular entry near expiry is refreshed once in the background', async () => {
  let n = 0;
  let hold: (() => void) | undefined;
  const h = await setup('pf.example {\n cache {\n  prefetch 3 5m 20%\n }\n}', (req, w) => {
    const reply = build(req.msg, { answer: [a(req.qname, 100, `192.0.2.${++n}`)] });
    if (hold === undefined && n > 1) {
      return new Promise<number>((resolve) => { hold = () => { w.writeMsg(reply); resolve(0); }; });
    }
    w.writeMsg(reply);
    return 0;
  });
  const labels = { server: SERVER, zones: 'pf.example.' };
  await h.ask('a.pf.example.'); // miss, stored for 100 s
  h.advance(1000);
  await h.ask('a.pf.example.'); // hit 1
  h.advance(1000);
  await h.ask('a.pf.example.'); // hit 2
  h.advance(77000); // 79 s: TTL 21 > 20 % of 100
  await h.ask('a.pf.example.'); // hit 3, not yet within 20 %
  await tick();
  assert.equal(h.stub.calls, 1);
  h.advance(1000); // TTL 20
  const hit = await h.ask('a.pf.example.');
  assert.deepEqual(ttls(hit), [20], 'the client is answered from the cache at once');
  assert.equal(addr(hit), '192.0.2.1');
  await tick();
  assert.equal(h.stub.calls, 2, 'one prefetch');
  assert.equal(h.seen[1]!.ad, true, 'the prefetch query has AD set');
  assert.equal(h.seen[1]!.proto, 'tcp', 'the prefetch query is marked TCP (no client size limit)');
  assert.equal(await metricValue('coredns_cache_prefetch_total', labels), 1);

  await h.ask('a.pf.example.'); // the refresh is still running: no second one
  await tick();
  assert.equal(h.stub.calls, 2);
  hold!();
  await tick();
  const fresh = await h.ask('a.pf.example.');
  assert.equal(addr(fresh), '192.0.2.2', 'the prefetched reply replaced the entry');
  assert.deepEqual(ttls(fresh), [100]);

  // the popularity gathered so far is kept: one more hit near the new expiry prefetches again
  h.advance(81000);
  await h.ask('a.pf.example.');
  await tick();
  assert.equal(h.stub.calls, 3);
  assert.equal(await metricValue('coredns_cache_prefetch_total', labels), 2);
});

test('prefetch: hits further apart than DURATION do not make an entry popular', async () => {
  const h = await setup('. {\n cache {\n  prefetch 2 10s 50%\n }\n}', answering({ answer: [a('slow.example.', 100)] }));
  await h.ask('slow.example.');
  h.advance(20000);
  await h.ask('slow.example.'); // hits = 1
  h.advance(31000); // 11 s later: resets to 1; TTL 49 ≤ 50
  await h.ask('slow.example.');
  await tick();
  assert.equal(h.stub.calls, 1, 'no prefetch');
  h.advance(5000);
  await h.ask('slow.example.'); // 5 s later: 2 hits
  await tick();
  assert.equal(h.stub.calls, 2, 'prefetched');
});

test('serve_stale (immediate): an expired entry is served with TTL 0 while one refresh runs; beyond DURATION it is a miss', async () => {
  let n = 0;
  let hold: (() => void) | undefined;
  const h = await setup('stale.example {\n cache {\n  serve_stale 1h\n }\n}', (req, w) => {
    const reply = build(req.msg, { answer: [a(req.qname, 10, `192.0.2.${++n}`)] });
    if (n === 2) return new Promise<number>((resolve) => { hold = () => { w.writeMsg(reply); resolve(0); }; });
    w.writeMsg(reply);
    return 0;
  });
  const labels = { server: SERVER, zones: 'stale.example.' };
  const first = await h.ask('a.stale.example.', { id: 1 });
  h.advance(15000);
  const stale = await h.ask('a.stale.example.', { id: 2 });
  assert.deepEqual(stale, withTtl(first, 0, { id: 2 }), 'the stored reply with TTL 0');
  await tick();
  assert.equal(h.stub.calls, 2, 'one background refresh');
  assert.equal(h.seen[1]!.ad, true);
  assert.equal(addr(await h.ask('a.stale.example.')), '192.0.2.1', 'still stale while the refresh runs');
  await tick();
  assert.equal(h.stub.calls, 2, 'no second refresh while one is running');
  assert.equal(await metricValue('coredns_cache_served_stale_total', labels), 2);
  hold!();
  await tick();
  const fresh = await h.ask('a.stale.example.');
  assert.equal(addr(fresh), '192.0.2.2');
  assert.deepEqual(ttls(fresh), [10]);

  // an entry expired for longer than DURATION is not used: a plain miss
  h.advance(10000 + 3600 * 1000);
  const miss = await h.ask('a.stale.example.');
  assert.equal(addr(miss), '192.0.2.3');
  assert.deepEqual(ttls(miss), [10]);
  assert.equal(await metricValue('coredns_cache_served_stale_total', labels), 2);
});

test('serve_stale DURATION immediate RESPONSE_TTL FAILURE_RECHECK: stale TTL as given; no new refresh for a while after a failed one', async () => {
  let fail = false;
  const h = await setup('. {\n cache {\n  serve_stale 10m immediate 7s 30s\n }\n}', (req, w) => {
    if (fail) throw new PluginError(2, 'upstream down');
    w.writeMsg(build(req.msg, { answer: [a(req.qname, 10)] }));
    return 0;
  });
  await h.ask('recheck.example.');
  fail = true;
  h.advance(20000);
  const stale = await h.ask('recheck.example.');
  assert.deepEqual(ttls(stale), [7], 'RESPONSE_TTL');
  await tick();
  assert.equal(h.stub.calls, 2, 'a refresh was tried and failed');
  h.advance(29000);
  await h.ask('recheck.example.');
  await tick();
  assert.equal(h.stub.calls, 2, 'within FAILURE_RECHECK: no refresh');
  h.advance(1000);
  fail = false;
  await h.ask('recheck.example.');
  await tick();
  assert.equal(h.stub.calls, 3, 'after FAILURE_RECHECK: refreshed');
  assert.deepEqual(ttls(await h.ask('recheck.example.')), [10]);
});

test('serve_stale verify: the next plugin is asked first; NOERROR/NXDOMAIN replace the entry, anything else serves it stale', async () => {
  let mode: 'ok' | 'new' | 'nx' | 'servfail' | 'refused' | 'throw' = 'ok';
  const h = await setup('. {\n cache {\n  serve_stale 1h verify\n  servfail 0\n }\n}', (req, w) => {
    switch (mode) {
      case 'ok': w.writeMsg(build(req.msg, { answer: [a(req.qname, 10, '192.0.2.1')] })); break;
      case 'new': w.writeMsg(build(req.msg, { answer: [a(req.qname, 10, '192.0.2.2')] })); break;
      case 'nx': w.writeMsg(build(req.msg, { rcode: 3, authority: [soa(10, 10)] })); break;
      case 'servfail': w.writeMsg(build(req.msg, { rcode: 2 })); break;
      case 'refused': w.writeMsg(build(req.msg, { rcode: 5 })); break;
      case 'throw': throw new PluginError(2, 'read udp: i/o timeout');
    }
    return 0;
  });
  const first = await h.ask('v.example.');
  for (const m of ['servfail', 'refused', 'throw'] as const) {
    mode = m;
    h.advance(20000);
    const before = h.stub.calls;
    const r = await h.ask('v.example.', { id: 9 });
    assert.equal(h.stub.calls, before + 1, `${m}: asked first`);
    assert.deepEqual(r, withTtl(first, 0, { id: 9 }), `${m}: the stale entry is served`);
  }
  mode = 'new';
  h.advance(20000);
  const fresh = await h.ask('v.example.');
  assert.equal(addr(fresh), '192.0.2.2');
  assert.deepEqual(ttls(fresh), [10]);
  assert.equal(fresh.aa, false, 'the next plugin\'s own reply, not a cache hit');
  assert.equal(addr(await h.ask('v.example.')), '192.0.2.2', 'and it replaced the entry');
  mode = 'nx';
  h.advance(20000);
  assert.equal((await h.ask('v.example.')).rcode, 3, 'NXDOMAIN replaces it too');
  assert.equal((await h.ask('v.example.')).rcode, 3);
});

test('serve_stale verify: concurrent requests each verify unless VERIFY_TIMEOUT or FAILURE_RECHECK is set (CoreDNS 1.15.0 trackRefresh)', async () => {
  for (const [opts, verifies] of [['verify', 2], ['verify 10s', 1], ['verify 0s 0s 30s', 1]] as const) {
    let release: (() => void) | undefined;
    let slow = false;
    const h = await setup(`. {\n cache {\n  serve_stale 1h ${opts}\n }\n}`, async (req, w) => {
      if (slow) await new Promise<void>((r) => { release ??= r; if (release !== r) { const prev = release; release = () => { prev(); r(); }; } });
      w.writeMsg(build(req.msg, { answer: [a(req.qname, 10, slow ? '192.0.2.2' : '192.0.2.1')] }));
      return 0;
    });
    await h.ask('c.example.');
    h.advance(20000);
    slow = true;
    const one = h.exchange('c.example.', { id: 1 });
    const two = h.exchange('c.example.', { id: 2 });
    await tick();
    assert.equal(h.stub.calls, 1 + verifies, `${opts}: ${verifies} verify request(s) upstream`);
    release?.();
    await Promise.all([one, two]);
  }
});

test('serve_stale verify VERIFY_TIMEOUT: a slow refresh serves the stale entry at the timeout and fills the cache later', async () => {
  let hold: (() => void) | undefined;
  let n = 0;
  const h = await setup('. {\n cache {\n  serve_stale 1h verify 30ms\n }\n}', (req, w) => {
    const reply = build(req.msg, { answer: [a(req.qname, 10, `192.0.2.${++n}`)] });
    if (n === 1) { w.writeMsg(reply); return 0; }
    return new Promise<number>((resolve) => { hold = () => { w.writeMsg(reply); resolve(0); }; });
  });
  await h.ask('slowv.example.');
  h.advance(20000);
  const { w } = await h.exchange('slowv.example.');
  assert.deepEqual(w.msgs.map(addr), ['192.0.2.1'], 'stale entry served once the verify timed out');
  assert.deepEqual(ttls(w.last!), [0]);
  hold!();
  await tick();
  assert.equal(w.msgs.length, 1, 'the late reply is not written to the client');
  const after = await h.ask('slowv.example.');
  assert.equal(addr(after), '192.0.2.2', 'the late reply filled the cache');
  assert.equal(h.stub.calls, 2);
});

test('servfail DURATION: SERVFAIL cached that long (default 5 s, 0 = not at all), counted as a denial hit', async () => {
  const sf = answering({ rcode: 2 });
  const h = await setup('sf.example {\n cache {\n  servfail 3s\n }\n}', sf);
  const labels = { server: SERVER, zones: 'sf.example.' };
  const first = await h.ask('a.sf.example.', { id: 1 });
  assert.equal(first.rcode, 2);
  h.advance(2999);
  const hit = await h.ask('a.sf.example.', { id: 2 });
  assert.deepEqual(hit, canon({ ...first, id: 2 }));
  assert.equal(h.stub.calls, 1);
  assert.equal(await metricValue('coredns_cache_hits_total', { ...labels, type: 'denial' }), 1);
  h.advance(1);
  await h.ask('a.sf.example.');
  assert.equal(h.stub.calls, 2, 'expired after 3 s');

  const d = await setup('. {\n cache\n}', sf);
  await d.ask('d.example.');
  d.advance(4999);
  await d.ask('d.example.');
  assert.equal(d.stub.calls, 1, 'default: 5 s');
  d.advance(1);
  await d.ask('d.example.');
  assert.equal(d.stub.calls, 2);

  const z = await setup('. {\n cache {\n  servfail 0\n }\n}', sf);
  await z.ask('z.example.');
  await z.ask('z.example.');
  assert.equal(z.stub.calls, 2, 'servfail 0: not cached');
});

test('a SERVFAIL that a prefetch brought in does not shadow the still-valid positive entry', async () => {
  let servfail = false;
  const h = await setup('. {\n cache {\n  prefetch 1 1m 50%\n }\n}', (req, w) => {
    w.writeMsg(build(req.msg, servfail ? { rcode: 2 } : { answer: [a(req.qname, 100)] }));
    return 0;
  });
  await h.ask('shadow.example.');
  servfail = true;
  h.advance(60000);
  await h.ask('shadow.example.'); // TTL 40 ≤ 50: prefetch, which gets SERVFAIL (cached 5 s)
  await tick();
  assert.equal(h.stub.calls, 2);
  const r = await h.ask('shadow.example.');
  assert.equal(r.rcode, 0);
  assert.deepEqual(ttls(r), [40]);
});

test('disable success|denial [ZONES]: that cache is not filled for those zones', async () => {
  const reply = (req: Request): Reply => (req.qname.startsWith('nx') ? { rcode: 3, authority: [soa(300, 300)] } : { answer: [a(req.qname, 300)] });
  const h = await setup('. {\n cache {\n  disable success off.example\n }\n}', answering(reply));
  const calls = async (name: string) => {
    const before = h.stub.calls;
    await h.ask(name);
    await h.ask(name);
    return h.stub.calls - before;
  };
  assert.equal(await calls('a.off.example.'), 2, 'success under off.example: not cached');
  assert.equal(await calls('OFF.example.'), 2, 'the zone itself, any case');
  assert.equal(await calls('nx.off.example.'), 1, 'denial still cached there');
  assert.equal(await calls('on.example.'), 1, 'success cached elsewhere');

  const d = await setup('. {\n cache {\n  disable denial\n }\n}', answering(reply));
  await d.ask('nx.example.');
  await d.ask('nx.example.');
  await d.ask('ok.example.');
  await d.ask('ok.example.');
  assert.equal(d.stub.calls, 3, 'no zone given: denial disabled everywhere, success cached');
});

test('keepttl: hits show the stored duration (after capping), and the entry still expires', async () => {
  const h = await setup('. {\n cache {\n  success 1000 60\n  keepttl\n }\n}', answering({ answer: [a('keep.example.', 300)] }));
  assert.deepEqual(ttls(await h.ask('keep.example.')), [60]);
  h.advance(59000);
  assert.deepEqual(ttls(await h.ask('keep.example.')), [60]);
  assert.equal(h.stub.calls, 1);
  h.advance(1000);
  await h.ask('keep.example.');
  assert.equal(h.stub.calls, 2);
});

test('capacity: `success 5` and `denial 1` hold 1024 entries each (4 per shard); the rest are evictions', async () => {
  const h = await setup('cap.example {\n cache {\n  success 5\n  denial 1\n }\n}', answering((req) => (
    req.qname.startsWith('nx') ? { rcode: 3, authority: [soa(300, 300)] } : { answer: [a(req.qname, 300)] })));
  const labels = { server: SERVER, zones: 'cap.example.' };
  const N = 1500;
  for (let i = 0; i < N; i++) await h.ask(`n${i}.cap.example.`);
  for (let i = 0; i < N; i++) await h.ask(`nx${i}.cap.example.`);
  for (const type of ['success', 'denial']) {
    const entries = await metricValue('coredns_cache_entries', { ...labels, type });
    const evicted = await metricValue('coredns_cache_evictions_total', { ...labels, type });
    assert.ok(entries <= 1024 && entries > 900, `${type}: ${entries} entries`);
    assert.equal(entries + evicted, N, `${type}: every insert either kept or evicted one`);
  }
  const d = await setup('cap2.example {\n cache\n}', answering((req) => ({ answer: [a(req.qname, 300)] })));
  for (let i = 0; i < N; i++) await d.ask(`n${i}.cap2.example.`);
  assert.equal(await metricValue('coredns_cache_entries', { server: SERVER, zones: 'cap2.example.', type: 'success' }), N, 'default capacity: no eviction');
});

test('metrics: requests, hits by type, misses, entries, served_stale move as CoreDNS\'s do', async () => {
  const h = await setup('m.example {\n cache {\n  serve_stale\n }\n}', answering((req) => (
    req.qname.startsWith('nx') ? { rcode: 3, authority: [soa(30, 30)] } : { answer: [a(req.qname, 30)] })));
  const labels = { server: SERVER, zones: 'm.example.', view: '' };
  const get = async () => ({
    requests: await metricValue('coredns_cache_requests_total', labels),
    success: await metricValue('coredns_cache_hits_total', { ...labels, type: 'success' }),
    denial: await metricValue('coredns_cache_hits_total', { ...labels, type: 'denial' }),
    misses: await metricValue('coredns_cache_misses_total', labels),
    stale: await metricValue('coredns_cache_served_stale_total', labels),
    pentries: await metricValue('coredns_cache_entries', { ...labels, type: 'success' }),
    nentries: await metricValue('coredns_cache_entries', { ...labels, type: 'denial' }),
  });
  await h.ask('a.m.example.');
  await h.ask('a.m.example.');
  await h.ask('a.m.example.');
  await h.ask('nx.m.example.');
  await h.ask('nx.m.example.');
  await h.ask('outside.example.'); // not in the cache's zones: not counted at all
  assert.deepEqual(await get(), { requests: 5, success: 2, denial: 1, misses: 2, stale: 0, pentries: 1, nentries: 1 });
  h.advance(31000);
  await h.ask('a.m.example.'); // stale hit
  await tick();
  assert.deepEqual(await get(), { requests: 6, success: 3, denial: 1, misses: 2, stale: 1, pentries: 1, nentries: 1 });
  assert.equal(h.stub.calls, 4, 'outside name passed on, stale refresh made');
});

test('cache ZONES: names outside them pass straight to the next plugin, uncached and untouched', async () => {
  const h = await setup('. {\n cache 30 inside.example\n}', answering((req) => ({ answer: [a(req.qname, 300)], ad: true })));
  const out = await h.exchange('x.outside.example.');
  assert.equal(h.seen[0]!.ad, false, 'no AD added outside the zones');
  assert.deepEqual(ttls(out.w.last!), [300], 'TTLs untouched');
  assert.equal(out.w.last!.ad, true);
  await h.ask('x.outside.example.');
  assert.equal(h.stub.calls, 2);
  assert.deepEqual(ttls(await h.ask('x.inside.example.')), [30]);
  await h.ask('x.inside.example.');
  assert.equal(h.stub.calls, 3);
});

test('an error other than SERVFAIL from the next plugin is passed up and nothing is cached', async () => {
  let fail = true;
  const h = await setup('. {\n cache\n}', (req, w) => {
    if (fail) throw new PluginError(5, 'refused by policy');
    w.writeMsg(build(req.msg, { answer: [a(req.qname, 300)] }));
    return 0;
  });
  await assert.rejects(h.exchange('err.example.'), (e: unknown) => e instanceof PluginError && e.rcode === 5);
  fail = false;
  assert.equal((await h.ask('err.example.')).rcode, 0);
  assert.equal(h.stub.calls, 2);
});

test('a SERVFAIL error with nothing written is cached as a SERVFAIL for the servfail duration (CoreDNS 1.15.0)', async () => {
  let fail = true;
  let async = false;
  const h = await setup('. {\n cache\n}', (req, w) => {
    if (fail) {
      const e = new PluginError(2, 'plugin/forward: no healthy proxies');
      if (async) return Promise.reject(e);
      throw e;
    }
    w.writeMsg(build(req.msg, { answer: [a(req.qname, 300)] }));
    return 0;
  });
  const labels = { server: SERVER, zones: '.' };
  // The error goes up (the server answers this request), and the failure is stored.
  await assert.rejects(h.exchange('sf.example.', { id: 1 }), (e: unknown) => e instanceof PluginError && e.rcode === 2);
  fail = false;
  h.advance(4999);
  const denialHits = await metricValue('coredns_cache_hits_total', { ...labels, type: 'denial' }) ?? 0;
  const { w, rc } = await h.exchange('SF.example.', { id: 2, rd: false });
  assert.equal(rc, 0);
  assert.equal(h.stub.calls, 1, 'answered from the cache');
  assert.deepEqual(w.msgs, [canon({
    id: 2, qr: true, opcode: 0, aa: false, tc: false, rd: false, ra: false, z: false, ad: false, cd: false, rcode: 2,
    question: [{ name: 'SF.example.', type: 1, class: 1 }], answer: [], authority: [], additional: [],
  })], 'a bare SERVFAIL: no AA, no RA');
  assert.equal(await metricValue('coredns_cache_hits_total', { ...labels, type: 'denial' }), denialHits + 1);
  h.advance(1); // default servfail 5 s: expired
  assert.equal((await h.ask('sf.example.')).rcode, 0);
  assert.equal(h.stub.calls, 2);

  // An asynchronous failure too.
  fail = true;
  async = true;
  await assert.rejects(h.exchange('sf2.example.'), (e: unknown) => e instanceof PluginError && e.rcode === 2);
  fail = false;
  assert.equal((await h.ask('sf2.example.')).rcode, 2);
  assert.equal(h.stub.calls, 3);
});

test('a SERVFAIL error is not cached with servfail 0, nor when the next plugin had written a reply', async () => {
  let fail = true;
  const off = await setup('. {\n cache {\n  servfail 0\n }\n}', (req, w) => {
    if (fail) throw new PluginError(2, 'upstream timeout');
    w.writeMsg(build(req.msg, { answer: [a(req.qname, 300)] }));
    return 0;
  });
  await assert.rejects(off.exchange('off.example.'));
  fail = false;
  assert.equal((await off.ask('off.example.')).rcode, 0);
  assert.equal(off.stub.calls, 2);

  const wrote = await setup('. {\n cache\n}', (req, w) => {
    w.writeMsg(build(req.msg, { rcode: 3, authority: [soa(60, 30)] }));
    throw new PluginError(2, 'failed after writing');
  });
  await assert.rejects(wrote.exchange('w.example.'));
  const again = await wrote.ask('w.example.');
  assert.equal(again.rcode, 3, 'the written NXDOMAIN is what the cache holds');
  assert.equal(wrote.stub.calls, 1);
});

test('a NOTIFY goes to the next plugin, neither answered from nor stored in the cache (CoreDNS 1.15.0)', async () => {
  const h = await setup('. {\n cache\n}', answering({ answer: [a('n.example.', 300)] }));
  await h.ask('n.example.');
  const notify = async () => {
    const req = makeRequest('n.example.', { type: 6 });
    req.msg.opcode = 4;
    const w = new CaptureWriter();
    await settle(h.cache.serveDNS(req, w));
    return w;
  };
  await notify();
  await notify();
  assert.equal(h.stub.calls, 3);
  await h.ask('n.example.', { type: 6 });
  assert.equal(h.stub.calls, 4, 'the NOTIFY replies were not stored');
  await h.ask('n.example.');
  assert.equal(h.stub.calls, 4, 'a QUERY is still answered from the cache');
});

test('a reply without a question is passed on, not cached, with CoreDNS 1.15.0\'s warning', async () => {
  const lines: string[] = [];
  const h = await setup('. {\n cache\n}', (req, w) => {
    const m = build(req.msg, { answer: [a(req.qname, 300)] });
    m.question = [];
    w.writeMsg(m);
    return 0;
  });
  h.cache.log = { ...h.cache.log!, warning: (msg: string) => { lines.push(msg); } };
  const r = await h.ask('Noq.example.');
  assert.equal(r.question.length, 0);
  await h.ask('noq.example.');
  assert.equal(h.stub.calls, 2);
  assert.deepEqual(lines, Array(2).fill('Not caching malformed response with an empty question section for "noq.example."'));
});

// ---- serve_stale / prefetch details checked against CoreDNS's handler.go, cache.go and item.go -----

test('serve_stale immediate: a SERVFAIL from the background refresh is not stored; the stale answer keeps being served', async () => {
  let servfail = false;
  const h = await setup('sfr.example {\n cache {\n  serve_stale 1h\n }\n}', (req, w) => {
    w.writeMsg(build(req.msg, servfail ? { rcode: 2 } : { answer: [a(req.qname, 10)] }));
    return 0;
  });
  const labels = { server: SERVER, zones: 'sfr.example.' };
  const first = await h.ask('a.sfr.example.', { id: 1 });
  servfail = true;
  h.advance(20000);
  assert.deepEqual(await h.ask('a.sfr.example.', { id: 2 }), withTtl(first, 0, { id: 2 }));
  await tick();
  assert.equal(h.stub.calls, 2, 'the refresh got SERVFAIL');
  assert.equal(await metricValue('coredns_cache_entries', { ...labels, type: 'denial' }), 0, 'the refresh\'s SERVFAIL was not cached');
  assert.deepEqual(await h.ask('a.sfr.example.', { id: 3 }), withTtl(first, 0, { id: 3 }), 'still the stale answer');
});

test('serve_stale: a cached SERVFAIL does not shadow a positive entry that is stale but within DURATION', async () => {
  let servfail = false;
  const h = await setup('. {\n cache {\n  serve_stale 1h\n  prefetch 1 1m 50%\n }\n}', (req, w) => {
    w.writeMsg(build(req.msg, servfail ? { rcode: 2 } : { answer: [a(req.qname, 100)] }));
    return 0;
  });
  await h.ask('shadow2.example.');
  servfail = true;
  h.advance(60000);
  await h.ask('shadow2.example.'); // TTL 40 ≤ 50: prefetch, which gets SERVFAIL (cached)
  await tick();
  assert.equal(h.stub.calls, 2);
  h.advance(41000); // the positive entry expired 1 s ago
  const r = await h.ask('shadow2.example.');
  assert.equal(r.rcode, 0, 'the stale positive entry, not the SERVFAIL');
  assert.deepEqual(ttls(r), [0]);
});

test('serve_stale immediate and prefetch: a positive refresh removes the denial entry; a denial does not remove the positive one', async () => {
  const nx = { rcode: 3, authority: [soa(10, 10)] };
  let positive = false;
  const h = await setup('rm.example {\n cache {\n  serve_stale 1h\n }\n}', (req, w) => {
    w.writeMsg(build(req.msg, positive ? { answer: [a(req.qname, 10)] } : nx));
    return 0;
  });
  const labels = { server: SERVER, zones: 'rm.example.' };
  assert.equal((await h.ask('a.rm.example.')).rcode, 3);
  positive = true;
  h.advance(20000);
  assert.equal((await h.ask('a.rm.example.')).rcode, 3, 'the stale NXDOMAIN');
  await tick();
  assert.equal(h.stub.calls, 2);
  assert.equal(await metricValue('coredns_cache_entries', { ...labels, type: 'denial' }), 0, 'the denial entry was removed');
  const fresh = await h.ask('a.rm.example.');
  assert.equal(fresh.rcode, 0, 'the refreshed positive answer');
  assert.deepEqual(ttls(fresh), [10]);
  assert.equal(h.stub.calls, 2);

  let mode: 'nx' | 'ok' = 'nx';
  const p = await setup('rmp.example {\n cache {\n  prefetch 1 1m 50%\n }\n}', (req, w) => {
    w.writeMsg(build(req.msg, mode === 'nx' ? { rcode: 3, authority: [soa(100, 100)] } : { answer: [a(req.qname, 100)] }));
    return 0;
  });
  const plabels = { server: SERVER, zones: 'rmp.example.' };
  await p.ask('a.rmp.example.');
  mode = 'ok';
  p.advance(60000);
  assert.equal((await p.ask('a.rmp.example.')).rcode, 3, 'TTL 40 ≤ 50: prefetch');
  await tick();
  assert.equal(p.stub.calls, 2);
  const got = await p.ask('a.rmp.example.');
  assert.equal(got.rcode, 0, 'the prefetched positive answer, not the still-valid NXDOMAIN');
  assert.deepEqual(ttls(got), [100]);
  assert.equal(await metricValue('coredns_cache_entries', { ...plabels, type: 'denial' }), 0);

  // the converse: a prefetched denial is stored beside the positive entry, which stays
  mode = 'nx';
  p.advance(60000);
  await p.ask('a.rmp.example.');
  await tick();
  assert.equal(p.stub.calls, 3);
  assert.equal((await p.ask('a.rmp.example.')).rcode, 3, 'the denial cache is looked at first');
  assert.equal(await metricValue('coredns_cache_entries', { ...plabels, type: 'success' }), 1, 'the positive entry was kept');
});

test('serve_stale verify: with VERIFY_TIMEOUT the refresh removes the denial entry; without it the denial stays (as in CoreDNS)', async () => {
  const run = async (zone: string, mode: string) => {
    let positive = false;
    const h = await setup(`${zone} {\n cache {\n  serve_stale 1h ${mode}\n }\n}`, (req, w) => {
      w.writeMsg(build(req.msg, positive ? { answer: [a(req.qname, 10)] } : { rcode: 3, authority: [soa(10, 10)] }));
      return 0;
    });
    await h.ask(`a.${zone}.`);
    positive = true;
    h.advance(20000);
    assert.equal((await h.ask(`a.${zone}.`)).rcode, 0, `${mode}: the verified positive answer`);
    assert.equal((await h.ask(`a.${zone}.`)).rcode, 0);
    return { calls: h.stub.calls, denial: await metricValue('coredns_cache_entries', { server: SERVER, zones: `${zone}.`, type: 'denial' }) };
  };
  assert.deepEqual(await run('vt.example', 'verify 1s'), { calls: 2, denial: 0 }, 'the next query is a hit of the new entry');
  assert.deepEqual(await run('vn.example', 'verify'), { calls: 3, denial: 1 }, 'the stale denial is found first and verified again');
});

test('serve_stale_policy prefer_positive: storing a positive answer removes the denial entry', async () => {
  let positive = false;
  const h = await setup('pp.example {\n cache {\n  serve_stale 10s\n  serve_stale_policy prefer_positive\n }\n}', (req, w) => {
    w.writeMsg(build(req.msg, positive ? { answer: [a(req.qname, 10)] } : { rcode: 3, authority: [soa(10, 10)] }));
    return 0;
  });
  const labels = { server: SERVER, zones: 'pp.example.' };
  await h.ask('a.pp.example.');
  assert.equal(await metricValue('coredns_cache_entries', { ...labels, type: 'denial' }), 1);
  positive = true;
  h.advance(30000); // beyond serve_stale: a miss
  assert.equal((await h.ask('a.pp.example.')).rcode, 0);
  assert.equal(await metricValue('coredns_cache_entries', { ...labels, type: 'denial' }), 0);
  assert.equal(await metricValue('coredns_cache_entries', { ...labels, type: 'success' }), 1);
});

test('serve_stale: a remaining TTL of exactly 0 is stale (refreshed, counted); one second before it is not', async () => {
  let n = 0;
  const h = await setup('zero.example {\n cache {\n  serve_stale 1h\n }\n}', (req, w) => {
    w.writeMsg(build(req.msg, { answer: [a(req.qname, 10, `192.0.2.${++n}`)] }));
    return 0;
  });
  const labels = { server: SERVER, zones: 'zero.example.' };
  await h.ask('a.zero.example.');
  h.advance(9999);
  assert.deepEqual(ttls(await h.ask('a.zero.example.')), [1]);
  await tick();
  assert.equal(h.stub.calls, 1);
  h.advance(1); // 10 s: remaining TTL 0
  const r = await h.ask('a.zero.example.');
  assert.deepEqual(ttls(r), [0]);
  assert.equal(addr(r), '192.0.2.1');
  await tick();
  assert.equal(h.stub.calls, 2, 'refreshed in the background');
  assert.equal(await metricValue('coredns_cache_served_stale_total', labels), 1);
  assert.equal(addr(await h.ask('a.zero.example.')), '192.0.2.2');
});

test('keepttl with serve_stale: stale replies show the stored duration, unless a RESPONSE_TTL is given', async () => {
  const reply = answering((req) => ({ answer: [a(req.qname, 10)] }));
  const down: Fn = () => { throw new PluginError(2, 'upstream down'); };
  for (const [opts, want] of [['serve_stale 1h', 10], ['serve_stale 1h immediate 7s', 7], ['serve_stale 1h verify', 10], ['serve_stale 1h verify 0 7s', 7]] as const) {
    const h = await setup(`. {\n cache {\n  ${opts}\n  keepttl\n }\n}`, reply);
    await h.ask('keep.example.');
    h.fn = down;
    h.advance(25000);
    assert.deepEqual(ttls(await h.ask('keep.example.')), [want], opts);
  }
});

test('coredns_cache_prefetch_total counts serve_stale immediate refreshes too', async () => {
  const h = await setup('pfc.example {\n cache {\n  serve_stale 1h\n }\n}', answering((req) => ({ answer: [a(req.qname, 10)] })));
  const labels = { server: SERVER, zones: 'pfc.example.' };
  await h.ask('a.pfc.example.');
  h.advance(20000);
  await h.ask('a.pfc.example.');
  await tick();
  assert.equal(h.stub.calls, 2);
  assert.equal(await metricValue('coredns_cache_prefetch_total', labels), 1);
});

test('serve_stale verify: a truncated reply, one for another question or an OtherError NXDOMAIN is discarded; the stale entry is served', async () => {
  let mode: 'ok' | 'tc' | 'wrongq' | 'nxanswer' = 'ok';
  const h = await setup('vbad.example {\n cache {\n  serve_stale 1h verify\n }\n}', (req, w) => {
    const n = req.qname;
    switch (mode) {
      case 'ok': w.writeMsg(build(req.msg, { answer: [a(n, 10)] })); break;
      case 'tc': w.writeMsg(build(req.msg, { tc: true, answer: [a(n, 10, '192.0.2.9')] })); break;
      case 'wrongq': w.writeMsg(build(req.msg, { qname: 'other.vbad.example.', answer: [a('other.vbad.example.', 10, '192.0.2.9')] })); break;
      case 'nxanswer': w.writeMsg(build(req.msg, { rcode: 3, answer: [a(n, 10, '192.0.2.9')], authority: [soa(10, 10)] })); break;
    }
    return 0;
  });
  const labels = { server: SERVER, zones: 'vbad.example.' };
  const first = await h.ask('a.vbad.example.');
  for (const m of ['tc', 'wrongq', 'nxanswer'] as const) {
    mode = m;
    h.advance(20000);
    const before = h.stub.calls;
    const { w } = await h.exchange('a.vbad.example.', { id: 5 });
    assert.equal(h.stub.calls, before + 1, `${m}: asked first`);
    assert.deepEqual(w.msgs, [withTtl(first, 0, { id: 5 })], `${m}: only the stale entry is written`);
  }
  assert.equal(await metricValue('coredns_cache_drops_total', labels), 0, 'discarded before the cache looks at it');
});

test('serve_stale verify with prefer_positive: only a usable positive answer is sent; an NXDOMAIN or SERVFAIL is cached, the stale answer served', async () => {
  let mode: 'ok' | 'nx' | 'servfail' | 'new' = 'ok';
  const h = await setup('vpp.example {\n cache {\n  serve_stale 1h verify\n  serve_stale_policy prefer_positive\n }\n}', (req, w) => {
    switch (mode) {
      case 'ok': w.writeMsg(build(req.msg, { answer: [a(req.qname, 10)] })); break;
      case 'new': w.writeMsg(build(req.msg, { answer: [a(req.qname, 10, '192.0.2.2')] })); break;
      case 'nx': w.writeMsg(build(req.msg, { rcode: 3, authority: [soa(60, 60)] })); break;
      case 'servfail': w.writeMsg(build(req.msg, { rcode: 2 })); break;
    }
    return 0;
  });
  const labels = { server: SERVER, zones: 'vpp.example.' };
  const first = await h.ask('a.vpp.example.');
  mode = 'nx';
  h.advance(20000);
  const { w } = await h.exchange('a.vpp.example.', { id: 3 });
  assert.equal(h.stub.calls, 2, 'asked first');
  assert.deepEqual(w.msgs, [withTtl(first, 0, { id: 3 })], 'the stale positive answer, not the NXDOMAIN');
  assert.equal(await metricValue('coredns_cache_entries', { ...labels, type: 'denial' }), 1, 'the NXDOMAIN was cached');
  assert.deepEqual(await h.ask('a.vpp.example.', { id: 4 }), withTtl(first, 0, { id: 4 }), 'the stale positive entry still wins');
  assert.equal(h.stub.calls, 3, 'and is verified again');

  mode = 'ok';
  await h.ask('b.vpp.example.');
  mode = 'servfail';
  h.advance(20000);
  assert.equal((await h.ask('b.vpp.example.')).rcode, 0, 'SERVFAIL not sent');
  assert.equal(await metricValue('coredns_cache_entries', { ...labels, type: 'denial' }), 2, 'but cached');

  mode = 'new';
  const fresh = await h.ask('a.vpp.example.');
  assert.equal(addr(fresh), '192.0.2.2', 'a usable positive answer is sent');
  assert.equal(fresh.aa, false);
  assert.equal(await metricValue('coredns_cache_entries', { ...labels, type: 'denial' }), 1, 'and removes the denial entry');
});

test('serve_stale verify VERIFY_TIMEOUT: a reply in time is written from the new entry (its AA, its remaining TTL), as CoreDNS does', async () => {
  let n = 0;
  const h = await setup('vin.example {\n cache {\n  serve_stale 1h verify 1s\n }\n}', () => 0);
  h.fn = (req, w) => {
    n++;
    if (req.msg.edns !== undefined) req.addExtendedError({ code: 15, data: new Uint8Array([0, 0]) });
    w.writeMsg(build(req.msg, { answer: [a(req.qname, 10, `192.0.2.${n}`)], ra: false }));
    h.advance(2000); // the refresh ends two seconds (of the cache's clock) after the reply was stored
    return 0;
  };
  await h.ask('a.vin.example.');
  h.advance(20000);
  const { req, w, rc } = await h.exchange('a.vin.example.', { id: 6 });
  assert.equal(h.stub.calls, 2);
  assert.equal(rc, 0);
  const upstream = build(req.msg, { answer: [a('a.vin.example.', 10, '192.0.2.2')], ra: false });
  assert.deepEqual(w.msgs, [withTtl(upstream, 8, { id: 6 })], 'toMsg of the new item: its AA, TTL 10 - 2');

  await h.exchange('e.vin.example.', { edns: {} });
  h.advance(20000);
  const e = await h.exchange('e.vin.example.', { edns: {} });
  assert.equal(e.w.msgs.length, 1);
  assert.equal(e.req.extendedErrors?.length, 1, 'the refresh\'s Extended DNS Error is not added twice');
});

test('a failed prefetch does not hold back the stale refresh of the entry (FAILURE_RECHECK is for stale refreshes)', async () => {
  let fail = false;
  const h = await setup('pff.example {\n cache {\n  serve_stale 1h immediate 0s 5m\n  prefetch 1 1m 50%\n }\n}', (req, w) => {
    if (fail) throw new PluginError(2, 'upstream down');
    w.writeMsg(build(req.msg, { answer: [a(req.qname, 100)] }));
    return 0;
  });
  await h.ask('a.pff.example.');
  fail = true;
  h.advance(60000);
  await h.ask('a.pff.example.'); // TTL 40 ≤ 50: prefetch, which fails
  await tick();
  assert.equal(h.stub.calls, 2);
  fail = false;
  h.advance(41000); // stale
  assert.deepEqual(ttls(await h.ask('a.pff.example.')), [0]);
  await tick();
  assert.equal(h.stub.calls, 3, 'the stale refresh is tried');
  assert.deepEqual(ttls(await h.ask('a.pff.example.')), [100]);
});

test('FAILURE_RECHECK: a stale refresh the writer accepts counts as done even when nothing is stored (disable success), also after VERIFY_TIMEOUT', async () => {
  for (const mode of ['immediate 0s 5m', 'verify 30ms 0s 5m']) {
    let positive = false;
    let hold: (() => void) | undefined;
    const h = await setup(`. {\n cache {\n  serve_stale 1h ${mode}\n  disable success\n }\n}`, (req, w) => {
      if (!positive) {
        w.writeMsg(build(req.msg, { rcode: 3, authority: [soa(10, 10)] }));
        return 0;
      }
      const reply = build(req.msg, { answer: [a(req.qname, 10)] });
      return new Promise<number>((resolve) => { hold = () => { w.writeMsg(reply); resolve(0); }; });
    });
    await h.ask('nx.example.');
    positive = true;
    h.advance(20000);
    assert.equal((await h.ask('nx.example.')).rcode, 3, `${mode}: the stale NXDOMAIN`);
    await tick();
    assert.equal(h.stub.calls, 2, `${mode}: refresh started`);
    hold!();
    await tick();
    assert.equal((await h.ask('nx.example.')).rcode, 3, `${mode}: the NOERROR was not cached`);
    await tick();
    assert.equal(h.stub.calls, 3, `${mode}: no FAILURE_RECHECK delay, refreshed again`);
    hold!();
    await tick();
  }
});

test('minimalTtl skips OPT records kept in the additional section (a reply with two OPTs), as CoreDNS\'s MinimalTTL does', () => {
  const m = replyTo(makeRequest('example.org.').msg);
  m.answer.push({ name: 'example.org.', type: 1, class: 1, ttl: 120, data: { address: '192.0.2.1' } });
  // An earlier OPT decoded as a record: its "TTL" is the DO flag.
  m.additional.push({ name: '.', type: 41, class: 1232, ttl: 0x8000, data: { raw: new Uint8Array(0) } });
  m.additional.push({ name: '.', type: 41, class: 1232, ttl: 0, data: { raw: new Uint8Array(0) } });
  assert.equal(minimalTtl(m, ResponseType.NoError), 120);
});
