import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type net from 'node:net';
import tls from 'node:tls';
import { parse, plugin, type TlsOptions } from './setup.ts';
import { captureLog, parseTable, runSetup, setupError } from '../pkg/testing.ts';
import { startServer, type NodensServer } from '../../index.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { newQuery } from '../../wire/message.ts';
import { RRType } from '../../wire/constants.ts';
import type { Message } from '../../wire/types.ts';
import { testCerts } from '../../../test/helpers/certs.ts';
import { serverTlsOptions } from '../../core/tls.ts';
import type { ClientAuth, ServerTlsConfig } from '../plugin.ts';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { DEBIAN_PYTHON, dig, kdig, status } from '../../../test/helpers/dig.ts';
import { freePort } from '../../../test/helpers/server.ts';

const C = testCerts();
const base: TlsOptions = { certFile: 'cert.pem', keyFile: 'key.pem', caFile: undefined, clientAuth: 'nocert', keylog: undefined };

test('tls parse', async () => {
  await parseTable('tls', parse, [
    ['tls://.:853 {\n tls cert.pem key.pem\n}', base],
    ['tls://.:853 {\n tls cert.pem key.pem ca.pem\n}', { ...base, caFile: 'ca.pem' }],
    ['tls://.:853 {\n tls cert.pem key.pem ca.pem {\n  client_auth require_and_verify\n }\n}', { ...base, caFile: 'ca.pem', clientAuth: 'require_and_verify' }],
    ['tls://.:853 {\n tls cert.pem key.pem {\n  client_auth request\n  client_auth require\n }\n}', { ...base, clientAuth: 'require' }],
    ['tls://.:853 {\n tls cert.pem key.pem {\n  client_auth verify_if_given\n }\n}', { ...base, clientAuth: 'verify_if_given' }],
    ['tls://.:853 {\n tls cert.pem key.pem {\n  client_auth nocert\n }\n}', base],
    ['tls://.:853 {\n tls cert.pem key.pem {\n  keylog /tmp/k.log\n }\n}', { ...base, keylog: { file: '/tmp/k.log', at: 'Corefile:4' } }],
    // The last tls line wins.
    ['tls://.:853 {\n tls a.pem b.pem\n tls cert.pem key.pem\n}', base],
    ['tls://.:853 {\n tls cert.pem\n}', "plugin/tls: plugin/tls: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'cert.pem'"],
    ['tls://.:853 {\n tls a b c d\n}', "plugin/tls: plugin/tls: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'd'"],
    ['tls://.:853 {\n tls cert.pem key.pem {\n  client_auth foo\n }\n}', "plugin/tls: Corefile:3 - Error during parsing: unknown authentication type 'foo'"],
    ['tls://.:853 {\n tls cert.pem key.pem {\n  client_auth\n }\n}', "plugin/tls: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'client_auth'"],
    ['tls://.:853 {\n tls cert.pem key.pem {\n  client_auth require verify_if_given\n }\n}', "plugin/tls: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'verify_if_given'"],
    ['tls://.:853 {\n tls cert.pem key.pem {\n  bogus\n }\n}', "plugin/tls: Corefile:3 - Error during parsing: unknown option 'bogus'"],
    ['tls://.:853 {\n tls cert.pem key.pem {\n  keylog\n }\n}', "plugin/tls: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'keylog'"],
    // ACME (tls without CERT KEY): CoreDNS's option checks, then nodens has no ACME client.
    ['tls://.:853 {\n tls\n}', 'plugin/tls: ACME requires at least one domain'],
    ['tls://.:853 {\n tls {\n  acme\n }\n}', "plugin/tls: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'acme'"],
    ['tls://.:853 {\n tls {\n  foo\n }\n}', 'plugin/tls: Corefile:3 - Error during parsing: unknown ACME option "foo"'],
    ['tls://.:853 {\n tls {\n  email a@b\n  email c@d\n }\n}', 'plugin/tls: Corefile:4 - Error during parsing: ACME option "email" can only be specified once'],
    ['tls://.:853 {\n tls {\n  email a@b c@d\n }\n}', "plugin/tls: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'c@d'"],
    ['tls://.:853 {\n tls {\n  acme dns.example.org\n }\n}', 'plugin/tls: Corefile:2 - Error during parsing: automatic certificates (ACME) are not supported by nodens; give CERT and KEY'],
  ]);
});

