import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import { parse, plugin } from './setup.ts';
import { metricValue, parseTable, runSetup } from '../pkg/testing.ts';
import { startServer, type NodensServer } from '../../index.ts';
import { maxAge } from '../../core/doh.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { newQuery, replyTo } from '../../wire/message.ts';
import { Rcode, RRClass, RRType } from '../../wire/constants.ts';
import type { Message, ResourceRecord } from '../../wire/types.ts';
import { testCerts } from '../../../test/helpers/certs.ts';
import { dig, kdig, status } from '../../../test/helpers/dig.ts';

const C = testCerts();
const NONE = { maxConnections: undefined, maxStreams: undefined };

test('https parse', async () => {
  await parseTable('https', parse, [
    ['https://. {\n https\n}', NONE],
    ['https://. {\n https {\n  max_connections 10\n }\n}', { ...NONE, maxConnections: 10 }],
    ['https://. {\n https {\n  max_streams 0\n  max_connections 0\n }\n}', { maxConnections: 0, maxStreams: 0 }],
    ['https://. {\n https {\n  max_streams 4294967295\n }\n}', { ...NONE, maxStreams: 4294967295 }],
    // Only the first https line is read, as in CoreDNS.
    ['https://. {\n https\n https {\n  foo 1\n }\n}', NONE],
    ['https://. {\n https x\n}', "plugin/https: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'x'"],
    ['https://. {\n https {\n  max_streams x\n }\n}', 'plugin/https: Corefile:3 - Error during parsing: invalid max_streams value \'x\': strconv.Atoi: parsing "x": invalid syntax'],
    ['https://. {\n https {\n  max_streams -1\n }\n}', 'plugin/https: Corefile:3 - Error during parsing: max_streams must be a non-negative integer: -1'],
    ['https://. {\n https {\n  max_streams 4294967296\n }\n}', 'plugin/https: Corefile:3 - Error during parsing: max_streams must not exceed 4294967295: 4294967296'],
    ['https://. {\n https {\n  max_connections 99999999999999999999\n }\n}', 'plugin/https: Corefile:3 - Error during parsing: invalid max_connections value \'99999999999999999999\': strconv.Atoi: parsing "99999999999999999999": value out of range'],
    ['https://. {\n https {\n  max_connections 1\n  max_connections 2\n }\n}', 'plugin/https: Corefile:4 - Error during parsing: max_connections already defined for this server block'],
    ['https://. {\n https {\n  max_streams 1\n  max_streams 2\n }\n}', 'plugin/https: Corefile:4 - Error during parsing: max_streams already defined for this server block'],
    ['https://. {\n https {\n  max_connections\n }\n}', "plugin/https: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'max_connections'"],
    ['https://. {\n https {\n  foo 1\n }\n}', "plugin/https: Corefile:3 - Error during parsing: unknown property 'foo'"],
  ]);
});

test('https setup stores the limits in the block config; no handler', async () => {
  const r = await runSetup(plugin, 'https://. {\n https {\n  max_connections 7\n  max_streams 9\n }\n}');
  assert.equal(r.factories.length, 0);
  assert.equal(r.config.maxHttpsConnections, 7);
  assert.equal(r.config.maxHttpsStreams, 9);
});

function rr(name: string, type: number, ttl: number, data: ResourceRecord['data']): ResourceRecord {
  return { name, type, class: RRClass.IN, ttl, data } as ResourceRecord;
}

