// HTTP listeners for the operational endpoints (/health, /ready, /metrics) that
// survive reloads.
//
// CoreDNS closes these listeners when a reload starts and opens them again from
// the new configuration, which is a classic source of "address already in use"
// and of probe failures during a reload. Here, every running configuration
// (instance) owns an HttpSite: the routes its plugins want, per address. The
// listeners themselves live in a pool keyed by address, shared by the instances
// of one server lineage (one Runtime: the first instance and every reload of it):
//
//   * a new instance's startup *swaps the route table* of the listeners it keeps
//     using (no close, no re-bind: a scrape or probe in flight is not refused),
//     and opens listeners for addresses that are new (SO_REUSEPORT);
//   * when the reload succeeded, listeners that only the old instance used close;
//   * when the reload failed, the old instance's routes are put back and
//     listeners opened for the failed configuration close again;
//   * on final shutdown each plugin unmounts its own route (ready first, then
//     health after its lameduck, as CoreDNS orders them); a listener without
//     routes closes.
//
// Requests are answered like Go's net/http ServeMux with exact patterns: the
// path must match, any method, otherwise `404 page not found`.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { InstanceServices, ServerLogger, SetupContext } from '../plugin.ts';
import type { Dispenser } from '../../corefile/dispenser.ts';

export type RouteHandler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** What to do when the listener of a route cannot be opened. */
export type ListenErrorPolicy =
  /** fail the start (or the reload): health */
  | 'fail'
  /** log `[ERROR] Failed to start metrics handler: <err>` and go on: prometheus */
  | 'log-metrics'
  /** go on silently: ready */
  | 'ignore';

const TIMEOUT_MS = 5000;

// ---- Go's net.SplitHostPort, with its error texts ----

/** Go's net.SplitHostPort; throws `address X: missing port in address` and friends. */
export function splitHostPort(hostport: string): { host: string; port: string } {
  const fail = (why: string): never => { throw new Error(`address ${hostport}: ${why}`); };
  const i = hostport.lastIndexOf(':');
  if (i < 0) fail('missing port in address');
  let host: string;
  let j = 0;
  let k = 0;
  if (hostport.startsWith('[')) {
    const end = hostport.indexOf(']');
    if (end < 0) fail("missing ']' in address");
    if (end + 1 === hostport.length) fail('missing port in address');
    else if (end + 1 !== i) {
      if (hostport[end + 1] === ':') fail('too many colons in address');
      fail('missing port in address');
    }
    host = hostport.slice(1, end);
    j = 1;
    k = end + 1;
  } else {
    host = hostport.slice(0, i);
    if (host.includes(':')) fail('too many colons in address');
  }
  if (hostport.slice(j).includes('[')) fail("unexpected '[' in address");
  if (hostport.slice(k).includes(']')) fail("unexpected ']' in address");
  return { host, port: hostport.slice(i + 1) };
}

/** Go's net.JoinHostPort. */
/**
 * The optional ADDRESS argument of health, ready and prometheus (the rest of
 * the current line): a `host:port` checked as Go's net.SplitHostPort would, or
 * `current` when there is none.
 */
export function addressArgument(d: Dispenser, current: string): string {
  const args = d.remainingArgs();
  if (args.length > 1) throw d.argErr();
  if (args.length === 0) return current;
  splitHostPort(args[0]!);
  return args[0]!;
}

