import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import dgram from 'node:dgram';
import { parse } from './setup.ts';
import { HeaderError, NEED_MORE, Transport, readHeader } from './header.ts';
import { Policy, ProxyProtocolPolicy, UDP_SESSION_MAX, policyFor, tlvHex, type ProxyOptions } from './proxyproto.ts';
import { v1Header, v2Header } from './testheaders.ts';
import { parseTable } from '../pkg/testing.ts';
import type { PluginLogger, ProxiedPeer } from '../plugin.ts';
import { parseCidr } from '../../wire/ip.ts';
import { startServer } from '../../index.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { newQuery } from '../../wire/message.ts';
import { formatRecord } from '../../wire/text.ts';
import { RRType } from '../../wire/constants.ts';
import { freePort } from '../../../test/helpers/server.ts';

const pre = 'plugin/proxyproto: Corefile:';

test('proxyproto parse: CoreDNS setup_test cases', async () => {
  const view = (o: ProxyOptions): Record<string, unknown> => ({
    allow: o.allow.length, defaultPolicy: o.defaultPolicy, sessionTtlMs: o.sessionTtlMs, maxSessions: o.maxSessions, tlvMetadata: o.tlvMetadata,
  });
  const none = { allow: 0, defaultPolicy: undefined, sessionTtlMs: 0, maxSessions: 0, tlvMetadata: false };
  await parseTable('proxyproto', parse, [
    ['. {\n proxyproto\n}', none],
    ['. {\n proxyproto {\n  allow 127.0.0.1/8 ::1/128\n }\n}', { ...none, allow: 2 }],
    ['. {\n proxyproto {\n  allow 127.0.0.1/8 ::1/128\n  default ignore\n }\n}', { ...none, allow: 2, defaultPolicy: 'ignore' }],
    ['. {\n proxyproto {\n  allow\n }\n}', none],
    ['. {\n proxyproto {\n  default SKIP\n }\n}', { ...none, defaultPolicy: 'skip' }],
    ['. {\n proxyproto {\n  udp_session_tracking 28s\n }\n}', { ...none, sessionTtlMs: 28000 }],
    ['. {\n proxyproto {\n  allow 10.0.0.0/8\n  udp_session_tracking 1m 500\n }\n}', { ...none, allow: 1, sessionTtlMs: 60000, maxSessions: 500 }],
    ['. {\n proxyproto {\n  udp_session_tracking -5s\n }\n}', none],
    // Several lines accumulate, as CoreDNS's loop over them does.
    ['. {\n proxyproto {\n  allow 10.0.0.0/8\n }\n proxyproto {\n  allow 10.1.0.0/16\n }\n}', { ...none, allow: 2 }],
    // Errors: CoreDNS's text; `unknown option` is a bare Controller error (no plugin prefix).
    ['. {\n proxyproto {\n  unknown\n }\n}', "Corefile:3 - Error during parsing: unknown option 'unknown'"],
    ['. {\n proxyproto extra_arg\n}', `${pre}2 - Error during parsing: Wrong argument count or unexpected line ending after 'extra_arg'`],
    ['. {\n proxyproto {\n  allow invalid_ip\n }\n}', 'plugin/proxyproto: invalid_ip: invalid CIDR address: invalid_ip'],
    ['. {\n proxyproto {\n  allow 127.0.0.1/8\n  default invalid_policy\n }\n}', `${pre}4 - Error during parsing: Wrong argument count or unexpected line ending after 'invalid_policy'`],
    ['. {\n proxyproto {\n  default\n }\n}', `${pre}3 - Error during parsing: Wrong argument count or unexpected line ending after 'default'`],
    ['. {\n proxyproto {\n  udp_session_tracking\n }\n}', `${pre}3 - Error during parsing: Wrong argument count or unexpected line ending after 'udp_session_tracking'`],
    ['. {\n proxyproto {\n  udp_session_tracking 28s 100 extra\n }\n}', `${pre}3 - Error during parsing: Wrong argument count or unexpected line ending after 'extra'`],
    ['. {\n proxyproto {\n  udp_session_tracking notaduration\n }\n}', 'plugin/proxyproto: udp_session_tracking: invalid duration "notaduration": time: invalid duration "notaduration"'],
    ['. {\n proxyproto {\n  udp_session_tracking 28s notanumber\n }\n}', 'plugin/proxyproto: udp_session_tracking: invalid max sessions "notanumber": must be a positive integer'],
    ['. {\n proxyproto {\n  udp_session_tracking 28s 0\n }\n}', 'plugin/proxyproto: udp_session_tracking: invalid max sessions "0": must be a positive integer'],
    ['. {\n proxyproto {\n  udp_session_tracking 28s -1\n }\n}', 'plugin/proxyproto: udp_session_tracking: invalid max sessions "-1": must be a positive integer'],
    ['. {\n proxyproto {\n  tlv_metadata on\n }\n}', `${pre}3 - Error during parsing: Wrong argument count or unexpected line ending after 'on'`],
    ['. {\n proxyproto {\n  allow 10.0.0.0/8\n  tlv_metadata\n }\n}', { ...none, allow: 1, tlvMetadata: true }],
    // What nodens does not implement is refused, never half-done.
    ['tls://.:853 {\n proxyproto\n}', /PROXY protocol on tls:\/\/ listeners is not supported by nodens/],
  ], { view });
});