test('tls setup reads the files with Go\'s errors', async () => {
  const dir = C.dir;
  const junk = join(dir, 'junk.txt');
  writeFileSync(junk, 'no pem here\n');
  const rows: Array<[string, string]> = [
    [`nope.pem ${C.key}`, 'plugin/tls: could not load TLS cert: open nope.pem: no such file or directory'],
    [`${C.cert} nope.pem`, 'plugin/tls: could not load TLS cert: open nope.pem: no such file or directory'],
    [`${C.cert} ${C.key} nope.pem`, 'plugin/tls: error reading nope.pem: open nope.pem: no such file or directory'],
    [`${C.cert} ${C.key} ${junk}`, 'plugin/tls: could not read root certs: %!s(<nil>)'],
    [`${C.cert} ${C.key} ${C.key}`, 'plugin/tls: could not read root certs: %!s(<nil>)'],
    [`${C.cert} ${C.cert}`, 'plugin/tls: could not load TLS cert: tls: found a certificate rather than a key in the PEM for the private key'],
    [`${C.key} ${C.key}`, 'plugin/tls: could not load TLS cert: tls: failed to find certificate PEM data in certificate input, but did find a private key; PEM inputs may have been switched'],
    [`${C.cert} ${junk}`, 'plugin/tls: could not load TLS cert: tls: failed to find any PEM data in key input'],
    [`${junk} ${C.key}`, 'plugin/tls: could not load TLS cert: tls: failed to find any PEM data in certificate input'],
    [`${C.cert} ${C.caKey}`, 'plugin/tls: could not load TLS cert: tls: private key does not match public key'],
    [`${dir} ${C.key}`, `plugin/tls: could not load TLS cert: read ${dir}: is a directory`],
  ];
  for (const [args, want] of rows) {
    assert.equal(await setupError(plugin, `tls://.:853 {\n tls ${args}\n}`), want, args);
  }
  assert.equal(await setupError(plugin, `tls://.:853 {\n tls ${C.cert} ${C.key} {\n  keylog /nonexistent/dir/k.log\n }\n}`),
    'plugin/tls: Corefile:4 - Error during parsing: unable to write TLS Key Log to "/nonexistent/dir/k.log": open /nonexistent/dir/k.log: no such file or directory');
});

test('tls setup: the block config holds the certificate and policy; no handler', async () => {
  const r = await runSetup(plugin, `tls://.:853 {\n tls ${C.cert} ${C.key} ${C.ca} {\n  client_auth verify_if_given\n }\n}`);
  assert.equal(r.factories.length, 0);
  const t = r.config.tls!;
  assert.equal(t.clientAuth, 'verify_if_given');
  assert.match(t.cert.toString(), /^-----BEGIN CERTIFICATE-----/);
  assert.match(t.key.toString(), /PRIVATE KEY-----/);
  assert.match(t.ca!.toString(), /^-----BEGIN CERTIFICATE-----/);
  assert.equal(t.keyLog, undefined);
});

function frame(m: Message): Buffer {
  const w = encodeMessage(m);
  const out = Buffer.alloc(w.length + 2);
  out.writeUInt16BE(w.length, 0);
  out.set(w, 2);
  return out;
}

function query(name: string, id: number): Message {
  const m = newQuery(name, RRType.A);
  m.id = id;
  return m;
}

/** Reads `n` length-prefixed messages from a stream socket. */
function readFrames(sock: net.Socket, n: number): Promise<Message[]> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const out: Message[] = [];
    const onData = (d: Buffer): void => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 2 && buf.length >= buf.readUInt16BE(0) + 2) {
        const len = buf.readUInt16BE(0);
        out.push(decodeMessage(buf.subarray(2, 2 + len)));
        buf = buf.subarray(2 + len);
        if (out.length === n) { sock.off('data', onData); resolve(out); return; }
      }
    };
    sock.on('data', onData);
    sock.once('error', reject);
    sock.once('close', () => { if (out.length < n) reject(new Error(`closed after ${out.length} replies`)); });
  });
}

interface DotClientOptions { cert?: string; key?: string }

function dotConnect(port: number, o: DotClientOptions = {}): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({
      host: '127.0.0.1', port, ca: readFileSync(C.ca), servername: 'localhost',
      cert: o.cert === undefined ? undefined : readFileSync(o.cert), key: o.key === undefined ? undefined : readFileSync(o.key),
    }, () => { resolve(s); });
    s.once('error', reject);
  });
}

