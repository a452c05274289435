import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import tls from 'node:tls';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PluginLogger } from '../plugin.ts';
import { DnstapOutput, splitHostPort, type OutputOptions } from './io.ts';
import { CONTENT_TYPE, CONTROL_ACCEPT, CONTROL_FINISH, CONTROL_READY, CONTROL_START, CONTROL_STOP, FrameEncoder, readControl } from './encode.ts';
import { TapType } from '../pkg/dnstap.ts';
import { Capture, decodeTap, readFstrmFile, requireTool } from './testutil.ts';

class Log implements PluginLogger {
  readonly lines: string[] = [];
  readonly debugEnabled = false;
  debug(m: string): void { this.lines.push('[DEBUG] ' + m); }
  info(m: string): void { this.lines.push('[INFO] ' + m); }
  warning(m: string): void { this.lines.push('[WARNING] ' + m); }
  error(m: string): void { this.lines.push('[ERROR] ' + m); }
  fatal(m: string): void { this.lines.push('[FATAL] ' + m); }
}

const env = { identity: Buffer.from('t'), version: Buffer.from('v') };
const enc = new FrameEncoder();
const frame = (port: number): Buffer => enc.frame(env, undefined, {
  type: TapType.CLIENT_QUERY, proto: 'udp', queryAddress: '127.0.0.1', queryPort: port, queryTime: Date.now(),
});

function output(o: Partial<OutputOptions> & Pick<OutputOptions, 'proto' | 'endpoint'>, log: Log): DnstapOutput {
  return new DnstapOutput({ queueSize: 10000, writeBuffer: 1 << 20, skipVerify: false, timeoutMs: 1000, errorCheckMs: 200, ...o }, log);
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => { resolve(p); });
    });
  });
}

const dir = mkdtempSync(join(tmpdir(), 'dnstap-io-'));

