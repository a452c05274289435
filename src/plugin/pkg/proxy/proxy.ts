// One upstream (CoreDNS plugin/pkg/proxy): sends a query over a cached or new
// connection with a fresh random ID, counts health, and runs the health-check
// loop CoreDNS runs after a failure (plus, optionally, periodic checks).

import type https from 'node:https';
import { randomFillSync } from 'node:crypto';
import { rcodeToString } from '../../../wire/constants.ts';
import { type Conn, StreamConn, UdpConn, type Proto, type TlsOptions } from './conn.ts';
import { questionEnd } from '../../../wire/scan.ts';
import { questionIdentical, randomizeQuestionCase, restoreQuestionCase } from '../../../wire/case.ts';
import { UpstreamError, hostPort } from './errors.ts';
import { proxyMetrics, type ProxyMetrics } from './metrics.ts';
import { Transport, type TransportOptions } from './transport.ts';

export type UpstreamKind = 'dns' | 'tls' | 'https';

/** Where an upstream was configured: a Corefile line or a resolv.conf line. */
export interface Origin {
  file: string;
  line: number;
  /** `corefile` for TO arguments, `resolvconf` for nameserver lines of a TO file. */
  source: 'corefile' | 'resolvconf';
}

export interface HealthOptions {
  /** Interval between probes while failing (CoreDNS health_check). */
  intervalMs: number;
  recursionDesired: boolean;
  domain: string;
  forceTcp: boolean;
  /** nodens: probe every N ms even when nothing failed; 0 = off (CoreDNS). */
  periodicMs: number;
}

export interface ProxyOptions extends TransportOptions {
  readTimeoutMs: number;
  /** 0x20: UDP queries' letters in random case (default on; forward's `case_randomization off`). */
  caseRandomization?: boolean;
  dohMethod: 'GET' | 'POST';
  health: HealthOptions;
}

// IDs and 0x20 case bits come from the CSPRNG, drawn in batches; no byte is used twice.
const RAND = Buffer.alloc(4096);
let randAt = RAND.length;
export function randomId(): number {
  if (randAt + 2 > RAND.length) {
    randomFillSync(RAND);
    randAt = 0;
  }
  const id = (RAND[randAt]! << 8) | RAND[randAt + 1]!;
  randAt += 2;
  return id;
}

/** Bytes that cover a name's letters (at most 255 bytes of name, so at most 253 letters). */
const CASE_BYTES = 32;

/** randomizeQuestionCase with bits from the CSPRNG; returns the letters randomised. */
function randomizeCase(out: Buffer, qEnd: number): number {
  if (randAt + CASE_BYTES > RAND.length) {
    randomFillSync(RAND);
    randAt = 0;
  }
  const letters = randomizeQuestionCase(out, qEnd, RAND, randAt);
  randAt += (letters + 7) >> 3;
  return letters;
}

const HC_TIMEOUT_MS = 1000;
const DOH_TIMEOUT_MS = 2000;

function rcodeLabel(rc: number): string {
  const s = rcodeToString(rc);
  return s.startsWith('RCODE') ? String(rc) : s;
}

/** What one exchange used, filled in by `connect` when asked (dnstap): our end and the transport dialled. */
export interface ExchangeInfo {
  /** `ip:port` of the local end of the upstream socket; '' until dialled. */
  local: string;
  /** The transport actually dialled (a TLS upstream is `tcp`). */
  proto: 'udp' | 'tcp';
}

