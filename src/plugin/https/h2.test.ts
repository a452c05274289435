// The DoH listener's own HTTP/2 layer (src/core/h2.ts) against Node's HTTP/2 client (nghttp2: Huffman strings,
// a dynamic table, flow control) and against raw frames: protocol errors end the connection with RFC 9113's codes,
// and the server keeps serving.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import tls from 'node:tls';
import { startServer, type NodensServer } from '../../index.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { newQuery } from '../../wire/message.ts';
import { RRType } from '../../wire/constants.ts';
import { HpackBlock, HpackDecoder } from '../../core/hpack.ts';
import { seededRandom } from '../../wire/prng.ts';
import { testCerts } from '../../../test/helpers/certs.ts';

const C = testCerts();
const MANY = Array.from({ length: 2000 }, (_, i) => `  10.${i >> 8}.${i & 255}.1 big.example.org`).join('\n');

function corefile(extra = ''): string {
  return `https://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n${extra} hosts {\n  192.0.2.1 www.example.org\n${MANY}\n  ttl 300\n }\n}\n` +
    `https://slow.example.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n${extra} erratic {\n  delay 1 400ms\n }\n}\n`;
}

async function withServer(extra: string, fn: (port: number) => Promise<void>): Promise<void> {
  const s: NodensServer = await startServer({ corefile: corefile(extra) });
  try {
    await fn(s.port);
  } finally {
    await s.stop();
  }
}

function b64(name: string, type: number = RRType.A): string {
  return Buffer.from(encodeMessage(newQuery(name, type))).toString('base64url');
}

function get(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = session.request(headers);
    const chunks: Buffer[] = [];
    let status = 0;
    req.on('response', (h) => { status = Number(h[':status']); });
    req.on('data', (c: Buffer) => { chunks.push(c); });
    req.on('end', () => { resolve({ status, body: Buffer.concat(chunks) }); });
    req.on('error', reject);
    req.end();
  });
}

test('HTTP/2: 300 requests on one connection with large, changing headers (dynamic table evictions) all answered', async () => {
  await withServer('', async (port) => {
    const session = http2.connect(`https://localhost:${port}`, { ca: readFileSync(C.ca) });
    try {
      const replies = await Promise.all(Array.from({ length: 300 }, (_, i) => get(session, {
        ':path': `/dns-query?dns=${b64('www.example.org.')}`,
        'x-pad': 'p'.repeat(100 + (i % 7) * 300), // 100 to 1900 bytes: four or fewer fit the 4096-byte table
        [`x-key-${i % 13}`]: `value-${i}`,
        'user-agent': `test/${i % 3}`,
      })));
      for (const r of replies) {
        assert.equal(r.status, 200);
        assert.equal(decodeMessage(r.body).answer.length, 1);
      }
    } finally {
      session.close();
    }
  });
});

test('HTTP/2 flow control: 32 KB replies in frames of the client\'s size, through small stream and connection windows', async () => {
  await withServer('', async (port) => {
    // 100-byte stream windows and the default 64 KiB connection window: four 32 KB replies need WINDOW_UPDATEs
    const session = http2.connect(`https://localhost:${port}`, { ca: readFileSync(C.ca), settings: { initialWindowSize: 100 } });
    try {
      const replies = await Promise.all(Array.from({ length: 4 }, () => get(session, { ':path': `/dns-query?dns=${b64('big.example.org.')}` })));
      for (const r of replies) {
        assert.equal(r.status, 200);
        assert.ok(r.body.length > 32000, String(r.body.length));
        assert.equal(decodeMessage(r.body).answer.length, 2000);
      }
    } finally {
      session.close();
    }
  });
});

// --- raw frames ------------------------------------------------------------------------------------

interface RawFrame { type: number; flags: number; id: number; payload: Buffer }

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

function frame(type: number, flags: number, id: number, payload: Uint8Array = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  return Buffer.concat([h, payload]);
}

