// The connection to the Kubernetes API server.
//
// Configuration (kubeconfig, in-cluster service account, `endpoint` + `tls`) is
// loaded with @kubernetes/client-node's KubeConfig logic, which also applies the
// credentials (CA, client certificate, bearer token, token file, exec/auth
// providers) to each request through applyToHTTPSOptions: LiteKubeConfig
// (kubeconfig.ts, without client-node's heavy index) unless the user needs an
// exec plugin or an auth provider only the full KubeConfig has; a kubeconfig user's
// `tokenFile`, which client-node ignores, is read here (TokenFileSource). The HTTP requests
// themselves are plain node:http/https requests: list/watch needs streaming
// bodies, per-request abort and exact control of the query parameters that
// client-node's own Watch/ListWatch does not give (see reflector.ts).

import http from 'node:http';
import https from 'node:https';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import yaml from 'js-yaml';
// Type-only at load time: @kubernetes/client-node's index costs ~1 s and ~75 MB to import, so it is
// loaded only when a kubeconfig needs it (LiteKubeConfig.needsFullClient).
import type { KubeConfig } from '@kubernetes/client-node';
import { LiteKubeConfig, type KubeAuth } from './kubeconfig.ts';
import { kubernetesMetrics, type KubernetesMetrics } from './metrics.ts';
import { PROTOBUF, decodeStatus } from './protobuf.ts';

export interface ConnectionSpec {
  /** `kubeconfig PATH [CONTEXT]` */
  kubeconfig?: { path: string; context?: string };
  /** `endpoint URL...` (only the first one is used) */
  endpoint?: string;
  /** `tls CERT KEY CACERT` */
  tls?: { cert: string; key: string; ca: string };
}

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** How long a token read from a tokenFile is used before the file is read again (client-go: 1 minute less 10 s leeway). */
export const TOKEN_FILE_REREAD_MS = 50_000;

/**
 * A kubeconfig user's `tokenFile:` as client-go's cached file token source reads it: trimmed, re-read once the
 * last read is 50 s old, the last good token kept when a re-read fails (empty or unreadable file), the
 * kubeconfig's own `token:` (or the first read) when no read ever succeeded. A 401 does not make it read the file
 * sooner: client-go's bearer-token round tripper never resets that cache.
 */
export class TokenFileSource {
  readonly path: string;
  private readonly fallback: string;
  private readonly now: () => number;
  private cached: string | undefined;
  private readAt = 0;

  constructor(file: string, fallback: string, now: () => number = Date.now) {
    this.path = file;
    this.fallback = fallback;
    this.now = now;
  }

  token(): string {
    const t = this.now();
    if (this.cached !== undefined && t - this.readAt < TOKEN_FILE_REREAD_MS) return this.cached;
    try {
      const tok = readFileSync(this.path, 'utf8').trim();
      if (tok !== '') {
        this.cached = tok;
        this.readAt = t;
      }
    } catch { /* keep the last good token, as client-go does */ }
    return this.cached ?? this.fallback;
  }
}

const tokenFiles = new WeakMap<KubeAuth, TokenFileSource>();

/** The tokenFile source of a KubeConfig made by loadKubeConfig, if its user has one. */
export function tokenFileOf(kc: KubeAuth): TokenFileSource | undefined {
  return tokenFiles.get(kc);
}

interface RawKubeconfig { users?: { name?: string; user?: { token?: string; tokenFile?: string } }[] }

