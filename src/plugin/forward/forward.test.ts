// Unit tests of the forward handler against in-process upstreams: UDP and TCP
// servers on 127.0.0.1 that each test scripts (answer, delay, drop, truncate,
// spoof, refuse). The handler is set up from a Corefile snippet, its start-up
// hooks run before and its shutdown hooks after each test.
// (test/e2e/forward.test.ts covers forward inside a running server.)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import net from 'node:net';
import { plugin } from './setup.ts';
import type { Forward } from './forward.ts';
import { CaptureWriter, StubHandler, makeRequest, runSetup, settle, type RequestOptions, metricValue } from '../pkg/testing.ts';
import { PluginError, type Handler } from '../plugin.ts';
import { Request } from '../../core/request.ts';
import { replyTo } from '../../wire/message.ts';
import { parseRecord } from '../../wire/text.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import type { Message } from '../../wire/types.ts';
import { TapType, isTapper, type TapMessage, type Tapper } from '../pkg/dnstap.ts';
import { nativeOpenSockets, oneshotAddon } from '../pkg/proxy/native-udp.ts';

// ---- scripted upstreams -------------------------------------------------------------------------

/** A query's name lower-cased: what scripts match on (over UDP its letters arrive in random case). */
const qname = (q: Message): string => q.question[0]!.name.toLowerCase();

interface Seen {
  /** The question name lower-cased (UDP queries go out in random case, 0x20). */
  name: string;
  /** The question name as it arrived. */
  spelled: string;
  type: number;
  proto: 'udp' | 'tcp';
  id: number;
  srcPort: number;
  msg: Message;
}

interface Ctx {
  proto: 'udp' | 'tcp';
  /** Send a reply (a message, or raw bytes) now or after delayMs; fromOther: from another UDP port. */
  send(reply: Message | Buffer, o?: { delayMs?: number; fromOther?: boolean }): void;
  /** TCP: reset the connection. */
  reset(): void;
}

type Script = (q: Message, ctx: Ctx) => void;

class Upstream {
  port = 0;
  readonly seen: Seen[] = [];
  script: Script;
  private udp: dgram.Socket | undefined;
  private other: dgram.Socket | undefined;
  private tcp: net.Server | undefined;
  private readonly conns = new Set<net.Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();

  private constructor(script: Script) {
    this.script = script;
  }

  /** UDP and TCP on the same free port of 127.0.0.1. */
  static async start(script: Script = (q, c) => { c.send(answer(q)); }): Promise<Upstream> {
    const u = new Upstream(script);
    for (let attempt = 0; ; attempt++) {
      await u.openUdp(0);
      try {
        await u.listenTcp();
        break;
      } catch (e) {
        await u.closeUdp();
        if (attempt > 20) throw e;
      }
    }
    u.other = dgram.createSocket('udp4');
    await new Promise<void>((r) => u.other!.bind(0, '127.0.0.1', () => r()));
    return u;
  }

  get addr(): string { return `127.0.0.1:${this.port}`; }

  /** The queries of type `type` (default A): health-check probes (NS) left out. */
  queries(type = 1): Seen[] { return this.seen.filter((s) => s.type === type); }

  /** Bind UDP on `port` (0: any); the same port again after closeUdp. */
  async openUdp(port = this.port): Promise<void> {
    const s = dgram.createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.bind(port, '127.0.0.1', () => { s.off('error', reject); resolve(); });
    });
    this.port = s.address().port;
    s.on('message', (m, rinfo) => {
      this.handle(m, 'udp', rinfo.port, (out, other) => {
        const sock = other ? this.other! : s;
        try { sock.send(out, rinfo.port, rinfo.address); } catch { /* closed meanwhile */ }
      }, () => {});
    });
    this.udp = s;
  }

  /** Send `out` from the upstream's own UDP address and port to 127.0.0.1:`port` (an off-path attacker's forgery). */
  spoof(out: Buffer, port: number): void {
    this.udp!.send(out, port, '127.0.0.1');
  }

  /** Close the UDP socket: datagrams to the port get ICMP port unreachable (connection refused). */
  async closeUdp(): Promise<void> {
    const s = this.udp;
    this.udp = undefined;
    if (s !== undefined) await new Promise<void>((r) => s.close(() => r()));
  }

  private async listenTcp(): Promise<void> {
    const srv = net.createServer((sock) => {
      this.conns.add(sock);
      sock.on('close', () => this.conns.delete(sock));
      sock.on('error', () => {});
      let buf = Buffer.alloc(0);
      sock.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
          const m = Buffer.from(buf.subarray(2, 2 + buf.readUInt16BE(0)));
          buf = buf.subarray(2 + m.length);
          this.handle(m, 'tcp', sock.remotePort ?? 0, (out) => {
            const framed = Buffer.alloc(out.length + 2);
            framed.writeUInt16BE(out.length, 0);
            out.copy(framed, 2);
            if (!sock.destroyed) sock.write(framed);
          }, () => { sock.resetAndDestroy(); });
        }
      });
    });
    await new Promise<void>((resolve, reject) => {
      srv.once('error', reject);
      srv.listen(this.port, '127.0.0.1', () => { srv.off('error', reject); resolve(); });
    });
    this.tcp = srv;
  }

  private handle(m: Buffer, proto: 'udp' | 'tcp', srcPort: number, send: (out: Buffer, other: boolean) => void, reset: () => void): void {
    let q: Message;
    try { q = decodeMessage(m); } catch { return; }
    const qq = q.question[0];
    if (qq === undefined) return;
    this.seen.push({ name: qq.name.toLowerCase(), spelled: qq.name, type: qq.type, proto, id: q.id, srcPort, msg: q });
    this.script(q, {
      proto,
      send: (reply, o = {}) => {
        const out = Buffer.isBuffer(reply) ? reply : encodeMessage(reply);
        if (!o.delayMs) { send(out, o.fromOther ?? false); return; }
        const t = setTimeout(() => { this.timers.delete(t); send(out, o.fromOther ?? false); }, o.delayMs);
        this.timers.add(t);
      },
      reset,
    });
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    for (const c of this.conns) c.destroy();
    await this.closeUdp();
    await new Promise<void>((r) => this.other!.close(() => r()));
    await new Promise<void>((r) => this.tcp!.close(() => r()));
  }
}

/** The upstream's answer to `q`: A records (for A queries), the given rcode, EDNS echoed. */
function answer(q: Message, o: { addrs?: string[]; rcode?: number; ttl?: number; tc?: boolean; nodata?: boolean } = {}): Message {
  const r = replyTo(q);
  r.ra = true;
  r.rcode = o.rcode ?? 0;
  const qq = q.question[0]!;
  if (r.rcode === 0 && qq.type === 1 && !o.nodata) {
    for (const address of o.addrs ?? ['192.0.2.1']) r.answer.push({ name: qq.name, type: 1, class: 1, ttl: o.ttl ?? 300, data: { address } });
  }
  if (o.tc) { r.tc = true; r.answer = []; }
  if (q.edns) r.edns = { udpSize: 1232, version: 0, do: q.edns.do, z: 0, options: [] };
  return r;
}

