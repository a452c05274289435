// The grpc plugin (CoreDNS plugin/grpc): queries under FROM (but not under an `except` name) go to the
// upstreams over DNS-over-gRPC, one unary call each, tried in the policy's order until one answers within
// 5 s. A reply for another question is answered FORMERR; NXDOMAIN (or no answer at all) goes to the next
// plugin under `fallthrough`. Each upstream holds one HTTP/2 connection (node:http2), opened on first use and
// reused by every call, as grpc-go's ClientConn: cleartext HTTP/2 with prior knowledge, or TLS with `tls`.

import http2 from 'node:http2';
import net from 'node:net';
import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import type { Message } from '../../wire/types.ts';
import { replyTo } from '../../wire/message.ts';
import { Rcode, rcodeToString } from '../../wire/constants.ts';
import { hasCompressionPointer } from '../../wire/scan.ts';
import { decodeDnsPacket, decodeGrpcMessage, grpcFrame, GRPC_PATH, MAX_PAYLOAD } from '../../wire/grpc.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { fromMatches } from '../pkg/zones.ts';
import type { Fall } from '../pkg/fall.ts';
import type { CounterVec, HistogramChild, CounterChild } from '../pkg/vec.ts';
import type { GrpcMetrics } from './metrics.ts';

/** CoreDNS's defaultTimeout: every attempt of one query together. */
const TIMEOUT_MS = 5000;
const MAX_DNS = 65535;
const GRPC_NOT_FOUND = 5;
export const ErrNoHealthy = 'no healthy gRPC proxies';

/** The TLS settings of `tls [CERT KEY] [CA]` and `tls_servername`; undefined: cleartext. */
export interface ClientTls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  servername?: string;
}

export interface Policy {
  readonly name: string;
  list(p: readonly GrpcProxy[]): readonly GrpcProxy[];
}

export class RandomPolicy implements Policy {
  readonly name = 'random';
  list(p: readonly GrpcProxy[]): readonly GrpcProxy[] {
    if (p.length <= 1) return p;
    if (p.length === 2) return Math.random() < 0.5 ? [p[1]!, p[0]!] : p;
    const out = [...p];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }
}

export class RoundRobinPolicy implements Policy {
  readonly name = 'round_robin';
  private robin = 0;
  list(p: readonly GrpcProxy[]): readonly GrpcProxy[] {
    if (p.length === 0) return p;
    this.robin = (this.robin + 1) >>> 0;
    const i = this.robin % p.length;
    return [p[i]!, ...p.slice(0, i), ...p.slice(i + 1)];
  }
}

export class SequentialPolicy implements Policy {
  readonly name = 'sequential';
  list(p: readonly GrpcProxy[]): readonly GrpcProxy[] { return p; }
}

/** An upstream's reply: decoded (CoreDNS unpacks it: one that does not unpack is an error), and its wire form. */
export interface Reply {
  msg: Message;
  /** The reply as received; undefined for one made here (NotFound). */
  wire: Buffer | undefined;
}

export class GrpcError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.name = 'GrpcError';
    this.code = code;
  }
}

/** One upstream: its address as configured (the `to` label) and its HTTP/2 connection. */
export class GrpcProxy {
  readonly addr: string;
  private readonly tls: ClientTls | undefined;
  private session: http2.ClientHttp2Session | undefined;
  private closed = false;
  private calls = 0;
  private readonly metrics: GrpcMetrics;
  private readonly requests: CounterChild;
  private readonly duration: HistogramChild;
  private readonly rcodes = new Map<number, CounterChild>();

  constructor(addr: string, tls: ClientTls | undefined, metrics: GrpcMetrics) {
    this.addr = addr;
    this.tls = tls;
    this.metrics = metrics;
    this.requests = metrics.requestCount.child(addr);
    this.duration = metrics.requestDuration.child(addr);
  }