export class Proxy {
  /** `ip:port` (or the DoH URL): the `to` metric label. */
  readonly addr: string;
  readonly host: string;
  readonly port: number;
  readonly kind: UpstreamKind;
  readonly origin: Origin;
  readonly proxyName: string;
  readonly transport: Transport;
  opts: ProxyOptions;
  /** Consecutive failed health checks. */
  fails = 0;
  /** Taken out of rotation by an operator or a plugin (e.g. loop detection). */
  quarantined = false;
  /**
   * A 0x20 query got, within its read timeout, replies with the question in another case and none in the case
   * sent: the upstream does not preserve case, so its queries go out as the client spelled them (the port and ID
   * carry the entropy again). Forged replies alone cannot cause this: the upstream's own reply would come in time.
   */
  caseBlind = false;
  private probing = false;
  private probeTimer: NodeJS.Timeout | undefined;
  private periodic: NodeJS.Timeout | undefined;
  private stopped = false;
  private agent: https.Agent | undefined;
  private readonly durations: ({ observe(v: number): void } | undefined)[] = [];

  constructor(host: string, port: number, kind: UpstreamKind, origin: Origin, opts: ProxyOptions, proxyName = 'forward') {
    this.host = host;
    this.port = port;
    this.kind = kind;
    this.origin = origin;
    this.opts = opts;
    this.proxyName = proxyName;
    this.addr = kind === 'https' ? `https://${hostPort(host, port)}/dns-query` : hostPort(host, port);
    this.transport = new Transport(host, port, this.addr, proxyName, opts);
    this.metrics = opts.metrics ?? proxyMetrics();
  }

  private readonly metrics: ProxyMetrics;

  get tls(): TlsOptions | undefined {
    return this.opts.tls;
  }

  start(): void {
    this.stopped = false;
    this.transport.start();
    const every = this.opts.health.periodicMs;
    if (every > 0 && this.periodic === undefined) {
      this.periodic = setInterval(() => { this.periodicCheck(); }, every);
      this.periodic.unref();
    }
  }

  stop(): void {
    this.stopped = true;
    this.transport.stop();
    if (this.periodic !== undefined) clearInterval(this.periodic);
    this.periodic = undefined;
    if (this.probeTimer !== undefined) clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    this.agent?.destroy();
  }

  /** CoreDNS Down: more consecutive failed checks than maxFails (never when maxFails is 0). */
  down(maxFails: number): boolean {
    if (maxFails === 0) return false;
    return this.fails > maxFails;
  }

  /**
   * Send `query` (the client's message, any ID) and return the upstream's reply with the
   * query's original ID restored. Rejects with an UpstreamError on network failure.
   */
  async connect(query: Uint8Array, proto: 'udp' | 'tcp', bufsize: number, timeoutMs = this.opts.readTimeoutMs, info?: ExchangeInfo): Promise<Buffer> {
    const t0 = performance.now();
    const originId = (query[0]! << 8) | query[1]!;
    const out = Buffer.from(query);
    let reply: Buffer;
    if (this.kind === 'https') {
      out[0] = 0;
      out[1] = 0;
      reply = await this.doh(out);
    } else {
      const id = randomId();
      out[0] = id >> 8;
      out[1] = id & 0xff;
      reply = await this.lookup(query, out, proto, bufsize, timeoutMs, info);
    }
    reply[0] = originId >> 8;
    reply[1] = originId & 0xff;
    const rc = reply[3]! & 0x0f;
    let h = this.durations[rc];
    if (h === undefined) h = this.durations[rc] = this.metrics.requestDuration.child(this.proxyName, this.addr, rcodeLabel(rc));
    h.observe((performance.now() - t0) / 1000);
    return reply;
  }

  /**
   * One exchange of `out` (a copy of `original` with our ID). Over UDP the name's letters go out in random case
   * (0x20: one bit of entropy each, beyond ID and source port) and the reply gets the client's spelling back; an
   * upstream that changes the case is asked again as the client spelled it, and from then on always so.
   */
  private lookup(original: Uint8Array, out: Buffer, proto: Proto, bufsize: number, timeoutMs: number, info: ExchangeInfo | undefined): Promise<Buffer> {
    const qEnd = questionEnd(out);
    if (qEnd < 0) return Promise.reject(new UpstreamError('other', 'dns: bad query'));
    const letters = proto === 'udp' && !this.caseBlind && this.opts.caseRandomization !== false ? randomizeCase(out, qEnd) : 0;
    return this.exchange(original, out, qEnd, proto, bufsize, timeoutMs, info, letters);
  }