/** One query over a fresh DoT connection; rejects when the server refuses the connection. */
async function dotQuery(port: number, o: DotClientOptions = {}): Promise<Message> {
  const s = await dotConnect(port, o);
  try {
    s.write(frame(query('example.org.', 7)));
    return (await readFrames(s, 1))[0]!;
  } finally {
    s.destroy();
  }
}

async function withServer(corefile: string, fn: (s: NodensServer) => Promise<void>): Promise<void> {
  const s = await startServer({ corefile });
  try {
    await fn(s);
  } finally {
    await s.stop();
  }
}

test('DoT: TLS 1.2+, length-prefixed, pipelined queries answered in order; the request is tcp', async () => {
  await withServer(`tls://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n whoami\n}\n`, async (s) => {
    const sock = await dotConnect(s.port);
    try {
      assert.ok(['TLSv1.2', 'TLSv1.3'].includes(sock.getProtocol()!));
      sock.write(Buffer.concat([frame(query('a.example.org.', 1)), frame(query('b.example.org.', 2)), frame(query('c.example.org.', 3))]));
      const r = await readFrames(sock, 3);
      assert.deepEqual(r.map((m) => m.id), [1, 2, 3]);
      // whoami: the transport is tcp
      assert.equal(r[0]!.additional.find((a) => a.type === RRType.SRV)!.name, '_tcp.a.example.org.');
    } finally {
      sock.destroy();
    }
    // TLS 1.1 is refused (CoreDNS: MinVersion TLS 1.2).
    await assert.rejects(new Promise((resolve, reject) => {
      const t = tls.connect({ host: '127.0.0.1', port: s.port, ca: readFileSync(C.ca), servername: 'localhost', maxVersion: 'TLSv1.1', minVersion: 'TLSv1' }, () => { resolve(t); });
      t.once('error', reject);
    }));
  });
});

test('DoT with kdig +tls, verifying the certificate', async () => {
  await withServer(`tls://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n whoami\n}\n`, async (s) => {
    const out = await kdig(s.port, '+tls', `+tls-ca=${C.ca}`, '+tls-hostname=localhost', 'example.org');
    assert.equal(status(out), 'NOERROR');
    assert.match(out, /_tcp\.example\.org\./);
    assert.match(out, /TLS session \(TLS1\.[23]\)/);
  });
});

test('tls:// without tls: plain DNS over TCP on the port, no UDP', async () => {
  await withServer('tls://.:0 {\n bind 127.0.0.1\n whoami\n}\n', async (s) => {
    const out = await kdig(s.port, '+tcp', 'example.org');
    assert.equal(status(out), 'NOERROR');
    assert.match(out, /_tcp\.example\.org\./);
    const udp = await kdig(s.port, '+notcp', 'example.org').catch((e: Error) => e.message);
    assert.doesNotMatch(udp, /status: NOERROR/);
  });
});

test('client_auth policies', async () => {
  const client = { cert: C.clientCert, key: C.clientKey };
  // A certificate from no known CA.
  const selfSigned = { cert: C.otherCert, key: C.otherKey };
  const cases: Array<[string, DotClientOptions, boolean]> = [
    ['nocert', {}, true],
    ['request', {}, true],
    ['request', selfSigned, true],
    ['require', {}, false],
    ['require', selfSigned, true],
    ['verify_if_given', {}, true],
    ['verify_if_given', client, true],
    ['require_and_verify', {}, false],
    ['require_and_verify', client, true],
  ];
  for (const [policy, opts, ok] of cases) {
    await withServer(`tls://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key} ${C.ca} {\n  client_auth ${policy}\n }\n whoami\n}\n`, async (s) => {
      const got = await dotQuery(s.port, opts).then(() => true, () => false);
      assert.equal(got, ok, `${policy} ${opts.cert ?? "-"}`);
    });
  }
  // A certificate that does not verify against CA is refused by verify_if_given and require_and_verify.
  for (const policy of ['verify_if_given', 'require_and_verify']) {
    await withServer(`tls://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key} ${C.ca} {\n  client_auth ${policy}\n }\n whoami\n}\n`, async (s) => {
      assert.equal(await dotQuery(s.port, selfSigned).then(() => true, () => false), false, policy);
    });
  }
});

