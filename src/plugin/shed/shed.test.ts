import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { setImmediate as tick } from 'node:timers/promises';
import { parse, plugin } from './setup.ts';
import { IN_FLIGHT_MAX, STACK_DEPTH, Shed, ShedSockets, ShedWriter } from './shed.ts';
import { CaptureWriter, StubHandler, makeRequest, metricValue, parseTable, runSetup, settle } from '../pkg/testing.ts';
import type { Handler, HandlerResult, PluginDefinition, PluginLogger, Request, ResponseWriter, UdpSocket } from '../plugin.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { startServer } from '../../index.ts';
import { exchange } from '../../../test/helpers/client.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { newQuery } from '../../wire/message.ts';
import { Rcode } from '../../wire/constants.ts';

test('shed parse', async () => {
  const pre = 'plugin/shed: Corefile:';
  await parseTable('shed', parse, [
    ['. {\n shed\n}', {}],
    ['. {\n shed {\n }\n}', {}],
    ['dns://.:53 example.org {\n shed\n}', {}],
    ['. {\n shed foo\n}', `${pre}2 - Error during parsing: Wrong argument count or unexpected line ending after 'foo'`],
    ['. {\n shed {\n  x\n }\n}', `${pre}3 - Error during parsing: shed takes no options`],
    ['. {\n shed\n shed\n}', 'plugin/shed: this plugin can only be used once per Server Block'],
    ['tls://.:853 {\n shed\n}', `${pre}2 - Error during parsing: only plain DNS server blocks are supported; "tls://.:853" uses transport "tls"`],
    ['https://. {\n shed\n}', `${pre}2 - Error during parsing: only plain DNS server blocks are supported; "https://.:443" uses transport "https"`],
    ['example.org:53 grpc://example.net:53 {\n shed\n}', `${pre}2 - Error during parsing: only plain DNS server blocks are supported; "grpc://example.net.:53" uses transport "grpc"`],
    ['quic://.:853 {\n shed\n}', `${pre}2 - Error during parsing: only plain DNS server blocks are supported; "quic://.:853" uses transport "quic"`],
  ]);
});

class Log implements PluginLogger {
  readonly lines: string[] = [];
  readonly debugEnabled = true;
  debug(m: string): void { this.lines.push('[DEBUG] ' + m); }
  info(m: string): void { this.lines.push('[INFO] ' + m); }
  warning(m: string): void { this.lines.push('[WARNING] ' + m); }
  error(m: string): void { this.lines.push('[ERROR] ' + m); }
  fatal(m: string): void { this.lines.push('[FATAL] ' + m); }
}

/** A socket whose sends complete only when the test says so (a socket that cannot keep up). */
class SlowSocket implements UdpSocket {
  readonly sent: number[] = [];
  readonly callbacks: ((error: Error | null, bytes: number) => void)[] = [];
  throwing = false;
  send(msg: Uint8Array, _port: number, _address: string, callback?: (error: Error | null, bytes: number) => void): void {
    if (this.throwing) throw new Error('Not running');
    this.sent.push(msg[0]!);
    this.callbacks.push(callback!);
  }
  /** Report the `n` oldest sends done (with `error` for each, if given). */
  complete(n: number, error: Error | null = null): void {
    for (const cb of this.callbacks.splice(0, n)) cb(error, 1);
  }
}

const msg = (i: number): Uint8Array => Uint8Array.of(i & 255, i >> 8);

