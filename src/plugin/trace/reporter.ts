// zipkin-go's HTTP reporter (reporter/http), as CoreDNS 1.15.0 configures it: finished spans are queued, and
// a batch is POSTed as a JSON v2 array to the collector when it reaches the batch size or when the batch
// interval has passed (checked every tenth of the interval). A queue longer than the backlog drops its oldest
// spans. A batch that could not be sent stays queued for the next try; one the collector answered (whatever
// the status) is done. One request at a time, with a 5 s timeout. Reporting never waits: `send` only queues.
//
// Its log lines are CoreDNS's warnings (trace's loggerAdapter around zipkin-go's logger).

import http from 'node:http';
import https from 'node:https';
import type { PluginLogger } from '../plugin.ts';
import type { SpanSink } from './span.ts';

/** zipkin-go's defaults. */
export const DEFAULT_BATCH_SIZE = 100;
export const DEFAULT_MAX_BACKLOG = 1000;
export const DEFAULT_BATCH_INTERVAL_MS = 1000;
const REQUEST_TIMEOUT_MS = 5000;

export interface ReporterOptions {
  batchSize: number;
  maxBacklog: number;
  batchIntervalMs: number;
}

/** The text Go's http.Client gives for a failed POST (net/http's url.Error around the dial error). */
export function goHttpError(url: string, e: unknown): string {
  const err = e as NodeJS.ErrnoException & { address?: string; port?: number; hostname?: string };
  let detail: string;
  const addr = err.address !== undefined
    ? (err.address.includes(':') ? '[' + err.address + ']' : err.address) + ':' + String(err.port)
    : '';
  switch (err.code) {
    case 'ECONNREFUSED': detail = `dial tcp ${addr}: connect: connection refused`; break;
    case 'EHOSTUNREACH': detail = `dial tcp ${addr}: connect: no route to host`; break;
    case 'ENETUNREACH': detail = `dial tcp ${addr}: connect: network is unreachable`; break;
    case 'ENOTFOUND': detail = `dial tcp: lookup ${err.hostname ?? ''}: no such host`; break;
    case 'ECONNRESET': detail = 'EOF'; break;
    case 'ETIMEDOUT': detail = 'context deadline exceeded'; break;
    default: detail = err.message;
  }
  return `Post ${JSON.stringify(url)}: ${detail}`;
}

/** A span sink that POSTs batches to a Zipkin collector. */
export class HttpReporter implements SpanSink {
  readonly url: string;
  private readonly opts: ReporterOptions;
  private readonly log: PluginLogger;
  private batch: string[] = [];
  private nextSend: number;
  private ticker: NodeJS.Timeout | undefined;
  private sending = false;
  /** A send was asked for while one ran (zipkin-go's send channel holds one). */
  private sendQueued = false;
  private closed = false;
  private readonly agent: http.Agent;
  private readonly target: URL | undefined;
  private readonly targetError: string;

  constructor(url: string, opts: ReporterOptions, log: PluginLogger) {
    this.url = url;
    this.opts = opts;
    this.log = log;
    let target: URL | undefined;
    let targetError = '';
    try {
      target = new URL(url);
      if (target.protocol !== 'http:' && target.protocol !== 'https:') {
        targetError = `Post ${JSON.stringify(url)}: unsupported protocol scheme ${JSON.stringify(target.protocol.slice(0, -1))}`;
        target = undefined;
      }
    } catch (e) {
      targetError = `parse ${JSON.stringify(url)}: ${e instanceof Error ? e.message : String(e)}`;
    }
    this.target = target;
    this.targetError = targetError;
    this.agent = target?.protocol === 'https:' ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
    this.nextSend = Date.now() + opts.batchIntervalMs;
  }

  /** Starts the interval check (zipkin-go starts it with the reporter). */
  start(): void {
    if (this.ticker !== undefined || this.closed) return;
    this.nextSend = Date.now() + this.opts.batchIntervalMs;
    this.ticker = setInterval(() => { this.tick(); }, Math.max(1, this.opts.batchIntervalMs / 10));
    this.ticker.unref();
  }

  /** Spans waiting to be sent. */
  get pending(): number { return this.batch.length; }

  /** Queues one finished span; a full batch is sent at once. Never waits. */
  send(spanJson: string): void {
    if (this.closed) return;
    this.batch.push(spanJson);
    if (this.batch.length > this.opts.maxBacklog) {
      const dispose = this.batch.length - this.opts.maxBacklog;
      this.log.warning(`backlog too long, disposing ${dispose} spans`);
      this.batch.splice(0, dispose);
    }
    if (this.batch.length >= this.opts.batchSize) {
      this.nextSend = Date.now() + this.opts.batchIntervalMs;
      this.enqueueSend();
    }
  }

  /** Stops the interval check and sends what is queued (one last try); resolves when that is done. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ticker !== undefined) clearInterval(this.ticker);
    this.ticker = undefined;
    while (this.sending) await new Promise((r) => setTimeout(r, 10));
    await this.sendBatch();
    this.agent.destroy();
  }

  private tick(): void {
    const now = Date.now();
    if (now > this.nextSend) {
      this.nextSend = now + this.opts.batchIntervalMs;
      this.enqueueSend();
    }
  }

  private enqueueSend(): void {
    if (this.sending) {
      this.sendQueued = true;
      return;
    }
    this.sending = true;
    void this.sendLoop();
  }

  private async sendLoop(): Promise<void> {
    do {
      this.sendQueued = false;
      await this.sendBatch();
    } while (this.sendQueued && !this.closed);
    this.sending = false;
  }

  /** zipkin-go's sendBatch: POST what is queued now; on an answer, drop that many spans from the queue. */
  private async sendBatch(): Promise<void> {
    const n = this.batch.length;
    if (n === 0) return;
    const body = '[' + this.batch.slice(0, n).join(',') + ']';
    const target = this.target;
    if (target === undefined) {
      this.log.warning(`failed when creating the request: ${this.targetError}`);
      return;
    }
    let status: number;
    try {
      status = await this.post(target, body);
    } catch (e) {
      this.log.warning(`failed to send the request: ${goHttpError(this.url, e)}`);
      return;
    }
    if (status < 200 || status > 299) this.log.warning(`failed the request with status code ${status}`);
    this.batch.splice(0, Math.min(n, this.batch.length));
  }

  private post(target: URL, body: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const mod = target.protocol === 'https:' ? https : http;
      const req = mod.request(target, {
        method: 'POST',
        agent: this.agent,
        headers: { 'b3': '0', 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
        timeout: REQUEST_TIMEOUT_MS,
      }, (res) => {
        res.resume();
        res.on('end', () => { resolve(res.statusCode ?? 0); });
        res.on('error', reject);
      });
      req.on('timeout', () => {
        req.destroy(Object.assign(new Error('context deadline exceeded'), { code: 'ETIMEDOUT' }));
      });
      req.on('error', reject);
      req.end(body);
    });
  }
}
