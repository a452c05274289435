// Zone transfer in over TCP, as miekg/dns's Transfer.In (AXFR) and Client.Exchange (the SOA check) do
// for CoreDNS's secondary: 2 s to connect, 2 s for each read, the messages framed with their length.

import { readFileSync } from 'node:fs';
import { Socket } from 'node:net';
import type { Message, ResourceRecord } from '../../wire/types.ts';
import { Rcode, RRClass, RRType } from '../../wire/constants.ts';
import { newQuery } from '../../wire/message.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { splitHostPort } from '../pkg/httpserver.ts';

/** miekg's dnsTimeout: dial, write and each read. */
const TIMEOUT_MS = 2000;

/** Go's net error texts for what connecting and reading can fail with. */
function netError(op: string, addr: string, local: string | undefined, e: unknown): Error {
  const code = (e as NodeJS.ErrnoException).code;
  const why = code === 'ECONNREFUSED' ? 'connect: connection refused'
    : code === 'ETIMEDOUT' ? 'i/o timeout'
      : code === 'EHOSTUNREACH' ? 'connect: no route to host'
        : code === 'ENETUNREACH' ? 'connect: network is unreachable'
          : code === 'ECONNRESET' ? 'read: connection reset by peer'
            : (e as Error).message;
  if (op === 'dial') return new Error(`dial tcp ${addr}: ${why}`);
  return new Error(`${op} tcp ${local ?? ''}->${addr}: ${why}`);
}

/** Go's port resolution for dialing: a number up to 65535, or a tcp service name from /etc/services. */
function dialPort(port: string): number {
  if (/^[0-9]+$/.test(port)) {
    const n = Number(port);
    if (n > 65535) throw new Error(`dial tcp: address ${port}: invalid port`);
    return n;
  }
  let services = '';
  try {
    services = readFileSync('/etc/services', 'latin1');
  } catch {
    // no services file: every name is unknown
  }
  for (const line of services.split('\n')) {
    const f = line.replace(/#.*/, '').trim().split(/\s+/);
    if (f.length < 2) continue;
    const [num, proto] = f[1]!.split('/');
    if (proto !== 'tcp') continue;
    if (f[0] === port || f.slice(2).includes(port)) return Number(num);
  }
  throw new Error(`dial tcp: lookup tcp/${port}: unknown port`);
}

/** One TCP connection reading length-framed DNS messages. */
class TcpConn {
  private readonly sock: Socket;
  private buf: Buffer = Buffer.alloc(0);
  private waiter: (() => void) | undefined;
  private error: Error | undefined;
  private ended = false;
  readonly addr: string;

  private constructor(sock: Socket, addr: string) {
    this.sock = sock;
    this.addr = addr;
    sock.on('data', (d: Buffer) => { this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]); this.wake(); });
    sock.on('end', () => { this.ended = true; this.wake(); });
    sock.on('error', (e) => { this.error ??= netError('read', addr, this.local(), e); this.wake(); });
  }

  private local(): string {
    const a = this.sock.localAddress ?? '';
    return `${a.includes(':') ? `[${a}]` : a}:${this.sock.localPort ?? 0}`;
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  static dial(addr: string): Promise<TcpConn> {
    const { host, port: portText } = splitHostPort(addr);
    let port: number;
    try {
      port = dialPort(portText);
    } catch (e) {
      return Promise.reject(e as Error);
    }
    // Go names the resolved address in its errors (a service name's number)
    addr = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
    return new Promise((resolve, reject) => {
      const sock = new Socket();
      const timer = setTimeout(() => { sock.destroy(); reject(new Error(`dial tcp ${addr}: i/o timeout`)); }, TIMEOUT_MS);
      sock.once('error', (e) => { clearTimeout(timer); reject(netError('dial', addr, undefined, e)); });
      sock.connect(port, host, () => {
        clearTimeout(timer);
        sock.removeAllListeners('error');
        resolve(new TcpConn(sock, addr));
      });
    });
  }

  write(m: Message): void {
    const wire = encodeMessage(m);
    const framed = Buffer.alloc(wire.length + 2);
    framed.writeUInt16BE(wire.length, 0);
    wire.copy(framed, 2);
    this.sock.write(framed);
  }

  /** The next message; rejects on a read error, EOF (Go's `EOF`) or after 2 s. */
  async read(): Promise<Message> {
    const deadline = Date.now() + TIMEOUT_MS;
    for (;;) {
      if (this.buf.length >= 2) {
        const n = this.buf.readUInt16BE(0);
        if (this.buf.length >= n + 2) {
          const wire = this.buf.subarray(2, n + 2);
          this.buf = this.buf.subarray(n + 2);
          return decodeMessage(wire);
        }
      }
      if (this.error !== undefined) throw this.error;
      if (this.ended) throw new Error(this.buf.length === 0 ? 'EOF' : 'unexpected EOF');
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`read tcp ${this.local()}->${this.addr}: i/o timeout`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiter = () => { clearTimeout(t); resolve(); };
      });
    }
  }

  close(): void {
    this.sock.destroy();
  }
}

function randomId(): number {
  return Math.floor(Math.random() * 65536);
}

/**
 * AXFR of `origin` from `addr` (host:port): every record of the transfer in order, including both SOAs
 * (miekg's Transfer.In as CoreDNS's TransferIn consumes it). Rejects with miekg's error texts.
 */
export async function axfr(origin: string, addr: string): Promise<ResourceRecord[]> {
  const q = newQuery(origin, RRType.AXFR, RRClass.IN);
  q.id = randomId();
  q.rd = false;
  const c = await TcpConn.dial(addr);
  try {
    c.write(q);
    const out: ResourceRecord[] = [];
    let first = true;
    for (;;) {
      const m = await c.read();
      if (m.id !== q.id) throw new Error('dns: id mismatch');
      if (first) {
        if (m.rcode !== Rcode.NOERROR) throw new Error(`dns: bad xfr rcode: ${m.rcode}`);
        if (m.answer.length === 0 || m.answer[0]!.type !== RRType.SOA) throw new Error('dns: no SOA');
        first = false;
        out.push(...m.answer);
        if (m.answer.length === 1) continue;
        if (m.answer[m.answer.length - 1]!.type === RRType.SOA) return out;
        continue;
      }
      if (m.rcode !== Rcode.NOERROR) throw new Error(`dns: bad xfr rcode: ${m.rcode}`);
      out.push(...m.answer);
      if (m.answer.length > 0 && m.answer[m.answer.length - 1]!.type === RRType.SOA) return out;
    }
  } finally {
    c.close();
  }
}

/** The SOA query over TCP (miekg's Client.Exchange with Net "tcp"): the reply. */
export async function soaQuery(origin: string, addr: string): Promise<Message> {
  const q = newQuery(origin, RRType.SOA, RRClass.IN);
  q.id = randomId();
  q.rd = true;
  const c = await TcpConn.dial(addr);
  try {
    c.write(q);
    const m = await c.read();
    if (m.id !== q.id) throw new Error('dns: id mismatch');
    return m;
  } finally {
    c.close();
  }
}