test('TLVs: split and joined as go-proxyproto does (NOOP loses its value; a truncated vector gives nothing)', () => {
  assert.equal(tlvHex(Buffer.from([0xea, 0, 2, 0xca, 0xfe])), 'ea0002cafe');
  assert.equal(tlvHex(Buffer.from([0x04, 0, 2, 1, 2, 0x01, 0, 1, 0x68])), '040000010001' + '68');
  assert.equal(tlvHex(Buffer.from([0xea, 0, 5, 1])), undefined);
  assert.equal(tlvHex(Buffer.from([0xea, 0])), undefined);
  assert.equal(tlvHex(Buffer.alloc(0)), undefined);
});

test('policy: USE without allow; inside allow USE, outside the default (ignore unless set)', () => {
  const o = (allow: string[], d?: Policy): ProxyOptions => ({ allow: allow.map((a) => parseCidr(a)!), defaultPolicy: d, sessionTtlMs: 0, maxSessions: 0, tlvMetadata: false });
  assert.equal(policyFor(o([]), '192.0.2.1'), Policy.USE);
  assert.equal(policyFor(o([], Policy.REJECT), '192.0.2.1'), Policy.REJECT);
  assert.equal(policyFor(o(['192.0.2.0/24']), '192.0.2.1'), Policy.USE);
  assert.equal(policyFor(o(['192.0.2.0/24']), '198.51.100.1'), Policy.IGNORE);
  assert.equal(policyFor(o(['192.0.2.0/24'], Policy.SKIP), '198.51.100.1'), Policy.SKIP);
  assert.equal(policyFor(o(['::1/128']), '::1'), Policy.USE);
  assert.equal(policyFor(o(['::1/128']), '127.0.0.1'), Policy.IGNORE);
});

