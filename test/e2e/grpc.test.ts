// DNS over gRPC against the real CoreDNS 1.15.0, both ways: CoreDNS's grpc plugin forwarding to a nodens
// grpc:// server and nodens's grpc plugin forwarding to a CoreDNS grpc:// server, in cleartext (h2c) and over
// TLS (certificates made by the test); malformed calls answered by both servers and compared status by
// status; the server's limits, metrics and the plugin's fallthrough/except/failover.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type NodensServer } from '../../src/index.ts';
import { freePort, referenceBinary, startServer as spawnServer, waitReady, type Running } from '../conformance/lib/servers.ts';
import { testCerts } from '../helpers/certs.ts';
import { dig, status } from '../helpers/dig.ts';
import { exchange } from '../helpers/client.ts';
import { grpcFrame, decodeDnsPacket, GRPC_PATH } from '../../src/wire/grpc.ts';
import { grpcServerTimeouts } from '../../src/core/grpc.ts';
import { decodeMessage } from '../../src/wire/decode.ts';
import { encodeMessage } from '../../src/wire/encode.ts';
import { newQuery } from '../../src/wire/message.ts';
import { RRType } from '../../src/wire/constants.ts';

const C = testCerts();
const running: Running[] = [];
const servers: NodensServer[] = [];
after(async () => {
  for (const r of running) await r.stop();
  for (const s of servers) await s.stop();
});

/** The reference CoreDNS with `corefile` (a `.` block on -dns.port for the readiness probe is added). */
async function coredns(corefile: string): Promise<Running> {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-grpc-'));
  writeFileSync(join(dir, 'Corefile'), `. {\n whoami\n}\n${corefile}`);
  const r = await spawnServer({ name: 'coredns', command: referenceBinary(), conf: 'Corefile', cwd: dir });
  running.push(r);
  await waitReady(r);
  return r;
}

async function nodens(corefile: string): Promise<NodensServer> {
  const s = await startServer({ corefile });
  servers.push(s);
  return s;
}

interface CallResult { headers: http2.IncomingHttpHeaders; trailers?: http2.IncomingHttpHeaders; body: Buffer }

function connect(port: number, tls: boolean): http2.ClientHttp2Session {
  const s = tls
    ? http2.connect(`https://localhost:${port}`, { ca: readFileSync(C.ca) })
    : http2.connect(`http://127.0.0.1:${port}`);
  s.on('error', () => { /* reported by the calls */ });
  return s;
}

function call(session: http2.ClientHttp2Session, body: Buffer | null, headers: http2.OutgoingHttpHeaders = {}): Promise<CallResult> {
  return new Promise((resolve, reject) => {
    const h: http2.OutgoingHttpHeaders = { ':method': 'POST', ':path': GRPC_PATH, 'content-type': 'application/grpc', te: 'trailers', ...headers };
    for (const k of Object.keys(h)) if (h[k] === null) delete h[k];
    const s = session.request(h, { endStream: body === null });
    const out: CallResult = { headers: {}, body: Buffer.alloc(0) };
    const chunks: Buffer[] = [];
    s.on('response', (hd) => { out.headers = hd; });
    s.on('trailers', (t) => { out.trailers = t; });
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', () => { /* closed by the server: the result says what was received */ });
    const t = setTimeout(() => { s.close(); reject(new Error('call timed out')); }, 5000);
    s.on('close', () => {
      clearTimeout(t);
      out.body = Buffer.concat(chunks);
      delete out.headers.date;
      resolve(out);
    });
    if (body !== null) s.end(body);
  });
}

function query(name: string, type = RRType.A): Buffer {
  const q = newQuery(name, type);
  q.id = 0x1234;
  return encodeMessage(q);
}

function frame(payload: Buffer, flags = 0, len = payload.length): Buffer {
  const h = Buffer.alloc(5);
  h[0] = flags;
  h.writeUInt32BE(len, 1);
  return Buffer.concat([h, payload]);
}
const pb = (m: Buffer): Buffer => grpcFrame(m).subarray(5);