test('Cache-Control max-age: CoreDNS MinimalTTLWithMaximum over Typify', () => {
  const q = newQuery('example.org.', RRType.A);
  const now = 1_700_000_000;
  const reply = (f: (m: Message) => void): Uint8Array => { const m = replyTo(q); f(m); return encodeMessage(m); };
  const soa = rr('org.', RRType.SOA, 900, { mname: 'ns.org.', rname: 'h.org.', serial: 1, refresh: 2, retry: 3, expire: 4, minimum: 5 });
  // An answer: its smallest TTL, at most an hour.
  assert.equal(maxAge(reply((m) => { m.answer = [rr('example.org.', RRType.A, 300, { address: '192.0.2.1' }), rr('example.org.', RRType.A, 200, { address: '192.0.2.2' })]; }), now), 200);
  assert.equal(maxAge(reply((m) => { m.answer = [rr('example.org.', RRType.A, 86400, { address: '192.0.2.1' })]; }), now), 3600);
  // NXDOMAIN and NODATA with a SOA: the SOA's TTL.
  assert.equal(maxAge(reply((m) => { m.rcode = Rcode.NXDOMAIN; m.authority = [soa]; }), now), 900);
  assert.equal(maxAge(reply((m) => { m.authority = [soa]; }), now), 900);
  // No records at all, or only an OPT: 5 s.
  assert.equal(maxAge(reply(() => undefined), now), 5);
  assert.equal(maxAge(reply((m) => { m.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [] }; }), now), 5);
  // Errors and delegations: 5 s.
  assert.equal(maxAge(reply((m) => { m.rcode = Rcode.SERVFAIL; }), now), 5);
  assert.equal(maxAge(reply((m) => { m.rcode = Rcode.REFUSED; m.authority = [soa]; }), now), 5);
  assert.equal(maxAge(reply((m) => { m.authority = [rr('example.org.', RRType.NS, 100, { target: 'ns.example.org.' })]; }), now), 5);
  // Additional records count (whoami: TTL 0).
  assert.equal(maxAge(reply((m) => { m.additional = [rr('example.org.', RRType.A, 0, { address: '127.0.0.1' })]; }), now), 0);
  // An expired RRSIG with DO: 5 s; without DO the signature is not looked at.
  const sig = rr('example.org.', RRType.RRSIG, 300, {
    typeCovered: RRType.A, algorithm: 13, labels: 2, originalTTL: 300, expiration: now - 10, inception: now - 1000, keyTag: 1,
    signerName: 'example.org.', signature: new Uint8Array(64),
  });
  const a = rr('example.org.', RRType.A, 300, { address: '192.0.2.1' });
  assert.equal(maxAge(reply((m) => { m.answer = [a, sig]; m.edns = { udpSize: 1232, version: 0, do: true, z: 0, options: [] }; }), now), 5);
  assert.equal(maxAge(reply((m) => { m.answer = [a, sig]; }), now), 300);
});

async function withServer(corefile: string, fn: (s: NodensServer) => Promise<void>): Promise<void> {
  const s = await startServer({ corefile });
  try {
    await fn(s);
  } finally {
    await s.stop();
  }
}

interface H2Reply { status: number; headers: http2.IncomingHttpHeaders; body: Buffer }

function h2(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Uint8Array): Promise<H2Reply> {
  return new Promise((resolve, reject) => {
    const req = session.request(headers);
    const chunks: Buffer[] = [];
    let h: http2.IncomingHttpHeaders = {};
    req.on('response', (hs) => { h = hs; });
    req.on('data', (c: Buffer) => { chunks.push(c); });
    req.on('end', () => { resolve({ status: Number(h[':status']), headers: h, body: Buffer.concat(chunks) }); });
    req.on('error', reject);
    req.end(body === undefined ? undefined : Buffer.from(body));
  });
}

function b64(m: Message): string {
  return Buffer.from(encodeMessage(m)).toString('base64url');
}

const HOSTS = ' hosts {\n  192.0.2.1 www.example.org\n  ttl 300\n }\n';

