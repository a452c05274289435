// The health plugin's self-check (CoreDNS plugin/health/overloaded.go): every
// second GET its own /health with a 3 s timeout, observe how long it took, count
// and log failures, warn when it took more than a second.

import http from 'node:http';
import type { PluginLogger } from '../plugin.ts';
import { healthMetrics, type HealthMetrics } from './metrics.ts';
import { formatDuration } from '../pkg/duration.ts';
import { splitHostPort, joinHostPort, type HttpSite } from '../pkg/httpserver.ts';


const INTERVAL_MS = 1000;
const TIMEOUT_MS = 3000;

export class Health {
  readonly addr: string;
  private readonly site: HttpSite;
  private readonly log: PluginLogger;
  private timer: NodeJS.Timeout | undefined;
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  private inFlight = false;

  private readonly metrics: HealthMetrics;

  constructor(addr: string, site: HttpSite, log: PluginLogger, metrics: HealthMetrics = healthMetrics()) {
    this.metrics = metrics;
    this.addr = addr;
    this.site = site;
    this.log = log;
  }

  /** The URL CoreDNS polls: the configured address, host `localhost` when it has none. */
  url(port?: number): string {
    const { host, port: p } = splitHostPort(this.addr);
    return `http://${joinHostPort(host === '' ? 'localhost' : host, port ?? p)}/health`;
  }

  startSelfCheck(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => { this.check(); }, INTERVAL_MS);
    this.timer.unref();
  }

  stopSelfCheck(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.agent.destroy();
  }

  private check(): void {
    if (this.inFlight) return;
    // With port 0 the kernel chose the port: poll that one.
    const { port } = splitHostPort(this.addr);
    const bound = port === '0' || port === '' ? this.site.port(this.addr) : undefined;
    const url = this.url(bound);
    const start = process.hrtime.bigint();
    this.inFlight = true;
    const fail = (msg: string): void => {
      this.inFlight = false;
      this.metrics.healthDuration.observe(Number(process.hrtime.bigint() - start) / 1e9);
      this.metrics.healthFailures.inc();
      this.log.warning(`Local health request to ${JSON.stringify(url)} failed: ${msg}`);
    };
    const req = http.get(url, { agent: this.agent, timeout: TIMEOUT_MS }, (res) => {
      res.resume();
      res.on('end', () => {
        this.inFlight = false;
        const elapsed = process.hrtime.bigint() - start;
        this.metrics.healthDuration.observe(Number(elapsed) / 1e9);
        if (elapsed > 1000000000n) {
          this.log.warning(`Local health request to ${JSON.stringify(url)} took more than 1s: ${formatDuration(elapsed)}`);
        }
      });
      res.on('error', (e) => { fail(e.message); });
    });
    req.on('timeout', () => {
      req.destroy(new Error(`Get ${JSON.stringify(url)}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)`));
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      if (!this.inFlight) return;
      fail(e.message.startsWith('Get ') ? e.message : `Get ${JSON.stringify(url)}: ${goNetError(e)}`);
    });
  }
}

/** Go's text for the usual dial errors. */
function goNetError(e: NodeJS.ErrnoException): string {
  const ae = e as NodeJS.ErrnoException & { address?: string; port?: number };
  const where = ae.address !== undefined ? `${joinHostPort(ae.address, ae.port ?? '')}` : '';
  if (e.code === 'ECONNREFUSED') return `dial tcp ${where}: connect: connection refused`;
  if (e.code === 'ECONNRESET') return 'read: connection reset by peer';
  return e.message;
}

export { healthMetrics, type HealthMetrics };