test('headers: v1 and v2 as go-proxyproto reads them', () => {
  const h1 = readHeader(v1Header('TCP4', '192.0.2.1', '127.0.0.1', 1234, 53), true);
  assert.ok(h1 !== undefined && h1 !== NEED_MORE);
  assert.deepEqual([h1.version, h1.local, h1.sourceHost, h1.sourcePort, h1.length], [1, false, '192.0.2.1', 1234, 40]);
  const h6 = readHeader(v1Header('TCP6', '2001:DB8:0:0:0:0:0:1', '::1', 1, 53), true);
  assert.ok(h6 !== undefined && h6 !== NEED_MORE);
  assert.equal(h6.sourceHost, '2001:db8::1');
  const unk = readHeader(Buffer.from('PROXY UNKNOWN ignored stuff\r\n'), true);
  assert.ok(unk !== undefined && unk !== NEED_MORE && unk.local);
  // Partial signatures wait on a stream and are plain data in a datagram.
  assert.equal(readHeader(Buffer.from('PRO'), true), NEED_MORE);
  assert.equal(readHeader(Buffer.from('PRO'), false), undefined);
  assert.equal(readHeader(Buffer.from([0x0d, 0x0a, 0x0d]), true), NEED_MORE);
  assert.equal(readHeader(Buffer.from('PRIVATE'), true), undefined);
  assert.equal(readHeader(Buffer.from([0x12, 0x34]), true), undefined);
  const v2 = v2Header({ command: 'proxy', proto: 'udp', src: { ip: '2001:db8::5', port: 99 }, dst: { ip: '::1', port: 53 }, tlvs: Buffer.from([1, 0, 1, 7]) });
  assert.equal(readHeader(v2.subarray(0, 20), true), NEED_MORE);
  const h2 = readHeader(v2, false);
  assert.ok(h2 !== undefined && h2 !== NEED_MORE);
  assert.deepEqual([h2.version, h2.transport, h2.sourceHost, h2.sourcePort, h2.length, [...h2.tlvs]], [2, Transport.UDPv6, '2001:db8::5', 99, 56, [1, 0, 1, 7]]);
  const bad = (b: Buffer | string, stream: boolean, msg: string): void => {
    assert.throws(() => readHeader(typeof b === 'string' ? Buffer.from(b) : b, stream), (e: unknown) => e instanceof HeaderError && e.message === msg);
  };
  bad('PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n', true, "proxyproto: can't read address family or protocol");
  bad('PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n', true, "proxyproto: can't read address family or protocol");
  bad('PROXY TCP4 ::1 5.6.7.8 1 2\r\n', true, 'proxyproto: invalid address');
  bad('PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n', true, 'proxyproto: invalid port number');
  bad('PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n', true, 'proxyproto: version 1 header is invalid, must end with \\r\\n');
  bad('PROXY TCP4 1.2.3.4 5.6.7.8 1 2', true, "proxyproto: can't read version 1 header");
  bad('PROXY ' + 'x'.repeat(120) + '\r\n', true, 'proxyproto: version 1 header must be 107 bytes or less');
  const cmd = Buffer.from(v2); cmd[12] = 0x22;
  bad(cmd, false, 'proxyproto: unsupported proxy protocol version and command');
  const fam = Buffer.from(v2); fam[13] = 0x13;
  bad(fam, false, 'proxyproto: unsupported address family and protocol');
  const short = Buffer.from(v2); short.writeUInt16BE(10, 14);
  bad(short, false, 'proxyproto: invalid length');
  bad(v2.subarray(0, 30), false, 'proxyproto: invalid address: unexpected EOF');
  bad(v2.subarray(0, 54), false, 'unexpected EOF');
  bad(v2.subarray(0, 52), false, 'proxyproto: invalid length');
  // LOCAL with a short address block: discarded, the transport becomes UNSPEC.
  const local = Buffer.from(v2Header({ command: 'local', proto: 'tcp', src: { ip: '192.0.2.1', port: 1 }, dst: { ip: '192.0.2.2', port: 2 } }).subarray(0, 20));
  local.writeUInt16BE(4, 14);
  const hl = readHeader(local, false);
  assert.ok(hl !== undefined && hl !== NEED_MORE);
  assert.deepEqual([hl.local, hl.transport, hl.length], [true, Transport.UNSPEC, 20]);
});

class Log implements PluginLogger {
  readonly lines: string[] = [];
  readonly debugEnabled = false;
  debug(): void { /* not asserted */ }
  info(m: string): void { this.lines.push('[INFO] ' + m); }
  warning(m: string): void { this.lines.push('[WARNING] ' + m); }
  error(m: string): void { this.lines.push('[ERROR] ' + m); }
  fatal(m: string): void { this.lines.push('[FATAL] ' + m); }
}