test('DoH over HTTP/2: GET and POST, statuses and headers as CoreDNS', async () => {
  await withServer(`https://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n${HOSTS}}\nhttps://example.net.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n erratic {\n  drop 1\n }\n}\n`, async (s) => {
    const session = http2.connect(`https://localhost:${s.port}`, { ca: readFileSync(C.ca) });
    try {
      const q = newQuery('www.example.org.', RRType.A);
      const get = await h2(session, { ':path': `/dns-query?dns=${b64(q)}` });
      assert.equal(get.status, 200);
      assert.equal(get.headers['content-type'], 'application/dns-message');
      assert.equal(get.headers['cache-control'], 'max-age=300');
      assert.equal(Number(get.headers['content-length']), get.body.length);
      const m = decodeMessage(get.body);
      assert.equal(m.answer.length, 1);
      assert.equal((m.answer[0]!.data as { address: string }).address, '192.0.2.1');

      const post = await h2(session, { ':method': 'POST', ':path': '/dns-query', 'content-type': 'application/dns-message' }, encodeMessage(q));
      assert.equal(post.status, 200);
      assert.deepEqual(post.body, get.body);

      const bad = async (headers: http2.OutgoingHttpHeaders, status: number, text: string, body?: Uint8Array): Promise<void> => {
        const r = await h2(session, headers, body);
        assert.equal(r.status, status, JSON.stringify(headers));
        assert.equal(r.body.toString(), text + '\n');
        assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8');
        assert.equal(r.headers['x-content-type-options'], 'nosniff');
      };
      await bad({ ':path': '/other?dns=' + b64(q) }, 404, '');
      await bad({ ':path': '/dns-query' }, 400, 'invalid request');
      await bad({ ':path': `/dns-query?dns=${b64(q)}=` }, 400, 'invalid request');
      await bad({ ':path': `/dns-query?dns=${b64(q)}&dns=${b64(q)}` }, 400, 'invalid request');
      await bad({ ':path': '/dns-query?dns=AAAA' }, 400, 'invalid request');
      await bad({ ':method': 'PUT', ':path': `/dns-query?dns=${b64(q)}` }, 400, 'invalid request');
      // A response, not a query: refused as miekg's accept policy does.
      const resp = replyTo(q);
      await bad({ ':path': `/dns-query?dns=${b64(resp)}` }, 400, 'invalid request');
      await bad({ ':method': 'POST', ':path': '/dns-query' }, 400, 'invalid request', new Uint8Array(70000));
      // The chain wrote nothing.
      await bad({ ':path': `/dns-query?dns=${b64(newQuery('x.example.net.', RRType.A))}` }, 500, 'No response');
      // A percent-encoded path is decoded as Go's URL.Path.
      assert.equal((await h2(session, { ':path': `/dns%2Dquery?dns=${b64(q)}` })).status, 200);
      // max_streams default: 250 advertised.
      assert.equal(session.remoteSettings.maxConcurrentStreams, 250);
    } finally {
      session.close();
    }
  });
});

function h1(url: string, opts: https.RequestOptions = {}, body?: Uint8Array): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const mod = url.startsWith('https:') ? https : http;
    const req = mod.request(url, { ca: readFileSync(C.ca), ...opts }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => { chunks.push(c); });
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }); });
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('DoH over HTTP/1.1 with TLS, and plain HTTP/1.1 without tls', async () => {
  const q = newQuery('www.example.org.', RRType.A);
  await withServer(`https://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n${HOSTS}}\n`, async (s) => {
    const r = await h1(`https://localhost:${s.port}/dns-query?dns=${b64(q)}`);
    assert.equal(r.status, 200);
    assert.equal(r.headers['cache-control'], 'max-age=300');
    // Go sends no Connection or Keep-Alive header.
    assert.equal(r.headers.connection, undefined);
    assert.equal(r.headers['keep-alive'], undefined);
    // POST: the body is the message; one longer than 64 KiB is a 400 (in several chunks either way)
    const post = { method: 'POST', headers: { 'content-type': 'application/dns-message' } };
    const ok = await h1(`https://localhost:${s.port}/dns-query`, post, encodeMessage(q));
    assert.equal(ok.status, 200);
    assert.equal(decodeMessage(ok.body).answer.length, 1);
    const padded = new Uint8Array(70000);
    padded.set(encodeMessage(q)); // a valid query, then bytes past the limit
    const big = await h1(`https://localhost:${s.port}/dns-query`, post, padded);
    assert.equal(big.status, 400);
    assert.equal(big.body.toString(), 'invalid request\n');
  });
  await withServer(`https://.:0 {\n bind 127.0.0.1\n whoami\n}\n`, async (s) => {
    const r = await h1(`http://127.0.0.1:${s.port}/dns-query?dns=${b64(q)}`);
    assert.equal(r.status, 200);
    // whoami's records have TTL 0; the request is tcp.
    assert.equal(r.headers['cache-control'], 'max-age=0');
    assert.equal(decodeMessage(r.body).additional.find((a) => a.type === RRType.SRV)!.name, '_tcp.www.example.org.');
  });
});

test('https { max_streams } is advertised; blocks sharing a listener must agree', async () => {
  await withServer(`https://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n https {\n  max_streams 7\n }\n whoami\n}\n`, async (s) => {
    const session = http2.connect(`https://localhost:${s.port}`, { ca: readFileSync(C.ca) });
    try {
      await new Promise<void>((resolve) => { session.once('remoteSettings', () => { resolve(); }); });
      assert.equal(session.remoteSettings.maxConcurrentStreams, 7);
    } finally {
      session.close();
    }
  });
  await assert.rejects(startServer({ corefile: `https://.:0 {\n bind 127.0.0.1\n https {\n  max_streams 10\n }\n whoami\n}\nhttps://a.:0 {\n bind 127.0.0.1\n https {\n  max_streams 11\n }\n whoami\n}\n` }),
    { message: 'conflicting max_streams values for shared HTTPS listener https://127.0.0.1:0: 10 and 11' });
});

