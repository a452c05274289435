// proxyproto side by side with the reference CoreDNS 1.15.0: the same Corefile, the same PROXY headers sent over
// real UDP and TCP sockets (v1 text, v2 binary with IPv4, IPv6, LOCAL and UNSPEC, malformed ones, untrusted
// sources); what a client sees must be equal: whoami's answer (the client's address, port and transport), the log
// plugin's `{remote}`, acl's verdict, the warning for a dropped datagram, and whether a TCP connection is closed.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import net from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeMessage } from '../../src/wire/encode.ts';
import { decodeMessage } from '../../src/wire/decode.ts';
import { newQuery } from '../../src/wire/message.ts';
import { formatRecord } from '../../src/wire/text.ts';
import { RRType } from '../../src/wire/constants.ts';
import { freePort, nodensBinary, referenceBinary, spawnArgv, waitReady, type Running } from '../conformance/lib/servers.ts';
import { v1Header, v2Header } from '../../src/plugin/proxyproto/testheaders.ts';

/** Ports of one side: trusted (allow 127/8), untrusted-ignore, untrusted-reject, untrusted-skip, default reject. */
interface Ports { use: number; ignore: number; reject: number; skip: number; session: number; tlv: number }

function corefile(p: Ports): string {
  const log = ' log . "{remote} {port} {proto} {name}"\n';
  return `.:${p.use} {\n proxyproto {\n  allow 127.0.0.0/8 ::1/128\n }\n whoami\n${log} acl {\n  block net 192.0.2.66/32\n }\n}\n` +
    `.:${p.ignore} {\n proxyproto {\n  allow 10.0.0.0/8\n }\n whoami\n${log}}\n` +
    `.:${p.reject} {\n proxyproto {\n  allow 10.0.0.0/8\n  default reject\n }\n whoami\n${log}}\n` +
    `.:${p.skip} {\n proxyproto {\n  allow 10.0.0.0/8\n  default skip\n }\n whoami\n${log}}\n` +
    `.:${p.session} {\n proxyproto {\n  udp_session_tracking 5s\n }\n whoami\n${log}}\n` +
    `.:${p.tlv} {\n metadata\n proxyproto {\n  tlv_metadata\n  udp_session_tracking 5s\n }\n whoami\n log . "{remote} {port} {proto} {name} tlv={/proxyproto/tlv}"\n}\n`;
}

interface Side { name: string; run: Running; ports: Ports }
const sides: Side[] = [];

async function start(name: string, bin: string, env?: Record<string, string>): Promise<Side> {
  const ports: Ports = { use: await freePort(), ignore: await freePort(), reject: await freePort(), skip: await freePort(), session: await freePort(), tlv: await freePort() };
  const dir = mkdtempSync(join(tmpdir(), `nodens-pp-${name}-`));
  const conf = join(dir, 'Corefile');
  writeFileSync(conf, corefile(ports));
  const run = spawnArgv(name, [bin, '-conf', conf], dir, ports.use, env);
  await waitReady(run);
  return { name, run, ports };
}

const bin = nodensBinary();

before(async () => {
  if (bin === undefined) throw new Error('bin/nodens is missing: npm run build');
  // nodens twice: its native UDP listener (native/udp.c) and the node:dgram fallback.
  sides.push(await start('coredns', referenceBinary()), await start('nodens', bin), await start('nodens-dgram', bin, { NODENS_NATIVE: '0' }));
});

after(async () => {
  for (const s of sides) await s.run.stop();
});

let nextId = 1;
function query(name: string): Buffer {
  const q = newQuery(name, RRType.A);
  q.id = nextId++ & 0xffff;
  return encodeMessage(q);
}

/** The records of a reply as text, or what happened instead. */
function describe(reply: Buffer | string): string {
  if (typeof reply === 'string') return reply;
  const m = decodeMessage(reply);
  return [`rcode=${m.rcode}`, ...m.answer.map(formatRecord), ...m.additional.filter((r) => r.type !== RRType.OPT).map(formatRecord)].join('\n');
}

