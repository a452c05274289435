import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PluginLogger } from '../plugin.ts';
import { DnstapListener, type ListenerOptions } from './listener.ts';
import { CONTROL_READY, CONTROL_START, CONTROL_STOP, FrameEncoder } from './encode.ts';
import { TapType } from '../pkg/dnstap.ts';
import { Sink, decodeTap, requireTool } from './testutil.ts';

class Log implements PluginLogger {
  readonly lines: string[] = [];
  readonly debugEnabled = false;
  debug(m: string): void { this.lines.push('[DEBUG] ' + m); }
  info(m: string): void { this.lines.push('[INFO] ' + m); }
  warning(m: string): void { this.lines.push('[WARNING] ' + m); }
  error(m: string): void { this.lines.push('[ERROR] ' + m); }
  fatal(m: string): void { this.lines.push('[FATAL] ' + m); }
}

const enc = new FrameEncoder();
const env = { identity: Buffer.from('t'), version: Buffer.from('v') };
const frame = (port: number): Buffer => enc.frame(env, undefined, {
  type: TapType.CLIENT_QUERY, proto: 'udp', queryAddress: '127.0.0.1', queryPort: port, queryTime: Date.now(),
});
const portOf = (f: Buffer): unknown => decodeTap(f).message.find((x) => x[0] === 'query_port')![1];

const dir = mkdtempSync(join(tmpdir(), 'dnstap-listen-'));

function listener(o: Partial<ListenerOptions> & Pick<ListenerOptions, 'proto' | 'endpoint'>, log: Log): DnstapListener {
  return new DnstapListener({ certFile: '', keyFile: '', caFile: '', skipVerify: false, timeoutMs: 1000, ...o }, log);
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const p = (s.address() as net.AddressInfo).port; s.close(() => { resolve(p); }); });
  });
}

async function until(cond: () => boolean, ms = 3000): Promise<void> {
  for (let t = 0; t < ms && !cond(); t += 10) await sleep(10);
  assert.ok(cond(), 'timed out');
}

test('listen: sinks connect over unix and tcp, each gets every message; a message without sinks is not encoded', async () => {
  for (const kind of ['unix', 'tcp'] as const) {
    const port = await freePort();
    const endpoint = kind === 'unix' ? join(dir, 'l.sock') : `127.0.0.1:${port}`;
    const log = new Log();
    const l = listener({ proto: kind, endpoint }, log);
    await l.start();
    assert.deepEqual(log.lines, []);
    assert.equal(l.accepting, false);
    const where = kind === 'unix' ? { unix: endpoint } : { port };
    const a = await Sink.connect(where);
    const b = await Sink.connect(where);
    await until(() => l.connected === 2);
    assert.deepEqual(a.controls, [CONTROL_READY, CONTROL_START]);
    for (let i = 0; i < 10; i++) l.send(frame(100 + i));
    await a.waitFrames(10);
    await b.waitFrames(10);
    assert.deepEqual(a.frames.map(portOf), Array.from({ length: 10 }, (_, i) => 100 + i));
    // A sink that leaves is forgotten; the other goes on.
    b.sock.destroy();
    await until(() => l.connected === 1);
    l.send(frame(200));
    await a.waitFrames(11);
    await l.close();
    assert.ok(await a.waitClosed());
    assert.deepEqual(a.controls, [CONTROL_READY, CONTROL_START, CONTROL_STOP], 'STOP on shutdown, FINISH answered');
  }
});

test('listen: a sink that stops reading is dropped, the others are not slowed', async () => {
  const port = await freePort();
  const l = listener({ proto: 'tcp', endpoint: `127.0.0.1:${port}` }, new Log());
  await l.start();
  const good = await Sink.connect({ port });
  const slow = await Sink.connect({ port });
  await until(() => l.connected === 2);
  slow.sock.pause();
  const big = Buffer.alloc(64 * 1024, 1);
  big.writeUInt32BE(big.length - 4, 0); // a data frame of 64 KiB
  let maxSend = 0;
  for (let i = 0; i < 400; i++) {
    const t = performance.now();
    l.send(big);
    maxSend = Math.max(maxSend, performance.now() - t);
    await sleep(1); // the sinks run in this process too: let the good one read
  }
  assert.ok(maxSend < 100, `a send took ${maxSend} ms`);
  await until(() => l.connected === 1, 5000);
  await good.waitFrames(400, 10000);
  await l.close();
});

