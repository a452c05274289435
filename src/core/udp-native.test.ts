// The DNS listener's UDP half on whichever path this process runs (the batched native socket of native/udp.c, or
// node:dgram with NODENS_NATIVE=0): replies on a wildcard listener leave from the address queried (native), bursts
// larger than one batch, SO_REUSEPORT between two listeners, a datagram of 60 000 bytes, a close while queries
// keep arriving, an exception thrown while a batch is handled, and a send the kernel refuses.

import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { DnsListener } from './listener.ts';
import { NativeUdp, udpAddon, udpPath } from './udp-native.ts';
import { Logger } from './log.ts';
import { LineageStore } from './instance.ts';
import type { RoutedBlock, ServeTable } from './serve.ts';
import type { Handler, UdpSocket } from '../plugin/plugin.ts';
import { encodeMessage } from '../wire/encode.ts';
import { decodeMessage } from '../wire/decode.ts';
import { newQuery, replyTo } from '../wire/message.ts';
import { Rcode, RRClass, RRType } from '../wire/constants.ts';
import type { Message } from '../wire/types.ts';

const native = udpAddon() !== undefined;

function makeTable(chain: Handler): ServeTable {
  const zones = new Map<string, RoutedBlock>([['.', { zone: '.', chain, filters: [], view: '', collect: undefined, next: undefined }]]);
  return { name: 'dns://:0', zones, zoneLengths: new Set([1]), classChaos: false, debug: false, stacktrace: false, log: new Logger(), lineage: new LineageStore(), ednsSupported: new Set() };
}

/** Answers TXT "<label>:<qname>"; counts what it served. */
function echo(label: string, served = { n: 0 }): Handler {
  return {
    name: 'echo',
    serveDNS(req, w) {
      served.n++;
      const r = replyTo(req.msg);
      r.answer.push({ name: req.qname, type: RRType.TXT, class: RRClass.IN, ttl: 0, data: { strings: [Buffer.from(`${label}:${req.qname}`)] } });
      w.writeMsg(r);
      return Rcode.NOERROR;
    },
  };
}

function q(name: string, id: number): Buffer {
  const m = newQuery(name, RRType.TXT);
  m.id = id;
  return encodeMessage(m);
}

function txtOf(m: Message): string {
  return Buffer.from((m.answer[0]!.data as { strings: Uint8Array[] }).strings[0]!).toString();
}

/** Sends `msgs` from `sock` and collects replies (with their source) until `want` arrived or `ms` passed. */
function collect(sock: dgram.Socket, want: number, ms: number): Promise<{ msg: Message; from: string }[]> {
  return new Promise((resolve) => {
    const got: { msg: Message; from: string }[] = [];
    const done = (): void => { clearTimeout(t); sock.removeListener('message', on); resolve(got); };
    const on = (b: Buffer, rinfo: dgram.RemoteInfo): void => { got.push({ msg: decodeMessage(b), from: rinfo.address }); if (got.length >= want) done(); };
    const t = setTimeout(done, ms);
    sock.on('message', on);
  });
}

function bound(type: 'udp4' | 'udp6', connectTo?: [number, string]): Promise<dgram.Socket> {
  // A large receive buffer: a burst of replies must not overflow the client's own socket.
  const s = dgram.createSocket({ type, recvBufferSize: 4 << 20 });
  return new Promise((resolve, reject) => {
    s.once('error', reject);
    if (connectTo === undefined) s.bind(0, type === 'udp4' ? '127.0.0.1' : '::1', () => { resolve(s); });
    else s.connect(connectTo[0], connectTo[1], () => { resolve(s); });
  });
}

test('NODENS_REQUIRE_NATIVE=1 (CI): the UDP addon is loaded unless NODENS_NATIVE=0 asks for the fallback', () => {
  if (process.env.NODENS_NATIVE === '0') {
    assert.equal(native, false);
    assert.equal(udpPath(), 'node:dgram (NODENS_NATIVE=0)');
  } else if (process.env.NODENS_REQUIRE_NATIVE === '1') {
    assert.ok(native, udpPath());
  }
  assert.match(udpPath(), native ? /^native/ : /^node:dgram \(.+\)$/);
});

