// The plugins built into nodens. The registry places each by its CoreDNS
// directive name (plugin.cfg order), so the order of this list does not matter.
//
// Each plugin's module is imported the first time a Corefile uses its directive:
// loading all of them eagerly cost ~0.5 s of start and ~20 MB of heap that a
// typical Corefile (a dozen directives) never needs.

import type { PluginDefinition, SetupContext } from './plugin.ts';
import { setMetricDefinitionsLoader } from './pkg/metrics.ts';

function lazy(name: string, load: () => Promise<{ plugin: PluginDefinition }>): PluginDefinition {
  let loaded: PluginDefinition | undefined;
  return {
    name,
    async setup(c: SetupContext): Promise<void> {
      loaded ??= (await load()).plugin;
      if (loaded.name !== name) throw new Error(`plugin module for ${name} defines ${loaded.name}`);
      await loaded.setup(c);
    },
  };
}

export const builtinPlugins: PluginDefinition[] = [
  lazy('acl', () => import('./acl/setup.ts')),
  lazy('any', () => import('./any/setup.ts')),
  lazy('auto', () => import('./auto/setup.ts')),
  lazy('autopath', () => import('./autopath/setup.ts')),
  lazy('bind', () => import('./bind/setup.ts')),
  lazy('bufsize', () => import('./bufsize/setup.ts')),
  lazy('cache', () => import('./cache/setup.ts')),
  lazy('cancel', () => import('./cancel/setup.ts')),
  lazy('chaos', () => import('./chaos/setup.ts')),
  lazy('debug', () => import('./debug/setup.ts')),
  lazy('dns64', () => import('./dns64/setup.ts')),
  lazy('dnssec', () => import('./dnssec/setup.ts')),
  lazy('dnstap', () => import('./dnstap/setup.ts')),
  lazy('dynupdate', () => import('./dynupdate/setup.ts')),
  lazy('erratic', () => import('./erratic/setup.ts')),
  lazy('errors', () => import('./errors/setup.ts')),
  lazy('file', () => import('./file/setup.ts')),
  lazy('forward', () => import('./forward/setup.ts')),
  lazy('geoip', () => import('./geoip/setup.ts')),
  lazy('grpc', () => import('./grpc/setup.ts')),
  lazy('grpc_server', () => import('./grpc_server/setup.ts')),
  lazy('header', () => import('./header/setup.ts')),
  lazy('health', () => import('./health/setup.ts')),
  lazy('hosts', () => import('./hosts/setup.ts')),
  lazy('https', () => import('./https/setup.ts')),
  lazy('k8s_external', () => import('./k8s_external/setup.ts')),
  lazy('kubernetes', () => import('./kubernetes/setup.ts')),
  lazy('loadbalance', () => import('./loadbalance/setup.ts')),
  lazy('local', () => import('./local/setup.ts')),
  lazy('log', () => import('./log/setup.ts')),
  lazy('loop', () => import('./loop/setup.ts')),
  lazy('metadata', () => import('./metadata/setup.ts')),
  lazy('minimal', () => import('./minimal/setup.ts')),
  lazy('multisocket', () => import('./multisocket/setup.ts')),
  lazy('nsid', () => import('./nsid/setup.ts')),
  lazy('on', () => import('./on/setup.ts')),
  lazy('prometheus', () => import('./prometheus/setup.ts')),
  lazy('proxyproto', () => import('./proxyproto/setup.ts')),
  lazy('ready', () => import('./ready/setup.ts')),
  lazy('reload', () => import('./reload/setup.ts')),
  lazy('rewrite', () => import('./rewrite/setup.ts')),
  lazy('root', () => import('./root/setup.ts')),
  lazy('secondary', () => import('./secondary/setup.ts')),
  lazy('shed', () => import('./shed/setup.ts')),
  lazy('siit', () => import('./siit/setup.ts')),
  lazy('template', () => import('./template/setup.ts')),
  lazy('timeouts', () => import('./timeouts/setup.ts')),
  lazy('tls', () => import('./tls/setup.ts')),
  lazy('trace', () => import('./trace/setup.ts')),
  lazy('transfer', () => import('./transfer/setup.ts')),
  lazy('tsig', () => import('./tsig/setup.ts')),
  lazy('view', () => import('./view/setup.ts')),
  lazy('whoami', () => import('./whoami/setup.ts')),
];

// The modules that define plugins' metrics, for the prometheus plugin's full listing
// (small modules: definitions only, not the plugins).
setMetricDefinitionsLoader(() => Promise.all([
  import('./acl/metrics.ts'),
  import('./autopath/metrics.ts'),
  import('./cache/metrics.ts'),
  import('./dns64/metrics.ts'),
  import('./dnssec/metrics.ts'),
  import('./forward/metrics.ts'),
  import('./grpc/metrics.ts'),
  import('./health/metrics.ts'),
  import('./hosts/metrics.ts'),
  import('./kubernetes/metrics.ts'),
  import('./local/metrics.ts'),
  import('./loop/metrics.ts'),
  import('./pkg/proxy/metrics.ts'),
  import('./reload/metrics.ts'),
  import('./shed/metrics.ts'),
  import('./siit/metrics.ts'),
  import('./template/metrics.ts'),
]));