/** The malformed (and a few valid) calls both servers answer; compared by status, message, HTTP status. */
const CASES: Array<[string, Buffer | null, http2.OutgoingHttpHeaders?]> = [
  ['ok', grpcFrame(query('www.example.org.'))],
  ['content-subtype +proto', grpcFrame(query('www.example.org.')), { 'content-type': 'application/grpc+proto' }],
  ['content-subtype ;x', grpcFrame(query('www.example.org.')), { 'content-type': 'application/grpc;x' }],
  ['unknown method', grpcFrame(query('www.example.org.')), { ':path': '/coredns.dns.DnsService/Nope' }],
  ['unknown service', grpcFrame(query('www.example.org.')), { ':path': '/x.Y/Query' }],
  ['GET', null, { ':method': 'GET' }],
  ['no content-type', grpcFrame(query('www.example.org.')), { 'content-type': null as unknown as string }],
  ['content-type json', grpcFrame(query('www.example.org.')), { 'content-type': 'application/json' }],
  ['upper-case content-type', grpcFrame(query('www.example.org.')), { 'content-type': 'APPLICATION/GRPC' }],
  ['compressed flag', frame(pb(query('www.example.org.')), 1)],
  ['gzip', frame(pb(query('www.example.org.')), 1), { 'grpc-encoding': 'gzip' }],
  ['truncated message', grpcFrame(query('www.example.org.')).subarray(0, 10)],
  ['short prefix', Buffer.from([0, 0, 0])],
  ['no message', Buffer.alloc(0)],
  ['empty DnsPacket', frame(Buffer.alloc(0))],
  ['invalid protobuf', frame(Buffer.from([0xff, 0xff, 0xff]))],
  ['unknown protobuf field', frame(Buffer.concat([Buffer.from([0x10, 0x05]), pb(query('www.example.org.'))]))],
  ['msg twice (the last wins)', frame(Buffer.concat([pb(Buffer.from([1, 2])), pb(query('www.example.org.'))]))],
  ['DNS message too short', grpcFrame(Buffer.from([1, 2, 3, 4, 5]))],
  ['DNS response', grpcFrame(Buffer.from([0x12, 0x34, 0x81, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1]))],
  ['two messages', Buffer.concat([grpcFrame(query('www.example.org.')), grpcFrame(query('www.example.org.'))])],
  ['message over the limit', frame(pb(Buffer.alloc(70000)))],
  ['declared length over the limit', frame(Buffer.alloc(10), 0, 100000)],
];

function summary(r: CallResult): string {
  const h = { ...r.headers };
  const body = r.body.length === 0 ? '' : ` body=${r.body.length}`;
  return JSON.stringify(h) + (r.trailers ? ' trailers=' + JSON.stringify(r.trailers) : '') + body;
}

/** An upstream's chain: NXDOMAIN for b. and d. (template), NAME → IP from hosts (SERVFAIL for anything else). */
const upstream = (ip: string, name: string): string =>
  ` template IN A example.org {\n  match "^(b|d)[.]"\n  rcode NXDOMAIN\n  fallthrough\n }\n hosts {\n  ${ip} ${name}\n }\n`;