describe(`UDP listener (${native ? 'native' : 'dgram'} path)`, { timeout: 30000 }, () => {
  test('a wildcard listener answers 127.0.0.2 from 127.0.0.2 and ::1 from ::1 (native: IP_PKTINFO)', async () => {
    const l = new DnsListener('', 0, makeTable(echo('w')));
    await l.listen();
    try {
      // A connected socket takes datagrams from its peer only: an answer from another source never arrives.
      for (const [type, addr] of [['udp4', '127.0.0.2'], ['udp4', '127.0.0.1'], ['udp6', '::1']] as const) {
        const c = await bound(type, [l.port, addr]);
        try {
          const p = collect(c, 1, 800);
          c.send(q(`to.${addr.replaceAll(':', '-')}.`, 7));
          const got = await p;
          if (native || addr !== '127.0.0.2') {
            assert.equal(got.length, 1, `an answer from ${addr}`);
            assert.equal(got[0]!.from, addr);
          } else {
            // node:dgram cannot choose the source: the kernel's (127.0.0.1) is not the address queried.
            assert.equal(got.length, 0);
          }
        } finally { c.close(); }
      }
      // An unconnected client sees the source too.
      const u = await bound('udp4');
      try {
        const p = collect(u, 1, 800);
        u.send(q('x.', 8), l.port, '127.0.0.2');
        const got = await p;
        assert.equal(got.length, 1);
        assert.equal(got[0]!.from, native ? '127.0.0.2' : '127.0.0.1');
      } finally { u.close(); }
    } finally { await l.close(100); }
  });

  test('a burst of 500 queries (many batches) is answered in full, each reply to its query', async () => {
    const l = new DnsListener('127.0.0.1', 0, makeTable(echo('b')));
    await l.listen();
    const c = await bound('udp4');
    try {
      const p = collect(c, 500, 5000);
      for (let i = 0; i < 500; i++) c.send(q(`n${i}.burst.`, i), l.port, '127.0.0.1');
      const got = await p;
      assert.equal(got.length, 500);
      const ids = new Set(got.map((g) => { assert.equal(txtOf(g.msg), `b:n${g.msg.id}.burst.`); return g.msg.id; }));
      assert.equal(ids.size, 500);
    } finally { c.close(); await l.close(100); }
  });

  test('two listeners on one port (SO_REUSEPORT, as -workers): the kernel spreads clients, all are answered', async () => {
    const na = { n: 0 }, nb = { n: 0 };
    const a = new DnsListener('127.0.0.1', 0, makeTable(echo('a', na)));
    await a.listen();
    const b = new DnsListener('127.0.0.1', a.port, makeTable(echo('b', nb)));
    await b.listen();
    const clients: dgram.Socket[] = [];
    try {
      for (let i = 0; i < 24; i++) clients.push(await bound('udp4'));
      const answers = await Promise.all(clients.map((c, i) => {
        const p = collect(c, 1, 2000);
        c.send(q(`c${i}.`, i), a.port, '127.0.0.1');
        return p;
      }));
      assert.ok(answers.every((g) => g.length === 1), 'every client answered');
      assert.equal(na.n + nb.n, 24);
      // 24 source ports hashed onto two sockets: all on one would be a 1-in-8-million chance.
      assert.ok(na.n > 0 && nb.n > 0, `spread ${na.n}/${nb.n}`);
    } finally {
      for (const c of clients) c.close();
      await a.close(100);
      await b.close(100);
    }
  });

  test('a 60 000-byte query (an EDNS option that large) is read whole and answered', async () => {
    let seenLen = 0;
    const l = new DnsListener('127.0.0.1', 0, makeTable({ name: 'len', serveDNS(req, w) { seenLen = req.length; return echo('big').serveDNS(req, w); } }));
    await l.listen();
    const c = await bound('udp4');
    try {
      const m = newQuery('big.', RRType.TXT);
      m.id = 99;
      m.edns = { udpSize: 4096, do: false, version: 0, z: 0, options: [{ code: 65001, data: new Uint8Array(60000) }] };
      const wire = encodeMessage(m);
      assert.ok(wire.length > 60000);
      const p = collect(c, 1, 2000);
      c.send(wire, l.port, '127.0.0.1');
      const got = await p;
      assert.equal(got.length, 1);
      assert.equal(got[0]!.msg.id, 99);
      assert.equal(seenLen, wire.length);
      // The next (small) one is fine too.
      const p2 = collect(c, 1, 2000);
      c.send(q('small.', 100), l.port, '127.0.0.1');
      assert.equal((await p2)[0]?.msg.id, 100);
    } finally { c.close(); await l.close(100); }
  });

  test('close() while queries keep arriving: it completes, nothing breaks, the port is free again', async () => {
    const l = new DnsListener('127.0.0.1', 0, makeTable(echo('c')));
    await l.listen();
    const port = l.port;
    const c = await bound('udp4');
    let replies = 0;
    c.on('message', () => { replies++; });
    let sending = true;
    let id = 0;
    const blast = (): void => {
      if (!sending) return;
      for (let i = 0; i < 20; i++) c.send(q('flood.', id++ & 0xffff), port, '127.0.0.1');
      setImmediate(blast);
    };
    blast();
    try {
      await new Promise((r) => setTimeout(r, 150));
      await l.close(200);
      await new Promise((r) => setTimeout(r, 100));
      assert.ok(replies > 0);
      const after = replies;
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(replies, after, 'no reply once closed');
      // The port can be bound again (the socket is really closed).
      const again = new DnsListener('127.0.0.1', port, makeTable(echo('again')));
      await again.listen();
      sending = false;
      const s = await bound('udp4');
      try {
        const p = collect(s, 1, 2000);
        s.send(q('later.', 5), port, '127.0.0.1');
        assert.equal(txtOf((await p)[0]!.msg), 'again:later.');
      } finally { s.close(); await again.close(100); }
    } finally { sending = false; c.close(); }
  });

  test('replies written asynchronously (a forwarded query) are sent too, and an async chain keeps its query bytes', async () => {
    const l = new DnsListener('127.0.0.1', 0, makeTable({
      name: 'later',
      async serveDNS(req, w) {
        const before = Buffer.from(req.wire);
        await new Promise((r) => setTimeout(r, 20));
        // Other datagrams arrived meanwhile: this query's bytes must be untouched.
        assert.deepEqual(Buffer.from(req.wire), before);
        return echo('later').serveDNS(req, w);
      },
    }));
    await l.listen();
    const c = await bound('udp4');
    try {
      const p = collect(c, 100, 5000);
      for (let i = 0; i < 100; i++) c.send(q(`a${i}.`, i), l.port, '127.0.0.1');
      const got = await p;
      assert.equal(got.length, 100);
      for (const g of got) assert.equal(txtOf(g.msg), `later:a${g.msg.id}.`);
    } finally { c.close(); await l.close(100); }
  });
});