/** One datagram from a fresh socket bound to `srcPort` on 127.0.0.1; the reply, or 'silence'. */
function udp(port: number, payload: Buffer, srcPort: number, ms = 400): Promise<Buffer | string> {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    const done = (v: Buffer | string): void => { clearTimeout(t); s.close(); resolve(v); };
    const t = setTimeout(() => { done('silence'); }, ms);
    s.on('message', (m) => { done(m); });
    s.bind(srcPort, '127.0.0.1', () => { s.send(payload, port, '127.0.0.1'); });
  });
}

/** A TCP connection that sends `head` then a framed query; the first reply, 'closed', or 'silence'. */
function tcp(port: number, head: Buffer, q: Buffer, srcPort: number, ms = 1500, splitAt = -1): Promise<Buffer | string> {
  return new Promise((resolve) => {
    const c = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.1', localPort: srcPort });
    let buf = Buffer.alloc(0);
    let settled = false;
    const done = (v: Buffer | string): void => { if (settled) return; settled = true; clearTimeout(t); c.destroy(); resolve(v); };
    const t = setTimeout(() => { done('silence'); }, ms);
    c.on('connect', () => {
      const frame = Buffer.alloc(2 + q.length);
      frame.writeUInt16BE(q.length, 0);
      q.copy(frame, 2);
      const all = Buffer.concat([head, frame]);
      if (splitAt < 0) { c.write(all); return; }
      // Two segments 150 ms apart: the server reads the first alone.
      c.write(all.subarray(0, splitAt));
      setTimeout(() => { if (!c.destroyed) c.write(all.subarray(splitAt)); }, 150);
    });
    c.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) done(buf.subarray(2, 2 + buf.readUInt16BE(0)));
    });
    c.on('error', () => { done('closed'); });
    c.on('close', () => { done('closed'); });
  });
}

/** Runs `fn` against both servers (same client port for UDP) and asserts the same outcome. */
async function same(label: string, fn: (s: Side, srcPort: number) => Promise<Buffer | string>): Promise<string> {
  const srcPort = await freePort();
  const got: string[] = [];
  for (const s of sides) got.push(describe(await fn(s, srcPort)));
  for (let i = 1; i < sides.length; i++) assert.equal(got[i], got[0], `${label}: ${sides[i]!.name} differs from CoreDNS`);
  return got[0]!;
}

const DST4 = { ip: '127.0.0.1', port: 53 };
const payloadV2 = (src: string, sport: number, q: Buffer, proto: 'udp' | 'tcp' = 'udp', tlvs?: Buffer): Buffer =>
  Buffer.concat([v2Header({ command: 'proxy', proto, src: { ip: src, port: sport }, dst: src.includes(':') ? { ip: '::1', port: 53 } : DST4, tlvs }), q]);

test('UDP: a v2 header from a trusted source names the client (IPv4 and IPv6); whoami and log see it', async () => {
  const a = await same('v2 ipv4', (s, p) => udp(s.ports.use, payloadV2('192.0.2.10', 4242, query('a.example.')), p));
  assert.match(a, /192\.0\.2\.10/);
  assert.match(a, /4242/);
  const b = await same('v2 ipv6', (s, p) => udp(s.ports.use, payloadV2('2001:db8::7', 5353, query('b.example.')), p));
  assert.match(b, /2001:db8::7/);
  // An IPv4-mapped source prints as IPv4 (Go's net.IP), and the family follows.
  await same('v2 ipv4-mapped', (s, p) => udp(s.ports.use, payloadV2('::ffff:198.51.100.3', 53, query('c.example.')), p));
  // With TLVs after the addresses.
  await same('v2 tlvs', (s, p) => udp(s.ports.use, payloadV2('192.0.2.11', 1, query('d.example.'), 'udp', Buffer.from([0xea, 0, 2, 0xca, 0xfe])), p));
  // acl sees the PROXY client: blocked.
  const blocked = await same('acl', (s, p) => udp(s.ports.use, payloadV2('192.0.2.66', 9, query('e.example.')), p));
  assert.match(blocked, /rcode=5/);
});