  /** The connection, opened now if there is none usable (grpc-go reconnects the same way after a failure). */
  private connect(): http2.ClientHttp2Session {
    const s = this.session;
    if (s !== undefined && !s.closed && !s.destroyed) return s;
    const addr = this.addr;
    let session: http2.ClientHttp2Session;
    const settings = { enablePush: false };
    if (addr.startsWith('unix://')) {
      const path = addr.slice('unix://'.length);
      session = http2.connect('http://localhost', { settings, createConnection: () => net.connect({ path }) });
    } else {
      const hp = splitHostPort(addr);
      if (hp === undefined) throw new Error(`unsupported upstream address ${JSON.stringify(addr)}`);
      const host = hp.host.includes(':') ? `[${hp.host}]` : hp.host;
      const t = this.tls;
      if (t === undefined) {
        session = http2.connect(`http://${host}:${hp.port}`, { settings });
      } else {
        const o: http2.SecureClientSessionOptions = { settings, minVersion: 'TLSv1.2', ALPNProtocols: ['h2'] };
        if (t.ca !== undefined) o.ca = t.ca;
        if (t.cert !== undefined) o.cert = t.cert;
        if (t.key !== undefined) o.key = t.key;
        // grpc-go verifies the ServerName when set, else the host of the target; an IP is checked against IP SANs.
        if (t.servername !== undefined) o.servername = t.servername;
        else if (net.isIP(hp.host) === 0) o.servername = hp.host;
        session = http2.connect(`https://${host}:${hp.port}`, o);
      }
    }
    session.on('error', () => { /* the calls on it fail; the next query reconnects */ });
    session.on('goaway', () => { if (this.session === session) this.session = undefined; });
    session.once('close', () => { if (this.session === session) this.session = undefined; });
    // An idle connection must not keep the process alive; calls in flight hold it (ref'd per call).
    session.unref();
    this.session = session;
    return session;
  }

  /** One call: the reply, or an error (the caller tries the next upstream). */
  async query(wire: Buffer, req: Message, deadline: number): Promise<Reply> {
    if (this.closed) throw new Error('grpc: the client connection is closing');
    const start = process.hrtime.bigint();
    if (wire.length > MAX_DNS) throw new Error(`dns message exceeds size limit: ${wire.length} bytes (limit ${MAX_DNS})`);
    let reply: Buffer;
    try {
      reply = await this.call(wire, deadline);
    } catch (e) {
      // CoreDNS: a NotFound status is an NXDOMAIN for the question.
      if (e instanceof GrpcError && e.code === GRPC_NOT_FOUND) {
        const m = replyTo(req);
        m.rcode = Rcode.NXDOMAIN;
        return { msg: m, wire: undefined };
      }
      throw e;
    }
    if (reply.length > MAX_DNS) throw new Error(`dns message exceeds size limit: ${reply.length} bytes (limit ${MAX_DNS})`);
    const m = decodeMessage(reply);
    this.requests.inc();
    let rc = this.rcodes.get(m.rcode);
    if (rc === undefined) this.rcodes.set(m.rcode, rc = (this.metrics.rcodeCount as CounterVec).child(rcodeToString(m.rcode), this.addr));
    rc.inc();
    this.duration.observe(Number(process.hrtime.bigint() - start) / 1e9);
    return { msg: m, wire: reply };
  }

  private call(wire: Buffer, deadline: number): Promise<Buffer> {
    const session = this.connect();
    const left = Math.max(1, deadline - Date.now());
    return new Promise<Buffer>((resolve, reject) => {
      let stream: http2.ClientHttp2Stream;
      try {
        stream = session.request({
          ':method': 'POST', ':path': GRPC_PATH, 'content-type': 'application/grpc', te: 'trailers',
          // grpc-go's timeout header: the time left, in milliseconds.
          'grpc-timeout': `${left}m`,
        });
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
        return;
      }
      // Calls in flight keep the process alive; an idle connection does not.
      if (this.calls++ === 0) session.ref();
      const chunks: Buffer[] = [];
      let size = 0;
      let status: string | undefined;
      let message = '';
      let httpStatus = 0;
      let settled = false;
      const timer = setTimeout(() => {
        finish(new GrpcError(4, 'context deadline exceeded'));
        stream.close(http2.constants.NGHTTP2_CANCEL);
      }, left);
      const finish = (err: Error | undefined, body?: Buffer): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (--this.calls === 0 && !session.destroyed) session.unref();
        if (err !== undefined) reject(err);
        else resolve(body!);
      };
      const readStatus = (h: http2.IncomingHttpHeaders): void => {
        const s = h['grpc-status'];
        if (s !== undefined) {
          status = String(s);
          message = decodeGrpcMessage(String(h['grpc-message'] ?? ''));
        }
      };
      stream.on('response', (h) => {
        httpStatus = Number(h[':status']);
        readStatus(h);
      });
      stream.on('trailers', readStatus);
      stream.on('data', (c: Buffer) => {
        size += c.length;
        if (size > 5 + MAX_PAYLOAD + 5) {
          finish(new GrpcError(8, `grpc: received message larger than max (${size - 5} vs. ${MAX_PAYLOAD})`));
          stream.close(http2.constants.NGHTTP2_CANCEL);
          return;
        }
        chunks.push(c);
      });
      stream.on('error', (e: Error) => { finish(new GrpcError(14, e.message)); });
      stream.on('close', () => {
        if (settled) return;
        if (status === undefined) {
          finish(new GrpcError(httpStatus === 200 || httpStatus === 0 ? 14 : 12,
            httpStatus === 0 ? 'connection closed before server preface received' : `unexpected HTTP status code received from server: ${httpStatus}`));
          return;
        }
        if (status !== '0') {
          finish(new GrpcError(Number(status), message));
          return;
        }
        const body = Buffer.concat(chunks, size);
        if (body.length < 5) {
          finish(new GrpcError(13, 'grpc: server returned no reply message'));
          return;
        }
        const len = body.readUInt32BE(1);
        if (len > MAX_PAYLOAD) {
          finish(new GrpcError(8, `grpc: received message larger than max (${len} vs. ${MAX_PAYLOAD})`));
          return;
        }
        if (body[0] !== 0 || body.length !== 5 + len) {
          finish(new GrpcError(13, 'grpc: malformed reply message'));
          return;
        }
        const msg = decodeDnsPacket(body, 5, body.length);
        if (msg === undefined) {
          finish(new GrpcError(13, 'grpc: failed to unmarshal the received message: proto:\u00a0cannot parse invalid wire-format data'));
          return;
        }
        finish(undefined, msg);
      });
      stream.end(grpcFrame(wire));
    });
  }

  /** Close the connection (shutdown: calls in flight end). */
  close(): void {
    this.closed = true;
    const s = this.session;
    this.session = undefined;
    if (s !== undefined && !s.destroyed) s.close();
  }
}

