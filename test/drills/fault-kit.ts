// The fault drills' parts: an upstream whose behaviour can be switched while
// it runs (healthy, killed, slow, flapping, truncating, resetting TCP,
// answering garbage), a steady query load that records every answer by rcode
// and time (and retries over TCP on TC, as a stub resolver does), and a server
// process launched with limits (ulimit -n, NODE_OPTIONS).

import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN } from '../helpers/server.ts';
import { query } from './udp-probe.ts';

export type Mode = 'ok' | 'down' | 'slow' | 'flap' | 'truncate' | 'reset' | 'garbage';

/** An authoritative-looking upstream on 127.0.0.1:port answering every A question with 192.0.2.1. */
export class Upstream {
  mode: Mode = 'ok';
  /** How long 'slow' holds each answer. */
  slowMs = 3000;
  port = 0;
  queries = 0;
  private udp: dgram.Socket | undefined;
  private tcp: net.Server | undefined;
  private readonly conns = new Set<net.Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private flapUp = true;
  private flapTimer: NodeJS.Timeout | undefined;

  /**
   * A port below the kernel's ephemeral range (32768 and up), so that while this upstream is down no
   * server's one-use upstream socket takes its port and it can come back.
   */
  async start(): Promise<void> {
    for (let tries = 0; ; tries++) {
      this.port = 20000 + Math.floor(Math.random() * 12000);
      try {
        await this.listen();
        return;
      } catch (e) {
        this.closeSockets();
        if (tries > 50) throw e;
      }
    }
  }

  private async listen(): Promise<void> {
    this.tcp = net.createServer((c) => { this.onTcp(c); });
    await new Promise<void>((r, j) => { this.tcp!.once('error', j); this.tcp!.listen(this.port, '127.0.0.1', r); });
    await this.openUdp();
  }

  private async openUdp(): Promise<void> {
    const u = dgram.createSocket('udp4');
    u.on('message', (m, rinfo) => { this.onUdp(u, m, rinfo); });
    try {
      await new Promise<void>((r, j) => { u.once('error', j); u.bind(this.port, '127.0.0.1', r); });
    } catch (e) {
      u.close();
      throw e;
    }
    this.udp = u;
  }

  /** Switch behaviour. 'down' closes the sockets (the kernel then refuses: ICMP port unreachable, TCP RST). */
  async set(mode: Mode): Promise<void> {
    if (this.flapTimer !== undefined) { clearInterval(this.flapTimer); this.flapTimer = undefined; }
    const wasDown = this.udp === undefined;
    this.mode = mode;
    if (mode === 'down') { this.closeSockets(); return; }
    if (wasDown) await this.reopen();
    if (mode === 'flap') {
      this.flapUp = true;
      // Up one second, down the next: the sockets really close and reopen.
      this.flapTimer = setInterval(() => {
        this.flapUp = !this.flapUp;
        if (this.flapUp) this.reopen().catch((e: unknown) => { console.error(String(e)); }); else this.closeSockets();
      }, 1000);
    }
  }

  /** Listens again on the same port; if it is taken meanwhile, tries again every 50 ms (for at most 5 s). */
  private async reopen(): Promise<void> {
    for (let tries = 0; this.udp === undefined && tries < 100; tries++) {
      try {
        await this.listen();
      } catch {
        this.closeSockets();
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    if (this.udp === undefined) throw new Error(`upstream port ${this.port} stayed taken`);
  }

  private closeSockets(): void {
    try { this.udp?.close(); } catch { /* never bound */ }
    this.udp = undefined;
    this.tcp?.close(); this.tcp = undefined;
    for (const c of this.conns) c.resetAndDestroy();
    this.conns.clear();
  }

  private answer(q: Buffer, tc: boolean): Buffer | undefined {
    if (q.length < 12) return undefined;
    // Question ends at the root label + type + class.
    let i = 12;
    while (i < q.length && q[i] !== 0) i += q[i]! + 1;
    const qEnd = i + 5;
    if (qEnd > q.length) return undefined;
    const head = Buffer.from([q[0]!, q[1]!, 0x84 | (tc ? 0x02 : 0) | (q[2]! & 0x01), 0x00, 0, 1, 0, tc ? 0 : 1, 0, 0, 0, 0]);
    if (tc) return Buffer.concat([head, q.subarray(12, qEnd)]);
    const rr = Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 192, 0, 2, 1]);
    return Buffer.concat([head, q.subarray(12, qEnd), rr]);
  }

  private reply(q: Buffer, tcp: boolean): Buffer | undefined | 'reset' {
    switch (this.mode) {
      case 'truncate': return this.answer(q, !tcp);
      case 'reset': return tcp ? 'reset' : this.answer(q, true);
      case 'garbage': {
        // Half random bytes, half a well-formed answer under another ID.
        if (this.queries % 2 === 0) return randomBytes(12 + (this.queries % 60));
        const a = this.answer(q, false)!;
        a.writeUInt16BE((a.readUInt16BE(0) + 1) & 0xffff, 0);
        return a;
      }
      default: return this.answer(q, false);
    }
  }