const addr = (m: Message | undefined): string => (m!.answer[0]!.data as { address: string }).address;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---- the handler under test ---------------------------------------------------------------------

interface Outcome {
  rcode: number;
  reply: Message | undefined;
  err: PluginError | undefined;
  req: Request;
  ms: number;
}

interface Chain {
  h: Handler;
  fwd: Forward;
  stop(): Promise<void>;
  ask(name: string, o?: RequestOptions): Promise<Outcome>;
}

async function forward(corefile: string, next?: Handler): Promise<Chain> {
  const r = await runSetup(plugin, corefile);
  for (const fn of r.hooks.startup) await fn();
  const h = r.chain(next);
  return {
    h,
    fwd: h as unknown as Forward,
    async stop() { for (const fn of r.hooks.shutdown) await fn(); },
    ask: (name, o) => ask(h, makeRequest(name, o)),
  };
}

/** Run one query; a PluginError (rcode with nothing written, as CoreDNS's `return rcode, err`) is returned, not thrown. */
async function ask(h: Handler, req: Request): Promise<Outcome> {
  const w = new CaptureWriter();
  const t0 = performance.now();
  try {
    const rcode = await settle(h.serveDNS(req, w));
    assert.equal(w.msgs.length, 1, 'one reply written');
    return { rcode, reply: w.last, err: undefined, req, ms: performance.now() - t0 };
  } catch (e) {
    if (!(e instanceof PluginError)) throw e;
    assert.equal(w.msgs.length, 0, 'nothing written with an error');
    return { rcode: e.rcode, reply: undefined, err: e, req, ms: performance.now() - t0 };
  }
}

/** Upstreams and chains stopped at the end of a test, whatever happens. */
function cleanup(t: { after(fn: () => Promise<void>): void }, ...things: { stop(): Promise<void> }[]): void {
  t.after(async () => { for (const x of things) await x.stop(); });
}


async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await sleep(10);
  }
}

// ---- tests --------------------------------------------------------------------------------------

test('the upstream\'s reply is relayed unchanged but for the client\'s ID; the query goes out with another ID, flags and EDNS kept', async (t) => {
  const up = await Upstream.start((q, c) => { c.send(answer(q, { addrs: ['192.0.2.10', '192.0.2.11'] })); });
  const f = await forward(`. {\n forward . ${up.addr}\n}`);
  cleanup(t, f, up);
  for (const proto of ['udp', 'tcp'] as const) {
    const o = await f.ask('Relay.Example.', { id: 4321, proto, cd: true, edns: { do: true, udpSize: 1400 } });
    assert.equal(o.rcode, 0);
    const sent = up.queries().at(-1)!;
    assert.equal(sent.proto, proto, 'same transport as the client');
    assert.notEqual(sent.id, 4321);
    // Over UDP the name's letters go out in random case (0x20); over TCP as the client spelled them.
    if (proto === 'tcp') assert.equal(sent.spelled, 'Relay.Example.');
    assert.equal(sent.name, 'relay.example.');
    assert.deepEqual({ ...sent.msg, id: 4321, question: o.req.msg.question }, o.req.msg, 'the client\'s message, only the ID (and the case) changed');
    // the upstream's reply (its OPT included), with the client's ID
    assert.deepEqual(o.reply, answer(o.req.msg, { addrs: ['192.0.2.10', '192.0.2.11'] }));
    assert.equal(o.reply!.id, 4321);
    assert.equal(o.req.value('forward/upstream'), up.addr);
    assert.equal(o.req.metadata('forward/upstream'), undefined, 'no metadata plugin: no label');
  }
});

test('0x20: over UDP the name goes out in random case, the client gets its own spelling back (question and copied owners); case_randomization off sends it as spelled', async (t) => {
  const up = await Upstream.start((q, c) => { c.send(answer(q)); });
  const on = await forward(`. {\n forward . ${up.addr}\n}`);
  const off = await forward(`. {\n forward . ${up.addr} {\n  case_randomization off\n }\n}`);
  cleanup(t, on, off, up);
  for (let i = 0; i < 40; i++) {
    const o = await on.ask('Mixed.Case.Example.', { id: 7 });
    assert.deepEqual(o.reply, answer(o.req.msg), 'question and answer owner as the client spelled them');
  }
  const spelled = new Set(up.queries().map((s) => s.spelled));
  // 15 letters: 40 queries all but surely show 40 spellings; a fixed one would show 1
  assert.ok(spelled.size >= 38, `spellings upstream: ${spelled.size}`);
  assert.ok(up.queries().every((s) => s.name === 'mixed.case.example.'));
  for (let i = 0; i < 5; i++) await off.ask('Mixed.Case.Example.');
  assert.deepEqual(up.queries().slice(-5).map((s) => s.spelled), new Array(5).fill('Mixed.Case.Example.'), 'off: as spelled');
});

test('a query with two OPT records goes upstream with both, as CoreDNS forwards them (the last is the query\'s EDNS)', async (t) => {
  const up = await Upstream.start((q, c) => { c.send(answer(q)); });
  const f = await forward(`. {\n forward . ${up.addr}\n}`);
  cleanup(t, f, up);
  // What CoreDNS 1.14.7 sent upstream for this query: the same bytes with another ID.
  const wire = Buffer.from('123401000001000000000002076578616d706c65036f7267000001000100002910000000800000040003000000002904d000000000000c000a00080102030405060708', 'hex');
  const req = new Request(decodeMessage(wire), wire, 'udp', '127.0.0.1', 5353, '127.0.0.1', 53, 'dns://:53', process.hrtime.bigint());
  assert.equal(req.size, 1232);
  assert.equal(req.do, false);
  const o = await ask(f.h, req);
  assert.equal(o.rcode, 0);
  const last = up.queries().at(-1)!;
  assert.equal(last.name, 'example.org.');
  const sent = encodeMessage({ ...last.msg, id: 0x1234, question: [{ ...last.msg.question[0]!, name: 'example.org.' }] });
  assert.deepEqual(sent, wire, 'the same bytes but for the ID and the case of the name');
});

