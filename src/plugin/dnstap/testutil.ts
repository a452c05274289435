// Test helpers for dnstap: a minimal protobuf reader for the Dnstap messages this plugin writes,
// Frame Streams file reading and writing, and the real tools (fstrm_capture, dnstap-read).

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { CONTENT_TYPE, CONTROL_ACCEPT, CONTROL_FINISH, CONTROL_READY, CONTROL_START, CONTROL_STOP, controlFrame } from './encode.ts';

/** One protobuf field: number, wire type and value (varints as numbers, bytes as Buffers, fixed32 as numbers). */
export interface PbField {
  n: number;
  wire: number;
  v: number | Buffer;
}

export function readVarint(b: Buffer, p: number): [number, number] {
  let v = 0;
  let mul = 1;
  for (;;) {
    const x = b[p++]!;
    v += (x & 0x7f) * mul;
    mul *= 128;
    if ((x & 0x80) === 0) return [v, p];
  }
}

export function pbFields(b: Buffer): PbField[] {
  const out: PbField[] = [];
  let p = 0;
  while (p < b.length) {
    let key: number;
    [key, p] = readVarint(b, p);
    const n = Math.floor(key / 8);
    const wire = key & 7;
    if (wire === 0) {
      let v: number;
      [v, p] = readVarint(b, p);
      out.push({ n, wire, v });
    } else if (wire === 2) {
      let len: number;
      [len, p] = readVarint(b, p);
      out.push({ n, wire, v: b.subarray(p, p + len) });
      p += len;
    } else if (wire === 5) {
      out.push({ n, wire, v: b.readUInt32LE(p) });
      p += 4;
    } else {
      throw new Error(`unexpected wire type ${wire}`);
    }
  }
  return out;
}

const MSG_FIELDS: Record<number, string> = {
  1: 'type', 2: 'socket_family', 3: 'socket_protocol', 4: 'query_address', 5: 'response_address', 6: 'query_port',
  7: 'response_port', 8: 'query_time_sec', 9: 'query_time_nsec', 10: 'query_message', 11: 'query_zone',
  12: 'response_time_sec', 13: 'response_time_nsec', 14: 'response_message', 15: 'policy',
};
const TOP_FIELDS: Record<number, string> = { 1: 'identity', 2: 'version', 3: 'extra', 14: 'message', 15: 'type' };

/** A decoded Dnstap frame: top-level and message fields by name, in wire order. */
export interface DecodedTap {
  top: [string, number | Buffer][];
  message: [string, number | Buffer][];
}

export function decodeTap(frame: Buffer): DecodedTap {
  const top: [string, number | Buffer][] = [];
  let message: [string, number | Buffer][] = [];
  for (const f of pbFields(frame)) {
    const name = TOP_FIELDS[f.n] ?? `field${f.n}`;
    if (f.n === 14) message = pbFields(f.v as Buffer).map((m) => [MSG_FIELDS[m.n] ?? `field${m.n}`, m.v]);
    else top.push([name, f.v]);
  }
  return { top, message };
}

/** The data frames of a Frame Streams file (control frames skipped). */
export function readFstrmFile(path: string): Buffer[] {
  const b = readFileSync(path);
  const out: Buffer[] = [];
  let p = 0;
  while (p + 4 <= b.length) {
    const len = b.readUInt32BE(p);
    if (len === 0) {
      const clen = b.readUInt32BE(p + 4);
      p += 8 + clen;
      continue;
    }
    out.push(b.subarray(p + 4, p + 4 + len));
    p += 4 + len;
  }
  return out;
}

/** A unidirectional Frame Streams file of dnstap payloads (what dnstap-read reads). */
export function fstrmFile(payloads: Buffer[]): Buffer {
  const parts: Buffer[] = [controlFrame(CONTROL_START, true)];
  for (const p of payloads) {
    const h = Buffer.alloc(4);
    h.writeUInt32BE(p.length);
    parts.push(h, p);
  }
  parts.push(controlFrame(CONTROL_STOP, false));
  return Buffer.concat(parts);
}

/** Fails loudly when a tool the test needs is missing. */
export function requireTool(name: string, pkg: string): void {
  const r = spawnSync('sh', ['-c', `command -v ${name}`]);
  if (r.status !== 0) throw new Error(`${name} is not installed (Debian package ${pkg}; .ci/run installs it)`);
}

/** `dnstap-read -y FILE`. */
export function dnstapRead(path: string): string {
  requireTool('dnstap-read', 'bind9-dnsutils');
  const r = spawnSync('dnstap-read', ['-y', path], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`dnstap-read failed: ${r.stderr}`);
  return r.stdout;
}

/** A running fstrm_capture writing to `out`. */
export class Capture {
  readonly proc: ChildProcess;
  readonly out: string;
  log = '';

