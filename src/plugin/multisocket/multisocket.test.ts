import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { availableParallelism } from 'node:os';
import { parse, MAX_NUM_SOCKETS } from './setup.ts';
import { parseTable } from '../pkg/testing.ts';
import { startServer } from '../../index.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { newQuery } from '../../wire/message.ts';
import { RRType } from '../../wire/constants.ts';
import { freePort } from '../../../test/helpers/server.ts';

const pre = 'plugin/multisocket: Corefile:';

test('multisocket parse: CoreDNS multisocket_test cases', async () => {
  await parseTable('multisocket', parse, [
    ['. {\n multisocket\n}', availableParallelism()],
    ['. {\n multisocket 2\n}', 2],
    ['. {\n multisocket 1024\n}', MAX_NUM_SOCKETS],
    ['. {\n multisocket 1025\n}', 'plugin/multisocket: num sockets exceeds maximum (1024): 1025'],
    ['. {\n multisocket 0\n}', 'plugin/multisocket: num sockets can not be zero or negative: 0'],
    ['. {\n multisocket -1\n}', 'plugin/multisocket: num sockets can not be zero or negative: -1'],
    ['. {\n multisocket 2 3\n}', `${pre}2 - Error during parsing: Wrong argument count or unexpected line ending after '3'`],
    ['. {\n multisocket 2\n multisocket 3\n}', `${pre}3 - Error during parsing: Wrong argument count or unexpected line ending after 'multisocket'`],
    ['. {\n multisocket abc\n}', 'plugin/multisocket: invalid num sockets: strconv.Atoi: parsing "abc": invalid syntax'],
    ['. {\n multisocket 99999999999999999999\n}', 'plugin/multisocket: invalid num sockets: strconv.Atoi: parsing "99999999999999999999": value out of range'],
  ]);
});

/** Sockets bound to `port` on 127.0.0.1 as the kernel lists them (ss): UDP, then listening TCP. */
function boundSockets(port: number): { udp: number; tcp: number } {
  const count = (args: string[]): number => execFileSync('ss', ['-Han', ...args, `sport = :${port}`], { encoding: 'utf8' })
    .split('\n').filter((l) => l.trim() !== '').length;
  return { udp: count(['-u']), tcp: count(['-t', '-l']) };
}

function udpQuery(port: number): Promise<number> {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    const t = setTimeout(() => { s.close(); resolve(-1); }, 1000);
    s.on('message', (m) => { clearTimeout(t); s.close(); resolve(decodeMessage(m).rcode); });
    // A fresh socket each time: a new source port, so SO_REUSEPORT's hash spreads the queries over the sockets.
    s.send(encodeMessage(newQuery('example.org.', RRType.A)), port, '127.0.0.1');
  });
}

function tcpQuery(port: number): Promise<number> {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1');
    const q = encodeMessage(newQuery('example.org.', RRType.A));
    const f = Buffer.alloc(q.length + 2);
    f.writeUInt16BE(q.length, 0);
    q.copy(f, 2);
    let buf = Buffer.alloc(0);
    const t = setTimeout(() => { c.destroy(); resolve(-1); }, 1000);
    c.on('connect', () => { c.write(f); });
    c.on('error', () => { clearTimeout(t); resolve(-1); });
    c.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) { clearTimeout(t); c.destroy(); resolve(decodeMessage(buf.subarray(2)).rcode); }
    });
  });
}

test('multisocket 3: three UDP and three TCP sockets on the port, every one answering; reloads keep or replace them', async () => {
  const port = await freePort();
  const other = await freePort();
  const lines: string[] = [];
  const conf = (n: number): string => `.:${port} {\n bind 127.0.0.1\n multisocket ${n}\n whoami\n}\n` +
    // The count of an address is its first block's (CoreDNS's group[0]); a later block does not change it.
    `example.org:${port} {\n bind 127.0.0.1\n multisocket 5\n whoami\n}\n` +
    `.:${other} {\n bind 127.0.0.1\n whoami\n}\n`;
  const srv = await startServer({ corefile: conf(3), log: { sink: (l) => { lines.push(l); } } });
  try {
    assert.deepEqual(boundSockets(port), { udp: 3, tcp: 3 });
    assert.deepEqual(boundSockets(other), { udp: 1, tcp: 1 });
    // 120 queries from 120 source ports: with one socket not served, about a third would go unanswered.
    const rcodes = await Promise.all(Array.from({ length: 120 }, () => udpQuery(port)));
    assert.deepEqual(rcodes.filter((r) => r !== 0), []);
    const tcp = await Promise.all(Array.from({ length: 30 }, () => tcpQuery(port)));
    assert.deepEqual(tcp.filter((r) => r !== 0), []);
    // A reload with the same count keeps the sockets; another count replaces them.
    assert.equal(await srv.reload(conf(3)), undefined);
    assert.deepEqual(boundSockets(port), { udp: 3, tcp: 3 });
    assert.equal(await srv.reload(conf(2)), undefined);
    assert.deepEqual(boundSockets(port), { udp: 2, tcp: 2 });
    const after = await Promise.all(Array.from({ length: 60 }, () => udpQuery(port)));
    assert.deepEqual(after.filter((r) => r !== 0), []);
  } finally {
    await srv.stop();
  }
  assert.deepEqual(boundSockets(port), { udp: 0, tcp: 0 });
});

test('multisocket: each socket prints its banner lines, as each of CoreDNS\'s servers does', async () => {
  const port = await freePort();
  const srv = await startServer({ corefile: `.:${port} {\n multisocket 3\n whoami\n}\nexample.org:${port} {\n whoami\n}\n`, log: { sink: () => { /* quiet */ } } });
  try {
    // Through the runtime's instance: the lines the CLI prints.
    const lines = (srv as unknown as { runtime: { instance: { bannerLines(): string[] } } }).runtime.instance.bannerLines();
    assert.deepEqual(lines, [`.:${port}`, `example.org.:${port}`, `.:${port}`, `example.org.:${port}`, `.:${port}`, `example.org.:${port}`]);
  } finally {
    await srv.stop();
  }
});

test('multisocket on tls:// and https:// addresses: that many TCP listeners each', async () => {
  const tlsPort = await freePort();
  const httpsPort = await freePort();
  const srv = await startServer({
    corefile: `tls://.:${tlsPort} {\n bind 127.0.0.1\n multisocket 2\n whoami\n}\nhttps://.:${httpsPort} {\n bind 127.0.0.1\n multisocket 3\n whoami\n}\n`,
    log: { sink: () => { /* quiet */ } },
  });
  try {
    assert.deepEqual(boundSockets(tlsPort), { udp: 0, tcp: 2 });
    assert.deepEqual(boundSockets(httpsPort), { udp: 0, tcp: 3 });
    // Without a `tls` certificate a tls:// key serves plain DNS over TCP (as CoreDNS): every listener answers.
    const tcp = await Promise.all(Array.from({ length: 30 }, () => tcpQuery(tlsPort)));
    assert.deepEqual(tcp.filter((r) => r !== 0), []);
  } finally {
    await srv.stop();
  }
});