/** The current user's tokenFile (relative to the kubeconfig's folder, as client-go resolves it), read once now. */
function attachTokenFile(kc: KubeAuth, file: string, raw: RawKubeconfig): void {
  const userName = kc.getCurrentUser()?.name;
  const entry = (raw.users ?? []).find((u) => u.name === userName)?.user;
  const tf = entry?.tokenFile;
  if (typeof tf !== 'string' || tf === '') return;
  const abs = path.resolve(path.dirname(file), tf);
  let fallback = entry?.token ?? '';
  if (fallback === '') {
    // client-go reads the file when the kubeconfig is loaded and fails then if it cannot.
    try {
      fallback = readFileSync(abs, 'utf8').trim();
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new Error(code === 'ENOENT' ? `open ${abs}: no such file or directory` : code === 'EACCES' ? `open ${abs}: permission denied` : `open ${abs}: ${(e as Error).message}`);
    }
  }
  tokenFiles.set(kc, new TokenFileSource(abs, fallback));
}

/** Builds the KubeConfig the way CoreDNS's getClientConfig chooses its source. Throws with client-go's texts. */
export async function loadKubeConfig(spec: ConnectionSpec): Promise<KubeAuth> {
  const lite = loadKubeConfigFrom(spec, new LiteKubeConfig());
  let kc: KubeAuth = lite;
  if (lite.needsFullClient()) {
    const { KubeConfig: KubeConfigClass } = await import('@kubernetes/client-node');
    kc = loadKubeConfigFrom(spec, new KubeConfigClass());
  }
  if (spec.kubeconfig !== undefined) {
    attachTokenFile(kc, spec.kubeconfig.path, (yaml.load(readFileSync(spec.kubeconfig.path, 'utf8')) as RawKubeconfig | undefined) ?? {});
  }
  // client-go talks plain HTTP to an http:// server; client-node refuses unless
  // skipTLSVerify is set, which means nothing without TLS anyway.
  const c = kc.getCurrentCluster();
  if (c !== null && c.server.startsWith('http:')) (c as { skipTLSVerify: boolean }).skipTLSVerify = true;
  return kc;
}

/** The loading steps both KubeConfig classes share. */
type Loadable = Pick<KubeConfig, 'loadFromFile' | 'getContextObject' | 'setCurrentContext' | 'getCurrentCluster' | 'loadFromCluster' | 'loadFromOptions'>;

function loadKubeConfigFrom<K extends Loadable>(spec: ConnectionSpec, kc: K): K {
  if (spec.kubeconfig !== undefined) {
    if (!existsSync(spec.kubeconfig.path)) {
      throw new Error(`stat ${spec.kubeconfig.path}: no such file or directory`);
    }
    kc.loadFromFile(spec.kubeconfig.path);
    if (spec.kubeconfig.context !== undefined) {
      if (kc.getContextObject(spec.kubeconfig.context) === null) {
        throw new Error(`context was not found for specified context: ${spec.kubeconfig.context}`);
      }
      kc.setCurrentContext(spec.kubeconfig.context);
    }
    if (kc.getCurrentCluster() === null) throw new Error('invalid configuration: no configuration has been provided');
    return kc;
  }
  if (spec.endpoint === undefined) {
    const host = process.env.KUBERNETES_SERVICE_HOST;
    const port = process.env.KUBERNETES_SERVICE_PORT;
    if (!host || !port) {
      throw new Error('unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined');
    }
    if (!existsSync(`${SA_DIR}/token`)) throw new Error(`open ${SA_DIR}/token: no such file or directory`);
    kc.loadFromCluster();
    return kc;
  }
  kc.loadFromOptions({
    clusters: [{ name: 'coredns', server: spec.endpoint, caFile: spec.tls?.ca, skipTLSVerify: false }],
    users: [{ name: 'coredns', certFile: spec.tls?.cert, keyFile: spec.tls?.key }],
    contexts: [{ name: 'coredns', cluster: 'coredns', user: 'coredns' }],
    currentContext: 'coredns',
  });
  return kc;
}

/**
 * client-go reads a token file (the in-cluster service account's, a kubeconfig's) with the surrounding
 * whitespace trimmed; @kubernetes/client-node sends it as read, and a token file ending in a newline then
 * makes every request fail (node refuses a header with a line break). Trimmed here for every bearer token.
 */