for (const tls of [false, true]) {
  test(`grpc:// server${tls ? ' over TLS' : ' (h2c)'}: malformed and valid calls answered as CoreDNS answers them`, async () => {
    const ref = await freePort();
    const tlsLine = tls ? ` tls ${C.cert} ${C.key}\n` : '';
    await coredns(`grpc://.:${ref} {\n${tlsLine} whoami\n}\n`);
    const sub = await nodens(`grpc://.:0 {\n bind 127.0.0.1\n${tlsLine} whoami\n}\n`);
    const a = connect(ref, tls);
    const b = connect(sub.port, tls);
    try {
      for (const [name, body, headers] of CASES) {
        const want = summary(await call(a, body, headers));
        const got = summary(await call(b, body, headers));
        assert.equal(got, want, name);
      }
      // Still serving after all of it, with the same reply as CoreDNS (whoami: the client's port differs).
      const r = await call(b, grpcFrame(query('www.example.org.')));
      const m = decodeMessage(decodeDnsPacket(r.body, 5, r.body.length)!);
      assert.equal(m.id, 0x1234);
      assert.equal(m.additional.find((rr) => rr.type === RRType.SRV)?.name, '_tcp.www.example.org.');
    } finally {
      a.close();
      b.close();
    }
  });

  test(`CoreDNS's grpc plugin forwards to a nodens grpc:// server${tls ? ' over TLS' : ''}, and nodens's grpc plugin to CoreDNS's`, async () => {
    const tlsLine = tls ? ` tls ${C.cert} ${C.key}\n` : '';
    const clientTls = tls ? ` {\n  tls ${C.ca}\n  tls_servername localhost\n }` : '';
    // nodens serves gRPC; CoreDNS forwards to it.
    const sub = await nodens(`grpc://.:0 {\n bind 127.0.0.1\n${tlsLine}${upstream('192.0.2.7', 'a.example.org')}}\n`);
    const refFront = await freePort();
    await coredns(`.:${refFront} {\n grpc . 127.0.0.1:${sub.port}${clientTls}\n}\n`);
    const out = await dig(refFront, 'a.example.org', 'A');
    assert.equal(status(out), 'NOERROR', out);
    assert.match(out, /a\.example\.org\.\s+3600\s+IN\s+A\s+192\.0\.2\.7/);
    assert.equal(status(await dig(refFront, 'b.example.org', 'A')), 'NXDOMAIN');
    // CoreDNS serves gRPC; nodens forwards to it.
    const refGrpc = await freePort();
    await coredns(`grpc://.:${refGrpc} {\n${tlsLine}${upstream('192.0.2.8', 'c.example.org')}}\n`);
    const front = await nodens(`.:0 {\n bind 127.0.0.1\n grpc . 127.0.0.1:${refGrpc}${clientTls}\n}\n`);
    const out2 = await dig(front.port, 'c.example.org', 'A');
    assert.equal(status(out2), 'NOERROR', out2);
    assert.match(out2, /c\.example\.org\.\s+3600\s+IN\s+A\s+192\.0\.2\.8/);
    assert.equal(status(await dig(front.port, 'd.example.org', 'A')), 'NXDOMAIN');
    // Many queries share the one connection.
    const many = await Promise.all(Array.from({ length: 20 }, () => exchange(front.port, query('c.example.org.'), { timeoutMs: 4000 })));
    for (const r of many) assert.equal(decodeMessage(r).answer.length, 1);
    const text = await front.metrics.metrics();
    assert.match(text, new RegExp(`coredns_grpc_requests_total\\{to="127\\.0\\.0\\.1:${refGrpc}"\\} 22`));
    assert.match(text, new RegExp(`coredns_grpc_responses_total\\{rcode="NXDOMAIN",to="127\\.0\\.0\\.1:${refGrpc}"\\} 1`));
    assert.match(text, new RegExp(`coredns_grpc_request_duration_seconds_count\\{to="127\\.0\\.0\\.1:${refGrpc}"\\} 22`));
  });
}

test('grpc:// server: metrics and log say proto tcp and server grpc://', async () => {
  const s = await nodens('grpc://.:0 {\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n whoami\n}\n');
  const session = connect(s.port, false);
  try {
    await call(session, grpcFrame(query('www.example.org.')));
  } finally {
    session.close();
  }
  const text = await s.metrics.metrics();
  const line = text.split('\n').find((l) => l.startsWith('coredns_dns_requests_total{'));
  assert.ok(line !== undefined, text);
  assert.match(line, /server="grpc:\/\/127\.0\.0\.1:0"/);
  assert.match(line, /proto="tcp"/);
  assert.match(line, /type="A"/);
  assert.match(line, / 1$/);
});

test('grpc_server limits: max_streams is the SETTINGS value; past max_connections a connection waits for a slot (LimitListener)', async () => {
  const s = await nodens('grpc://.:0 {\n bind 127.0.0.1\n grpc_server {\n  max_streams 7\n  max_connections 1\n }\n whoami\n}\n');
  const a = connect(s.port, false);
  const settings = await new Promise<http2.Settings>((resolve) => { a.once('remoteSettings', resolve); });
  assert.equal(settings.maxConcurrentStreams, 7);
  const first = await call(a, grpcFrame(query('www.example.org.')));
  assert.equal(first.trailers?.['grpc-status'], '0');
  const b = connect(s.port, false);
  const served = new Promise<boolean>((resolve) => {
    b.once('remoteSettings', () => { resolve(true); });
    b.once('close', () => { resolve(false); });
  });
  const early = await Promise.race([served, new Promise<string>((resolve) => { setTimeout(() => { resolve('waiting'); }, 500); })]);
  assert.equal(early, 'waiting', 'the second connection is not served while the first is open');
  a.close();
  assert.equal(await served, true, 'served once the first closed');
  const second = await call(b, grpcFrame(query('www.example.org.')));
  assert.equal(second.trailers?.['grpc-status'], '0');
  b.close();
  // Defaults: 256 streams.
  const d = await nodens('grpc://.:0 {\n bind 127.0.0.1\n whoami\n}\n');
  const c = connect(d.port, false);
  const ds = await new Promise<http2.Settings>((resolve) => { c.once('remoteSettings', resolve); });
  assert.equal(ds.maxConcurrentStreams, 256);
  c.close();
});

