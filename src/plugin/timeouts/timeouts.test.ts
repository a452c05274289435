import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { parse, plugin } from './setup.ts';
import { parseTable, runSetup } from '../pkg/testing.ts';
import { startServer } from '../../index.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newQuery, replyTo } from '../../wire/message.ts';
import type { Handler, PluginDefinition, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';

const NONE = { readTimeoutMs: undefined, writeTimeoutMs: undefined, idleTimeoutMs: undefined, maxTcpQueries: undefined };

test('timeouts parse', async () => {
  await parseTable('timeouts', parse, [
    ['. {\n timeouts {\n  read 30s\n }\n}', { ...NONE, readTimeoutMs: 30000 }],
    ['. {\n timeouts {\n  read 1m\n  write 2m\n  idle 3h\n }\n}', { ...NONE, readTimeoutMs: 60000, writeTimeoutMs: 120000, idleTimeoutMs: 10800000 }],
    // A bare number is seconds.
    ['. {\n timeouts {\n  idle 90\n }\n}', { ...NONE, idleTimeoutMs: 90000 }],
    ['. {\n timeouts {\n  write 1s\n  read 24h\n }\n}', { ...NONE, writeTimeoutMs: 1000, readTimeoutMs: 86400000 }],
    ['. {\n timeouts {\n  read 1h0m0.5s\n }\n}', { ...NONE, readTimeoutMs: 3600500 }],
    ['. {\n timeouts {\n  maxtcpqueries 128\n }\n}', { ...NONE, maxTcpQueries: 128 }],
    ['. {\n timeouts {\n  maxtcpqueries -1\n  idle 5s\n }\n}', { ...NONE, maxTcpQueries: -1, idleTimeoutMs: 5000 }],
    ['. {\n timeouts {\n  read 5s\n }\n timeouts {\n  read 6s\n }\n}', { ...NONE, readTimeoutMs: 6000 }],
    ['. {\n timeouts x\n}', "plugin/timeouts: plugin/timeouts: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'x'"],
    ['. {\n timeouts\n}', 'plugin/timeouts: plugin/timeouts: Corefile:2 - Error during parsing: timeouts block with no timeouts specified'],
    ['. {\n timeouts {\n }\n}', 'plugin/timeouts: plugin/timeouts: Corefile:3 - Error during parsing: timeouts block with no timeouts specified'],
    ['. {\n timeouts {\n  read\n }\n}', "plugin/timeouts: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'read'"],
    ['. {\n timeouts {\n  read 1s 2s\n }\n}', "plugin/timeouts: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after '2s'"],
    ['. {\n timeouts {\n  read 0.5s\n }\n}', "plugin/timeouts: Corefile:3 - Error during parsing: timeout provided '500ms' needs to be between 1 second and 24 hours"],
    ['. {\n timeouts {\n  read 25h\n }\n}', "plugin/timeouts: Corefile:3 - Error during parsing: timeout provided '25h0m0s' needs to be between 1 second and 24 hours"],
    ['. {\n timeouts {\n  idle 24h0m0.001s\n }\n}', "plugin/timeouts: Corefile:3 - Error during parsing: timeout provided '24h0m0.001s' needs to be between 1 second and 24 hours"],
    ['. {\n timeouts {\n  read abc\n }\n}', "plugin/timeouts: Corefile:3 - Error during parsing: failed to parse duration 'abc'"],
    ['. {\n timeouts {\n  read 99999999999999999999\n }\n}', "plugin/timeouts: Corefile:3 - Error during parsing: failed to parse duration '99999999999999999999'"],
    ['. {\n timeouts {\n  foo 5s\n }\n}', "plugin/timeouts: Corefile:3 - Error during parsing: unknown option: 'foo'"],
    // The duration is checked before the option's name, as in CoreDNS.
    ['. {\n timeouts {\n  foo bar\n }\n}', "plugin/timeouts: Corefile:3 - Error during parsing: failed to parse duration 'bar'"],
    ['. {\n timeouts {\n  maxtcpqueries 0\n }\n}', "plugin/timeouts: Corefile:3 - Error during parsing: maxtcpqueries provided '0' needs to be -1 (unlimited) or a positive integer"],
    ['. {\n timeouts {\n  maxtcpqueries -2\n }\n}', "plugin/timeouts: Corefile:3 - Error during parsing: maxtcpqueries provided '-2' needs to be -1 (unlimited) or a positive integer"],
    ['. {\n timeouts {\n  maxtcpqueries x\n }\n}', 'plugin/timeouts: Corefile:3 - Error during parsing: invalid value for maxtcpqueries \'x\': strconv.Atoi: parsing "x": invalid syntax'],
    ['. {\n timeouts {\n  maxtcpqueries 99999999999999999999\n }\n}', 'plugin/timeouts: Corefile:3 - Error during parsing: invalid value for maxtcpqueries \'99999999999999999999\': strconv.Atoi: parsing "99999999999999999999": value out of range'],
  ]);
});

test('timeouts sets the block config and adds no handler', async () => {
  const r = await runSetup(plugin, '. {\n timeouts {\n  read 2s\n  write 3s\n  idle 4s\n  maxtcpqueries 5\n }\n}');
  assert.equal(r.config.readTimeoutMs, 2000);
  assert.equal(r.config.writeTimeoutMs, 3000);
  assert.equal(r.config.idleTimeoutMs, 4000);
  assert.equal(r.config.maxTcpQueries, 5);
  assert.equal(r.factories.length, 0);
});

function frame(name: string, id: number): Buffer {
  const m = newQuery(name, 1);
  m.id = id;
  const w = encodeMessage(m);
  const out = Buffer.alloc(w.length + 2);
  out.writeUInt16BE(w.length, 0);
  out.set(w, 2);
  return out;
}

/** Connect, send `queries` frames at once, and collect the reply IDs until the server closes (or `waitMs`). */
function session(port: number, queries: number, sendAfterMs = 0, waitMs = 4000): Promise<{ ids: number[]; closedAfterMs: number | undefined }> {
  return new Promise((resolve) => {
    const ids: number[] = [];
    const s = net.connect(port, '127.0.0.1');
    const t0 = performance.now();
    let buf = Buffer.alloc(0);
    const done = (closed: boolean): void => { clearTimeout(t); s.destroy(); resolve({ ids, closedAfterMs: closed ? performance.now() - t0 : undefined }); };
    const t = setTimeout(() => { done(false); }, waitMs);
    s.on('connect', () => {
      setTimeout(() => { for (let i = 0; i < queries; i++) s.write(frame('example.org.', 100 + i)); }, sendAfterMs);
    });
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        ids.push(buf.readUInt16BE(2));
        buf = buf.subarray(2 + buf.readUInt16BE(0));
      }
    });
    s.on('error', () => {});
    s.on('close', () => { done(true); });
  });
}