  /** The query again with the client's spelling (no 0x20) and a fresh ID: the port draw carries the entropy. */
  private askAsSpelled(
    original: Uint8Array, out: Buffer, qEnd: number, proto: Proto, bufsize: number, timeoutMs: number, info: ExchangeInfo | undefined,
  ): Promise<Buffer> {
    out.set(original.subarray(12, qEnd), 12);
    const id = randomId();
    out[0] = id >> 8;
    out[1] = id & 0xff;
    return this.exchange(original, out, qEnd, proto, bufsize, timeoutMs, info, 0);
  }

  /** One connection's exchange (one async frame per upstream query: this is the hot path of every miss). */
  private async exchange(
    original: Uint8Array, out: Buffer, qEnd: number, proto: Proto, bufsize: number, timeoutMs: number, info: ExchangeInfo | undefined,
    caseLetters: number,
  ): Promise<Buffer> {
    const t = this.transport;
    const conn: Conn = proto === 'udp' && t.udpOneShot ? t.oneShotUdp() : await t.dial(proto);
    if (info !== undefined) {
      info.local = conn.localEndpoint();
      info.proto = conn.proto === 'udp' ? 'udp' : 'tcp';
    }
    let reply: Buffer;
    try {
      reply = await conn.exchange(out, qEnd, timeoutMs, bufsize < 512 ? 512 : bufsize, caseLetters);
      // A native one-use socket exists only from its send on: its end is known now, not at the dial.
      if (info !== undefined && info.local === '') info.local = conn.localEndpoint();
      this.transport.yield(conn);
    } catch (e) {
      if (info !== undefined && info.local === '') info.local = conn.localEndpoint();
      conn.close();
      if (e instanceof UpstreamError) {
        if (e.kind === 'timeout') this.metrics.timeoutsCount.labels(this.proxyName, this.addr, conn.proto).inc();
        else if (e.kind === 'case') {
          this.caseBlind = true;
          return this.askAsSpelled(original, out, qEnd, proto, bufsize, timeoutMs, info);
        }
      }
      throw e;
    }
    if (caseLetters === 0 || !questionIdentical(out, qEnd, reply)) return reply; // another question: forward answers FORMERR
    // Truncated: upstreams compress names case-sensitively (miekg, nodens), so under another spelling fewer records
    // may fit than under the client's. Asked again as spelled, the TC reply is the one CoreDNS would relay.
    if ((reply[2]! & 0x02) !== 0) return this.askAsSpelled(original, out, qEnd, proto, bufsize, timeoutMs, info);
    restoreQuestionCase(reply, qEnd, out, original);
    return reply;
  }