test('grpc plugin: except, fallthrough on NXDOMAIN, failover to the next upstream, SERVFAIL when none answers', async () => {
  const up = await nodens(`grpc://.:0 {\n bind 127.0.0.1\n${upstream('192.0.2.9', 'a.example.org')}}\n`);
  const dead = await freePort();
  const front = await nodens(`.:0 {\n bind 127.0.0.1\n grpc . 127.0.0.1:${dead} 127.0.0.1:${up.port} {\n  policy sequential\n  except skip.example.org\n  fallthrough\n }\n whoami\n}\n`);
  const a = await dig(front.port, 'a.example.org', 'A');
  assert.match(a, /a\.example\.org\.\s+3600\s+IN\s+A\s+192\.0\.2\.9/, 'failover past the dead upstream');
  const b = await dig(front.port, 'b.example.org', 'A');
  assert.equal(status(b), 'NOERROR', b);
  assert.match(b, /_udp\.b\.example\.org\.\s+0\s+IN\s+SRV/, 'NXDOMAIN falls through to whoami');
  const c = await dig(front.port, 'a.skip.example.org', 'A');
  assert.match(c, /_udp\.a\.skip\.example\.org\.\s+0\s+IN\s+SRV/, 'except: straight to the next plugin');
  // Without fallthrough the NXDOMAIN is the answer.
  const plain = await nodens(`.:0 {\n bind 127.0.0.1\n grpc . 127.0.0.1:${up.port}\n whoami\n}\n`);
  assert.equal(status(await dig(plain.port, 'b.example.org', 'A')), 'NXDOMAIN');
  const lone = await nodens(`.:0 {\n bind 127.0.0.1\n grpc . 127.0.0.1:${dead}\n}\n`);
  assert.equal(status(await dig(lone.port, 'a.example.org', 'A')), 'SERVFAIL');
});

test('grpc:// server: garbage on the connection closes that connection only; a reload keeps the listener', async () => {
  const { connect: tcpConnect } = await import('node:net');
  const s = await nodens('grpc://.:0 {\n bind 127.0.0.1\n whoami\n}\n');
  const port = s.port;
  for (const junk of [Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'), Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff\xff\xff\xff\xff\xff'), Buffer.alloc(70000, 0xab)]) {
    await new Promise<void>((resolve) => {
      const c = tcpConnect(port, '127.0.0.1', () => { c.end(junk); });
      c.on('error', () => { /* reset by the server */ });
      c.resume();
      c.on('close', () => { resolve(); });
      setTimeout(() => { c.destroy(); }, 3000);
    });
  }
  const session = connect(port, false);
  try {
    const r = await call(session, grpcFrame(query('www.example.org.')));
    assert.equal(r.trailers?.['grpc-status'], '0');
    // A reload to another chain: the same socket, the open connection gets the new configuration's answers.
    assert.equal(await s.reload(`grpc://.:0 {\n bind 127.0.0.1\n hosts {\n  192.0.2.1 www.example.org\n }\n}\n`), undefined);
    const r2 = await call(session, grpcFrame(query('www.example.org.')));
    const m = decodeMessage(decodeDnsPacket(r2.body, 5, r2.body.length)!);
    assert.equal(m.answer.length, 1);
    assert.equal(s.port, port);
  } finally {
    session.close();
  }
});

