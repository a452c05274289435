// prometheus [ADDRESS] { runtime_metrics; tls CONFIG_FILE }
//
// Serves /metrics (this server's registry: every plugin's metrics, the server
// metrics below and Go-style process_* metrics) on ADDRESS, default
// localhost:9153, and records every query of its block (handler.ts).

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { ServeChannels, type DroppedEvent, type HttpsResponseEvent, type InstanceServices, type Lineage, type PanicEvent, type PluginDefinition, type SetupContext } from '../plugin.ts';
import { COREDNS_VERSION } from '../../core/directives.ts';
import { NODENS_VERSION } from '../../version.ts';
import { defineAllMetrics, metricsContentType, metricsText, type MetricsRegistry } from '../pkg/metrics.ts';
import { httpSite, joinHostPort, addressArgument } from '../pkg/httpserver.ts';
import { Metrics } from './handler.ts';
import { serverMetrics, type ServerMetrics } from './vars.ts';
import { enableNodeRuntimeMetrics, processMetrics } from './process.ts';

export const DEFAULT_ADDR = 'localhost:9153';

async function serveMetrics(reg: MetricsRegistry, res: import('node:http').ServerResponse): Promise<void> {
  let text: string;
  try {
    text = await metricsText(reg);
  } catch (e) {
    res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' });
    res.end(`An error has occurred while serving metrics:\n\n${e instanceof Error ? e.message : String(e)}\n`);
    return;
  }
  res.writeHead(200, { 'Content-Type': metricsContentType() });
  res.end(withoutEmptyFamilies(text));
}

/**
 * Drop the HELP/TYPE lines of families without a sample (a labelled metric no
 * one has used yet): Go's client does not print them, prom-client does.
 */
export function withoutEmptyFamilies(text: string): string {
  const lines = text.split('\n');
  const out: string[] = [];
  let pending: string[] = [];
  for (const line of lines) {
    if (line.startsWith('# HELP ') || line.startsWith('# TYPE ')) {
      const name = line.split(' ', 3)[2];
      if (pending.length > 0 && pending[0]!.split(' ', 3)[2] !== name) pending = [];
      pending.push(line);
      continue;
    }
    if (line === '') continue;
    if (pending.length > 0) {
      out.push(...pending);
      pending = [];
    }
    out.push(line);
  }
  return out.join('\n') + '\n';
}

/** Per registry: the instance whose blocks set coredns_plugin_enabled last. */
const enabledBy = new WeakMap<MetricsRegistry, InstanceServices>();

/** coredns_plugin_enabled: one series per chain plugin of every block with prometheus, per listen host. */
function setPluginEnabled(inst: InstanceServices): void {
  const pluginEnabled = serverMetrics(inst.metrics).pluginEnabled;
  pluginEnabled.reset();
  enabledBy.set(inst.metrics, inst);
  for (const b of inst.blockConfigs()) {
    if (!b.pluginNames.includes('prometheus')) continue;
    for (const h of b.listenHosts) {
      const server = `${b.transport}://${joinHostPort(h, b.port)}`;
      for (const name of b.pluginNames) pluginEnabled.set({ server, zone: b.zones[0] ?? '.', view: b.viewName, name }, 1);
    }
  }
}

/**
 * Counts what the server core reports on its diagnostics channels, for this
 * server only. One per server lineage, held by every instance that has
 * prometheus: during a reload the new instance holds it before the old one lets go.
 */
class ServeObserver {
  private readonly lineage: Lineage;
  private readonly metrics: ServerMetrics;
  private holders = 0;
  constructor(lineage: Lineage, metrics: ServerMetrics) {
    this.lineage = lineage;
    this.metrics = metrics;
  }

  private readonly onDropped = (m: unknown): void => {
    const ev = m as DroppedEvent;
    if (ev.lineage === this.lineage) this.metrics.reportDropped(ev.req, ev.rcode, ev.replySize);
  };

  private readonly onPanic = (m: unknown): void => {
    if ((m as PanicEvent).lineage === this.lineage) this.metrics.panics.inc();
  };