function requestBlock(path: string, method = 'GET'): Buffer {
  return new HpackBlock().indexed(method === 'GET' ? 2 : 3).indexed(7).withName(4, path).withName(1, 'localhost').bytes();
}

/** A TLS connection speaking h2 by hand; collects the server's frames. */
class Raw {
  readonly frames: RawFrame[] = [];
  closed = false;
  private buf = Buffer.alloc(0);
  private readonly sock: tls.TLSSocket;
  private readonly ready: Promise<void>;

  constructor(port: number) {
    this.sock = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca: readFileSync(C.ca), ALPNProtocols: ['h2'] });
    this.ready = new Promise((resolve, reject) => { this.sock.once('secureConnect', resolve); this.sock.once('error', reject); });
    this.sock.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      while (this.buf.length >= 9) {
        const len = this.buf.readUIntBE(0, 3);
        if (this.buf.length < 9 + len) break;
        this.frames.push({ type: this.buf[3]!, flags: this.buf[4]!, id: this.buf.readUInt32BE(5) & 0x7fffffff, payload: this.buf.subarray(9, 9 + len) });
        this.buf = this.buf.subarray(9 + len);
      }
    });
    this.sock.on('error', () => { /* the server may reset */ });
    this.sock.on('close', () => { this.closed = true; });
  }

  async start(): Promise<void> {
    await this.ready;
    this.sock.write(Buffer.concat([PREFACE, frame(4, 0, 0)]));
  }

  send(...frames: Buffer[]): void { this.sock.write(Buffer.concat(frames)); }

  async until(pred: (f: RawFrame[]) => boolean, ms = 3000): Promise<void> {
    const end = Date.now() + ms;
    while (!pred(this.frames)) {
      if (Date.now() > end) throw new Error(`timeout; frames: ${JSON.stringify(this.frames.map((f) => [f.type, f.flags, f.id, f.payload.toString('hex').slice(0, 32)]))}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  goawayCode(): number | undefined {
    const g = this.frames.find((f) => f.type === 7);
    return g === undefined ? undefined : g.payload.readUInt32BE(4);
  }

  destroy(): void { this.sock.destroy(); }
}

test('HTTP/2 raw: settings as Go\'s server, PING answered, a GET answered in HEADERS + DATA with END_STREAM', async () => {
  await withServer('', async (port) => {
    const r = new Raw(port);
    await r.start();
    r.send(frame(6, 0, 0, Buffer.from('12345678')), frame(1, 0x5, 1, requestBlock(`/dns-query?dns=${b64('www.example.org.')}`)));
    await r.until((f) => f.some((x) => x.type === 0 && x.id === 1 && (x.flags & 1) === 1));
    const settings = r.frames.find((f) => f.type === 4 && f.flags === 0)!;
    const s = new Map<number, number>();
    for (let p = 0; p < settings.payload.length; p += 6) s.set(settings.payload.readUInt16BE(p), settings.payload.readUInt32BE(p + 2));
    assert.deepEqual([...s], [[5, 1 << 20], [3, 250], [6, (1 << 20) + 320], [1, 4096], [4, 1 << 20]]);
    assert.ok(r.frames.some((f) => f.type === 8 && f.id === 0 && f.payload.readUInt32BE(0) === (1 << 20) - 65535), 'connection WINDOW_UPDATE');
    assert.ok(r.frames.some((f) => f.type === 4 && f.flags === 1), 'our SETTINGS acknowledged');
    assert.ok(r.frames.some((f) => f.type === 6 && f.flags === 1 && f.payload.toString() === '12345678'), 'PING ACK');
    const data = r.frames.find((f) => f.type === 0 && f.id === 1)!;
    assert.equal(decodeMessage(data.payload).answer.length, 1);
    r.destroy();
  });
});

test('HTTP/2 raw: protocol errors end the connection with GOAWAY and RFC 9113\'s code; the server keeps serving', async () => {
  const cases: Array<[string, Buffer[], number]> = [
    ['DATA on stream 0', [frame(0, 0, 0, Buffer.from('x'))], 1],
    ['HEADERS on an even stream', [frame(1, 0x5, 2, requestBlock('/'))], 1],
    ['CONTINUATION without HEADERS', [frame(9, 0x4, 1, Buffer.alloc(1))], 1],
    ['another frame inside a header block', [frame(1, 0x1, 1, requestBlock('/')), frame(6, 0, 0, Buffer.alloc(8))], 1],
    ['bad HPACK index', [frame(1, 0x5, 1, Buffer.from([0xff, 0x80, 0x80, 0x01]))], 9],
    ['PING of 7 bytes', [frame(6, 0, 0, Buffer.alloc(7))], 6],
    ['SETTINGS of 5 bytes', [frame(4, 0, 0, Buffer.alloc(5))], 6],
    ['SETTINGS_INITIAL_WINDOW_SIZE 2^31', [frame(4, 0, 0, Buffer.from([0, 4, 0x80, 0, 0, 0]))], 3],
    ['SETTINGS_MAX_FRAME_SIZE 100', [frame(4, 0, 0, Buffer.from([0, 5, 0, 0, 0, 100]))], 1],
    ['WINDOW_UPDATE of 0 on the connection', [frame(8, 0, 0, Buffer.alloc(4))], 1],
    ['connection window overflow', [frame(8, 0, 0, Buffer.from([0x7f, 0xff, 0xff, 0xff]))], 3],
    ['PUSH_PROMISE from a client', [frame(5, 0x4, 1, Buffer.alloc(4))], 1],
    ['a frame over 1 MiB', [Buffer.from([0x20, 0, 0, 0, 0, 0, 0, 0, 1])], 6],
    ['padding longer than the frame', [frame(1, 0x5 | 0x8, 1, Buffer.from([200, 0x82]))], 1],
    ['RST_STREAM on an idle stream', [frame(3, 0, 9, Buffer.alloc(4))], 1],
  ];
  await withServer('', async (port) => {
    for (const [name, frames, code] of cases) {
      const r = new Raw(port);
      await r.start();
      r.send(...frames);
      await r.until((f) => f.some((x) => x.type === 7), 3000).catch((e: Error) => { throw new Error(`${name}: ${e.message}`); });
      assert.equal(r.goawayCode(), code, name);
      r.destroy();
    }
    const ok = new Raw(port);
    await ok.start();
    ok.send(frame(1, 0x5, 1, requestBlock(`/dns-query?dns=${b64('www.example.org.')}`)));
    await ok.until((f) => f.some((x) => x.type === 0 && x.id === 1));
    ok.destroy();
  });
});

test('HTTP/2 raw: a bad preface closes the connection; max_streams refuses the stream over the limit', async () => {
  await withServer(' https {\n  max_streams 2\n }\n', async (port) => {
    const bad = new Raw(port);
    await new Promise((r) => setTimeout(r, 50));
    bad.send(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    await bad.until(() => bad.closed);

    const r = new Raw(port);
    await r.start();
    // The slow block delays its answers 400 ms: the third stream opened meanwhile is refused.
    for (const id of [1, 3, 5]) r.send(frame(1, 0x5, id, requestBlock(`/dns-query?dns=${b64('x.slow.example.')}`)));
    await r.until((f) => f.some((x) => x.type === 3 && x.id === 5));
    assert.equal(r.frames.find((x) => x.type === 3 && x.id === 5)!.payload.readUInt32BE(0), 7, 'REFUSED_STREAM before the SETTINGS ACK');
    // Once the client acknowledged the limit, breaking it is a PROTOCOL_ERROR of the stream (Go's server).
    r.send(frame(4, 1, 0), frame(1, 0x5, 7, requestBlock(`/dns-query?dns=${b64('y.slow.example.')}`)));
    await r.until((f) => f.some((x) => x.type === 3 && x.id === 7));
    assert.equal(r.frames.find((x) => x.type === 3 && x.id === 7)!.payload.readUInt32BE(0), 1, 'PROTOCOL_ERROR after it');
    await r.until((f) => [1, 3].every((id) => f.some((x) => x.type === 0 && x.id === id && (x.flags & 1) === 1)));
    r.destroy();
  });
});

test('HTTP/2 raw: 40 streams at once on each of two connections: each answered once, HEADERS then DATA, lengths right', async () => {
  await withServer('', async (port) => {
    const conns = [new Raw(port), new Raw(port)];
    for (const r of conns) await r.start();
    const ids = Array.from({ length: 40 }, (_, i) => 2 * i + 1);
    // Names of different lengths (NXDOMAIN replies carry the name): each reply's own content-length.
    const name = (id: number): string => (id % 3 === 0 ? 'www.example.org.' : `nx${'x'.repeat(id % 50)}.example.org.`);
    const query = (id: number): string => {
      const q = newQuery(name(id), RRType.A);
      q.id = id;
      return Buffer.from(encodeMessage(q)).toString('base64url');
    };
    for (const r of conns) r.send(...ids.map((id) => frame(1, 0x5, id, requestBlock(`/dns-query?dns=${query(id)}`))));
    for (const r of conns) {
      await r.until((f) => ids.every((id) => f.some((x) => x.type === 0 && x.id === id && (x.flags & 1) === 1)));
      const hpack = new HpackDecoder();
      for (const f of r.frames.filter((x) => x.type === 1)) {
        const fields = new Map<string, string>();
        hpack.decode(f.payload, (n, v) => { fields.set(n, v); });
        const data = r.frames.filter((x) => x.type === 0 && x.id === f.id);
        assert.equal(data.length, 1, `stream ${f.id}: one DATA frame`);
        assert.ok(r.frames.indexOf(f) < r.frames.indexOf(data[0]!), `stream ${f.id}: HEADERS first`);
        assert.equal(fields.get(':status'), '200');
        assert.equal(fields.get('content-length'), String(data[0]!.payload.length), `stream ${f.id}`);
        const m = decodeMessage(data[0]!.payload);
        assert.equal(m.id, f.id);
        assert.equal(m.question[0]!.name, name(f.id));
      }
      assert.deepEqual(r.frames.filter((x) => x.type === 1).map((x) => x.id).sort((a, b) => a - b), ids);
      r.destroy();
    }
  });
});

test('HTTP/2 raw: a POST with Expect: 100-continue gets an interim 100 before it sends its body, then its answer', async () => {
  await withServer('', async (port) => {
    const r = new Raw(port);
    await r.start();
    const block = new HpackBlock().indexed(3).indexed(7).withName(4, '/dns-query').withName(1, 'localhost')
      .literal('expect', '100-continue').bytes();
    r.send(frame(1, 0x4, 1, block)); // END_HEADERS, the body still to come
    await r.until((f) => f.some((x) => x.type === 1 && x.id === 1));
    const hpack = new HpackDecoder();
    const status = (payload: Buffer): string | undefined => {
      let s: string | undefined;
      hpack.decode(payload, (n, v) => { if (n === ':status') s = v; });
      return s;
    };
    const interim = r.frames.find((x) => x.type === 1 && x.id === 1)!;
    assert.equal(status(interim.payload), '100');
    assert.equal(interim.flags & 0x1, 0, 'the interim response does not end the stream');
    r.send(frame(0, 0x1, 1, Buffer.from(encodeMessage(newQuery('www.example.org.', RRType.A)))));
    await r.until((f) => f.some((x) => x.type === 0 && x.id === 1 && (x.flags & 1) === 1));
    const heads = r.frames.filter((x) => x.type === 1 && x.id === 1);
    assert.deepEqual(heads.map((h) => status(h.payload)), ['100', '200']);
    assert.equal(decodeMessage(r.frames.find((x) => x.type === 0 && x.id === 1)!.payload).answer.length, 1);
    r.destroy();
  });
});

test('HTTP/2 raw: a POST body in padded DATA frames, with trailers; a reset stream gets no reply', async () => {
  await withServer('', async (port) => {
    const r = new Raw(port);
    await r.start();
    const q = Buffer.from(encodeMessage(newQuery('www.example.org.', RRType.A)));
    const half = q.length >> 1;
    r.send(
      frame(1, 0x4, 1, requestBlock('/dns-query', 'POST')),
      frame(0, 0x8, 1, Buffer.concat([Buffer.from([3]), q.subarray(0, half), Buffer.alloc(3)])),
      frame(0, 0, 1, q.subarray(half)),
      frame(1, 0x5, 1, new HpackBlock().literal('x-trailer', '1').bytes()),
      // stream 3: reset by the client while the slow block would still be answering
      frame(1, 0x5, 3, requestBlock(`/dns-query?dns=${b64('r.slow.example.')}`)),
      frame(3, 0, 3, Buffer.from([0, 0, 0, 8])),
    );
    await r.until((f) => f.some((x) => x.type === 0 && x.id === 1 && (x.flags & 1) === 1));
    assert.equal(decodeMessage(r.frames.find((x) => x.type === 0 && x.id === 1)!.payload).answer.length, 1);
    await new Promise((res) => setTimeout(res, 600));
    assert.equal(r.frames.some((x) => x.id === 3), false, 'nothing for the reset stream');
    assert.equal(r.closed, false);
    r.destroy();
  });
});

test('HTTP/2 raw: a request written one byte per TLS record, and a 60 KB DATA frame, are reassembled', async () => {
  await withServer('', async (port) => {
    const r = new Raw(port);
    await r.start();
    const bytes = frame(1, 0x5, 1, requestBlock(`/dns-query?dns=${b64('www.example.org.')}`));
    for (const b of bytes) {
      r.send(Buffer.from([b]));
      await new Promise((res) => setImmediate(res));
    }
    await r.until((f) => f.some((x) => x.type === 0 && x.id === 1 && (x.flags & 1) === 1));
    assert.equal(decodeMessage(r.frames.find((x) => x.type === 0 && x.id === 1)!.payload).answer.length, 1);
    // One DATA frame of 60000 bytes (several TLS records): a POST body that is no DNS message, so 400.
    r.send(frame(1, 0x4, 3, requestBlock('/dns-query', 'POST')), frame(0, 0x1, 3, Buffer.alloc(60000, 7)));
    await r.until((f) => f.some((x) => x.type === 1 && x.id === 3));
    const status = r.frames.find((x) => x.type === 1 && x.id === 3)!.payload[0];
    assert.equal(status, 0x80 | 12, ':status 400 (static index 12)');
    r.destroy();
  });
});

test('HTTP/2 raw: 300 random frame sequences after the preface never stop the server', async () => {
  const rand = seededRandom(0x4832);
  await withServer('', async (port) => {
    for (let i = 0; i < 300; i++) {
      const r = new Raw(port);
      await r.start();
      const frames: Buffer[] = [];
      const n = 1 + rand(4);
      for (let k = 0; k < n; k++) {
        const type = rand(11);
        const flags = rand(256);
        const id = rand(10) < 3 ? 0 : 1 + 2 * rand(4);
        const payload = Buffer.from(Array.from({ length: rand(40) }, () => rand(256)));
        frames.push(rand(5) === 0 ? frame(1, 0x5, id | 1, Buffer.concat([requestBlock(`/dns-query?dns=${b64('www.example.org.')}`), payload])) : frame(type, flags, id, payload));
      }
      assert.ok(frames.length > 0);
      r.send(...frames);
      await new Promise((res) => setTimeout(res, 5));
      r.destroy();
    }
    const session = http2.connect(`https://localhost:${port}`, { ca: readFileSync(C.ca) });
    try {
      assert.equal((await get(session, { ':path': `/dns-query?dns=${b64('www.example.org.')}` })).status, 200);
    } finally {
      session.close();
    }
  });
});