test('shed writer: sends directly while few are in flight, then stacks; evicts the oldest, sends the newest first', () => {
  const sock = new SlowSocket();
  const log = new Log();
  const w = new ShedWriter(sock, 'dns://:test-writer', '127.0.0.1', 1, log, 4, 2);
  for (let i = 0; i < 2; i++) w.send(msg(i), 53, '127.0.0.1');
  assert.deepEqual(sock.sent, [0, 1], 'in flight');
  for (let i = 2; i < 6; i++) w.send(msg(i), 53, '127.0.0.1');
  assert.equal(w.full(), true);
  assert.equal(w.pending(), 6);
  assert.equal(w.droppedResponse.value, 0);
  w.send(msg(6), 53, '127.0.0.1');
  w.send(msg(7), 53, '127.0.0.1');
  assert.equal(w.droppedResponse.value, 2, '2 and 3 evicted');
  assert.equal(w.pending(), 6);
  sock.complete(1);
  assert.deepEqual(sock.sent, [0, 1, 7], 'the newest goes next');
  assert.equal(w.full(), false);
  sock.complete(2);
  assert.deepEqual(sock.sent, [0, 1, 7, 6, 5]);
  sock.complete(2, new Error('send ENOBUFS'));
  assert.deepEqual(sock.sent, [0, 1, 7, 6, 5, 4]);
  assert.equal(w.droppedResponse.value, 4, 'two failed sends counted');
  sock.complete(1);
  assert.equal(w.pending(), 0);
  // Once the stack is empty and the socket keeps up, replies go straight out again.
  w.send(msg(8), 53, '127.0.0.1');
  assert.deepEqual(sock.sent, [0, 1, 7, 6, 5, 4, 8]);
  sock.complete(1);
  sock.throwing = true;
  w.send(msg(9), 53, '127.0.0.1');
  assert.equal(w.droppedResponse.value, 5, 'a send on a closed socket is counted');
  assert.equal(w.pending(), 0);
  assert.deepEqual(log.lines, [
    '[DEBUG] Deferred response write failed: send ENOBUFS',
    '[DEBUG] Deferred response write failed: send ENOBUFS',
    '[DEBUG] Deferred response write failed: Not running',
  ]);
});

test('shed handler: drops UDP queries while the socket\'s stack is full; TCP and other sockets pass', async () => {
  const sock = new SlowSocket();
  const sockets = new ShedSockets();
  const w = sockets.add(new ShedWriter(sock, 'dns://:test-handler', '127.0.0.1', 53, new Log(), 2, 1));
  const next = new StubHandler('next', () => Rcode.NOERROR);
  const h = new Shed(sockets, next);
  const serve = async (o: Parameters<typeof makeRequest>[1]): Promise<[number, number]> => {
    const cw = new CaptureWriter();
    const rc = await settle(h.serveDNS(makeRequest('a.example.', o), cw));
    return [rc, cw.msgs.length];
  };
  assert.deepEqual(await serve({}), [Rcode.NOERROR, 0]);
  assert.equal(next.calls, 1);
  for (let i = 0; i < 3; i++) w.send(msg(i), 53, '127.0.0.1');
  assert.equal(w.full(), true);
  assert.deepEqual(await serve({}), [Rcode.NOERROR, 0]);
  assert.equal(next.calls, 1, 'dropped before the rest of the chain');
  assert.equal(w.droppedQuery.value, 1);
  await serve({ proto: 'tcp' });
  assert.equal(next.calls, 2, 'TCP is never shed');
  await serve({ local: '192.0.2.1' });
  assert.equal(next.calls, 3, 'another socket');
  sock.complete(1);
  await serve({});
  assert.equal(next.calls, 4, 'not full any more');
  assert.equal(w.droppedQuery.value, 1);
  await assert.rejects(async () => settle(new Shed(sockets, undefined).serveDNS(makeRequest('a.', { proto: 'tcp' }), new CaptureWriter())),
    /plugin\/shed: no next plugin found/);
});

test('shed: setup installs the UDP writer and the handler', async () => {
  const r = await runSetup(plugin, '. {\n shed\n}');
  assert.equal(r.chain(new StubHandler('next', () => 0)).name, 'shed');
  const factory = (r.config as unknown as { udpWriter: unknown }).udpWriter;
  assert.equal(typeof factory, 'function');
});

/** A test plugin that holds every query (but `now.*`) until the test releases them all at once: a burst of replies in one tick. */
function holdPlugin(held: { count: number; release: () => void }): PluginDefinition {
  const waiting: (() => void)[] = [];
  held.release = () => { for (const f of waiting.splice(0)) f(); };
  return {
    name: 'hold',
    setup(c) {
      c.addPlugin((next) => ({
        name: 'hold',
        serveDNS(req: Request, w: ResponseWriter): HandlerResult {
          if (req.name.startsWith('now.')) return nextOrFailure('hold', next, req, w);
          held.count++;
          return new Promise<void>((resolve) => { waiting.push(resolve); }).then(() => nextOrFailure('hold', next, req, w));
        },
      } satisfies Handler));
    },
  };
}

