// NOTIFY out (CoreDNS plugin/transfer/notify.go, miekg's dns.Client over UDP): each `to` address that is
// not `*` gets a NOTIFY for the zone's SOA, tried up to three times (2 s per try) until it answers
// NOERROR.

import { createSocket, type Socket } from 'node:dgram';
import { Opcode, Rcode, RRClass, RRType, rcodeToString } from '../../wire/constants.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newMessage } from '../../wire/message.ts';
import { goQuote } from '../../corefile/address.ts';
import { splitHostPort } from '../pkg/httpserver.ts';

/** miekg's default dial/read/write timeout. */
const TIMEOUT_MS = 2000;
const TRIES = 3;

/** miekg's SetNotify: a random id, opcode NOTIFY, AA, the question `zone SOA IN`. */
function notifyMessage(zone: string): Uint8Array {
  const m = newMessage();
  m.id = (Math.random() * 0x10000) | 0;
  m.opcode = Opcode.NOTIFY;
  m.aa = true;
  m.question.push({ name: zone, type: RRType.SOA, class: RRClass.IN });
  return encodeMessage(m);
}

/** One exchange; resolves with the reply's rcode, rejects with Go's error text. */
function exchange(wire: Uint8Array, host: string, port: number, source: string | undefined): Promise<number> {
  const v6 = host.includes(':');
  return new Promise<number>((resolve, reject) => {
    const sock: Socket = createSocket(v6 ? 'udp6' : 'udp4');
    // NOTIFYs in flight do not keep a stopping process alive.
    sock.unref();
    const id = (wire[0]! << 8) | wire[1]!;
    let local = '';
    let timer: NodeJS.Timeout | undefined;
    const peer = (v6 ? `[${host}]` : host) + ':' + String(port);
    const done = (err: Error | undefined, rcode: number): void => {
      if (timer !== undefined) clearTimeout(timer);
      sock.removeAllListeners('message');
      sock.on('error', () => { /* closing */ });
      sock.close();
      if (err !== undefined) reject(err); else resolve(rcode);
    };
    sock.on('error', (e: NodeJS.ErrnoException) => {
      if (local === '') {
        // before the exchange: binding `source` or connecting failed (Go's dial error)
        const src = source === undefined ? '' : (source.includes(':') ? `[${source}]` : source) + ':0->';
        const why = e.code === 'EADDRNOTAVAIL' ? 'bind: cannot assign requested address' : e.message;
        done(new Error(`dial udp ${src}${peer}: ${why}`), 0);
        return;
      }
      const why = e.code === 'ECONNREFUSED' ? 'read: connection refused' : e.message;
      done(new Error(`read udp ${local}->${peer}: ${why}`), 0);
    });
    sock.on('message', (msg: Buffer) => {
      let rcode: number;
      try {
        if (msg.length < 2 || ((msg[0]! << 8) | msg[1]!) !== id) return; // another id: keep reading, as miekg
        rcode = decodeMessage(msg).rcode;
      } catch (e) {
        done(new Error(e instanceof Error ? e.message : String(e)), 0);
        return;
      }
      done(undefined, rcode);
    });
    const start = (): void => {
      sock.connect(port, host, () => {
        const a = sock.address();
        local = (a.family === 'IPv6' ? `[${a.address}]` : a.address) + ':' + String(a.port);
        timer = setTimeout(() => { done(new Error(`read udp ${local}->${peer}: i/o timeout`), 0); }, TIMEOUT_MS);
        timer.unref();
        sock.send(wire);
      });
    };
    if (source !== undefined) sock.bind({ address: source, port: 0 }, start);
    else start();
  });
}

/** miekg-style `host:port` to its parts (the host without brackets). */
function target(s: string): { host: string; port: number } {
  const { host, port } = splitHostPort(s);
  return { host, port: Number(port) };
}

/** CoreDNS's sendNotify: up to three tries until one is answered NOERROR. */
async function sendNotify(wire: Uint8Array, zone: string, to: string, source: string | undefined): Promise<void> {
  const { host, port } = target(to);
  let err: Error | undefined;
  let code: number = Rcode.SERVFAIL; // until something answers
  for (let i = 0; i < TRIES; i++) {
    try {
      code = await exchange(wire, host, port, source);
      err = undefined;
    } catch (e) {
      err = e as Error;
      continue;
    }
    if (code === Rcode.NOERROR) return;
  }
  if (err !== undefined) throw new Error(`notify for zone ${goQuote(zone)} was not accepted by ${goQuote(to)}: ${goQuote(err.message)}`);
  throw new Error(`notify for zone ${goQuote(zone)} was not accepted by ${goQuote(to)}: rcode was ${goQuote(rcodeToString(code))}`);
}

/**
 * NOTIFY every address of `to` but `*`, one after the other; rejects with the errors joined by newlines
 * (Go's errors.Join) when some did not accept.
 */
export async function sendNotifies(zone: string, to: readonly string[], source: string | undefined): Promise<void> {
  const wire = notifyMessage(zone);
  const errs: string[] = [];
  for (const t of to) {
    if (t === '*') continue;
    try {
      await sendNotify(wire, zone, t, source);
    } catch (e) {
      errs.push((e as Error).message);
    }
  }
  if (errs.length > 0) throw new Error(errs.join('\n'));
}
