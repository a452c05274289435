// Small in-test upstreams for forward/cache tests: a UDP+TCP DNS server on
// 127.0.0.1 whose behaviour per query is a function (answer, SERVFAIL, drop,
// delay, truncate, reset TCP, reply from another port or with another ID),
// and helpers to run Debian's unbound as a real upstream.

import dgram from 'node:dgram';
import net from 'node:net';
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { wire } from '../../src/index.ts';
import { freePort } from '../helpers/server.ts';

export type Action =
  | { kind: 'answer'; ttl?: number; addresses?: string[]; rcode?: number; tc?: boolean; delayMs?: number; idDelta?: number; fromOtherPort?: boolean; otherName?: string; soa?: boolean }
  | { kind: 'drop' }
  | { kind: 'reset' };

/** `name` lower-cased (UDP queries arrive with their letters in random case, 0x20); `spelled` as it arrived. */
export interface Seen { name: string; spelled: string; type: number; proto: 'udp' | 'tcp'; id: number; srcPort: number; ad: boolean; rd: boolean; do: boolean }

export class FakeUpstream {
  port = 0;
  readonly seen: Seen[] = [];
  behave: (q: wire.Message, proto: 'udp' | 'tcp') => Action = () => ({ kind: 'answer' });
  private udp: dgram.Socket | undefined;
  private other: dgram.Socket | undefined;
  private tcp: net.Server | undefined;
  private readonly conns = new Set<net.Socket>();

  static async start(behave?: FakeUpstream['behave']): Promise<FakeUpstream> {
    const u = new FakeUpstream();
    if (behave) u.behave = behave;
    u.port = await freePort();
    u.udp = dgram.createSocket('udp4');
    u.other = dgram.createSocket('udp4');
    await new Promise<void>((r) => u.udp!.bind(u.port, '127.0.0.1', () => r()));
    await new Promise<void>((r) => u.other!.bind(0, '127.0.0.1', () => r()));
    u.udp.on('message', (m, rinfo) => { u.handle(m, 'udp', (out, other) => { (other ? u.other! : u.udp!).send(out, rinfo.port, rinfo.address); }, undefined, rinfo.port); });
    u.tcp = net.createServer((s) => {
      u.conns.add(s);
      s.on('close', () => u.conns.delete(s));
      s.on('error', () => {});
      let buf = Buffer.alloc(0);
      s.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
          const m = buf.subarray(2, 2 + buf.readUInt16BE(0));
          buf = buf.subarray(2 + m.length);
          u.handle(Buffer.from(m), 'tcp', (out) => {
            const f = Buffer.alloc(out.length + 2);
            f.writeUInt16BE(out.length, 0);
            out.copy(f, 2);
            if (!s.destroyed) s.write(f);
          }, () => { s.resetAndDestroy(); });
        }
      });
    });
    await new Promise<void>((r) => u.tcp!.listen(u.port, '127.0.0.1', () => r()));
    return u;
  }

  get addr(): string { return `127.0.0.1:${this.port}`; }

  private handle(m: Buffer, proto: 'udp' | 'tcp', send: (out: Buffer, other?: boolean) => void, reset?: () => void, srcPort = 0): void {
    let q: wire.Message;
    try { q = wire.decodeMessage(m); } catch { return; }
    const qq = q.question[0]!;
    this.seen.push({ name: qq.name.toLowerCase(), spelled: qq.name, type: qq.type, proto, id: q.id, srcPort, ad: q.ad, rd: q.rd, do: q.edns?.do ?? false });
    const a = this.behave(q, proto);
    if (a.kind === 'drop') return;
    if (a.kind === 'reset') { reset?.(); return; }
    const r = wire.replyTo(q);
    r.ra = true;
    r.rcode = a.rcode ?? 0;
    if (a.otherName !== undefined) r.question = [{ ...qq, name: a.otherName }];
    if (r.rcode === 0 && (qq.type === 1)) {
      for (const addr of a.addresses ?? ['192.0.2.1']) r.answer.push({ name: qq.name, type: 1, class: 1, ttl: a.ttl ?? 300, data: { address: addr } });
    }
    if (a.soa) {
      r.authority.push({ name: 'example.', type: 6, class: 1, ttl: a.ttl ?? 300, data: { mname: 'ns.example.', rname: 'h.example.', serial: 1, refresh: 1, retry: 1, expire: 1, minimum: 300 } });
    }
    if (q.edns) r.edns = { udpSize: 1232, version: 0, do: q.edns.do, z: 0, options: [] };
    if (a.tc && proto === 'udp') { r.tc = true; r.answer = []; }
    if (a.idDelta) r.id = (r.id + a.idDelta) & 0xffff;
    const out = wire.encodeMessage(r);
    if (a.delayMs) setTimeout(() => send(out, a.fromOtherPort), a.delayMs);
    else send(out, a.fromOtherPort);
  }

  count(name?: string): number {
    return name === undefined ? this.seen.length : this.seen.filter((s) => s.name.toLowerCase() === name.toLowerCase()).length;
  }

  async stop(): Promise<void> {
    for (const c of this.conns) c.destroy();
    await new Promise<void>((r) => this.udp!.close(() => r()));
    await new Promise<void>((r) => this.other!.close(() => r()));
    await new Promise<void>((r) => this.tcp!.close(() => r()));
  }
}