  private doh(out: Buffer): Promise<Buffer> {
    // node:https is loaded on the first DoH exchange, not with the module: loading it (and the HTTP stack behind
    // it) costs every Corefile with `forward` start-up time and memory, and only https:// upstreams use it.
    const https = process.getBuiltinModule('node:https');
    this.agent ??= new https.Agent({
      keepAlive: true, maxSockets: 64, minVersion: 'TLSv1.2', localAddress: this.opts.source,
      ca: this.opts.tls?.ca, cert: this.opts.tls?.cert, key: this.opts.tls?.key,
      servername: this.opts.tls?.servername,
    });
    const get = this.opts.dohMethod === 'GET';
    const path = get ? '/dns-query?dns=' + out.toString('base64url') : '/dns-query';
    return new Promise((resolve, reject) => {
      const req = https.request({
        host: this.host, port: this.port, path, method: get ? 'GET' : 'POST', agent: this.agent,
        headers: get
          ? { accept: 'application/dns-message' }
          : { accept: 'application/dns-message', 'content-type': 'application/dns-message', 'content-length': out.length },
        timeout: DOH_TIMEOUT_MS,
      }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => { chunks.push(c); });
        res.on('end', () => {
          if (res.statusCode !== 200) {
            reject(new UpstreamError('other', `DNS-over-HTTPS server returned non-OK status code: ${res.statusCode}`));
            return;
          }
          const body = Buffer.concat(chunks);
          if (body.length < 12) { reject(new UpstreamError('other', 'dns: overflow unpacking uint16')); return; }
          resolve(body);
        });
        res.on('error', (e) => { reject(new UpstreamError('other', e.message)); });
      });
      req.on('timeout', () => { req.destroy(new Error('timeout')); });
      req.on('error', (e) => {
        const timeout = e.message === 'timeout';
        reject(new UpstreamError(timeout ? 'timeout' : 'other',
          `Post "https://${hostPort(this.host, this.port)}/dns-query": ${timeout ? 'context deadline exceeded (Client.Timeout exceeded while awaiting headers)' : e.message}`));
      });
      if (!get) req.write(out);
      req.end();
    });
  }

  /** CoreDNS Healthcheck: start the check loop unless one runs already. */
  healthcheck(): void {
    if (this.probing || this.stopped) return;
    this.probing = true;
    void this.probeLoop();
  }

  private async probeLoop(): Promise<void> {
    while (!this.stopped) {
      const ok = await this.check();
      if (ok) break;
      await new Promise<void>((resolve) => {
        this.probeTimer = setTimeout(resolve, this.opts.health.intervalMs);
        this.probeTimer.unref();
      });
    }
    this.probing = false;
  }

  private periodicCheck(): void {
    if (this.probing || this.stopped) return;
    void this.check().then((ok) => { if (!ok) this.healthcheck(); });
  }

  /** One health probe: `<domain> IN NS`; any reply is healthy, a network failure is not. */
  async check(): Promise<boolean> {
    try {
      await this.probe();
      this.fails = 0;
      return true;
    } catch {
      this.fails++;
      this.metrics.healthcheckFailureCount.labels(this.proxyName, this.addr).inc();
      return false;
    }
  }

  /** Send one health-check query on a fresh connection (not the cache). */
  async probe(): Promise<void> {
    const h = this.opts.health;
    const q = healthQuery(h.domain, h.recursionDesired);
    if (this.kind === 'https') {
      q[0] = 0;
      q[1] = 0;
      await this.doh(q);
      return;
    }
    const qEnd = questionEnd(q);
    const proto: Proto = this.opts.tls !== undefined ? 'tcp-tls' : h.forceTcp ? 'tcp' : 'udp';
    const conn = proto === 'udp'
      ? await UdpConn.dial(this.host, this.port, this.opts.source, HC_TIMEOUT_MS)
      : await StreamConn.dial(this.host, this.port, proto, this.opts.source, HC_TIMEOUT_MS, this.opts.tls);
    try {
      await conn.exchange(q, qEnd, HC_TIMEOUT_MS, 65535);
    } finally {
      conn.close();
    }
  }
}

/** `<domain> IN NS` with a random ID, RD as configured. */
export function healthQuery(domain: string, rd: boolean): Buffer {
  const labels = domain === '.' ? [] : domain.replace(/\.$/, '').split('.');
  let len = 12 + 1 + 4;
  for (const l of labels) len += 1 + Buffer.byteLength(l);
  const b = Buffer.alloc(len);
  const id = randomId();
  b[0] = id >> 8;
  b[1] = id & 0xff;
  b[2] = rd ? 0x01 : 0;
  b.writeUInt16BE(1, 4);
  let p = 12;
  for (const l of labels) {
    const n = b.write(l, p + 1);
    b[p] = n;
    p += n + 1;
  }
  b[p++] = 0;
  b.writeUInt16BE(2, p); // NS
  b.writeUInt16BE(1, p + 2); // IN
  return b;
}