  private later(fn: () => void): void {
    if (this.mode !== 'slow') { fn(); return; }
    const t = setTimeout(() => { this.timers.delete(t); fn(); }, this.slowMs);
    this.timers.add(t);
  }

  private onUdp(u: dgram.Socket, m: Buffer, rinfo: dgram.RemoteInfo): void {
    this.queries++;
    const r = this.reply(m, false);
    if (r === undefined || r === 'reset') return;
    this.later(() => { if (this.udp === u) u.send(r, rinfo.port, rinfo.address); });
  }

  private onTcp(c: net.Socket): void {
    this.conns.add(c);
    c.on('close', () => { this.conns.delete(c); });
    c.on('error', () => { /* peers reset too */ });
    let buf = Buffer.alloc(0);
    c.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        const m = buf.subarray(2, 2 + buf.readUInt16BE(0));
        buf = buf.subarray(2 + m.length);
        this.queries++;
        const r = this.reply(m, true);
        if (r === 'reset') { c.resetAndDestroy(); return; }
        if (r === undefined) continue;
        this.later(() => { if (!c.destroyed) c.write(Buffer.concat([Buffer.from([r.length >> 8, r.length & 0xff]), r])); });
      }
    });
  }

  async stop(): Promise<void> {
    if (this.flapTimer !== undefined) clearInterval(this.flapTimer);
    for (const t of this.timers) clearTimeout(t);
    this.closeSockets();
  }
}

/** One query of the load: when it left, what came back (rcode, or 'lost'), how long it took, over which transport. */
export interface Sample { at: number; rcode: string; ms: number; tcpRetry: boolean }

const RCODES = ['NOERROR', 'FORMERR', 'SERVFAIL', 'NXDOMAIN', 'NOTIMP', 'REFUSED'];

/** One DNS query over TCP (a stub's retry after TC); resolves with the rcode or 'lost' after timeoutMs. */
export function tcpQuery(port: number, msg: Buffer, timeoutMs: number): Promise<string> {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const done = (r: string): void => { clearTimeout(t); c.destroy(); resolve(r); };
    const t = setTimeout(() => { done('lost'); }, timeoutMs);
    c.on('error', () => { done('lost'); });
    c.on('connect', () => { c.write(Buffer.concat([Buffer.from([msg.length >> 8, msg.length & 0xff]), msg])); });
    c.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) done(RCODES[buf[5]! & 0x0f] ?? `RCODE${buf[5]! & 0x0f}`);
    });
    c.on('close', () => { done('lost'); });
  });
}

/**
 * A steady load: `rate` UDP queries a second, each for a new name under `zone` (so no cache answers it),
 * until stop(); a query unanswered after `timeoutMs` is 'lost'; a TC answer is asked again over TCP.
 */
export class Load {
  readonly samples: Sample[] = [];
  private readonly sock = dgram.createSocket('udp4');
  private readonly pending = new Map<number, { at: number; msg: Buffer; timer: NodeJS.Timeout }>();
  private seq = 0;
  private stopped = false;
  private ticker: NodeJS.Timeout | undefined;
  private readonly retries = new Set<Promise<void>>();
  readonly t0 = performance.now();
  private readonly port: number;
  private readonly rate: number;
  private readonly zone: string;
  private readonly timeoutMs: number;

  /** Every query for this name instead of a new one under zone. */
  private readonly fixed: string | undefined;

  constructor(port: number, rate: number, zone: string, timeoutMs = 5000, fixed?: string) {
    this.port = port; this.rate = rate; this.zone = zone; this.timeoutMs = timeoutMs; this.fixed = fixed;
  }

  async start(): Promise<void> {
    await new Promise<void>((r) => { this.sock.bind(0, '127.0.0.1', r); });
    this.sock.on('message', (m) => { this.onReply(m); });
    const start = performance.now();
    let sent = 0;
    this.ticker = setInterval(() => {
      const due = Math.floor(((performance.now() - start) / 1000) * this.rate);
      for (; sent < due; sent++) this.send();
    }, 10);
  }

  private send(): void {
    const id = this.seq++ & 0xffff;
    const msg = query(this.fixed ?? `q${this.seq}-${process.pid}.${this.zone}`, id);
    const at = performance.now() - this.t0;
    const old = this.pending.get(id);
    if (old !== undefined) { clearTimeout(old.timer); this.record(old.at, 'lost', false); }
    const timer = setTimeout(() => { this.pending.delete(id); this.record(at, 'lost', false); }, this.timeoutMs);
    this.pending.set(id, { at, msg, timer });
    this.sock.send(msg, this.port, '127.0.0.1', () => { /* ENOBUFS etc. show up as lost */ });
  }