/** `host:port` or `[v6]:port` (HostPortOrFile's form); undefined for anything else (another scheme). */
function splitHostPort(a: string): { host: string; port: number } | undefined {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(a) ?? /^([^:[\]/]+):(\d+)$/.exec(a);
  if (m === null) return undefined;
  return { host: m[1]!.replace(/%.*$/, ''), port: Number(m[2]) };
}

export interface GrpcOptions {
  from: string;
  ignored: string[];
  policy: Policy;
  fall: Fall;
}

export class Grpc implements Handler {
  readonly name = 'grpc';
  next: Handler | undefined;
  readonly proxies: GrpcProxy[];
  private readonly opts: GrpcOptions;

  constructor(opts: GrpcOptions, proxies: GrpcProxy[]) {
    this.opts = opts;
    this.proxies = proxies;
  }

  private match(name: string): boolean {
    return fromMatches(this.opts.from, this.opts.ignored, name);
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    if (!this.match(req.name)) {
      if (this.next !== undefined) return nextOrFailure(this.name, this.next, req, w);
      return Rcode.SERVFAIL;
    }
    return this.serve(req, w);
  }

  private async serve(req: Request, w: ResponseWriter): Promise<number> {
    const msg = req.msg;
    const wire = encodeMessage(msg);
    const list = this.opts.policy.list(this.proxies);
    const deadline = Math.min(Date.now() + TIMEOUT_MS, req.deadline);
    let err: Error | undefined;
    for (let i = 0; i < list.length && Date.now() < deadline; i++) {
      let reply: Reply;
      try {
        reply = await list[i]!.query(wire, msg, deadline);
      } catch (e) {
        err = e instanceof Error ? e : new Error(String(e));
        continue;
      }
      const ret = reply.msg;
      // request.Match: a response, one question, the same name (case-insensitive) and type.
      const q = ret.question;
      if (!ret.qr || q.length !== 1 || q[0]!.name.toLowerCase() !== req.name || q[0]!.type !== req.qtype) {
        const formerr = replyTo(msg);
        formerr.rcode = Rcode.FORMERR;
        w.writeMsg(formerr);
        return 0;
      }
      if (ret.rcode === Rcode.NXDOMAIN && this.opts.fall.through(req.name) && this.next !== undefined) {
        return await nextOrFailure(this.name, this.next, req, w);
      }
      // CoreDNS writes the unpacked reply, packed again without compression: an uncompressed reply is
      // already that, byte for byte, and goes out as received (no second encoding).
      if (reply.wire !== undefined && !hasCompressionPointer(reply.wire)) w.writeWire(reply.wire);
      else w.writeMsg(ret);
      return 0;
    }
    if (this.opts.fall.through(req.name) && this.next !== undefined) return await nextOrFailure(this.name, this.next, req, w);
    throw new PluginError(Rcode.SERVFAIL, err !== undefined ? err.message : ErrNoHealthy, { cause: err });
  }

  close(): void {
    for (const p of this.proxies) p.close();
  }
}