test('an exception while a batch is handled reaches uncaughtException; the rest of the batch and later queries are answered', () => {
  // In a child process: the test runner treats an uncaught exception as its own failure.
  const mod = fileURLToPath(new URL('./udp-native.ts', import.meta.url));
  const script = `
    import dgram from 'node:dgram';
    import { NativeUdp, udpAddon } from ${JSON.stringify(mod)};
    const a = udpAddon();
    if (a === undefined) { console.log(JSON.stringify({ native: false })); process.exit(0); }
    let caught = 0;
    process.on('uncaughtException', (e) => { if (e.message === 'boom') caught++; else throw e; });
    const sock = NativeUdp.open(a, '127.0.0.1', 0, 0, (wire, remote, port, sink) => {
      if (wire[12] === 0x62) throw new Error('boom');
      sink.send(wire);
    });
    const c = dgram.createSocket('udp4');
    const got = [];
    c.on('message', (m) => { got.push(m.toString('latin1', 12)); });
    c.bind(0, '127.0.0.1', () => {
      // One batch: ok1, boom, ok2 (sent back to back); later: ok3.
      for (const s of ['ok1', 'bad', 'ok2']) c.send(Buffer.from('0123456789ab' + s, 'latin1'), sock.port, '127.0.0.1');
      setTimeout(() => c.send(Buffer.from('0123456789ab' + 'ok3', 'latin1'), sock.port, '127.0.0.1'), 200);
      setTimeout(async () => { c.close(); await sock.close(); console.log(JSON.stringify({ native: true, caught, got: got.sort() })); }, 500);
    });
  `;
  const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 10000 })) as { native: boolean; caught?: number; got?: string[] };
  assert.equal(out.native, native);
  if (!native) return;
  assert.equal(out.caught, 1);
  assert.deepEqual(out.got, ['ok1', 'ok2', 'ok3']);
});

test('a send that fails (broadcast without SO_BROADCAST) reports its error to the callback; the reply queued after it still leaves', async () => {
  const a = udpAddon();
  const recv = await bound('udp4');
  let sock: UdpSocket;
  let close: () => Promise<void>;
  if (a !== undefined) {
    const n = NativeUdp.open(a, '127.0.0.1', 0, 0, () => { /* nothing received */ });
    sock = n;
    close = () => n.close();
  } else {
    const d = await bound('udp4');
    sock = d;
    close = () => new Promise((r) => { d.close(() => { r(); }); });
  }
  try {
    const got = collect(recv, 1, 2000);
    const results = await new Promise<(string | null)[]>((resolve) => {
      const out: (string | null)[] = [];
      const cb = (i: number) => (err: Error | null): void => { out[i] = err === null ? null : 'error'; if (out.filter((x) => x !== undefined).length === 2) resolve(out); };
      // Both in one flush on the native path: the failing entry is skipped, the next one sent.
      sock.send(q('bad.', 1), 53, '255.255.255.255', cb(0));
      sock.send(q('good.', 2), recv.address().port, '127.0.0.1', cb(1));
    });
    assert.deepEqual(results, ['error', null]);
    const r = await got;
    assert.equal(r.length, 1);
    assert.equal(r[0]!.msg.id, 2);
  } finally { recv.close(); await close(); }
});