test('upstream rcodes (SERVFAIL, REFUSED, NXDOMAIN) are relayed as replies, not errors', async (t) => {
  const up = await Upstream.start((q, c) => { c.send(answer(q, { rcode: qname(q).startsWith('sf') ? 2 : qname(q).startsWith('ref') ? 5 : 3 })); });
  const f = await forward(`. {\n forward . ${up.addr}\n}`);
  cleanup(t, f, up);
  for (const [name, rcode] of [['sf.example.', 2], ['ref.example.', 5], ['nx.example.', 3]] as const) {
    const o = await f.ask(name, { id: 9 });
    assert.equal(o.rcode, 0, `${name}: forward itself succeeded`);
    assert.deepEqual(o.reply, answer(o.req.msg, { rcode }));
  }
  assert.equal(up.queries().length, 3, 'one attempt each');
});

test('FROM and except: other names and excepted names go to the next plugin; FROM itself is always forwarded', async (t) => {
  const up = await Upstream.start();
  const next = new StubHandler('stub', (req, w) => { w.writeMsg({ ...replyTo(req.msg), rcode: 3 }); return 0; });
  const f = await forward(`. {\n forward example.org ${up.addr} {\n  except example.org skip.example.net\n }\n}`, next);
  cleanup(t, f, up);
  assert.equal(addr((await f.ask('Example.ORG.')).reply), '192.0.2.1', 'FROM itself, even though excepted');
  for (const name of ['a.example.org.', 'other.net.', 'example.net.']) {
    const o = await f.ask(name);
    assert.equal(o.reply!.rcode, 3, `${name}: answered by the next plugin`);
  }
  assert.equal(next.calls, 3);
  assert.deepEqual(up.queries().map((s) => s.name), ['example.org.']);

  const g = await forward(`. {\n forward . ${up.addr} {\n  except skip.example.net\n }\n}`, next);
  cleanup(t, g);
  assert.equal((await g.ask('a.b.SKIP.example.net.')).reply!.rcode, 3);
  assert.equal((await g.ask('noskip.example.net.')).reply!.rcode, 0);
  assert.equal(next.calls, 4);
});

test('policy sequential: always the first upstream; a slow one (reply after read_timeout) is given up for the next', async (t) => {
  const slow = await Upstream.start((q, c) => { if (q.question[0]!.type === 1) c.send(answer(q, { addrs: ['192.0.2.66'] }), { delayMs: 150 }); else c.send(answer(q)); });
  const good = await Upstream.start((q, c) => { c.send(answer(q, { addrs: ['192.0.2.2'] })); });
  const f = await forward(`. {\n forward . ${slow.addr} ${good.addr} {\n  policy sequential\n  read_timeout 60ms\n  max_fails 0\n }\n}`);
  cleanup(t, f, slow, good);
  for (let i = 0; i < 3; i++) {
    const o = await f.ask(`seq${i}.example.`);
    assert.equal(addr(o.reply), '192.0.2.2');
  }
  assert.equal(slow.queries().length, 3, 'the first upstream is tried first every time');
  assert.equal(good.queries().length, 3);
});

test('policy round_robin rotates (starting at the second upstream); random uses every upstream', async (t) => {
  const ups = await Promise.all([0, 1, 2].map((i) => Upstream.start((q, c) => { c.send(answer(q, { addrs: [`192.0.2.${i}`] })); })));
  const rr = await forward(`. {\n forward . ${ups.map((u) => u.addr).join(' ')} {\n  policy round_robin\n }\n}`);
  const rnd = await forward(`. {\n forward . ${ups.map((u) => u.addr).join(' ')}\n}`);
  cleanup(t, rr, rnd, ...ups);
  const got: string[] = [];
  for (let i = 0; i < 5; i++) got.push(addr((await rr.ask(`rr${i}.example.`)).reply));
  assert.deepEqual(got, ['192.0.2.1', '192.0.2.2', '192.0.2.0', '192.0.2.1', '192.0.2.2']);
  const seen = new Set<string>();
  for (let i = 0; i < 60; i++) seen.add(addr((await rnd.ask(`rnd${i}.example.`)).reply));
  assert.equal(seen.size, 3, 'random (default) spreads queries over all upstreams');
});

test('an upstream that refuses (ICMP port unreachable) fails over at once', async (t) => {
  const dead = await Upstream.start();
  await dead.closeUdp();
  const good = await Upstream.start((q, c) => { c.send(answer(q, { addrs: ['192.0.2.2'] })); });
  const f = await forward(`. {\n forward . ${dead.addr} ${good.addr} {\n  policy sequential\n  max_fails 0\n }\n}`);
  cleanup(t, f, dead, good);
  const o = await f.ask('refused.example.');
  assert.equal(addr(o.reply), '192.0.2.2');
  assert.ok(o.ms < 1000, `took ${o.ms} ms: no read timeout waited for`);
});

test('max_fails: failed health checks mark an upstream down (skipped); a passing check brings it back', async (t) => {
  let answerProbes = true;
  const held: (() => void)[] = [];
  const a = await Upstream.start((q, c) => {
    const reply = answer(q, { addrs: ['192.0.2.1'] });
    if (q.question[0]!.type === 2 && !answerProbes) { held.push(() => c.send(reply)); return; }
    c.send(reply);
  });
  const b = await Upstream.start((q, c) => { c.send(answer(q, { addrs: ['192.0.2.2'] })); });
  const f = await forward(`. {\n forward . ${a.addr} ${b.addr} {\n  policy sequential\n  max_fails 1\n  health_check 20ms\n }\n}`);
  cleanup(t, f, a, b);
  const healthy = () => f.fwd.upstreams().map((u) => u.healthy);
  const failures = () => metricValue('coredns_proxy_healthcheck_failures_total', { to: a.addr });

  assert.equal(addr((await f.ask('up1.example.')).reply), '192.0.2.1');
  await a.closeUdp(); // now refused
  assert.equal(addr((await f.ask('fail.example.')).reply), '192.0.2.2', 'failed over');
  // the failure started health checks: 2 failed probes (> max_fails 1) mark it down
  await until('a marked down', () => healthy()[0] === false);
  assert.ok(await failures() >= 2);
  assert.deepEqual(healthy(), [false, true]);

  answerProbes = false;
  await a.openUdp(); // back, but its probe replies are held for now
  await until('a probe reached a', () => a.queries(2).length > 0);
  const before = a.queries().length;
  for (let i = 0; i < 3; i++) assert.equal(addr((await f.ask(`down${i}.example.`)).reply), '192.0.2.2');
  assert.equal(a.queries().length, before, 'a down upstream is skipped without trying it');

  for (const release of held.splice(0)) release(); // the probe gets its reply: healthy again
  await until('a healthy again', () => healthy()[0] === true);
  assert.equal(addr((await f.ask('back.example.')).reply), '192.0.2.1');
});