  private onReply(m: Buffer): void {
    if (m.length < 12) return;
    const id = m.readUInt16BE(0);
    const p = this.pending.get(id);
    if (p === undefined) return;
    this.pending.delete(id);
    clearTimeout(p.timer);
    if ((m[2]! & 0x02) !== 0) {
      const r = tcpQuery(this.port, p.msg, this.timeoutMs).then((rc) => { this.record(p.at, rc, true); });
      this.retries.add(r);
      void r.then(() => { this.retries.delete(r); });
      return;
    }
    this.record(p.at, RCODES[m[3]! & 0x0f] ?? `RCODE${m[3]! & 0x0f}`, false);
  }

  private record(at: number, rcode: string, tcpRetry: boolean): void {
    this.samples.push({ at, rcode, ms: performance.now() - this.t0 - at, tcpRetry });
  }

  /** Now, on this load's clock (ms). */
  now(): number { return performance.now() - this.t0; }

  /** Stops sending, waits for the answers still due (at most timeoutMs), returns the samples by send time. */
  async stop(): Promise<Sample[]> {
    if (this.stopped) return this.samples;
    this.stopped = true;
    clearInterval(this.ticker);
    const deadline = performance.now() + this.timeoutMs + 500;
    while ((this.pending.size > 0 || this.retries.size > 0) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    this.sock.close();
    return this.samples.sort((a, b) => a.at - b.at);
  }
}

/** Counts of rcodes among samples sent in [from, to). */
export function tally(samples: Sample[], from: number, to: number): { n: number; by: Record<string, number>; late: Record<string, number>; p50: number; p99: number; tcp: number } {
  const s = samples.filter((x) => x.at >= from && x.at < to);
  const by: Record<string, number> = {};
  for (const x of s) by[x.rcode] = (by[x.rcode] ?? 0) + 1;
  // Sent in the phase but answered after it ended (the next phase's fault may have decided their answer).
  const late: Record<string, number> = {};
  for (const x of s) if (x.rcode !== 'lost' && x.at + x.ms >= to) late[x.rcode] = (late[x.rcode] ?? 0) + 1;
  const ms = s.filter((x) => x.rcode !== 'lost').map((x) => x.ms).sort((a, b) => a - b);
  const pct = (p: number): number => (ms.length === 0 ? NaN : Math.round(ms[Math.min(ms.length - 1, Math.floor(ms.length * p))]!));
  return { n: s.length, by, late, p50: pct(0.5), p99: pct(0.99), tcp: s.filter((x) => x.tcpRetry).length };
}

/** "NOERROR 200, SERVFAIL 3" */
export function fmt(by: Record<string, number>): string {
  return Object.entries(by).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(', ') || '-';
}

/** ms from `from` to the send time of the first query after which every query sent (before `to`) got NOERROR. */
export function recovery(samples: Sample[], from: number, to: number): number | undefined {
  const s = samples.filter((x) => x.at >= from && x.at < to);
  let i = s.length;
  while (i > 0 && s[i - 1]!.rcode === 'NOERROR') i--;
  if (i === s.length) return undefined;
  return i === 0 ? 0 : Math.round(s[i]!.at - from);
}

export interface Proc {
  name: string;
  proc: ChildProcess;
  lines: string[];
  dir: string;
  exited: Promise<number | null>;
  rssKiB(): number;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Start nodens ('nodens') or a CoreDNS binary with `corefile` in a fresh directory, optionally under
 * `ulimit -n nofile` and with more environment; waits for its banner.
 */
export async function launch(name: string, bin: string, corefile: string, opts: { nofile?: number; env?: Record<string, string>; files?: Record<string, string> } = {}): Promise<Proc> {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-faults-'));
  for (const [f, text] of Object.entries(opts.files ?? {})) writeFileSync(join(dir, f), text);
  writeFileSync(join(dir, 'Corefile'), corefile);
  const argv = [bin === 'nodens' ? BIN : bin, '-conf', join(dir, 'Corefile')];
  const cmd = opts.nofile === undefined ? argv : ['prlimit', `--nofile=${opts.nofile}`, '--', ...argv];
  const proc = spawn(cmd[0]!, cmd.slice(1), { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...opts.env } });
  // A drill that dies (an uncaught error) leaves no server behind.
  const reap = (): void => { proc.kill('SIGKILL'); };
  process.on('exit', reap);
  proc.on('exit', () => { process.off('exit', reap); });
  const lines: string[] = [];
  const feed = (): ((c: Buffer) => void) => {
    let partial = '';
    return (c) => { const ls = (partial + c.toString('latin1')).split('\n'); partial = ls.pop()!; lines.push(...ls); };
  };
  proc.stdout!.on('data', feed());
  proc.stderr!.on('data', feed());
  const exited = new Promise<number | null>((r) => { proc.on('exit', (code, sig) => { r(code ?? (sig === null ? null : -1)); }); });
  const deadline = Date.now() + 20_000;
  while (!lines.some((l) => l.startsWith('CoreDNS-'))) {
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`${name} did not start:\n${lines.join('\n')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    name, proc, lines, dir, exited,
    rssKiB() {
      try { return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${proc.pid}/status`, 'utf8'))?.[1] ?? 0); } catch { return 0; }
    },
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const t = setTimeout(() => { proc.kill('SIGKILL'); }, 7000);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
  };
}