/** A query in wire form. */
export function query(name: string, type = 1, o: { do?: boolean; edns?: boolean; id?: number; rd?: boolean; cd?: boolean } = {}): Buffer {
  const q = wire.newQuery(name, type);
  q.id = o.id ?? Math.floor(Math.random() * 65535);
  if (o.rd !== undefined) q.rd = o.rd;
  if (o.cd) q.cd = true;
  if (o.edns !== false && (o.edns || o.do)) q.edns = { udpSize: 1232, version: 0, do: o.do ?? false, z: 0, options: [] };
  return wire.encodeMessage(q);
}

export function decode(b: Buffer): wire.Message {
  return wire.decodeMessage(b);
}

function which(bin: string): string | undefined {
  for (const d of ['/usr/sbin', '/usr/bin', '/sbin', '/bin']) if (existsSync(join(d, bin))) return join(d, bin);
  try { return execFileSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' }).trim() || undefined; } catch { return undefined; }
}

export interface Unbound { port: number; proc: ChildProcess; dir: string; stop(): Promise<void> }

/**
 * Start Debian's unbound on 127.0.0.1 (foreground, config in a temp dir) serving `localData`
 * lines as a static zone. Throws when unbound is not installed: these tests need it.
 */
/** Also serve DNS over TLS on `port` with this key and certificate (PEM files). */
export interface UnboundTls { port: number; keyFile: string; certFile: string }

export async function startUnbound(zone: string, localData: string[], tls?: UnboundTls): Promise<Unbound> {
  const bin = which('unbound');
  if (bin === undefined) throw new Error('unbound is not installed (apt-get install -y unbound): the forward/cache e2e tests need it');
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'nodens-unbound-'));
  const tlsLines = tls === undefined ? [] : [
    `  interface: 127.0.0.1@${tls.port}`, `  tls-port: ${tls.port}`,
    `  tls-service-key: "${tls.keyFile}"`, `  tls-service-pem: "${tls.certFile}"`,
  ];
  const conf = [
    'server:', `  interface: 127.0.0.1@${port}`, ...tlsLines, `  port: ${port}`, '  do-daemonize: no', '  use-syslog: no', '  logfile: ""',
    '  username: ""', '  chroot: ""', `  directory: "${dir}"`, '  pidfile: ""', '  access-control: 127.0.0.0/8 allow',
    '  num-threads: 1', '  do-not-query-localhost: no', '  module-config: "iterator"',
    `  local-zone: "${zone}" static`, ...localData.map((l) => `  local-data: '${l}'`),
  ].join('\n') + '\n';
  writeFileSync(join(dir, 'unbound.conf'), conf);
  const proc = spawn(bin, ['-d', '-c', join(dir, 'unbound.conf')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d) => { out += d; });
  proc.stderr!.on('data', (d) => { out += d; });
  // wait until it answers
  const deadline = Date.now() + 10000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`unbound exited: ${out}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = dgram.createSocket('udp4');
      const t = setTimeout(() => { s.close(); resolve(false); }, 200);
      s.on('message', () => { clearTimeout(t); s.close(); resolve(true); });
      s.send(query(zone, 6), port, '127.0.0.1');
    });
    if (ok) break;
    if (Date.now() > deadline) { proc.kill(); throw new Error(`unbound did not come up: ${out}`); }
  }
  return {
    port, proc, dir,
    stop: () => new Promise<void>((r) => { if (proc.exitCode !== null) { r(); return; } proc.once('exit', () => r()); proc.kill('SIGTERM'); }),
  };
}