test('shed on a real socket: a burst beyond the budget evicts the oldest replies, counted, and the server goes on', async () => {
  const held = { count: 0, release: () => {} };
  const server = await startServer({
    dnsPort: 0, corefile: 'shed-e2e.example:0 {\n  shed\n  hold\n  whoami\n}\n', plugins: [{ plugin: holdPlugin(held), before: 'whoami' }],
  });
  const labels = (reason: string): Record<string, string> => ({ server: 'dns://:0', reason });
  const client = dgram.createSocket('udp4');
  try {
    const query0 = await metricValue('coredns_shed_dropped_total', labels('query'), server.metrics);
    const response0 = await metricValue('coredns_shed_dropped_total', labels('response'), server.metrics);
    const got = new Set<number>();
    client.on('message', (m) => { got.add(m.readUInt16BE(0)); });
    await new Promise<void>((resolve) => { client.bind(0, '127.0.0.1', resolve); });
    const send = (name: string, id: number): void => {
      const q = newQuery(name, 1, 1);
      q.id = id;
      client.send(encodeMessage(q), server.port, '127.0.0.1');
    };
    // N held queries, sent in small bursts so that no socket buffer overflows.
    const N = 2000;
    for (let i = 0; i < N; i++) {
      send(`q${i}.shed-e2e.example.`, i);
      if (i % 50 === 49) {
        const want = i + 1;
        const deadline = Date.now() + 5000;
        while (held.count < want && Date.now() < deadline) await tick();
      }
    }
    assert.equal(held.count, N, 'every query held');
    // All N replies are written in one tick: IN_FLIGHT_MAX go to the socket, STACK_DEPTH wait, the oldest others are evicted.
    held.release();
    const until = Date.now() + 3000;
    do await new Promise((r) => setTimeout(r, 50)); while (got.size === 0 && Date.now() < until);
    await new Promise((r) => setTimeout(r, 100));
    const evicted = N - IN_FLIGHT_MAX - STACK_DEPTH;
    assert.equal((await metricValue('coredns_shed_dropped_total', labels('response'), server.metrics)) - response0, evicted);
    assert.equal((await metricValue('coredns_shed_dropped_total', labels('query'), server.metrics)) - query0, 0, 'the socket kept up: no query shed');
    assert.ok(got.size > 0, 'replies were sent');
    // Pushed in query order: 0..IN_FLIGHT_MAX-1 went straight out; the next `evicted` ones were pushed out of the stack.
    for (let id = IN_FLIGHT_MAX; id < IN_FLIGHT_MAX + evicted; id++) assert.ok(!got.has(id), `evicted reply ${id} was sent`);
    // The server goes on answering.
    const reply = decodeMessage(await exchange(server.port, encodeMessage(newQuery('now.shed-e2e.example.', 1, 1))));
    assert.equal(reply.rcode, Rcode.NOERROR);
    assert.ok(reply.additional.length > 0, 'whoami answered');
  } finally {
    client.close();
    await server.stop();
  }
});

test('shed across reloads: each configuration gets its own writer; replies in flight go out through theirs', async () => {
  const held = { count: 0, release: () => {} };
  const corefile = (extra: string): string => `shed-reload.example:0 {\n  ${extra}\n  hold\n  whoami\n}\n`;
  const server = await startServer({ dnsPort: 0, corefile: corefile('shed'), plugins: [{ plugin: holdPlugin(held), before: 'whoami' }] });
  const ask = (name: string): Promise<Buffer> => exchange(server.port, encodeMessage(newQuery(name, 1, 1)), { timeoutMs: 3000 });
  try {
    const inFlight = ask('held.shed-reload.example.');
    const deadline = Date.now() + 3000;
    while (held.count < 1 && Date.now() < deadline) await tick();
    assert.equal(held.count, 1);
    assert.equal(await server.reload(corefile('shed\n  # reloaded')), undefined);
    assert.equal(decodeMessage(await ask('now.shed-reload.example.')).rcode, Rcode.NOERROR, 'answered by the new configuration');
    held.release();
    assert.equal(decodeMessage(await inFlight).rcode, Rcode.NOERROR, 'the held reply went out through the old writer');
    // Without shed, replies go straight to the socket again.
    assert.equal(await server.reload(corefile('# no shed')), undefined);
    assert.equal(decodeMessage(await ask('now.shed-reload.example.')).rcode, Rcode.NOERROR);
  } finally {
    await server.stop();
  }
});