test('all upstreams down: one is tried anyway (SERVFAIL with its error); failfast_all_unhealthy_upstreams answers SERVFAIL "no healthy proxies" without trying', async (t) => {
  const x = await Upstream.start();
  const y = await Upstream.start();
  await x.closeUdp();
  await y.closeUdp();
  const opts = ' max_fails 1\n  health_check 20ms\n';
  const slow = await forward(`. {\n forward . ${x.addr} ${y.addr} {\n ${opts} }\n}`);
  const fast = await forward(`. {\n forward . ${x.addr} ${y.addr} {\n ${opts}  failfast_all_unhealthy_upstreams\n }\n}`);
  cleanup(t, slow, fast, x, y);
  for (const f of [slow, fast]) {
    const o = await f.ask('first.example.');
    assert.equal(o.rcode, 2);
    assert.match(o.err!.message, /^read udp 127\.0\.0\.1:\d+->127\.0\.0\.1:\d+: read: connection refused$/);
    await until('all down', () => f.fwd.upstreams().every((u) => !u.healthy));
  }
  const broken = await metricValue('coredns_forward_healthcheck_broken_total');
  const o = await slow.ask('anyway.example.');
  assert.equal(o.rcode, 2);
  assert.match(o.err!.message, /connection refused$/, 'an attempt was made');
  const ff = await fast.ask('failfast.example.');
  assert.equal(ff.rcode, 2);
  assert.equal(ff.err!.message, 'no healthy proxies');
  assert.ok(await metricValue('coredns_forward_healthcheck_broken_total') >= broken + 2, 'both counted as broken health checks');
});

test('timeouts: each attempt waits read_timeout; the default cap is 2 attempts per upstream; SERVFAIL with the i/o timeout; counted', async (t) => {
  const up = await Upstream.start((q, c) => { if (q.question[0]!.type !== 1) c.send(answer(q)); });
  const f = await forward(`. {\n forward . ${up.addr} {\n  read_timeout 80ms\n }\n}`);
  const one = await forward(`. {\n forward . ${up.addr} {\n  read_timeout 80ms\n  max_connect_attempts 1\n }\n}`);
  cleanup(t, f, one, up);
  const before = await metricValue('nodens_proxy_timeouts_total', { proxy_name: 'forward', to: up.addr, proto: 'udp' });
  const o = await f.ask('timeout.example.');
  assert.equal(o.rcode, 2);
  assert.equal(o.err!.name, 'PluginError');
  assert.match(o.err!.message, new RegExp(`^read udp 127\\.0\\.0\\.1:\\d+->${up.addr.replace(/\./g, '\\.')}: i/o timeout$`));
  assert.equal(up.queries().length, 2);
  assert.ok(o.ms >= 150 && o.ms < 1000, `took ${o.ms} ms`);
  assert.equal(await metricValue('nodens_proxy_timeouts_total', { proxy_name: 'forward', to: up.addr, proto: 'udp' }), before + 2);

  const p = await one.ask('once.example.');
  assert.equal(p.rcode, 2);
  assert.equal(up.queries().length, 3, 'max_connect_attempts 1: a single attempt');
});

test('failover RCODE: the next upstream is tried, at most n-1 times; then the last reply is used', async (t) => {
  const mk = (rcode: number, a: string) => Upstream.start((q, c) => { c.send(answer(q, { rcode, addrs: [a] })); });
  const ups = [await mk(2, '192.0.2.1'), await mk(5, '192.0.2.2'), await mk(2, '192.0.2.3')];
  const ok = await mk(0, '192.0.2.9');
  const f = await forward(`. {\n forward . ${ups.map((u) => u.addr).join(' ')} {\n  policy sequential\n  failover SERVFAIL REFUSED\n }\n}`);
  const g = await forward(`. {\n forward . ${ups[0]!.addr} ${ok.addr} {\n  policy sequential\n  failover SERVFAIL\n }\n}`);
  cleanup(t, f, g, ok, ...ups);
  const o = await f.ask('fo.example.', { id: 77 });
  assert.equal(o.rcode, 0);
  assert.deepEqual(o.reply, answer(o.req.msg, { rcode: 2 }), 'the third (last) SERVFAIL relayed');
  assert.deepEqual(ups.map((u) => u.queries().length), [1, 1, 1]);
  const p = await g.ask('fo2.example.');
  assert.equal(addr(p.reply), '192.0.2.9');
});

test('next RCODE and next_on_nodata hand the query to the following forward, and only to a forward', async (t) => {
  const nx = await Upstream.start((q, c) => {
    const n = qname(q);
    c.send(n.startsWith('nodata') ? answer(q, { nodata: true }) : n.startsWith('sf') ? answer(q, { rcode: 2 }) : answer(q, { rcode: 3 }));
  });
  const ok = await Upstream.start((q, c) => { c.send(answer(q, { addrs: ['192.0.2.9'] })); });
  const f = await forward(`. {\n forward . ${nx.addr} {\n  next NXDOMAIN\n  next_on_nodata\n }\n forward . ${ok.addr}\n}`);
  const stub = new StubHandler('stub', (req, w) => { w.writeMsg(replyTo(req.msg)); return 0; });
  const g = await forward(`. {\n forward . ${nx.addr} {\n  next NXDOMAIN\n  next_on_nodata\n }\n}`, stub);
  cleanup(t, f, g, nx, ok);
  assert.equal(addr((await f.ask('nx.example.')).reply), '192.0.2.9', 'NXDOMAIN: the second forward answered');
  assert.equal(addr((await f.ask('nodata.example.')).reply), '192.0.2.9', 'NODATA: the second forward answered');
  assert.equal((await f.ask('sf.example.')).reply!.rcode, 2, 'an rcode not listed is relayed');
  assert.equal(ok.queries().length, 2);
  // the next plugin is not a forward: the reply is written as it is
  assert.equal((await g.ask('nx.example.')).reply!.rcode, 3);
  assert.equal((await g.ask('nodata.example.')).reply!.answer.length, 0);
  assert.equal(stub.calls, 0);
});

