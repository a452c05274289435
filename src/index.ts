// nodens as a library: start a CoreDNS-compatible server from a Corefile string
// inside a Node process, and write plugins in TypeScript.
//
//   import { startServer } from 'nodens';
//   const server = await startServer({ corefile: '.:0 { whoami }' });
//   console.log(server.port);   // the UDP/TCP port actually bound
//   await server.stop();

import { PluginRegistry, type Placement } from './core/registry.ts';
import { Runtime } from './core/runtime.ts';
import { builtinPlugins } from './plugin/index.ts';
import type { PluginDefinition } from './plugin/plugin.ts';
import type { LoggerOptions } from './core/log.ts';
import Registry from 'prom-client/lib/registry.js';
import type { MetricsRegistry } from './plugin/plugin.ts';

export * from './plugin/plugin.ts';
export { Request } from './core/request.ts';
export { PluginRegistry, type Placement } from './core/registry.ts';
export { Runtime } from './core/runtime.ts';
export { StartupError } from './core/instance.ts';
export { Logger, log, pluginLogger, setLogSink, type LogSink, type LoggerOptions, type LogFormat } from './core/log.ts';
export { MAX_LOOKUP_DEPTH, type DeriveOptions } from './core/request.ts';
export * as wire from './wire/index.ts';
// Types the exports above mention, exported so that the API reference (npm run docs) and users can name them.
export type { Dispenser } from './corefile/dispenser.ts';
export type { ServerBlock } from './corefile/parser.ts';
export type { Transport, ReplySigner, QuerySpan, SubQueryRouter } from './core/request.ts';
export type { FatalHandler } from './core/log.ts';
export type { Instance } from './core/instance.ts';
export type { RuntimeOptions, StartedListener } from './core/runtime.ts';
export { validateCorefile, type ValidateOptions, type ValidationResult } from './core/validate.ts';

/** An external plugin and where it runs in the chain. */
export interface ExternalPlugin extends Placement {
  plugin: PluginDefinition;
}

/** A registry with every built-in plugin, plus the external ones given. */
export function createRegistry(external: ExternalPlugin[] = []): PluginRegistry {
  const registry = new PluginRegistry();
  for (const p of builtinPlugins) registry.register(p);
  for (const e of external) registry.register(e.plugin, { before: e.before, after: e.after });
  return registry;
}

export interface StartOptions {
  /** The Corefile text. Keys may use port 0 to get a free port. */
  corefile: string;
  /** Name used in error messages (default `Corefile`). */
  file?: string;
  /** Port for keys without one (CoreDNS's -dns.port; default 53). */
  dnsPort?: string | number;
  /** External plugins to register next to the built-ins. */
  plugins?: ExternalPlugin[];
  /** Environment for {$VAR} substitution (default process.env). */
  env?: Record<string, string | undefined>;
  /**
   * This server's log lines and [FATAL] handling. Default: lines to the default
   * sink (stdout, or what `setLogSink` set), and a [FATAL] line (a plain `loop`
   * finding a loop) stops this server — `server.stopped` resolves — while the
   * host process goes on. Give `onFatal: () => process.exit(1)` for CoreDNS's behaviour.
   */
  log?: LoggerOptions;
  /**
   * This server's Prometheus registry (prom-client's Registry): every metric its plugins define,
   * served by its `prometheus` endpoint. Default: a registry of its own, so two servers in one
   * process count apart. Give one to add nodens's metrics to an application's own registry.
   */
  metrics?: MetricsRegistry;
}

export interface ListenAddress {
  host: string;
  port: number;
}

export class NodensServer {
  readonly runtime: Runtime;
  constructor(runtime: Runtime) { this.runtime = runtime; }

  /** Every listen address with the port actually bound. */
  addresses(): ListenAddress[] {
    return this.runtime.instance.listeners().map((l) => ({ host: l.host, port: l.port }));
  }

  /** The port of the first listener (convenient with a single `.:0` block). */
  get port(): number {
    const a = this.addresses()[0];
    if (a === undefined) throw new Error('nodens: no listener');
    return a.port;
  }

  /** Swap in a new Corefile; resolves to the error when the old configuration had to stay. */
  reload(corefile: string): Promise<Error | undefined> { return this.runtime.reload(corefile); }

  /** Graceful stop: shutdown hooks, then listeners closed after queries in flight. */
  async stop(): Promise<void> { await this.runtime.stop(); }

  /** This server's metrics registry (`await server.metrics.metrics()` gives the exposition text). */
  get metrics(): MetricsRegistry { return this.runtime.instance.metrics; }

  /** Resolves when the server stopped by itself after a [FATAL] line (without a custom `log.onFatal`). */
  get stopped(): Promise<void> { return this.runtime.fatalStop; }
}

export async function startServer(opts: StartOptions): Promise<NodensServer> {
  const runtime = await Runtime.start({
    corefile: opts.corefile,
    file: opts.file ?? 'Corefile',
    defaultPort: String(opts.dnsPort ?? 53),
    registry: createRegistry(opts.plugins),
    env: opts.env,
    log: opts.log,
    metrics: opts.metrics ?? new Registry(),
  });
  await runtime.announceStart();
  return new NodensServer(runtime);
}