export function trimBearer(headers: Record<string, string>): void {
  const auth = headers.Authorization;
  if (typeof auth !== 'string' || !auth.startsWith('Bearer ')) return;
  const token = auth.slice('Bearer '.length).trim();
  if (token === '') delete headers.Authorization;
  else headers.Authorization = `Bearer ${token}`;
}

export interface ClientLimits {
  /** client-side requests per second for non-watch requests (client-go default 5) */
  qps: number;
  /** token bucket size (client-go default 10) */
  burst: number;
  /** max concurrent non-watch requests; 0 = unlimited */
  maxInflight: number;
}

export class HttpStatusError extends Error {
  readonly status: number;
  readonly reason: string;
  readonly body: string;
  constructor(status: number, reason: string, message: string, body: string) {
    super(message);
    this.status = status;
    this.reason = reason;
    this.body = body;
  }
}

/** A token bucket as client-go's flowcontrol.NewTokenBucketRateLimiter. */
class TokenBucket {
  private tokens: number;
  private last = performance.now();
  private readonly qps: number;
  private readonly burst: number;
  constructor(qps: number, burst: number) {
    this.qps = qps;
    this.burst = burst;
    this.tokens = burst;
  }

  /** Milliseconds to wait before the next request may go (reserving its token). */
  reserve(): number {
    const now = performance.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
    this.tokens -= 1;
    if (this.tokens >= 0) return 0;
    return (-this.tokens / this.qps) * 1000;
  }
}

export interface StreamResponse {
  res: http.IncomingMessage;
  abort(): void;
}

export class ApiClient {
  readonly kc: KubeAuth;
  readonly server: URL;
  /** `host` label of the rest client metrics */
  readonly host: string;
  private readonly agent: http.Agent;
  private readonly watchAgent: http.Agent;
  private readonly bucket: TokenBucket | undefined;
  private readonly maxInflight: number;
  private inflight = 0;
  private waiting: (() => void)[] = [];
  readonly userAgent: string;

  private readonly metrics: KubernetesMetrics;

  constructor(kc: KubeAuth, limits: ClientLimits, userAgent: string, metrics: KubernetesMetrics = kubernetesMetrics()) {
    this.metrics = metrics;
    this.kc = kc;
    const c = kc.getCurrentCluster();
    if (c === null) throw new Error('invalid configuration: no configuration has been provided');
    this.server = new URL(c.server);
    this.host = this.server.host;
    const secure = this.server.protocol === 'https:';
    this.agent = secure ? new https.Agent({ keepAlive: true, maxSockets: 16 }) : new http.Agent({ keepAlive: true, maxSockets: 16 });
    this.watchAgent = secure ? new https.Agent({ keepAlive: false }) : new http.Agent({ keepAlive: false });
    this.bucket = limits.qps > 0 ? new TokenBucket(limits.qps, Math.max(1, limits.burst)) : undefined;
    this.maxInflight = limits.maxInflight;
    this.userAgent = userAgent;
  }

  close(): void {
    this.agent.destroy();
    this.watchAgent.destroy();
  }

  private async acquire(): Promise<void> {
    if (this.bucket !== undefined) {
      const t0 = performance.now();
      const wait = this.bucket.reserve();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      this.metrics.restClientRateLimiter.observe({ verb: 'GET', host: this.host }, (performance.now() - t0) / 1000);
    }
    if (this.maxInflight > 0) {
      while (this.inflight >= this.maxInflight) await new Promise<void>((r) => { this.waiting.push(r); });
      this.inflight++;
    }
  }

  private release(): void {
    if (this.maxInflight > 0) {
      this.inflight--;
      this.waiting.shift()?.();
    }
  }