test('TC over UDP: relayed as is by default; prefer_udp retries the same upstream over TCP; force_tcp uses only TCP', async (t) => {
  const up = await Upstream.start((q, c) => { c.send(answer(q, { tc: c.proto === 'udp', addrs: ['192.0.2.5'] })); });
  const plain = await forward(`. {\n forward . ${up.addr}\n}`);
  const prefer = await forward(`. {\n forward . ${up.addr} {\n  prefer_udp\n }\n}`);
  const force = await forward(`. {\n forward . ${up.addr} {\n  force_tcp\n }\n}`);
  cleanup(t, plain, prefer, force, up);
  const protos = (name: string) => up.seen.filter((s) => s.name === name).map((s) => s.proto);

  const a = await plain.ask('tc1.example.');
  assert.deepEqual(a.reply, answer(a.req.msg, { tc: true }));
  // A truncated reply to a 0x20 query is asked for again as spelled (the upstream may fit fewer records under
  // another spelling); then relayed: the client retries over TCP itself.
  assert.deepEqual(protos('tc1.example.'), ['udp', 'udp'], 'no TCP retry');
  assert.equal(up.seen.filter((s) => s.name === 'tc1.example.').at(-1)!.spelled, 'tc1.example.', 'asked again as spelled');
  const b = await prefer.ask('tc2.example.', { proto: 'tcp' });
  assert.deepEqual(b.reply, answer(b.req.msg, { addrs: ['192.0.2.5'] }));
  assert.deepEqual(protos('tc2.example.'), ['udp', 'udp', 'tcp'], 'prefer_udp: UDP first even for a TCP client, then TCP');
  const c = await prefer.ask('tc3.example.');
  assert.equal(c.reply!.tc, false);
  assert.deepEqual(protos('tc3.example.'), ['udp', 'udp', 'tcp'], 'prefer_udp retries for UDP clients too');
  const d = await force.ask('tc4.example.');
  assert.equal(addr(d.reply), '192.0.2.5');
  assert.deepEqual(protos('tc4.example.'), ['tcp']);
});

test('a UDP reply larger than the client\'s buffer comes back as an empty TC reply', async (t) => {
  const many = Array.from({ length: 60 }, (_, i) => `10.0.${i >> 8}.${i & 255}`);
  const up = await Upstream.start((q, c) => { c.send(answer(q, { addrs: many })); });
  const f = await forward(`. {\n forward . ${up.addr}\n}`);
  cleanup(t, f, up);
  const small = await f.ask('big.example.', { id: 5 });
  const r = replyTo(small.req.msg);
  r.ra = true;
  r.tc = true;
  assert.deepEqual(small.reply, r, 'header and question of the reply, no records, TC set');
  const large = await f.ask('big.example.', { edns: { udpSize: 4096 } });
  assert.equal(large.reply!.answer.length, 60, 'fits the client\'s EDNS buffer: passed whole');
});

test('RFC 5452: replies with a wrong ID, for a wrong question or from another port are ignored; the genuine reply that follows is taken', async (t) => {
  const up = await Upstream.start((q, c) => {
    const n = qname(q);
    const fake = answer(q, { addrs: ['6.6.6.6'] });
    if (n.startsWith('id')) fake.id = (q.id + 1) & 0xffff;
    else if (n.startsWith('question')) fake.question = [{ ...fake.question[0]!, name: 'evil.example.' }];
    else if (n.startsWith('noqr')) fake.qr = false;
    if (n.startsWith('port')) c.send(fake, { fromOther: true });
    else c.send(fake);
    c.send(answer(q, { addrs: ['192.0.2.7'] }), { delayMs: 20 });
  });
  const f = await forward(`. {\n forward . ${up.addr} {\n  read_timeout 500ms\n }\n}`);
  cleanup(t, f, up);
  for (const kind of ['id', 'question', 'noqr', 'port']) {
    const o = await f.ask(`${kind}.example.`, { id: 31 });
    assert.deepEqual(o.reply, answer(o.req.msg, { addrs: ['192.0.2.7'] }), kind);
    assert.equal(up.queries().filter((s) => s.name === `${kind}.example.`).length, 1, `${kind}: no second attempt`);
  }
});

test('RFC 5452: only a wrong-question reply → FORMERR after read_timeout; only wrong IDs → timeout SERVFAIL', async (t) => {
  const up = await Upstream.start((q, c) => {
    if (q.question[0]!.type !== 1) { c.send(answer(q)); return; }
    const fake = answer(q, { addrs: ['6.6.6.6'] });
    if (qname(q).startsWith('q')) fake.question = [{ ...fake.question[0]!, name: 'evil.example.' }];
    else fake.id = (q.id + 1) & 0xffff;
    c.send(fake);
  });
  const f = await forward(`. {\n forward . ${up.addr} {\n  read_timeout 60ms\n }\n}`);
  cleanup(t, f, up);
  const q = await f.ask('q.example.', { id: 12 });
  assert.equal(q.rcode, 0);
  assert.deepEqual(q.reply, { ...replyTo(q.req.msg), rcode: 1 }, 'FORMERR, as CoreDNS answers a mismatched reply');
  assert.ok(q.ms >= 50, 'the genuine reply was waited for first');
  const i = await f.ask('i.example.');
  assert.equal(i.rcode, 2);
  assert.match(i.err!.message, /i\/o timeout$/);
});

test('every upstream UDP query has a fresh source port and a random ID by default; reuse_udp_sockets pools the sockets', async (t) => {
  const up = await Upstream.start((q, c) => { c.send(answer(q), { delayMs: qname(q).startsWith('conc') ? 30 : 0 }); });
  const fresh = await forward(`. {\n forward . ${up.addr}\n}`);
  const reuse = await forward(`. {\n forward . ${up.addr} {\n  reuse_udp_sockets\n }\n}`);
  cleanup(t, fresh, reuse, up);
  for (let i = 0; i < 12; i++) assert.equal((await fresh.ask(`f${i}.example.`, { id: 1000 })).reply!.id, 1000);
  const f = up.queries().filter((s) => s.name.startsWith('f'));
  assert.equal(new Set(f.map((s) => s.srcPort)).size, 12, 'twelve source ports');
  assert.ok(new Set(f.map((s) => s.id)).size >= 11, `IDs: ${f.map((s) => s.id).join(',')}`);
  assert.ok(f.filter((s) => s.id === 1000).length <= 1, 'not the client\'s ID');

  for (let i = 0; i < 6; i++) await reuse.ask(`r${i}.example.`, { id: 1000 });
  const r = up.queries().filter((s) => s.name.startsWith('r'));
  assert.equal(new Set(r.map((s) => s.srcPort)).size, 1, 'one pooled socket for sequential queries');
  assert.ok(new Set(r.map((s) => s.id)).size >= 5, 'still a random ID per query');
  // concurrent queries each need a socket of their own (one outstanding query per socket)
  await Promise.all([0, 1, 2].map((i) => reuse.ask(`conc${i}.example.`)));
  const c = up.queries().filter((s) => s.name.startsWith('conc'));
  assert.equal(new Set(c.map((s) => s.srcPort)).size, 3);
});