test('keylog: the TLS secrets are appended to the file, and a warning is logged', async () => {
  const file = join(C.dir, 'keys.log');
  rmSync(file, { force: true });
  const lines = await captureLog(async () => {
    await withServer(`tls://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key} {\n  keylog ${file}\n }\n whoami\n}\n`, async (s) => {
      await dotQuery(s.port);
    });
  });
  assert.ok(lines.includes(`[WARNING] plugin/tls: Writing TLS Key Log to "${file}"`), lines.join('\n'));
  assert.ok(existsSync(file));
  assert.match(readFileSync(file, 'utf8'), /^(CLIENT_HANDSHAKE_TRAFFIC_SECRET|CLIENT_RANDOM|SERVER_HANDSHAKE_TRAFFIC_SECRET) /m);
});

test('timeouts idle applies to DoT connections', async () => {
  await withServer(`tls://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n timeouts {\n  idle 1s\n }\n whoami\n}\n`, async (s) => {
    const sock = await dotConnect(s.port);
    sock.write(frame(query('example.org.', 1)));
    await readFrames(sock, 1);
    const t0 = Date.now();
    await new Promise<void>((resolve) => { sock.once('close', () => { resolve(); }); });
    const waited = Date.now() - t0;
    assert.ok(waited >= 900 && waited < 6000, `closed after ${waited} ms`);
  });
});

test('blocks sharing a DoT listener must agree on TLS (CoreDNS sharedTLSConfig)', async () => {
  const start = async (cf: string): Promise<string> => {
    try {
      const s = await startServer({ corefile: cf });
      await s.stop();
      return '';
    } catch (e) {
      return (e as Error).message;
    }
  };
  assert.equal(await start(`tls://a.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n whoami\n}\ntls://b.:0 {\n bind 127.0.0.1\n whoami\n}\n`),
    'conflicting TLS configuration for shared listener tls://127.0.0.1:0 between zones "a." and "b.": TLS is configured for only one server block');
  assert.equal(await start(`tls://a.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n whoami\n}\ntls://b.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key} {\n  client_auth request\n }\n whoami\n}\n`),
    'conflicting TLS configuration for shared listener tls://127.0.0.1:0 between zones "a." and "b.": client authentication policies differ');
  assert.equal(await start(`tls://a.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n whoami\n}\ntls://b.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key} ${C.ca}\n whoami\n}\n`),
    'conflicting TLS configuration for shared listener tls://127.0.0.1:0 between zones "a." and "b.": client CA pools differ');
  assert.equal(await start(`tls://a.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n whoami\n}\ntls://b.:0 {\n bind 127.0.0.1\n tls ${C.clientCert} ${C.clientKey}\n whoami\n}\n`),
    'conflicting TLS configuration for shared listener tls://127.0.0.1:0 between zones "a." and "b.": server certificates differ');
  assert.equal(await start(`tls://a.:0 tls://b.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n whoami\n}\n`), '');
});

test('quic:// and https3:// are refused at start-up', async () => {
  for (const t of ['quic', 'https3']) {
    await assert.rejects(startServer({ corefile: `${t}://.:0 {\n whoami\n}\n` }), { message: `cannot serve ${t}://.:0 - transport ${t} is not supported by nodens` });
  }
});

test('a reload takes a new certificate without closing the listener', async () => {
  const port = await freePort();
  await withServer(`tls://.:${port} {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n whoami\n}\n`, async (s) => {
    const before = await dotConnect(port);
    const first = before.getPeerCertificate().fingerprint256;
    before.destroy();
    assert.equal(await s.reload(`tls://.:${port} {\n bind 127.0.0.1\n tls ${C.clientCert} ${C.clientKey}\n whoami\n}\n`), undefined);
    const after = await new Promise<tls.TLSSocket>((resolve, reject) => {
      const t = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => { resolve(t); });
      t.once('error', reject);
    });
    assert.notEqual(after.getPeerCertificate().fingerprint256, first);
    after.destroy();
    // ...and back to plain TCP without tls.
    assert.equal(await s.reload(`tls://.:${port} {\n bind 127.0.0.1\n whoami\n}\n`), undefined);
    assert.equal(status(await kdig(port, '+tcp', 'example.org')), 'NOERROR');
  });
});

test('default ports: tls:// 853, https:// 443, whatever -dns.port says', async () => {
  const r = await runSetup(plugin, `tls://. {\n tls ${C.cert} ${C.key}\n}\nhttps://. {\n tls ${C.cert} ${C.key}\n}\n. {\n whoami\n}\n`);
  assert.deepEqual(r.instance.bannerLines(), ['tls://.:853', 'https://.:443', '.:53']);
});