test('UDP sessions: header-only datagrams open them, later ones take the client, LRU-capped and expiring', async () => {
  const log = new Log();
  const p = new ProxyProtocolPolicy({ allow: [], defaultPolicy: undefined, sessionTtlMs: 50, maxSessions: 2, tlvMetadata: false }, log);
  const peer = (port: number): ProxiedPeer => ({ address: '127.0.0.1', port, proto: 'udp', tlv: undefined });
  const hdr = (ip: string): Buffer => v2Header({ command: 'proxy', proto: 'udp', src: { ip, port: 7 }, dst: { ip: '127.0.0.1', port: 53 } });
  for (const [i, ip] of ['192.0.2.1', '192.0.2.2', '192.0.2.3'].entries()) assert.equal(p.datagram(hdr(ip), peer(1000 + i)), -1);
  assert.equal(p.sessionCount(), 2);
  const q = Buffer.alloc(12);
  const first = peer(1000);
  assert.equal(p.datagram(q, first), 0);
  assert.equal(first.address, '127.0.0.1', 'the oldest session was evicted');
  const third = peer(1002);
  assert.equal(p.datagram(q, third), 0);
  assert.equal(third.address, '192.0.2.3');
  await new Promise((r) => setTimeout(r, 80));
  const later = peer(1002);
  p.datagram(q, later);
  assert.equal(later.address, '127.0.0.1', 'expired');
  assert.equal(UDP_SESSION_MAX, 10240);
  assert.deepEqual(log.lines, []);
});

function query(name: string): Buffer {
  return encodeMessage(newQuery(name, RRType.A));
}

test('TCP in-process: a header split over several segments, then two pipelined queries, all from the PROXY client', async () => {
  const srv = await startServer({ corefile: '.:0 {\n bind 127.0.0.1\n proxyproto\n whoami\n}\n', log: { sink: () => { /* quiet */ } } });
  try {
    const port = srv.addresses()[0]!.port;
    const head = v1Header('TCP4', '192.0.2.77', '127.0.0.1', 4444, 53);
    const frames = [query('a.example.'), query('b.example.')].map((q) => { const f = Buffer.alloc(q.length + 2); f.writeUInt16BE(q.length, 0); q.copy(f, 2); return f; });
    const replies = await new Promise<Buffer[]>((resolve, reject) => {
      const c = net.connect(port, '127.0.0.1');
      let buf = Buffer.alloc(0);
      const out: Buffer[] = [];
      c.on('error', reject);
      c.on('connect', () => {
        // The v2 rule (bytes may trickle in) and v1 (the line in the first bytes): 'PRO' then the rest.
        c.write(head.subarray(0, 3));
        setTimeout(() => { c.write(Buffer.concat([head.subarray(3), ...frames])); }, 30);
      });
      c.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
          out.push(buf.subarray(2, 2 + buf.readUInt16BE(0)));
          buf = buf.subarray(2 + buf.readUInt16BE(0));
        }
        if (out.length === 2) { c.destroy(); resolve(out); }
      });
    });
    for (const r of replies) {
      // whoami: the client's address and port in the additional section.
      const extra = decodeMessage(r).additional.map((rr) => formatRecord(rr).split('\t').pop());
      assert.deepEqual(extra, ['192.0.2.77', '0 0 4444 .']);
    }
  } finally {
    await srv.stop();
  }
});

test('a reload keeps the policy rule of CoreDNS: a listener opened without proxyproto does not gain one', async () => {
  const port = await freePort();
  const srv = await startServer({ corefile: `.:${port} {\n bind 127.0.0.1\n whoami\n}\n`, log: { sink: () => { /* quiet */ } } });
  try {
    const send = (payload: Buffer): Promise<string> => new Promise((resolve) => {
      const s = dgram.createSocket('udp4');
      const t = setTimeout(() => { s.close(); resolve('silence'); }, 500);
      s.on('message', (m) => {
        clearTimeout(t);
        s.close();
        const r = decodeMessage(m);
        resolve([`rcode=${r.rcode}`, ...r.additional.map((rr) => formatRecord(rr).split('\t').pop())].join(','));
      });
      s.send(payload, port, '127.0.0.1');
    });
    const proxied = Buffer.concat([v2Header({ command: 'proxy', proto: 'udp', src: { ip: '192.0.2.9', port: 9 }, dst: { ip: '127.0.0.1', port } }), query('x.example.')]);
    const err = await srv.reload(`.:${port} {\n bind 127.0.0.1\n proxyproto\n whoami\n}\n`);
    assert.equal(err, undefined);
    // The old socket is reused unwrapped (caddy hands it over): the header is read as a DNS header (opcode 1: NOTIMP).
    assert.equal(await send(proxied), 'rcode=4');
    assert.match(await send(query('y.example.')), /^rcode=0,127\.0\.0\.1,/);
    // Without proxyproto again, then with it: the listener never had a policy, so it never gets one.
    assert.equal(await srv.reload(`.:${port} {\n bind 127.0.0.1\n whoami\n}\n`), undefined);
    assert.equal(await send(proxied), 'rcode=4');
  } finally {
    await srv.stop();
  }
});