test('RFC 5452 drill: a source port learned from one\'s own query carries no later query (one-use sockets); with reuse_udp_sockets it does, and a forgery wins', async (t) => {
  // The attacker asks for a name of his own and sees the source port P at his server; then the victim's query
  // goes out, and a forged reply from the upstream's address reaches P before the genuine answer. The forgery
  // carries the victim query's ID, as if the attacker had guessed it (1 in 65536: the ID's share of the entropy,
  // checked in the next test), so that only the port decides. One-use sockets: P was closed, the victim's query
  // left from another random port, the forgery falls on nothing. (The kernel may pick P again for the victim
  // by chance, about 1 in 28k with the kernel's default port range, 1 in 64.5k with the oneshot addon's 1024-65535:
  // that is the port's share of the entropy.)
  let learned = 0;
  const up = await Upstream.start((q, c) => {
    const n = qname(q);
    if (n.startsWith('attacker')) learned = up.queries().at(-1)!.srcPort;
    if (n.startsWith('victim')) {
      up.spoof(encodeMessage(answer(q, { addrs: ['6.6.6.6'] })), learned);
      c.send(answer(q, { addrs: ['192.0.2.7'] }), { delayMs: 30 });
      return;
    }
    c.send(answer(q));
  });
  const fresh = await forward(`. {\n forward . ${up.addr}\n}`);
  const pooled = await forward(`. {\n forward . ${up.addr} {\n  reuse_udp_sockets\n }\n}`);
  cleanup(t, fresh, pooled, up);

  for (let round = 0; round < 20; round++) {
    await fresh.ask(`attacker${round}.example.`);
    const v = await fresh.ask(`victim${round}.example.`);
    assert.equal(addr(v.reply), '192.0.2.7', `round ${round}: the genuine answer, the forgery was not taken`);
    const [a, w] = up.queries().slice(-2);
    assert.notEqual(w!.srcPort, a!.srcPort, 'the victim\'s query left from another port');
  }
  // The control: the drill can fail. A pooled socket carries the victim's query on the port the attacker learned.
  await pooled.ask('attacker-pooled.example.');
  const v = await pooled.ask('victim-pooled.example.');
  assert.equal(addr(v.reply), '6.6.6.6', 'pooled sockets: the forgery was taken');
});

test('one-use sockets: each carries one query (dgram path: spares opened ahead of need); 400 queries carry ~400 distinct IDs', async (t) => {
  const up = await Upstream.start();
  const f = await forward(`. {\n forward . ${up.addr}\n}`);
  cleanup(t, f, up);
  const tr = f.fwd.proxies[0]!.transport;
  // With the oneshot addon a socket is opened at its query's send, in C: no spares.
  const native = oneshotAddon() !== undefined;
  assert.equal(tr.spareCount(), 0, 'none before the first query');
  await Promise.all(Array.from({ length: 40 }, (_, i) => f.ask(`burst${i}.example.`)));
  if (native) {
    await new Promise((r) => setImmediate(r));
    assert.equal(tr.spareCount(), 0, 'the addon keeps no spares');
  } else {
    // Refills replace what the queries of a turn took: all 40 when the burst left in one turn, fewer when not.
    await until('spares opened after the burst', () => tr.spareCount() > 0);
    assert.ok(tr.spareCount() <= 40, 'no more than were taken');
  }
  for (let i = 0; i < 360; i++) await f.ask(`s${i}.example.`, { id: 7 });
  const qs = up.queries();
  assert.equal(qs.length, 400);
  // Expected repeats among 400 random 16-bit IDs: about 1.2.
  assert.ok(new Set(qs.map((s) => s.id)).size >= 390, 'IDs from the CSPRNG');
  assert.ok(qs.filter((s) => s.id === 7).length <= 2, 'not the client\'s ID');
  // Each port carried one query, but for the kernel choosing a closed port again at random.
  assert.ok(new Set(qs.map((s) => s.srcPort)).size >= 390, 'ports: one query each');
  if (native) assert.equal(nativeOpenSockets(), 0, 'every socket closed with its query');
  else assert.ok(tr.spareCount() > 0 && tr.spareCount() <= 64, 'kept, bounded');
  await f.stop();
  assert.equal(tr.spareCount(), 0, 'closed at shutdown');
});

test('coalescing: 100 identical concurrent queries make one upstream query; DO, CD and later queries are separate', async (t) => {
  const up = await Upstream.start((q, c) => { c.send(answer(q, { addrs: ['192.0.2.13'] }), { delayMs: 80 }); });
  const f = await forward(`. {\n forward . ${up.addr}\n}`);
  const off = await forward(`. {\n forward . ${up.addr} {\n  coalesce off\n }\n}`);
  cleanup(t, f, off, up);
  const os = await Promise.all(Array.from({ length: 100 }, (_, i) => f.ask(i % 2 ? 'Same.Example.' : 'same.example.', { id: i + 1 })));
  assert.equal(up.queries().length, 1);
  // The upstream saw the first asker's name (in random case); its reply came back with that asker's spelling.
  assert.equal(up.queries()[0]!.name, 'same.example.');
  const shared = answer({ ...up.queries()[0]!.msg, question: os[0]!.req.msg.question }, { addrs: ['192.0.2.13'] });
  os.forEach((o, i) => {
    // the one upstream reply, with each client's ID and question (records keep the owner names of the flight's query)
    assert.deepEqual(o.reply, { ...shared, id: i + 1, question: o.req.msg.question }, `reply ${i}`);
  });
  const variants: RequestOptions[] = [{}, { edns: { do: true } }, { cd: true }, { edns: { do: true }, cd: true }, { proto: 'tcp' },
    { edns: { udpSize: 4096 } }, { edns: { udpSize: 1232 } }, { rd: false }, { type: 28 }];
  const vs = await Promise.all(variants.flatMap((o) => [f.ask('var.example.', o), f.ask('var.example.', o)]));
  const varQueries = (): number => up.queries(1).concat(up.queries(28)).filter((s) => s.name === 'var.example.').length;
  assert.equal(varQueries(), variants.length, 'one upstream query per DO/CD/transport/EDNS size/RD/type variant');
  for (const v of vs) assert.equal(v.reply!.edns?.do ?? false, v.req.do, 'each variant got the reply to its own query');
  await f.ask('var.example.');
  assert.equal(varQueries(), variants.length + 1, 'nothing is remembered after the reply');

  await Promise.all(Array.from({ length: 5 }, () => off.ask('off.example.')));
  assert.equal(up.queries().filter((s) => s.name === 'off.example.').length, 5, 'coalesce off');
});