export function joinHostPort(host: string, port: string | number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

// ---- the pool ----

class Listener {
  readonly addr: string;
  readonly server: http.Server;
  /** The route table in force; replaced as a whole when another instance takes the listener. */
  routes: Map<string, RouteHandler> = new Map();
  /** The site whose routes are in force. */
  site: HttpSite | undefined;
  /** Routes that answer only while others keep the listener open. */
  lingering = new Set<string>();
  closed = false;

  private readonly log: ServerLogger;

  constructor(addr: string, log: ServerLogger) {
    this.addr = addr;
    this.log = log;
    this.server = http.createServer((req, res) => { this.dispatch(req, res); });
    this.server.requestTimeout = TIMEOUT_MS;
    this.server.headersTimeout = TIMEOUT_MS;
    this.server.keepAliveTimeout = TIMEOUT_MS;
    this.server.timeout = TIMEOUT_MS;
  }

  private dispatch(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const h = this.routes.get(path);
    if (h === undefined) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' });
      res.end('404 page not found\n');
      return;
    }
    try {
      h(req, res);
    } catch (e) {
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end(`${e instanceof Error ? e.message : String(e)}\n`);
    }
  }

  /** Bind host:port with SO_REUSEPORT. `localhost` and names resolve to their first IPv4 address, as Go listens. */
  async listen(): Promise<void> {
    const { host, port } = splitHostPort(this.addr);
    const p = port === '' ? 0 : Number(port);
    if (!Number.isInteger(p) || p < 0 || p > 65535) {
      throw new Error(`listen tcp ${this.addr}: address ${port}: invalid port`);
    }
    const bindHost = await resolveListenHost(host);
    await new Promise<void>((resolve, reject) => {
      const onError = (e: NodeJS.ErrnoException): void => {
        reject(new Error(`listen tcp ${this.addr}: bind: ${errnoText(e)}`));
      };
      this.server.once('error', onError);
      const opts: { port: number; host?: string; reusePort: boolean } = { port: p, reusePort: true };
      if (bindHost !== '') opts.host = bindHost;
      this.server.listen(opts, () => {
        this.server.off('error', onError);
        resolve();
      });
    });
    this.server.on('error', (e) => { this.log.error(`http server ${this.addr}: ${e.message}`); });
  }

  /** Stop accepting, let requests in flight finish (at most 5 s, as Go's Shutdown timeout). */
  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.routes = new Map();
    return new Promise((resolve) => {
      const timer = setTimeout(() => { this.server.closeAllConnections(); }, TIMEOUT_MS);
      timer.unref();
      this.server.close(() => { clearTimeout(timer); resolve(); });
      this.server.closeIdleConnections();
    });
  }

  port(): number | undefined {
    const a = this.server.address();
    return a !== null && typeof a === 'object' ? (a as AddressInfo).port : undefined;
  }
}

async function resolveListenHost(host: string): Promise<string> {
  // Go listens on the IPv4 wildcard with a dual-stack IPv6 socket where the host has IPv6 (net's
  // favoriteAddrFamily), so `prometheus 0.0.0.0:9153` answers on [::1] too; Node's default listen does the same.
  if (host === '' || host === '0.0.0.0') return '';
  if (host === 'localhost') return '127.0.0.1';
  if (/^[0-9.]+$/.test(host) || host.includes(':')) return host;
  const { lookup } = process.getBuiltinModule('node:dns/promises');
  const all = await lookup(host, { all: true });
  const v4 = all.find((a) => a.family === 4);
  return (v4 ?? all[0])?.address ?? host;
}

function errnoText(e: NodeJS.ErrnoException): string {
  const known: Record<string, string> = {
    EADDRINUSE: 'address already in use',
    EACCES: 'permission denied',
    EADDRNOTAVAIL: 'cannot assign requested address',
  };
  return (e.code !== undefined ? known[e.code] : undefined) ?? e.message;
}

/** The listeners of one server lineage (a Runtime and all its reloads). */
class Pool {
  readonly listeners = new Map<string, Listener>();
  /** The site whose configuration is in force (the last activated). */
  current: HttpSite | undefined;
}

function poolFor(instance: InstanceServices): Pool {
  return instance.lineage.store('http/pool', () => new Pool());
}

interface Mount {
  handler: RouteHandler;
  policy: ListenErrorPolicy;
}

/** The HTTP routes of one instance, per address. Get it with `httpSite(c)`. */
export class HttpSite {
  private readonly pool: Pool;
  private readonly wanted = new Map<string, Map<string, Mount>>();
  /** The site that was in force when this one took over (restored if this one fails). */
  private predecessor: HttpSite | undefined;
  private dead = false;
  /** A reload away from this instance is under way (restart hook ran, no restart-failed since). */
  private leaving = false;

  private readonly log: ServerLogger;

  constructor(pool: Pool, log: ServerLogger) {
    this.pool = pool;
    this.log = log;
  }

  /** Ask for `path` on `addr` (host:port as written in the Corefile). Call during setup. */
  mount(addr: string, path: string, handler: RouteHandler, policy: ListenErrorPolicy): void {
    let routes = this.wanted.get(addr);
    if (routes === undefined) {
      routes = new Map();
      this.wanted.set(addr, routes);
    }
    routes.set(path, { handler, policy });
  }

  private routeTable(addr: string): Map<string, RouteHandler> {
    const out = new Map<string, RouteHandler>();
    for (const [path, m] of this.wanted.get(addr) ?? []) out.set(path, m.handler);
    return out;
  }