  private readonly onHttps = (m: unknown): void => {
    const ev = m as HttpsResponseEvent;
    if (ev.lineage === this.lineage) this.metrics.httpsResponses.child(ev.server, String(ev.status)).inc();
  };

  hold(): void {
    if (this.holders++ > 0) return;
    subscribe(ServeChannels.dropped, this.onDropped);
    subscribe(ServeChannels.panic, this.onPanic);
    subscribe(ServeChannels.https, this.onHttps);
  }

  release(): void {
    if (--this.holders > 0) return;
    unsubscribe(ServeChannels.dropped, this.onDropped);
    unsubscribe(ServeChannels.panic, this.onPanic);
    unsubscribe(ServeChannels.https, this.onHttps);
  }
}

/** What `prometheus [ADDRESS] { runtime_metrics }` configures. */
export interface PrometheusOptions {
  /** The address /metrics is served on (host:port), DEFAULT_ADDR when none is given. */
  addr: string;
}

/**
 * Reads the block's `prometheus` directive (once per block). `runtime_metrics`
 * is accepted and has no effect; `tls` is refused (not supported yet).
 */
export function parse(c: SetupContext): PrometheusOptions {
  const d = c.dispenser;
  let addr = DEFAULT_ADDR;
  let tlsConfig = '';
  let i = 0;
  while (d.next()) {
    if (i > 0) throw new Error('plugin/prometheus: this plugin can only be used once per Server Block');
    i++;
    addr = addressArgument(d, addr);
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'runtime_metrics':
          // Go runtime metrics have no Node.js counterpart; accepted so Corefiles keep working.
          if (d.remainingArgs().length !== 0) throw d.argErr();
          break;
        case 'tls': {
          if (tlsConfig !== '') throw d.err('tls block already specified');
          const rest = d.remainingArgs();
          if (rest.length !== 1) throw d.argErr();
          tlsConfig = rest[0]!;
          // Serving /metrics in plain text when TLS was asked for would be worse than refusing.
          throw d.err('tls is not supported by nodens yet');
        }
        default:
          throw d.err(`unknown option: ${d.val()}`);
      }
    }
  }
  return { addr };
}

export const plugin: PluginDefinition = {
  name: 'prometheus',
  async setup(c) {
    const { addr } = parse(c);

    const reg = c.instance.metrics;
    // Every plugin's metrics, process_* and nodejs_* in the registry this endpoint serves, as CoreDNS lists all of its own.
    await defineAllMetrics(reg);
    processMetrics(reg);
    // At start, not in setup: the event-loop monitor and GC observer are running work that `nodens validate`
    // (which runs setups only) must not leave behind.
    c.onStartup(() => { enableNodeRuntimeMetrics(reg); });
    const metrics = serverMetrics(reg);
    metrics.buildInfo.set({ version: COREDNS_VERSION, revision: `nodens-${NODENS_VERSION}`, goversion: `node-${process.version}` }, 1);

    const site = httpSite(c);
    site.mount(addr, '/metrics', (_req, res) => { void serveMetrics(reg, res); }, 'log-metrics');

    // Once per instance: watch the server's own replies and panics, and set coredns_plugin_enabled.
    let first = false;
    c.instance.shared('prometheus/instance', () => { first = true; return true; });
    if (first) {
      const inst = c.instance;
      const observer = inst.lineage.store('prometheus/observer', () => new ServeObserver(inst.lineage, metrics));
      let held = false;
      c.onStartup(() => {
        observer.hold();
        held = true;
        setPluginEnabled(inst);
      });
      c.onRestartFailed(() => { setPluginEnabled(inst); });
      c.onShutdown(() => {
        if (held) observer.release();
        held = false;
        // Replaced by a configuration without prometheus: its series go.
        if (enabledBy.get(reg) === inst) {
          metrics.pluginEnabled.reset();
          enabledBy.delete(reg);
        }
      });
    }
    c.onFinalShutdown(() => site.unmount(addr, '/metrics'));

    const zones = c.config.zones;
    // The chain is built after every setup ran, so the view plugin's name is known here.
    c.addPlugin((next) => new Metrics(next, zones, c.config.viewName, metrics));
  },
};
