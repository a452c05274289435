// loop, exactly as CoreDNS's plugin/loop: one HINFO probe `<R1>.<R2>.<zone>`
// for the first zone of the block, sent over UDP to the block's own listen
// address for up to 30 s until one attempt gets any reply; three sightings of
// the probe name before that → [FATAL] and exit 1; then the plugin switches
// itself off for good.

import dgram from 'node:dgram';
import { randomInt } from 'node:crypto';
import type { Handler, HandlerResult, PluginLogger, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { zonesMatches } from '../pkg/zones.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newMessage } from '../../wire/message.ts';
import { RRType, RRClass } from '../../wire/constants.ts';
import { randomLabel } from '../pkg/loopguard.ts';
import { goQuote } from '../../corefile/address.ts';
// Request metadata forward honours: a probe must be forwarded on every lap, never coalesced.
import { NO_COALESCE } from '../pkg/upstreams.ts';


const HINFO = RRType.HINFO;

/** CoreDNS dnsutil.Join(l1, l2, zone). */
export function probeQname(zone: string): string {
  const l1 = randomLabel();
  const l2 = randomLabel();
  return zone === '.' ? `${l1}.${l2}.` : `${l1}.${l2}.${zone}`;
}

/** Go's net.JoinHostPort. */
export function joinHostPort(host: string, port: string): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The CoreDNS fatal text (without the `[FATAL] plugin/loop: ` prefix). */
export function fatalMessage(remote: string, target: string, zone: string, qname: string, qtype = 'HINFO'): string {
  return `Loop (${remote} -> ${target}) detected for zone ${goQuote(zone)}, see https://coredns.io/plugins/loop#troubleshooting. Query: "${qtype} ${qname}"`;
}

export class Loop implements Handler {
  readonly name = 'loop';
  next: Handler | undefined;
  readonly zone: string;
  qname: string;
  private addr = '';
  private i = 0;
  private off = false;
  private readonly log: PluginLogger | undefined;

  constructor(zone: string, log?: PluginLogger) {
    this.zone = zone;
    this.qname = probeQname(zone);
    this.log = log;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    if (req.qtype !== HINFO || this.off) return nextOrFailure(this.name, this.next, req, w);
    const name = req.name;
    if (zonesMatches([this.zone], name) === '') return nextOrFailure(this.name, this.next, req, w);
    if (name === this.qname) {
      this.i++;
      // nodens's forward coalesces identical in-flight queries, which would stop the probe after one lap;
      // CoreDNS's forward sends every lap, and so the probe must be counted on every lap here too.
      req.setValue(NO_COALESCE, '1');
    }
    if (this.i > 2) {
      const remote = joinHostPort(req.remoteAddress, String(req.remotePort));
      this.log?.fatal(fatalMessage(remote, this.addr, this.zone, this.qname));
      // Reached only when the server's fatal handler did not end the process (an embedded server stopping).
      return 2; // SERVFAIL
    }
    return nextOrFailure(this.name, this.next, req, w);
  }

  seen(): number { return this.i; }
  inc(): void { this.i++; }
  reset(): void { this.i = 0; }
  setDisabled(): void { this.off = true; }
  disabled(): boolean { return this.off; }
  setAddress(a: string): void { this.addr = a; }
  address(): string { return this.addr; }

  /**
   * The background task CoreDNS starts from OnStartup: probe `addr` until one
   * attempt gets a reply or 30 s have passed, then disable. Resolves when done.
   */
  async probeLoop(addr: string, stopped: () => boolean): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && !stopped()) {
      this.setAddress(addr);
      try {
        await exchangeUdp(this.qname, HINFO, addr);
      } catch {
        this.reset();
        await sleep(1000);
        continue;
      }
      break;
    }
    this.setDisabled();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => { setTimeout(r, ms).unref(); });
}

/**
 * miekg/dns Exchange over UDP: a fresh socket, 2 s dial/write/read timeouts,
 * random ID, RD=1, no EDNS; a reply with another ID is an error.
 */
export function exchangeUdp(qname: string, qtype: number, addr: string, timeoutMs = 2000): Promise<Buffer> {
  const m = newMessage();
  m.id = randomInt(0, 0x10000);
  m.rd = true;
  m.question.push({ name: qname, type: qtype, class: RRClass.IN });
  const wire = encodeMessage(m);
  // An empty host dials the local machine, as Go's net.Dial does.
  const hp = /^\[(.*)\]:(\d+)$/.exec(addr) ?? /^(.*):(\d+)$/.exec(addr);
  const host = hp === null || hp[1] === '' ? '127.0.0.1' : hp[1]!;
  const port = hp === null ? 53 : Number(hp[2]);
  const sock = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
  return new Promise<Buffer>((resolve, reject) => {
    const done = (e: Error | undefined, b?: Buffer): void => {
      clearTimeout(timer);
      try { sock.close(); } catch { /* closed */ }
      if (e !== undefined) reject(e); else resolve(b!);
    };
    const timer = setTimeout(() => { done(new Error('i/o timeout')); }, timeoutMs);
    sock.on('error', (e) => { done(e); });
    sock.on('message', (b) => {
      if (b.length < 2 || b.readUInt16BE(0) !== m.id) { done(new Error('dns: id mismatch')); return; }
      done(undefined, b);
    });
    sock.connect(port, host, () => { sock.send(wire); });
  });
}