test('max_concurrent: queries over the limit are REFUSED at once and counted; the slots free up', async (t) => {
  const up = await Upstream.start((q, c) => { c.send(answer(q), { delayMs: 80 }); });
  const f = await forward(`. {\n forward . ${up.addr} {\n  max_concurrent 2\n }\n}`);
  cleanup(t, f, up);
  const before = await metricValue('coredns_forward_max_concurrent_rejects_total');
  const running = [f.ask('mc1.example.'), f.ask('mc2.example.')];
  const rejected = await f.ask('mc3.example.');
  assert.equal(rejected.rcode, 5);
  assert.equal(rejected.err!.message, 'concurrent queries exceeded maximum 2');
  assert.ok(rejected.ms < 50);
  assert.equal(await metricValue('coredns_forward_max_concurrent_rejects_total'), before + 1);
  assert.deepEqual((await Promise.all(running)).map((o) => o.rcode), [0, 0]);
  assert.equal((await f.ask('mc4.example.')).rcode, 0, 'a slot is free again');
  assert.equal(up.queries().some((s) => s.name === 'mc3.example.'), false);
});

test('failover RCODE with the other upstream down: the failover is not a down-skip; the list wraps and the SERVFAIL is relayed', async (t) => {
  const sf = await Upstream.start((q, c) => { c.send(answer(q, { rcode: 2 })); });
  const down = await Upstream.start();
  await down.closeUdp();
  const f = await forward(`. {\n forward . ${sf.addr} ${down.addr} {\n  policy sequential\n  failover SERVFAIL\n  max_fails 1\n  health_check 20ms\n }\n}`);
  cleanup(t, f, sf, down);
  const first = await f.ask('fo-down0.example.'); // the second upstream refuses, which starts its health checks
  assert.equal(first.reply!.rcode, 2);
  await until('second upstream down', () => f.fwd.upstreams()[1]!.healthy === false);
  const broken = await metricValue('coredns_forward_healthcheck_broken_total');
  for (let i = 1; i <= 5; i++) {
    const before = sf.queries().length;
    const o = await f.ask(`fo-down${i}.example.`, { id: 70 + i });
    assert.equal(o.rcode, 0, `query ${i}: ${o.err?.message ?? ''}`);
    assert.deepEqual(o.reply, answer(o.req.msg, { rcode: 2 }), 'the first upstream\'s SERVFAIL');
    assert.equal(sf.queries().length, before + 2, 'asked again after skipping the down one');
  }
  assert.equal(await metricValue('coredns_forward_healthcheck_broken_total'), broken, 'not all upstreams were down');
});

test('a request deadline (the cancel plugin) stops the upstream loop: no new attempt once it has passed', async (t) => {
  const silent = await Upstream.start(() => { /* never answers */ });
  const f = await forward(`. {\n forward . ${silent.addr} {\n  max_fails 0\n  read_timeout 100ms\n }\n}`);
  cleanup(t, f, silent);
  // Without a deadline: attempts until the connect-attempt cap (2 per upstream).
  const free = await f.ask('free.example.');
  assert.equal(free.rcode, 2);
  assert.equal(silent.queries().filter((s) => s.name === 'free.example.').length, 2);
  // A deadline 50 ms away: the first attempt runs its read timeout, then the loop stops, as CoreDNS's ctx.Err() check.
  const req = makeRequest('dl.example.').derive({ deadline: Date.now() + 50 });
  const o = await ask(f.h, req);
  assert.equal(o.rcode, 2);
  assert.equal(silent.queries().filter((s) => s.name === 'dl.example.').length, 1);
  // A deadline already passed: no attempt at all, CoreDNS's "no healthy proxies".
  const gone = await ask(f.h, makeRequest('gone.example.').derive({ deadline: Date.now() - 1 }));
  assert.equal(gone.rcode, 2);
  assert.equal(gone.err?.message, 'no healthy proxies');
  assert.equal(silent.queries().filter((s) => s.name === 'gone.example.').length, 0);
});

test('a compressed upstream reply goes out uncompressed, as CoreDNS packs it again: names expanded on the wire, or decoded and encoded when the decoder must judge', async (t) => {
  let compress = true;
  let caa = false;
  const up = await Upstream.start((q, c) => {
    const r = answer(q, { addrs: ['192.0.2.10', '192.0.2.11'] });
    if (caa) r.answer.push(parseRecord(`${q.question[0]!.name} 60 IN CAA 0 issue "ca.example.org"`));
    c.send(encodeMessage(r, { compress }));
  });
  const f = await forward(`. {\n forward . ${up.addr}\n}`);
  cleanup(t, f, up);
  const seen: Array<{ kind: 'msg' | 'wire'; bytes: Buffer }> = [];
  const w = {
    writeMsg(m: Message) { seen.push({ kind: 'msg', bytes: encodeMessage(m) }); },
    writeWire(b: Uint8Array) { seen.push({ kind: 'wire', bytes: Buffer.from(b) }); },
  };
  for (const [c, withCaa, kind] of [[true, false, 'wire'], [false, false, 'wire'], [true, true, 'msg']] as const) {
    compress = c;
    caa = withCaa;
    const req = makeRequest('www.example.org.', { id: 77 });
    await settle(f.h.serveDNS(req, w));
    const m = { ...answer(req.msg, { addrs: ['192.0.2.10', '192.0.2.11'] }), id: 77 };
    if (withCaa) m.answer.push(parseRecord('www.example.org. 60 IN CAA 0 issue "ca.example.org"'));
    const got = seen.at(-1)!;
    assert.equal(got.kind, kind, `compressed ${c}, CAA ${withCaa}`);
    assert.deepEqual(got.bytes, encodeMessage(m), 'the uncompressed reply, with the client\'s ID');
  }
});

test('dnstap: with a Tapper in the block each attempt is tapped (FORWARDER_QUERY, FORWARDER_RESPONSE), and queries are not coalesced', async (t) => {
  const up = await Upstream.start((q, c) => { c.send(answer(q, { addrs: ['192.0.2.20'] }), { delayMs: 30 }); });
  const f = await forward(`. {\n forward . 127.0.0.1:1 ${up.addr} {\n  policy sequential\n  max_fails 0\n }\n}`);
  cleanup(t, f, up);
  const seen: { m: TapMessage; req: Request }[] = [];
  const tapper: Tapper = {
    name: 'dnstap', tapFull: true,
    serveDNS: () => 0,
    tapMessage(m, req) { seen.push({ m, req }); },
  };
  assert.ok(isTapper(tapper));
  f.fwd.tappers = [tapper];
  const os = await Promise.all([f.ask('tap.example.', { id: 7 }), f.ask('tap.example.', { id: 8 })]);
  assert.equal(up.queries().filter((s) => s.name === 'tap.example.').length, 2, 'no coalescing while tapping');
  const mine = seen.filter((s) => s.req === os[0]!.req).map((s) => s.m);
  // 127.0.0.1:1 refuses (a query, no response), then the upstream answers (query and response).
  assert.deepEqual(mine.map((m) => m.type), [TapType.FORWARDER_QUERY, TapType.FORWARDER_QUERY, TapType.FORWARDER_RESPONSE]);
  assert.deepEqual(mine.map((m) => m.responsePort), [1, up.port, up.port]);
  for (const m of mine) {
    assert.equal(m.proto, 'udp');
    assert.equal(m.responseAddress, '127.0.0.1');
    assert.equal(m.queryAddress, '127.0.0.1', 'our end of the upstream socket');
    assert.ok(m.queryPort! > 0);
    assert.equal(m.queryTime, mine[0]!.queryTime, 'the time forward started');
  }
  assert.deepEqual(mine[1]!.queryMessage, encodeMessage(os[0]!.req.msg), 'the query as sent, with the client\'s ID');
  assert.deepEqual(decodeMessage(mine[2]!.responseMessage!), answer(os[0]!.req.msg, { addrs: ['192.0.2.20'] }), 'the reply, with the client\'s ID');
  assert.ok(mine[2]!.responseTime! >= mine[2]!.queryTime);
});