test('UDP: LOCAL keeps the sender; no header passes; v1, TCP transport and malformed headers are dropped', async () => {
  const local = v2Header({ command: 'local', proto: 'udp', src: { ip: '192.0.2.1', port: 1 }, dst: DST4 });
  const l = await same('local', (s, p) => udp(s.ports.use, Buffer.concat([local, query('f.example.')]), p));
  assert.match(l, /127\.0\.0\.1/);
  await same('plain', (s, p) => udp(s.ports.use, query('g.example.'), p));
  assert.equal(await same('v1 over udp', (s, p) => udp(s.ports.use, Buffer.concat([v1Header('TCP4', '192.0.2.1', '127.0.0.1', 1, 53), query('h.example.')]), p)), 'silence');
  assert.equal(await same('tcp transport', (s, p) => udp(s.ports.use, payloadV2('192.0.2.1', 1, query('i.example.'), 'tcp'), p)), 'silence');
  const bad = Buffer.from(v2Header({ command: 'proxy', proto: 'udp', src: { ip: '192.0.2.1', port: 1 }, dst: DST4 }));
  bad.writeUInt16BE(4000, 14);
  assert.equal(await same('bad length', (s, p) => udp(s.ports.use, Buffer.concat([bad, query('j.example.')]), p)), 'silence');
  const unspec = v2Header({ command: 'local', proto: 'unspec', src: { ip: '0.0.0.0', port: 0 }, dst: DST4 });
  assert.equal(await same('local unspec', (s, p) => udp(s.ports.use, Buffer.concat([unspec, query('k.example.')]), p)), 'silence');
});

test('UDP: untrusted sources: ignore strips the header, reject drops it, skip leaves it to the DNS reader', async () => {
  const ig = await same('ignore', (s, p) => udp(s.ports.ignore, payloadV2('192.0.2.10', 4242, query('l.example.')), p));
  assert.match(ig, /127\.0\.0\.1/);
  assert.equal(await same('reject', (s, p) => udp(s.ports.reject, payloadV2('192.0.2.10', 4242, query('m.example.')), p)), 'silence');
  await same('reject without header', (s, p) => udp(s.ports.reject, query('n.example.'), p));
  await same('skip', (s, p) => udp(s.ports.skip, payloadV2('192.0.2.10', 4242, query('o.example.')), p));
});

test('UDP: udp_session_tracking: a header-only datagram opens a session for the sender\'s later datagrams', async () => {
  await same('session', async (s, p) => {
    const hdr = v2Header({ command: 'proxy', proto: 'udp', src: { ip: '203.0.113.9', port: 7777 }, dst: DST4 });
    const first = await udp(s.ports.session, hdr, p, 200);
    if (first !== 'silence') return 'header-only datagram was answered';
    return udp(s.ports.session, query('p.example.'), p);
  });
});

test('TCP: v1 and v2 headers name the client; a v2 UDP header makes the request UDP; bad headers close', async () => {
  const v1line = await same('v1', (s, p) => tcp(s.ports.use, v1Header('TCP4', '192.0.2.20', '127.0.0.1', 6000, 53), query('q.example.'), p));
  assert.match(v1line, /192\.0\.2\.20/);
  await same('v1 tcp6', (s, p) => tcp(s.ports.use, v1Header('TCP6', '2001:db8::20', '::1', 6001, 53), query('r.example.'), p));
  await same('v1 unknown', (s, p) => tcp(s.ports.use, Buffer.from('PROXY UNKNOWN\r\n'), query('s.example.'), p));
  await same('v2 tcp', (s, p) => tcp(s.ports.use, v2Header({ command: 'proxy', proto: 'tcp', src: { ip: '192.0.2.21', port: 6002 }, dst: DST4 }), query('t.example.'), p));
  const u = await same('v2 udp over tcp', (s, p) => tcp(s.ports.use, v2Header({ command: 'proxy', proto: 'udp', src: { ip: '192.0.2.22', port: 6003 }, dst: DST4 }), query('u.example.'), p));
  assert.match(u, /_udp/);
  await same('no header', (s, p) => tcp(s.ports.use, Buffer.alloc(0), query('v.example.'), p));
  // go-proxyproto's rule: a v1 line must be in the connection's first bytes; a signature alone may wait for more.
  const v1 = v1Header('TCP4', '192.0.2.24', '127.0.0.1', 6005, 53);
  assert.equal(await same('v1 split after the signature', (s, p) => tcp(s.ports.use, v1, query('vs.example.'), p, 1500, 11)), 'closed');
  assert.match(await same('v1 split inside the signature', (s, p) => tcp(s.ports.use, v1, query('vt.example.'), p, 1500, 3)), /192\.0\.2\.24/);
  const v2 = v2Header({ command: 'proxy', proto: 'tcp', src: { ip: '192.0.2.25', port: 6006 }, dst: DST4 });
  assert.match(await same('v2 split', (s, p) => tcp(s.ports.use, v2, query('vu.example.'), p, 1500, 20)), /192\.0\.2\.25/);
  assert.equal(await same('bad v1', (s, p) => tcp(s.ports.use, Buffer.from('PROXY TCP4 1.2.3 127.0.0.1 1 53\r\n'), query('w.example.'), p)), 'closed');
  assert.equal(await same('bad v2', (s, p) => tcp(s.ports.use, Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a, 0x21, 0x13, 0, 12, ...new Array<number>(12).fill(0)]), query('x.example.'), p)), 'closed');
  // Untrusted: ignore keeps the connection's peer, reject closes.
  assert.match(await same('tcp ignore', (s, p) => tcp(s.ports.ignore, v1Header('TCP4', '192.0.2.23', '127.0.0.1', 6004, 53), query('y.example.'), p)), /127\.0\.0\.1/);
  assert.equal(await same('tcp reject', (s, p) => tcp(s.ports.reject, v1Header('TCP4', '192.0.2.23', '127.0.0.1', 6004, 53), query('z.example.'), p)), 'closed');
  await same('tcp reject, no header', (s, p) => tcp(s.ports.reject, Buffer.alloc(0), query('za.example.'), p));
});