test('timeouts on plain DNS-over-TCP: maxtcpqueries closes the connection after that many replies; read closes a silent one', async () => {
  const srv = await startServer({
    corefile: '.:0 {\n bind 127.0.0.1\n timeouts {\n  read 1s\n  idle 2s\n  maxtcpqueries 2\n }\n whoami\n}\n',
    log: { sink: () => {} },
  });
  try {
    const port = srv.addresses()[0]!.port;
    const three = await session(port, 3);
    assert.deepEqual(three.ids, [100, 101], 'two replies, then the connection closes');
    assert.ok(three.closedAfterMs !== undefined && three.closedAfterMs < 1000);
    // Nothing sent: closed after the 1 s read timeout (not the 3 s default).
    const silent = await session(port, 0);
    assert.ok(silent.closedAfterMs !== undefined && silent.closedAfterMs >= 900 && silent.closedAfterMs < 2500, String(silent.closedAfterMs));
    // One query, then silence: closed by the 2 s idle timeout after the reply.
    const idle = await session(port, 1);
    assert.deepEqual(idle.ids, [100]);
    assert.ok(idle.closedAfterMs !== undefined && idle.closedAfterMs >= 1900 && idle.closedAfterMs < 3500, String(idle.closedAfterMs));
  } finally {
    await srv.stop();
  }
});

/** Answers every query with a TXT reply of about 60 kB (TCP only). */
const bigReplies = {
  name: 'bigtxt',
  setup(c: { addPlugin(f: () => Handler): void }): void {
    const strings = Array.from({ length: 235 }, () => Buffer.alloc(255, 0x61));
    c.addPlugin(() => ({
      name: 'bigtxt',
      serveDNS(req: Request, w: ResponseWriter): number {
        const m = replyTo(req.msg);
        m.answer.push({ name: req.qname, type: 16, class: 1, ttl: 0, data: { strings } });
        w.writeMsg(m);
        return 0;
      },
    }));
  },
};

/** Pipeline `n` queries, read nothing for `pauseMs`, then count the replies until the server closes or all came. */
function slowReader(port: number, n: number, pauseMs: number): Promise<number> {
  return new Promise((resolve) => {
    let replies = 0;
    let buf = Buffer.alloc(0);
    const s = net.connect(port, '127.0.0.1');
    const finish = (): void => { s.destroy(); resolve(replies); };
    s.on('connect', () => {
      s.pause();
      const all = Buffer.concat(Array.from({ length: n }, (_, i) => frame('big.example.', i)));
      s.write(all);
      setTimeout(() => { s.resume(); }, pauseMs);
    });
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        replies++;
        buf = buf.subarray(2 + buf.readUInt16BE(0));
      }
      if (replies === n) finish();
    });
    s.on('error', () => {});
    s.on('close', finish);
  });
}

test('timeouts { write }: a client that stops reading for longer than the write timeout loses its connection', async () => {
  const n = 400; // ~24 MB of replies: more than the kernel buffers hold
  for (const [write, pause, all] of [['1s', 2500, false], ['10s', 2500, true]] as const) {
    const srv = await startServer({
      corefile: `.:0 {\n bind 127.0.0.1\n timeouts {\n  write ${write}\n }\n bigtxt\n}\n`,
      plugins: [{ plugin: bigReplies as unknown as PluginDefinition, before: 'whoami' }],
      log: { sink: () => {} },
    });
    try {
      const got = await slowReader(srv.addresses()[0]!.port, n, pause);
      if (all) assert.equal(got, n, `write ${write}: every reply arrives`);
      else assert.ok(got < n, `write ${write}: closed after ${got} replies`);
    } finally {
      await srv.stop();
    }
  }
});

test('timeouts of several blocks on one address: the last block that sets a value wins, as CoreDNS\'s NewServer', async () => {
  const srv = await startServer({
    corefile: '.:0 {\n bind 127.0.0.1\n timeouts {\n  maxtcpqueries 1\n  read 1s\n }\n whoami\n}\n'
      + 'example.org:0 {\n bind 127.0.0.1\n timeouts {\n  maxtcpqueries 3\n }\n whoami\n}\n',
    log: { sink: () => {} },
  });
  try {
    assert.equal(srv.addresses().length, 1);
    const port = srv.addresses()[0]!.port;
    const five = await session(port, 5);
    assert.deepEqual(five.ids, [100, 101, 102], 'the second block\'s maxtcpqueries');
    const silent = await session(port, 0);
    assert.ok(silent.closedAfterMs !== undefined && silent.closedAfterMs < 2500, 'the first block\'s read timeout still applies');
  } finally {
    await srv.stop();
  }
});