  /**
   * Put this instance's routes in force: open listeners for new addresses, swap
   * the route tables of the others. Throws when a `fail` route cannot listen.
   */
  async activate(): Promise<void> {
    const pool = this.pool;
    if (pool.current !== this) {
      if (pool.current !== undefined && !pool.current.dead) this.predecessor = pool.current;
      pool.current = this;
    }
    for (const [addr, routes] of this.wanted) {
      let l = pool.listeners.get(addr);
      if (l === undefined || l.closed) {
        l = new Listener(addr, this.log);
        try {
          await l.listen();
        } catch (e) {
          const msg = e instanceof Error ? e.message : String(e);
          const policies = new Set([...routes.values()].map((m) => m.policy));
          if (policies.has('fail')) throw new Error(msg);
          if (policies.has('log-metrics')) this.log.error(`Failed to start metrics handler: ${msg}`);
          continue;
        }
        pool.listeners.set(addr, l);
      }
      l.routes = this.routeTable(addr);
      l.lingering = new Set();
      l.site = this;
    }
  }

  /** The old instance's restart hook: a reload starts. */
  restarting(): void { this.leaving = true; }

  /** The old instance's restart-failed hook: it stays; put its routes back in force. */
  async restartFailed(): Promise<void> {
    this.leaving = false;
    await this.activate();
  }

  /**
   * The instance stops (CoreDNS OnShutdown). After a successful reload away from
   * it: close the listeners only this instance used. When this instance is the
   * one that failed to start: give the listeners back to the instance it was to
   * replace. On a plain stop nothing happens here; the plugins unmount their
   * routes on final shutdown.
   */
  async shutdown(): Promise<void> {
    const pool = this.pool;
    const closing: Promise<void>[] = [];
    if (this.leaving) {
      for (const [addr, l] of pool.listeners) {
        if (l.site !== this) continue;
        pool.listeners.delete(addr);
        closing.push(l.close());
      }
      if (pool.current === this) pool.current = undefined;
      this.dead = true;
    } else if (pool.current === this && this.predecessor !== undefined && !this.predecessor.dead) {
      const back = this.predecessor;
      for (const [addr, l] of pool.listeners) {
        if (l.site !== this) continue;
        if (back.wanted.has(addr)) {
          l.routes = back.routeTable(addr);
          l.lingering = new Set();
          l.site = back;
        } else {
          pool.listeners.delete(addr);
          closing.push(l.close());
        }
      }
      pool.current = back;
      this.dead = true;
    }
    await Promise.all(closing);
  }

  /** This instance was replaced (or failed to start) and its shutdown ran. */
  get retired(): boolean { return this.dead; }

  /**
   * Remove one route (final shutdown); the listener closes when no route is left
   * but lingering ones. A lingering route (`linger`) keeps answering while other
   * routes still hold the listener open (ready's 503 `Shutting down` next to
   * health in lameduck).
   */
  async unmount(addr: string, path: string, linger = false): Promise<void> {
    this.wanted.get(addr)?.delete(path);
    const l = this.pool.listeners.get(addr);
    if (l === undefined || l.site !== this) return;
    if (linger) l.lingering.add(path);
    else l.routes.delete(path);
    for (const p of l.routes.keys()) if (!l.lingering.has(p)) return;
    this.pool.listeners.delete(addr);
    await l.close();
  }

  /** The port `addr` is actually bound to (useful with port 0), undefined when not listening. */
  port(addr: string): number | undefined {
    const l = this.pool.listeners.get(addr);
    return l === undefined || l.closed ? undefined : l.port();
  }

}

const SITE_KEY = 'pkg/httpserver';

/**
 * The HTTP site of the instance being set up. The first call per instance
 * registers the lifecycle hooks that open/swap (startup, restart-failed) and
 * release (shutdown) the listeners.
 */
export function httpSite(c: SetupContext): HttpSite {
  let created = false;
  const site = c.instance.shared(SITE_KEY, () => {
    created = true;
    return new HttpSite(poolFor(c.instance), c.instance.log);
  });
  if (created) {
    c.onStartup(() => site.activate());
    c.onRestart(() => { site.restarting(); });
    c.onRestartFailed(() => site.restartFailed());
    c.onShutdown(() => site.shutdown());
  }
  return site;
}

/** The port an endpoint address is bound to in the lineage of `instance` (tests, port 0). */
export function boundPort(instance: InstanceServices, addr: string): number | undefined {
  const l = poolFor(instance).listeners.get(addr);
  return l === undefined || l.closed ? undefined : l.port();
}