test('tlv_metadata: the TLVs as the proxyproto/tlv label over UDP (sessions too) and TCP; none for LOCAL or no TLV', async () => {
  const tlvs = Buffer.from([0xea, 0, 2, 0xca, 0xfe, 0x04, 0, 3, 0, 0, 0, 0x01, 0, 2, 0x68, 0x32]);
  await same('tlv udp', (s, p) => udp(s.ports.tlv, payloadV2('192.0.2.30', 30, query('tlv1.example.'), 'udp', tlvs), p));
  await same('no tlv udp', (s, p) => udp(s.ports.tlv, payloadV2('192.0.2.31', 31, query('tlv2.example.')), p));
  await same('truncated tlv udp', (s, p) => udp(s.ports.tlv, payloadV2('192.0.2.32', 32, query('tlv3.example.'), 'udp', Buffer.from([0xea, 0, 9, 1])), p));
  await same('tlv session', async (s, p) => {
    const hdr = v2Header({ command: 'proxy', proto: 'udp', src: { ip: '192.0.2.33', port: 33 }, dst: DST4, tlvs });
    await udp(s.ports.tlv, hdr, p, 200);
    return udp(s.ports.tlv, query('tlv4.example.'), p);
  });
  await same('tlv tcp', (s, p) => tcp(s.ports.tlv, v2Header({ command: 'proxy', proto: 'tcp', src: { ip: '192.0.2.34', port: 34 }, dst: DST4, tlvs }), query('tlv5.example.'), p));
  await same('tlv tcp local', (s, p) => tcp(s.ports.tlv, v2Header({ command: 'local', proto: 'tcp', src: { ip: '192.0.2.35', port: 35 }, dst: DST4, tlvs }), query('tlv6.example.'), p));
});

test('the log lines and the drop warnings are CoreDNS\'s', async () => {
  await new Promise((r) => setTimeout(r, 300));
  const norm = (out: string): string[] => out.split('\n')
    .filter((l) => /^\[(INFO|WARNING)\] (\S+ \d+ (udp|tcp) |dropping)/.test(l))
    // The client's own UDP port differs between runs of the same case; the PROXY header's port does not.
    .map((l) => l.replace(/(from \S+:)\d+:/, '$1PORT:').replace(/^\[INFO\] 127\.0\.0\.1 \d+ /, '[INFO] 127.0.0.1 PORT '));
  const [ref, ...subs] = sides.map((s) => norm(s.run.output()));
  assert.ok(ref!.length > 20, ref!.join('\n'));
  assert.ok(ref!.includes('[INFO] 192.0.2.30 30 udp tlv1.example. tlv=ea0002cafe0400000100026832'), ref!.join('\n'));
  for (const sub of subs) assert.deepEqual(sub, ref);
});