  /**
   * GET `pathAndQuery`, resolving with the response once the status line is in.
   * Non-2xx statuses reject with an HttpStatusError (body read). Watches are not
   * rate limited (as client-go).
   */
  async open(pathAndQuery: string, watch: boolean, unlimited = false, accept = 'application/json'): Promise<StreamResponse> {
    const limited = !watch && !unlimited;
    if (limited) await this.acquire();
    let released = !limited;
    const done = () => {
      if (!released) {
        released = true;
        this.release();
      }
    };
    const url = new URL(pathAndQuery, this.server);
    const opts: https.RequestOptions = {
      method: 'GET',
      protocol: url.protocol,
      hostname: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port || (url.protocol === 'https:' ? 443 : 80),
      path: url.pathname + url.search,
      headers: { Accept: accept, 'User-Agent': this.userAgent },
      agent: watch ? this.watchAgent : this.agent,
    };
    await this.kc.applyToHTTPSOptions(opts);
    const tokenFile = tokenFileOf(this.kc);
    if (tokenFile !== undefined) {
      const tok = tokenFile.token();
      if (tok !== '') (opts.headers as Record<string, string>).Authorization = `Bearer ${tok}`;
    }
    trimBearer(opts.headers as Record<string, string>);
    const mod = url.protocol === 'https:' ? https : http;
    const t0 = performance.now();
    return await new Promise<StreamResponse>((resolve, reject) => {
      const req = mod.request(opts, (res) => {
        const status = res.statusCode ?? 0;
        this.metrics.restClientRequests.inc({ code: String(status), method: 'GET', host: this.host });
        this.metrics.restClientLatency.observe({ verb: 'GET', host: this.host }, (performance.now() - t0) / 1000);
        if (status < 200 || status > 299) {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (d: Buffer) => { if (size < 65536) { chunks.push(d); size += d.length; } });
          res.on('end', () => {
            done();
            const raw = Buffer.concat(chunks);
            let body = raw.toString('utf8');
            let reason = '';
            let message = `the server responded with the status code ${status}`;
            try {
              // A protobuf Status when protobuf was asked for (its JSON form kept as the body, for the callers
              // that look into it).
              const isProto = (res.headers['content-type'] ?? '').startsWith(PROTOBUF);
              const st = (isProto ? decodeStatus(raw) : JSON.parse(body)) as { reason?: string; message?: string };
              if (isProto) body = JSON.stringify(st);
              reason = st.reason ?? '';
              if (st.message) message = st.message;
            } catch { /* not a Status */ }
            reject(new HttpStatusError(status, reason, message, body));
          });
          res.on('error', (e) => { done(); reject(e); });
          return;
        }
        res.on('end', done);
        res.on('close', done);
        resolve({ res, abort: () => { req.destroy(); done(); } });
      });
      req.on('error', (e) => {
        done();
        this.metrics.restClientRequests.inc({ code: '<error>', method: 'GET', host: this.host });
        reject(e);
      });
      req.end();
    });
  }

  /** GET a whole body, with its Content-Type. */
  async getBody(pathAndQuery: string, signal?: { aborted: boolean; onAbort?: () => void }, continuation = false, accept = 'application/json'): Promise<{ contentType: string; body: Buffer }> {
    // The pages after the first of one paginated LIST ride on the first page's token.
    const s = await this.open(pathAndQuery, false, continuation, accept);
    if (signal !== undefined) signal.onAbort = s.abort;
    return await new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      s.res.on('data', (d: Buffer) => { chunks.push(d); });
      s.res.on('end', () => { resolve({ contentType: s.res.headers['content-type'] ?? '', body: Buffer.concat(chunks) }); });
      s.res.on('error', reject);
      s.res.on('aborted', () => { reject(new Error('request aborted')); });
    });
  }

  /** GET and parse a JSON body. */
  async getJSON<T>(pathAndQuery: string, signal?: { aborted: boolean; onAbort?: () => void }, continuation = false): Promise<T> {
    const { body } = await this.getBody(pathAndQuery, signal, continuation);
    return JSON.parse(body.toString('utf8')) as T;
  }
}
