// node-cache's own metric (kubernetes/dns cmd/node-cache/app/metrics.go), on
// -metrics-listen-address at /metrics, apart from the prometheus plugin's port:
// coredns_nodecache_setup_errors_total{errortype}, every label value present
// from the start at 0.

import { createServer, type Server } from 'node:http';
import Registry from 'prom-client/lib/registry.js';
import Counter from 'prom-client/lib/counter.js';
import { splitHostPort } from './kubedns.ts';

export const ERROR_TYPES = ['iptables', 'iptables_lock', 'interface_add', 'interface_check', 'configmap'] as const;
export type ErrorType = typeof ERROR_TYPES[number];

export class SetupMetrics {
  private readonly registry = new Registry();
  private readonly counter = new Counter<'errortype'>({
    name: 'coredns_nodecache_setup_errors_total',
    help: 'The number of errors during periodic network setup for node-cache',
    labelNames: ['errortype'],
    registers: [],
  });
  private server: Server | undefined;

  inc(type: ErrorType): void { this.counter.labels(type).inc(); }

  /** Current value of one counter (tests, logs). */
  async value(type: ErrorType): Promise<number> {
    const m = await this.counter.get();
    return m.values.find((v) => v.labels.errortype === type)?.value ?? 0;
  }

  /**
   * initMetrics: listen, then register. When the address cannot be listened on, the counter is not
   * exported (and still counts in memory); the error is returned for the log.
   */
  async serve(ipport: string): Promise<Error | undefined> {
    const hp = splitHostPort(ipport);
    if (hp === undefined || !/^[0-9]*$/.test(hp.port) || Number(hp.port) > 65535) return new Error(`listen tcp: address ${ipport}: missing port in address`);
    const srv = createServer((req, res) => {
      if ((req.url ?? '').split('?')[0] !== '/metrics') { res.writeHead(404).end('404 page not found\n'); return; }
      this.registry.metrics().then((text) => {
        res.writeHead(200, { 'Content-Type': this.registry.contentType }).end(text);
      }, (e: unknown) => { res.writeHead(500).end(String(e)); });
    });
    const err = await new Promise<Error | undefined>((resolve) => {
      srv.once('error', resolve);
      srv.listen({ host: hp.host === '' ? undefined : hp.host, port: Number(hp.port || '0') }, () => resolve(undefined));
    });
    if (err !== undefined) return new Error(`listen tcp ${ipport}: ${err.message}`);
    srv.unref();
    this.server = srv;
    this.registry.registerMetric(this.counter);
    for (const t of ERROR_TYPES) this.counter.labels(t).inc(0);
    return undefined;
  }

  close(): void { this.server?.close(); }
}
