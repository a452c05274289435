// A minimal DNS client for tests: send raw bytes over UDP or TCP to a loopback
// server and return the raw reply. Bounded by a timeout, never retries.

import dgram from 'node:dgram';
import net from 'node:net';

export interface ExchangeOptions {
  tcp?: boolean;
  host?: string;
  timeoutMs?: number;
}

export function exchange(port: number, query: Uint8Array, opts: ExchangeOptions = {}): Promise<Buffer> {
  return opts.tcp ? exchangeTcp(port, query, opts) : exchangeUdp(port, query, opts);
}

function exchangeUdp(port: number, query: Uint8Array, opts: ExchangeOptions): Promise<Buffer> {
  const host = opts.host ?? '127.0.0.1';
  const sock = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { sock.close(); reject(new Error(`UDP query to ${host}:${port} timed out`)); }, opts.timeoutMs ?? 2000);
    sock.on('message', (msg) => { clearTimeout(timer); sock.close(); resolve(msg); });
    sock.on('error', (e) => { clearTimeout(timer); sock.close(); reject(e); });
    sock.send(query, port, host);
  });
}

function exchangeTcp(port: number, query: Uint8Array, opts: ExchangeOptions): Promise<Buffer> {
  const host = opts.host ?? '127.0.0.1';
  return new Promise((resolve, reject) => {
    const sock = net.connect({ port, host });
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => { sock.destroy(); reject(new Error(`TCP query to ${host}:${port} timed out`)); }, opts.timeoutMs ?? 2000);
    sock.on('connect', () => {
      const framed = Buffer.alloc(query.length + 2);
      framed.writeUInt16BE(query.length, 0);
      framed.set(query, 2);
      sock.write(framed);
    });
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= 2 && buf.length >= buf.readUInt16BE(0) + 2) {
        clearTimeout(timer);
        sock.destroy();
        resolve(buf.subarray(2, buf.readUInt16BE(0) + 2));
      }
    });
    sock.on('error', (e) => { clearTimeout(timer); reject(e); });
  });
}

/** Send and expect no reply within `ms` (for queries a server must ignore). */
export function expectSilence(port: number, query: Uint8Array, ms = 300): Promise<boolean> {
  const sock = dgram.createSocket('udp4');
  return new Promise((resolve) => {
    const timer = setTimeout(() => { sock.close(); resolve(true); }, ms);
    sock.on('message', () => { clearTimeout(timer); sock.close(); resolve(false); });
    sock.send(query, port, '127.0.0.1');
  });
}