test('https { max_connections }: connections beyond the limit are not served', async () => {
  await withServer(`https://.:0 {\n bind 127.0.0.1\n https {\n  max_connections 1\n }\n whoami\n}\n`, async (s) => {
    const q = newQuery('example.org.', RRType.A);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const first = await h1(`http://127.0.0.1:${s.port}/dns-query?dns=${b64(q)}`, { agent });
      assert.equal(first.status, 200);
      // The first connection is still open (keep-alive): a second one is turned away.
      await assert.rejects(h1(`http://127.0.0.1:${s.port}/dns-query?dns=${b64(q)}`, { agent: false }));
    } finally {
      agent.destroy();
    }
  });
});

function run(tool: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(tool, args, { timeout: 10000 }, (err, stdout, stderr) => {
      if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') { reject(new Error(`${tool} is not installed`)); return; }
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

test('real DoH clients: kdig +https, dig +https, curl --doh-url', async () => {
  await withServer(`https://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n${HOSTS}}\n`, async (s) => {
    const k = await kdig(s.port, '+https', `+tls-ca=${C.ca}`, '+tls-hostname=localhost', 'www.example.org');
    assert.match(k, /HTTP session \(HTTP\/2-POST\)-\(localhost\/dns-query\)-\(status: 200\)/);
    assert.match(k, /opcode: QUERY; status: NOERROR/);
    assert.match(k, /www\.example\.org\.\s+300\s+IN\s+A\s+192\.0\.2\.1/);
    const kp = await kdig(s.port, '+https-get', `+tls-ca=${C.ca}`, '+tls-hostname=localhost', 'www.example.org');
    assert.match(kp, /HTTP session \(HTTP\/2-GET\)-\(localhost\/dns-query\)-\(status: 200\)/);
    assert.match(kp, /192\.0\.2\.1/);
    // BIND's dig (9.18) speaks DoH without verifying the certificate.
    const d = await dig(s.port, '+https', 'www.example.org');
    assert.equal(status(d), 'NOERROR');
    assert.match(d, /192\.0\.2\.1/);
    // curl resolves the host name through nodens's DoH; the HTTP request itself goes to a local server.
    const web = http.createServer((_req, res) => { res.end('hello via doh\n'); });
    await new Promise<void>((resolve) => { web.listen(0, '127.0.0.1', () => { resolve(); }); });
    const hostsPort = (web.address() as { port: number }).port;
    try {
      await s.reload(`https://.:${s.port} {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n hosts {\n  127.0.0.1 web.example.org\n }\n}\n`);
      const c = await run('curl', ['-s', '--max-time', '5', '--cacert', C.ca, '--doh-url', `https://localhost:${s.port}/dns-query`,
        `http://web.example.org:${hostsPort}/`]);
      assert.equal(c.stdout, 'hello via doh\n', c.stderr);
    } finally {
      web.close();
    }
  });
});

test('coredns_dns_https_responses_total counts DoH replies by status (with prometheus in the server)', async () => {
  await withServer(`https://.:0 {\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n whoami\n}\n`, async (s) => {
    const server = `https://127.0.0.1:0`;
    const before = { ok: await metricValue('coredns_dns_https_responses_total', { server, status: '200' }, s.metrics), nf: await metricValue('coredns_dns_https_responses_total', { server, status: '404' }, s.metrics) };
    const q = newQuery('example.org.', RRType.A);
    assert.equal((await h1(`http://127.0.0.1:${s.port}/dns-query?dns=${b64(q)}`)).status, 200);
    assert.equal((await h1(`http://127.0.0.1:${s.port}/elsewhere`)).status, 404);
    assert.equal(await metricValue('coredns_dns_https_responses_total', { server, status: '200' }, s.metrics), before.ok + 1);
    assert.equal(await metricValue('coredns_dns_https_responses_total', { server, status: '404' }, s.metrics), before.nf + 1);
    // The DNS metrics see the DoH query as tcp.
    assert.ok(await metricValue('coredns_dns_requests_total', { server, proto: 'tcp' }, s.metrics) >= 1);
  });
});

test('timeouts idle closes an idle DoH connection (HTTP/2 and HTTP/1.1)', async () => {
  await withServer(`https://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n timeouts {\n  idle 1s\n }\n whoami\n}\n`, async (s) => {
    const session = http2.connect(`https://localhost:${s.port}`, { ca: readFileSync(C.ca) });
    const q = newQuery('example.org.', RRType.A);
    assert.equal((await h2(session, { ':path': `/dns-query?dns=${b64(q)}` })).status, 200);
    const t0 = Date.now();
    await new Promise<void>((resolve) => { session.once('close', () => { resolve(); }); });
    const waited = Date.now() - t0;
    assert.ok(waited >= 800 && waited < 6000, `HTTP/2 closed after ${waited} ms`);
  });
  await withServer(`https://.:0 {\n bind 127.0.0.1\n timeouts {\n  idle 1s\n }\n whoami\n}\n`, async (s) => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const q = newQuery('example.org.', RRType.A);
      const t0 = Date.now();
      const closed = await new Promise<number>((resolve, reject) => {
        const req = http.get(`http://127.0.0.1:${s.port}/dns-query?dns=${b64(q)}`, { agent }, (res) => {
          res.resume();
          // The kept-alive connection closes by itself after the idle time.
          res.socket.once('close', () => { resolve(Date.now()); });
        });
        req.once('error', reject);
        setTimeout(() => { reject(new Error('the idle HTTP/1.1 connection was not closed within 6 s')); }, 6000).unref();
      });
      assert.ok(closed - t0 >= 800, `HTTP/1.1 closed after ${closed - t0} ms`);
    } finally {
      agent.destroy();
    }
  });
});

test('DoH: a chain that answers later (erratic delay) is waited for', async () => {
  await withServer(`https://.:0 {\n bind 127.0.0.1\n erratic {\n  delay 1 50ms\n }\n}\n`, async (s) => {
    const q = newQuery('example.org.', RRType.A);
    const t0 = Date.now();
    const r = await h1(`http://127.0.0.1:${s.port}/dns-query?dns=${b64(q)}`);
    assert.equal(r.status, 200);
    assert.ok(Date.now() - t0 >= 40);
    assert.equal(decodeMessage(r.body).answer.length, 1);
  });
});

test('DoH over HTTP/2: streams the client resets (with an error code) while their answer is pending do not stop the server', async () => {
  await withServer(`https://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n erratic {\n  delay 1 50ms\n }\n}\n`, async (s) => {
    const session = http2.connect(`https://localhost:${s.port}`, { ca: readFileSync(C.ca) });
    try {
      const q = newQuery('example.org.', RRType.A);
      // GETs in flight, and a POST whose body never ends, each reset with INTERNAL_ERROR.
      const resets = [
        session.request({ ':path': `/dns-query?dns=${b64(q)}` }),
        session.request({ ':path': `/dns-query?dns=${b64(q)}` }),
        session.request({ ':method': 'POST', ':path': '/dns-query' }, { endStream: false }),
      ];
      await Promise.all(resets.map((req) => new Promise<void>((resolve) => {
        req.on('error', () => { /* the reset's own error */ });
        req.on('close', () => { resolve(); });
        setTimeout(() => { req.close(http2.constants.NGHTTP2_INTERNAL_ERROR); }, 10);
      })));
      await new Promise((resolve) => setTimeout(resolve, 100));
      const r = await h2(session, { ':path': `/dns-query?dns=${b64(q)}` });
      assert.equal(r.status, 200);
      assert.equal(decodeMessage(r.body).answer.length, 1);
    } finally {
      session.close();
    }
  });
});

test('graceful stop: a DoH answer the chain gives during the stop still reaches the client (HTTP/2 and HTTP/1.1)', async () => {
  const q = newQuery('example.org.', RRType.A);
  for (const proto of ['h2', 'h1']) {
    const s = await startServer({ corefile: `https://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n erratic {\n  delay 1 200ms\n }\n}\n` });
    let session: http2.ClientHttp2Session | undefined;
    let answer: Promise<{ status: number; body: Buffer }>;
    if (proto === 'h2') {
      session = http2.connect(`https://localhost:${s.port}`, { ca: readFileSync(C.ca) });
      session.on('error', () => { /* the server goes away */ });
      answer = h2(session, { ':path': `/dns-query?dns=${b64(q)}` });
    } else {
      answer = h1(`https://localhost:${s.port}/dns-query?dns=${b64(q)}`, { agent: false });
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    await s.stop();
    const r = await answer;
    session?.destroy();
    assert.equal(r.status, 200, proto);
    assert.equal(decodeMessage(r.body).answer.length, 1, proto);
  }
});