for (const kind of ['unix', 'tcp'] as const) {
  test(`output: frames reach fstrm_capture over ${kind} (READY/ACCEPT/START, data, STOP/FINISH)`, async () => {
    const out = join(dir, `${kind}.fstrm`);
    const port = await freePort();
    const sock = join(dir, `${kind}.sock`);
    const cap = await Capture.start(kind === 'unix' ? { unix: sock } : { port }, out);
    const log = new Log();
    const o = output({ proto: kind, endpoint: kind === 'unix' ? sock : `127.0.0.1:${port}` }, log);
    try {
      await o.start();
      assert.deepEqual(log.lines, []);
      for (let i = 0; i < 100; i++) o.send(frame(1000 + i));
      for (let i = 0; i < 100 && o.written < 100; i++) await sleep(10);
      await o.close();
      // fstrm_capture saw a clean end of the session (STOP answered with FINISH).
      assert.ok(await cap.waitFor(/closing \(read 100 frames/), cap.log);
    } finally {
      await cap.stop();
    }
    const frames = readFstrmFile(out);
    assert.equal(frames.length, 100);
    assert.deepEqual(frames.map((f) => decodeTap(f).message.find((x) => x[0] === 'query_port')![1]), Array.from({ length: 100 }, (_, i) => 1000 + i));
  });
}

test('output: no receiver: CoreDNS log line at start, frames dropped and counted, reconnect when it appears', async () => {
  const sock = join(dir, 'late.sock');
  const log = new Log();
  const o = output({ proto: 'unix', endpoint: sock }, log);
  await o.start();
  assert.deepEqual(log.lines, [`[ERROR] No connection to dnstap endpoint: dial unix ${sock}: connect: no such file or directory`]);
  assert.equal(o.accepting, false);
  for (let i = 0; i < 5; i++) o.send(frame(i));
  await sleep(300);
  assert.ok(log.lines.includes('[WARNING] Dropped dnstap messages: 5'), log.lines.join('\n'));
  const out = join(dir, 'late.fstrm');
  const cap = await Capture.start({ unix: sock }, out);
  try {
    for (let i = 0; i < 100 && !o.accepting; i++) await sleep(20);
    assert.equal(o.accepting, true);
    o.send(frame(7));
    for (let i = 0; i < 100 && o.written < 1; i++) await sleep(10);
    await o.close();
    assert.ok(await cap.waitFor(/closing \(read 1 frames/), cap.log);
  } finally {
    await cap.stop();
  }
  assert.equal(readFstrmFile(out).length, 1);
});

test('output: a receiver that goes away: dialled again at once, then by the error check', async () => {
  const sock = join(dir, 'gone.sock');
  const out = join(dir, 'gone.fstrm');
  let cap = await Capture.start({ unix: sock }, out);
  const log = new Log();
  const o = output({ proto: 'unix', endpoint: sock }, log);
  try {
    await o.start();
    o.send(frame(1));
    for (let i = 0; i < 100 && o.written < 1; i++) await sleep(10);
    await cap.stop();
    for (let i = 0; i < 100 && o.accepting; i++) await sleep(20);
    assert.equal(o.accepting, false);
    cap = await Capture.start({ unix: sock }, join(dir, 'gone2.fstrm'));
    for (let i = 0; i < 100 && !o.accepting; i++) await sleep(20);
    assert.equal(o.accepting, true);
    o.send(frame(2));
    for (let i = 0; i < 100 && o.written < 2; i++) await sleep(10);
    await o.close();
    assert.ok(await cap.waitFor(/closing \(read 1 frames/), cap.log);
  } finally {
    await o.close();
    await cap.stop();
  }
  assert.deepEqual(readFstrmFile(join(dir, 'gone2.fstrm')).map((f) => decodeTap(f).message.find((x) => x[0] === 'query_port')![1]), [2]);
});

/** A receiver that completes the handshake and then reads nothing (a stalled sink), or answers `accept`. */
function fakeReceiver(accept: Buffer | undefined, onControl?: (type: number) => void): Promise<{ server: net.Server; port: number; conns: net.Socket[] }> {
  return new Promise((resolve) => {
    const conns: net.Socket[] = [];
    const server = net.createServer((c) => {
      conns.push(c);
      let buf = Buffer.alloc(0);
      const onData = (d: Buffer): void => {
        buf = Buffer.concat([buf, d]);
        for (;;) {
          const r = readControl(buf);
          if (r === undefined) return;
          buf = buf.subarray(r.used);
          onControl?.(r.control.type);
          if (r.control.type === CONTROL_READY) {
            assert.deepEqual(r.control.contentTypes, [CONTENT_TYPE]);
            c.write(accept ?? ctl(CONTROL_ACCEPT, CONTENT_TYPE));
          } else if (r.control.type === CONTROL_START) {
            assert.deepEqual(r.control.contentTypes, [CONTENT_TYPE]);
            c.off('data', onData);
            c.pause(); // stalled: never reads again
            if (onControl !== undefined) {
              // Watch for STOP without draining data frames: read the tail on demand.
              c.resume();
              c.on('data', (x: Buffer) => {
                if (x.length >= 12 && x.readUInt32BE(x.length - 12) === 0 && x.readUInt32BE(x.length - 4) === CONTROL_STOP) {
                  onControl(CONTROL_STOP);
                  c.write(ctl(CONTROL_FINISH));
                }
              });
            }
            return;
          }
        }
      };
      c.on('data', onData);
      c.on('error', () => { /* test end */ });
    });
    server.listen(0, '127.0.0.1', () => { resolve({ server, port: (server.address() as net.AddressInfo).port, conns }); });
  });
}

function ctl(type: number, ct?: Buffer): Buffer {
  const body = ct === undefined ? 4 : 12 + ct.length;
  const b = Buffer.alloc(8 + body);
  b.writeUInt32BE(body, 4);
  b.writeUInt32BE(type, 8);
  if (ct !== undefined) {
    b.writeUInt32BE(1, 12);
    b.writeUInt32BE(ct.length, 16);
    ct.copy(b, 20);
  }
  return b;
}

test('output: a stalled receiver never blocks the caller; the queue is bounded and the excess dropped', async () => {
  const r = await fakeReceiver(undefined);
  const log = new Log();
  const o = output({ proto: 'tcp', endpoint: `127.0.0.1:${r.port}`, queueSize: 1000, writeBuffer: 64 * 1024, errorCheckMs: 60_000 }, log);
  try {
    await o.start();
    assert.deepEqual(log.lines, []);
    const big = Buffer.alloc(1024, 1);
    const t0 = performance.now();
    for (let i = 0; i < 50_000; i++) o.send(big);
    assert.ok(performance.now() - t0 < 1000, 'sending does not wait on the receiver');
    await sleep(200);
    // What the socket buffers is bounded by the write buffer; the rest waits in the queue (1000) or was dropped.
    assert.ok(o.written < 50_000 - 1000, `written ${o.written}`);
    assert.ok(o.dropped >= 50_000 - o.written - 1000, `dropped ${o.dropped}`);
  } finally {
    for (const c of r.conns) c.destroy();
    await o.close();
    r.server.close();
  }
});

test('output: close sends STOP and waits for FINISH', async () => {
  const seen: number[] = [];
  const r = await fakeReceiver(undefined, (t) => { seen.push(t); });
  const o = output({ proto: 'tcp', endpoint: `127.0.0.1:${r.port}` }, new Log());
  try {
    await o.start();
    o.send(frame(1));
    await sleep(50);
    await o.close();
    assert.deepEqual(seen, [CONTROL_READY, CONTROL_START, CONTROL_STOP]);
  } finally {
    r.server.close();
  }
});

test('output: an ACCEPT without our content type fails the handshake (framestream text)', async () => {
  const r = await fakeReceiver(ctl(CONTROL_ACCEPT, Buffer.from('protobuf:other')));
  const log = new Log();
  const o = output({ proto: 'tcp', endpoint: `127.0.0.1:${r.port}` }, log);
  try {
    await o.start();
    assert.deepEqual(log.lines, ['[ERROR] No connection to dnstap endpoint: content type mismatch']);
  } finally {
    await o.close();
    for (const c of r.conns) c.destroy();
    r.server.close();
  }
});

test('output: Go texts for bad addresses and refused connections', async () => {
  assert.deepEqual(splitHostPort('127.0.0.1:53'), { host: '127.0.0.1', port: 53 });
  assert.deepEqual(splitHostPort('[::1]:53'), { host: '::1', port: 53 });
  assert.equal(splitHostPort('127.0.0.1'), 'address 127.0.0.1: missing port in address');
  assert.equal(splitHostPort(''), 'missing address');
  assert.equal(splitHostPort('h:x'), 'address x: invalid port');
  const log = new Log();
  const port = await freePort();
  const o = output({ proto: 'tcp', endpoint: `127.0.0.1:${port}` }, log);
  await o.start();
  await o.close();
  assert.deepEqual(log.lines, [`[ERROR] No connection to dnstap endpoint: dial tcp 127.0.0.1:${port}: connect: connection refused`]);
});

test('output over TLS: the receiver\'s certificate is verified (Go\'s error text); skipverify connects anyway', async () => {
  requireTool('openssl', 'openssl');
  const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'k.pem', '-out', 'c.pem', '-days', '2',
    '-subj', '/CN=receiver', '-addext', 'subjectAltName=IP:127.0.0.1'], { cwd: dir, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const seen: number[] = [];
  const frames: Buffer[] = [];
  const server = tls.createServer({ cert: readFileSync(join(dir, 'c.pem')), key: readFileSync(join(dir, 'k.pem')) }, (c) => {
    let buf: Buffer = Buffer.alloc(0);
    c.on('error', () => { /* test end */ });
    c.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        if (buf.length >= 4 && buf.readUInt32BE(0) !== 0) {
          const len = buf.readUInt32BE(0);
          if (buf.length < 4 + len) return;
          frames.push(buf.subarray(4, 4 + len));
          buf = buf.subarray(4 + len);
          continue;
        }
        const x = readControl(buf);
        if (x === undefined) return;
        buf = buf.subarray(x.used);
        seen.push(x.control.type);
        if (x.control.type === CONTROL_READY) c.write(ctl(CONTROL_ACCEPT, CONTENT_TYPE));
        if (x.control.type === CONTROL_STOP) c.write(ctl(CONTROL_FINISH));
      }
    });
  });
  await new Promise<void>((res) => { server.listen(0, '127.0.0.1', () => { res(); }); });
  const port = (server.address() as net.AddressInfo).port;
  try {
    const log = new Log();
    const strict = output({ proto: 'tls', endpoint: `127.0.0.1:${port}` }, log);
    await strict.start();
    await strict.close();
    assert.deepEqual(log.lines, ['[ERROR] No connection to dnstap endpoint: tls: failed to verify certificate: x509: certificate signed by unknown authority']);
    const log2 = new Log();
    const lax = output({ proto: 'tls', endpoint: `127.0.0.1:${port}`, skipVerify: true }, log2);
    await lax.start();
    assert.deepEqual(log2.lines, []);
    lax.send(frame(443));
    for (let i = 0; i < 100 && frames.length < 1; i++) await sleep(10);
    await lax.close();
    assert.deepEqual(seen, [CONTROL_READY, CONTROL_START, CONTROL_STOP]);
    assert.deepEqual(frames.map((f) => decodeTap(f).message.find((x) => x[0] === 'query_port')![1]), [443]);
  } finally {
    server.close();
  }
});