test('an upstream that resets TCP connections (force_tcp): each query fails over to the next, counted as a failed attempt; 300 at once all answered', async (t) => {
  const reset = await Upstream.start((q, c) => { if (c.proto === 'tcp') c.reset(); else c.send(answer(q, { tc: true })); });
  const good = await Upstream.start((q, c) => { c.send(answer(q, { addrs: ['192.0.2.2'] })); });
  const f = await forward(`. {\n forward . ${reset.addr} ${good.addr} {\n  policy sequential\n  force_tcp\n  max_fails 0\n }\n}`);
  cleanup(t, f, reset, good);
  const one = await f.ask('reset-one.example.');
  assert.equal(addr(one.reply), '192.0.2.2');
  assert.deepEqual(reset.queries().map((s) => s.proto), ['tcp'], 'the resetting upstream is tried once, over TCP (a reset is not retried there)');
  // Many in flight at once (the load of the faults drill, in one burst): every one answered by the second upstream.
  const outs = await Promise.all(Array.from({ length: 300 }, (_, i) => f.ask(`reset${i}.example.`)));
  const got = new Map<string, number>();
  for (const o of outs) { const k = o.err !== undefined ? o.err.message : addr(o.reply); got.set(k, (got.get(k) ?? 0) + 1); }
  assert.deepEqual([...got], [['192.0.2.2', 300]]);
  assert.equal(reset.queries().length, 301, 'one attempt each on the resetting upstream');
  assert.equal(good.queries().length, 301);
  // Both resetting: SERVFAIL once the attempts (2 per upstream) are spent, with Go's words for the reset.
  good.script = (q, c) => { if (c.proto === 'tcp') c.reset(); else c.send(answer(q)); };
  const both = await f.ask('reset-both.example.');
  assert.equal(both.rcode, 2);
  assert.match(both.err!.message, new RegExp(`^read tcp 127\\.0\\.0\\.1:\\d+->${good.addr.replaceAll('.', '\\.')}: read: connection reset by peer$`));
  assert.equal(reset.queries().filter((s) => s.name === 'reset-both.example.').length, 2);
  assert.equal(good.queries().filter((s) => s.name === 'reset-both.example.').length, 2);
});

test('max_fails with force_tcp: the health check goes over TCP too, so a resetting upstream is marked down and skipped', async (t) => {
  const reset = await Upstream.start((q, c) => { if (c.proto === 'tcp') c.reset(); else c.send(answer(q)); });
  const good = await Upstream.start((q, c) => { c.send(answer(q, { addrs: ['192.0.2.2'] })); });
  const f = await forward(`. {\n forward . ${reset.addr} ${good.addr} {\n  policy sequential\n  force_tcp\n  max_fails 1\n  health_check 20ms\n }\n}`);
  cleanup(t, f, reset, good);
  assert.equal(addr((await f.ask('hc0.example.')).reply), '192.0.2.2');
  await until('the resetting upstream is down', () => f.fwd.proxies[0]!.down(1));
  const before = reset.queries().length;
  for (let i = 1; i <= 5; i++) assert.equal(addr((await f.ask(`hc${i}.example.`)).reply), '192.0.2.2');
  assert.equal(reset.queries().length, before, 'skipped while down');
  assert.ok(reset.seen.some((s) => s.type === 2 && s.proto === 'tcp'), 'health probes (NS) over TCP');
});

test('a cached TCP connection: closed by the peer (EOF) on the query, tried again on the same upstream (ErrCachedClosed); reset, the next upstream', async (t) => {
  // The first upstream answers the first query of each connection; on the second it closes (FIN) or resets.
  let how: 'end' | 'reset' = 'end';
  const first: { port: number; seen: number; srv?: net.Server } = { port: 0, seen: 0 };
  const socks = new Set<net.Socket>();
  first.srv = net.createServer((sock) => {
    socks.add(sock);
    sock.on('error', () => {});
    sock.on('close', () => socks.delete(sock));
    let n = 0;
    let buf = Buffer.alloc(0);
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        const q = decodeMessage(buf.subarray(2, 2 + buf.readUInt16BE(0)));
        buf = buf.subarray(2 + buf.readUInt16BE(0));
        first.seen++;
        if (++n === 2) { if (how === 'end') sock.end(); else sock.resetAndDestroy(); return; }
        const out = encodeMessage(answer(q, { addrs: ['192.0.2.1'] }));
        const framed = Buffer.alloc(out.length + 2);
        framed.writeUInt16BE(out.length, 0);
        out.copy(framed, 2);
        sock.write(framed);
      }
    });
  });
  await new Promise<void>((r) => first.srv!.listen(0, '127.0.0.1', () => r()));
  first.port = (first.srv.address() as net.AddressInfo).port;
  const good = await Upstream.start((q, c) => { c.send(answer(q, { addrs: ['192.0.2.2'] })); });
  const f = await forward(`. {\n forward . 127.0.0.1:${first.port} ${good.addr} {\n  policy sequential\n  force_tcp\n  max_fails 0\n }\n}`);
  cleanup(t, f, good, { stop: async () => { for (const s of socks) s.destroy(); await new Promise<void>((r) => first.srv!.close(() => r())); } });
  assert.equal(addr((await f.ask('c1.example.')).reply), '192.0.2.1');
  assert.equal(addr((await f.ask('c2.example.')).reply), '192.0.2.1', 'EOF on the cached connection: a new connection to the same upstream');
  assert.equal(good.queries().length, 0);
  how = 'reset';
  // c2's new connection was pooled; c3 is its second query.
  assert.equal(addr((await f.ask('c3.example.')).reply), '192.0.2.2', 'reset on the cached connection: a failed attempt, the next upstream');
  assert.equal(good.queries().length, 1);
  assert.equal(first.seen, 4, 'c1, c2 twice (EOF, then a new connection), c3 once');
});