test('grpc plugin against a misbehaving upstream: NotFound is NXDOMAIN, a wrong question FORMERR, bad frames fail over', async () => {
  // A real HTTP/2 server answering each call as `mode` says.
  let mode = 'notfound';
  const srv = http2.createServer();
  srv.on('stream', (st, headers) => {
    st.on('error', () => { /* reset */ });
    const chunks: Buffer[] = [];
    st.on('data', (c: Buffer) => chunks.push(c));
    st.on('end', () => {
      assert.equal(headers[':path'], GRPC_PATH);
      assert.equal(headers['content-type'], 'application/grpc');
      const req = decodeDnsPacket(Buffer.concat(chunks), 5, Buffer.concat(chunks).length)!;
      const trailersOnly = (code: number, msg: string): void => {
        st.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(code), 'grpc-message': msg }, { endStream: true });
      };
      const ok = (payload: Buffer): void => {
        st.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        st.once('wantTrailers', () => { st.sendTrailers({ 'grpc-status': '0' }); });
        st.end(payload);
      };
      if (mode === 'notfound') trailersOnly(5, 'not here');
      else if (mode === 'other-question') {
        const m = decodeMessage(req);
        m.qr = true;
        m.question[0]!.name = 'other.example.org.';
        ok(grpcFrame(encodeMessage(m)));
      } else if (mode === 'bad-protobuf') ok(frame(Buffer.from([0xff, 0xff])));
      else if (mode === 'oversized') ok(frame(Buffer.alloc(10), 0, 100000));
      else if (mode === 'http-415') st.respond({ ':status': 415 }, { endStream: true });
      else st.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    });
  });
  await new Promise<void>((resolve) => { srv.listen(0, '127.0.0.1', resolve); });
  const port = (srv.address() as { port: number }).port;
  try {
    const front = await nodens(`.:0 {\n bind 127.0.0.1\n grpc . 127.0.0.1:${port}\n}\n`);
    assert.equal(status(await dig(front.port, 'a.example.org', 'A')), 'NXDOMAIN');
    mode = 'other-question';
    assert.equal(status(await dig(front.port, 'a.example.org', 'A')), 'FORMERR');
    for (const m of ['bad-protobuf', 'oversized', 'http-415', 'reset']) {
      mode = m;
      assert.equal(status(await dig(front.port, 'a.example.org', 'A')), 'SERVFAIL', m);
    }
    // With a good second upstream, each of those failures is passed over.
    const good = await nodens(`grpc://.:0 {\n bind 127.0.0.1\n${upstream('192.0.2.9', 'a.example.org')}}\n`);
    const both = await nodens(`.:0 {\n bind 127.0.0.1\n grpc . 127.0.0.1:${port} 127.0.0.1:${good.port} {\n  policy sequential\n }\n}\n`);
    for (const m of ['bad-protobuf', 'oversized', 'http-415', 'reset']) {
      mode = m;
      assert.match(await dig(both.port, 'a.example.org', 'A'), /192\.0\.2\.9/, m);
    }
  } finally {
    await new Promise<void>((resolve) => { srv.close(() => { resolve(); }); });
  }
});

test('grpc:// server: a connection that sends no HTTP/2 preface is closed after the connection timeout (grpc-go: 120 s)', async () => {
  const { connect: tcpConnect } = await import('node:net');
  const saved = grpcServerTimeouts.handshakeMs;
  grpcServerTimeouts.handshakeMs = 400;
  try {
    const s = await nodens('grpc://.:0 {\n bind 127.0.0.1\n grpc_server {\n  max_connections 1\n }\n whoami\n}\n');
    const t0 = performance.now();
    const outcome = await new Promise<string>((resolve) => {
      const c = tcpConnect(s.port, '127.0.0.1');
      c.resume();
      c.on('error', () => { /* reset */ });
      c.on('close', () => { resolve('closed'); });
      setTimeout(() => { resolve('open'); c.destroy(); }, 3000);
    });
    assert.equal(outcome, 'closed');
    assert.ok(performance.now() - t0 >= 350, 'not before the timeout');
    // Its slot is free again: a real client is served.
    const session = connect(s.port, false);
    try {
      const r = await call(session, grpcFrame(query('www.example.org.')));
      assert.equal(r.trailers?.['grpc-status'], '0');
      // An active client is not cut by the timeout.
      await new Promise((resolve) => setTimeout(resolve, 800));
      assert.equal(session.closed || session.destroyed, false);
    } finally {
      session.close();
    }
  } finally {
    grpcServerTimeouts.handshakeMs = saved;
  }
});