test('the per-address policy cache gives policyFor\'s answers, also past its bound', () => {
  const p = new ProxyProtocolPolicy({ allow: [parseCidr('10.0.0.0/8')!], defaultPolicy: Policy.REJECT, sessionTtlMs: 0, maxSessions: 0, tlvMetadata: false }, new Log());
  const hdr = v2Header({ command: 'proxy', proto: 'udp', src: { ip: '192.0.2.1', port: 7 }, dst: { ip: '127.0.0.1', port: 53 } });
  const d = Buffer.concat([hdr, Buffer.alloc(12)]);
  for (let i = 0; i < 5000; i++) {
    const inside = i % 2 === 0;
    const peer: ProxiedPeer = { address: inside ? `10.0.${i >> 8 & 255}.${i & 255}` : `172.16.${i >> 8 & 255}.${i & 255}`, port: 1, proto: 'udp', tlv: undefined };
    const off = p.datagram(d, peer);
    if (inside) assert.deepEqual([off, peer.address], [hdr.length, '192.0.2.1']);
    else assert.equal(off, -1);
  }
});

test('random and mutated headers: readHeader only refuses (HeaderError), datagram() and stream() never throw', () => {
  // A fixed-seed generator: the same inputs every run.
  let seed = 0x2545f491;
  const rnd = (n: number): number => { seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5; return (seed >>> 0) % n; };
  const seeds = [
    v1Header('TCP4', '192.0.2.1', '127.0.0.1', 1, 53), v1Header('TCP6', '2001:db8::1', '::1', 65535, 53),
    v2Header({ command: 'proxy', proto: 'udp', src: { ip: '192.0.2.1', port: 1 }, dst: { ip: '127.0.0.1', port: 53 }, tlvs: Buffer.from([0xea, 0, 1, 9]) }),
    v2Header({ command: 'local', proto: 'tcp', src: { ip: '2001:db8::2', port: 1 }, dst: { ip: '::1', port: 53 } }),
  ];
  const p = new ProxyProtocolPolicy({ allow: [], defaultPolicy: undefined, sessionTtlMs: 1000, maxSessions: 4, tlvMetadata: true }, new Log());
  for (let i = 0; i < 20000; i++) {
    const b = Buffer.from(seeds[rnd(seeds.length)]!);
    const mutations = 1 + rnd(4);
    for (let m = 0; m < mutations; m++) b[rnd(b.length)] = rnd(256);
    const cut = b.subarray(0, rnd(b.length + 1));
    for (const stream of [false, true]) {
      try {
        readHeader(cut, stream);
      } catch (e) {
        assert.ok(e instanceof HeaderError, `${(e as Error).stack} for ${cut.toString('hex')}`);
      }
    }
    const peer: ProxiedPeer = { address: '127.0.0.1', port: 1000 + rnd(8), proto: 'udp', tlv: undefined };
    const off = p.datagram(cut, peer);
    assert.ok(off >= -1 && off <= cut.length);
    const tp: ProxiedPeer = { address: '127.0.0.1', port: 1, proto: 'tcp', tlv: undefined };
    const n = p.stream(cut, tp);
    assert.ok(n >= -2 && n <= cut.length);
  }
});