test('DoT with BIND dig +tls', async () => {
  await withServer(`tls://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n whoami\n}\n`, async (s) => {
    const out = await dig(s.port, '+tls', 'example.org');
    assert.equal(status(out), 'NOERROR');
    assert.match(out, /_tcp\.example\.org\./);
    assert.match(out, /\(TLS\)/);
  });
});

/** dnspython's DoT and DoH clients (python3 with dnspython, httpx and h2: a missing one is a loud failure). */
const PY = `
import sys, ssl
import dns.message, dns.query, dns.rcode
mode, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
q = dns.message.make_query('www.example.org', 'A')
if mode == 'tls':
    ctx = ssl.create_default_context(cafile=ca)
    r = dns.query.tls(q, '127.0.0.1', port=port, ssl_context=ctx, server_hostname='localhost', timeout=5)
else:
    # HTTP/2 (dnspython 2.4 and later would try HTTP/3 first; 2.3 has no http_version and uses HTTP/2 with h2)
    kw = {'http_version': dns.query.HTTPVersion.H2} if hasattr(dns.query, 'HTTPVersion') else {}
    r = dns.query.https(q, 'https://127.0.0.1:%d/dns-query' % port, verify=ca, post=(mode == 'https-post'), timeout=5, **kw)
print(dns.rcode.to_text(r.rcode()), r.answer[0].to_text() if r.answer else '-')
`;


function python(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(DEBIAN_PYTHON, ['-c', PY, ...args], { timeout: 15000 }, (err, stdout, stderr) => {
      if (err) {
        reject(new Error(`${DEBIAN_PYTHON} (with dnspython, httpx, h2: apt-get install -y python3-dnspython python3-httpx python3-h2) failed (newer dnspython: pip install "dnspython[doh]"): ${stderr || err.message}`));
        return;
      }
      resolve(stdout.trim());
    });
  });
}

test('dnspython over DoT and DoH (GET and POST)', async () => {
  const hosts = ' hosts {\n  192.0.2.1 www.example.org\n  ttl 300\n }\n';
  await withServer(`tls://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n${hosts}}\n`, async (s) => {
    assert.equal(await python(['tls', String(s.port), C.ca]), 'NOERROR www.example.org. 300 IN A 192.0.2.1');
  });
  await withServer(`https://.:0 {\n bind 127.0.0.1\n tls ${C.cert} ${C.key}\n${hosts}}\n`, async (s) => {
    assert.equal(await python(['https-post', String(s.port), C.ca]), 'NOERROR www.example.org. 300 IN A 192.0.2.1');
    assert.equal(await python(['https-get', String(s.port), C.ca]), 'NOERROR www.example.org. 300 IN A 192.0.2.1');
  });
});

function serverConfig(clientAuth: ClientAuth, ca?: Buffer): ServerTlsConfig {
  const c = testCerts();
  return { cert: readFileSync(c.cert), key: readFileSync(c.key), ca, clientAuth, keyLog: undefined };
}

test('a server that asks for no client certificate gets an empty trust store; the verifying policies keep Node\'s roots or the given CA', () => {
  assert.deepEqual(serverTlsOptions(serverConfig('nocert'), 1000).ca, []);
  for (const policy of ['request', 'require', 'verify_if_given', 'require_and_verify'] as const) {
    assert.equal(serverTlsOptions(serverConfig(policy), 1000).ca, undefined, policy);
  }
  const ca = readFileSync(testCerts().ca);
  assert.equal(serverTlsOptions(serverConfig('nocert', ca), 1000).ca, ca);
  assert.equal(serverTlsOptions(serverConfig('require_and_verify', ca), 1000).ca, ca);
});

test('with the empty store the handshake still completes with the certificate of the file', async () => {
  const server = tls.createServer(serverTlsOptions(serverConfig('nocert'), 1000), (s) => { s.end('ok'); });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const socket = tls.connect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, ca: readFileSync(testCerts().ca) });
    await once(socket, 'secureConnect');
    assert.equal(socket.authorized, true);
    const leaf = socket.getPeerCertificate(true);
    assert.match(leaf.subjectaltname ?? '', /IP Address:127\.0\.0\.1/);
    const [data] = await once(socket, 'data') as [Buffer];
    assert.equal(data.toString(), 'ok');
    socket.destroy();
  } finally {
    server.close();
  }
});