test('listen: start-up errors as CoreDNS logs them', async () => {
  const taken = net.createServer();
  await new Promise<void>((r) => { taken.listen(0, '127.0.0.1', () => { r(); }); });
  const port = (taken.address() as net.AddressInfo).port;
  const cases: [Partial<ListenerOptions> & Pick<ListenerOptions, 'proto' | 'endpoint'>, string][] = [
    [{ proto: 'tcp', endpoint: `127.0.0.1:${port}` }, `[ERROR] Failed to start dnstap listener: listen tcp 127.0.0.1:${port}: bind: address already in use`],
    [{ proto: 'unix', endpoint: '/nonexistent-dir/x.sock' }, '[ERROR] Failed to start dnstap listener: listen unix /nonexistent-dir/x.sock: bind: no such file or directory'],
    [{ proto: 'tls', endpoint: '127.0.0.1:0' }, '[WARNING] TLS listener requires cert and key files'],
    [{ proto: 'tls', endpoint: '127.0.0.1:0', certFile: '/nonexistent/c.pem', keyFile: '/nonexistent/k.pem' }, '[ERROR] Failed to start dnstap listener: open /nonexistent/c.pem: no such file or directory'],
  ];
  try {
    for (const [o, line] of cases) {
      const log = new Log();
      const l = listener(o, log);
      await l.start();
      await l.close();
      assert.deepEqual(log.lines, [line]);
    }
  } finally {
    taken.close();
  }
});

test('listen over TLS: server certificate; with a CA, sinks must present a client certificate (skipverify: optional)', async () => {
  requireTool('openssl', 'openssl');
  const ssl = (...args: string[]): void => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
  };
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=test-ca');
  for (const n of ['server', 'client']) {
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${n}.key`, '-out', `${n}.csr`, '-subj', `/CN=${n}`);
    writeExt(n);
    ssl('x509', '-req', '-in', `${n}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${n}.pem`, '-days', '2', '-extfile', `${n}.ext`);
  }
  const ca = readFileSync(join(dir, 'ca.pem'));
  const clientCert = { cert: readFileSync(join(dir, 'client.pem')), key: readFileSync(join(dir, 'client.key')) };
  const files = { certFile: join(dir, 'server.pem'), keyFile: join(dir, 'server.key') };

  // No CA: any sink that trusts the server.
  let port = await freePort();
  let l = listener({ proto: 'tls', endpoint: `127.0.0.1:${port}`, ...files }, new Log());
  await l.start();
  let s = await Sink.connect({ port, tls: { ca } });
  await until(() => l.connected === 1);
  l.send(frame(1));
  await s.waitFrames(1);
  await l.close();

  // A CA: a client certificate is required.
  port = await freePort();
  l = listener({ proto: 'tls', endpoint: `127.0.0.1:${port}`, ...files, caFile: join(dir, 'ca.pem') }, new Log());
  await l.start();
  await assert.rejects(async () => { const x = await Sink.connect({ port, tls: { ca } }); x.sock.destroy(); });
  s = await Sink.connect({ port, tls: { ca, ...clientCert } });
  await until(() => l.connected === 1);
  await l.close();

  // A CA and skipverify: a sink without a certificate is let in.
  port = await freePort();
  l = listener({ proto: 'tls', endpoint: `127.0.0.1:${port}`, ...files, caFile: join(dir, 'ca.pem'), skipVerify: true }, new Log());
  await l.start();
  s = await Sink.connect({ port, tls: { ca } });
  await until(() => l.connected === 1);
  await l.close();
  assert.ok(await s.waitClosed());
});

function writeExt(n: string): void {
  const text = n === 'server' ? 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' : 'extendedKeyUsage=clientAuth\n';
  spawnSync('sh', ['-c', `printf '${text}' > ${join(dir, `${n}.ext`)}`]);
}