  private constructor(proc: ChildProcess, out: string) {
    this.proc = proc;
    this.out = out;
    proc.stderr!.on('data', (d: Buffer) => { this.log += d.toString(); });
    proc.stdout!.on('data', (d: Buffer) => { this.log += d.toString(); });
  }

  /** Listen on a unix socket path, or on 127.0.0.1:port. */
  static async start(where: { unix: string } | { port: number }, out: string): Promise<Capture> {
    requireTool('fstrm_capture', 'fstrm-bin');
    const args = ['-d', '-d', '-d', '-t', CONTENT_TYPE.toString(), '-w', out];
    if ('unix' in where) args.push('-u', where.unix);
    else args.push('-a', '127.0.0.1', '-p', String(where.port));
    const c = new Capture(spawn('fstrm_capture', args, { stdio: ['ignore', 'pipe', 'pipe'] }), out);
    for (let i = 0; i < 100; i++) {
      if (c.log.includes('opened output file') && ('unix' in where ? existsSync(where.unix) : c.log.includes('opening TCP'))) {
        await sleep(50);
        return c;
      }
      await sleep(20);
    }
    c.proc.kill('SIGKILL');
    throw new Error(`fstrm_capture did not start: ${c.log}`);
  }

  /** Waits until the log shows `text` (true) or `ms` passed (false). */
  async waitFor(text: string | RegExp, ms = 5000): Promise<boolean> {
    for (let t = 0; t < ms; t += 20) {
      if (typeof text === 'string' ? this.log.includes(text) : text.test(this.log)) return true;
      await sleep(20);
    }
    return false;
  }

  /** SIGINT: fstrm_capture closes its file; resolves once it exited. */
  async stop(): Promise<void> {
    if (this.proc.exitCode !== null) return;
    const done = new Promise<void>((resolve) => { this.proc.once('exit', () => { resolve(); }); });
    this.proc.kill('SIGINT');
    await done;
  }
}

/**
 * A dnstap sink that connects to a `dnstap listen` server (the reader's side of the bidirectional
 * handshake: ACCEPT to READY, then START, data frames, FINISH to STOP) and keeps the data frames.
 */
export class Sink {
  readonly frames: Buffer[] = [];
  readonly controls: number[] = [];
  private buf: Buffer = Buffer.alloc(0);
  readonly sock: net.Socket;
  closed = false;

  private constructor(sock: net.Socket) {
    this.sock = sock;
    sock.on('data', (d: Buffer) => { this.onData(d); });
    sock.on('close', () => { this.closed = true; });
    sock.on('error', () => { /* closed */ });
  }

  static async connect(where: { unix: string } | { port: number; tls?: tls.ConnectionOptions }): Promise<Sink> {
    const sock = 'unix' in where ? net.connect({ path: where.unix })
      : where.tls !== undefined ? tls.connect({ host: '127.0.0.1', port: where.port, ...where.tls })
        : net.connect({ host: '127.0.0.1', port: where.port });
    await new Promise<void>((resolve, reject) => {
      sock.once('error', reject);
      sock.once('tls' in where && where.tls !== undefined ? 'secureConnect' : 'connect', () => { sock.off('error', reject); resolve(); });
    });
    const s = new Sink(sock);
    for (let i = 0; i < 250 && !s.controls.includes(CONTROL_START) && !s.closed; i++) await sleep(20);
    if (!s.controls.includes(CONTROL_START)) throw new Error('no START from the server');
    return s;
  }

  private onData(d: Buffer): void {
    this.buf = Buffer.concat([this.buf, d]);
    for (;;) {
      const b = this.buf;
      if (b.length < 4) return;
      const len = b.readUInt32BE(0);
      if (len === 0) {
        if (b.length < 8) return;
        const clen = b.readUInt32BE(4);
        if (b.length < 8 + clen) return;
        const type = b.readUInt32BE(8);
        this.controls.push(type);
        this.buf = b.subarray(8 + clen);
        if (type === CONTROL_READY) this.sock.write(controlFrame(CONTROL_ACCEPT, true));
        else if (type === CONTROL_STOP) this.sock.write(controlFrame(CONTROL_FINISH, false));
        continue;
      }
      if (b.length < 4 + len) return;
      this.frames.push(Buffer.from(b.subarray(4, 4 + len)));
      this.buf = b.subarray(4 + len);
    }
  }

  async waitFrames(n: number, ms = 5000): Promise<void> {
    for (let t = 0; t < ms && this.frames.length < n; t += 20) await sleep(20);
    if (this.frames.length < n) throw new Error(`${this.frames.length} of ${n} frames`);
  }

  async waitClosed(ms = 5000): Promise<boolean> {
    for (let t = 0; t < ms && !this.closed; t += 20) await sleep(20);
    return this.closed;
  }
}
