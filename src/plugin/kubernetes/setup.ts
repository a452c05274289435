import { kubernetesMetrics } from './metrics.ts';
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import type { PluginDefinition, Request, SetupContext } from '../plugin.ts';
import type { Message } from '../../wire/types.ts';
import { originsFromArgsOrServerBlock } from '../../corefile/address.ts';
import { parseDuration, toMillis } from '../pkg/duration.ts';
import { Fall } from '../pkg/fall.ts';
import { zonesMatches } from '../pkg/zones.ts';
import { parseResolvConfSearch } from '../pkg/resolvconf.ts';
import { asciiLower, fqdn } from '../../wire/name.ts';
import { ApiClient, loadKubeConfig, type ConnectionSpec } from './client.ts';
import { Controller } from './controller.ts';
import { Kubernetes, type KubernetesOptions } from './kubernetes.ts';
import { parseSelector, SelectorError } from './selector.ts';

/** Go's strconv.Atoi: optional sign, decimal digits. */
function atoi(s: string): number | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
}

function isReverse(z: string): boolean {
  return z.endsWith('in-addr.arpa.') || z.endsWith('ip6.arpa.');
}

/** Non-loopback interface addresses (CoreDNS boundIPs when not bound): IPv4 first, then IPv6. */
export function interfaceIPs(): string[] {
  const v4: string[] = [];
  const v6: string[] = [];
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.internal) continue;
      if (a.family === 'IPv4') v4.push(a.address);
      else v6.push(a.address.replace(/%.*$/, ''));
    }
  }
  return [...v4, ...v6];
}

function checkSelector(s: string, what: string): void {
  try {
    parseSelector(s);
  } catch (e) {
    if (e instanceof SelectorError) {
      throw new Error(`unable to parse ${what} selector value: '${s}': couldn't parse the selector string "${s}": ${e.message}`);
    }
    throw e;
  }
}

/** The periodic relist interval (nodens extension, not a Corefile option): $NODENS_KUBERNETES_RESYNC, default 5m; 0 disables. */
function resyncMs(): number {
  const v = process.env.NODENS_KUBERNETES_RESYNC;
  if (v === undefined || v === '') return 300_000;
  return toMillis(parseDuration(v));
}

/** What `kubernetes [ZONES...] { ... }` configures. */
export interface KubernetesSetupOptions {
  /** The zones served (the block's zones when none are given), normalised. */
  zones: string[];
  /** How to reach the API: `kubeconfig`, `endpoint`, `tls` (none: in-cluster). */
  conn: ConnectionSpec;
  /** `ttl` (seconds, 0 to 3600; default 5). */
  ttl: number;
  /** `pods disabled|insecure|verified` (default disabled). */
  podMode: KubernetesOptions['podMode'];
  /** `endpoint_pod_names`. */
  endpointNameMode: boolean;
  /** `namespaces NS...`: the only namespaces exposed (deduplicated; empty: all). */
  namespaces: string[];
  /** `labels SELECTOR`: the objects exposed ('' : all). */
  labelSelector: string;
  /** `namespace_labels SELECTOR`: the namespaces exposed ('' : all). */
  namespaceLabelSelector: string;
  /** `fallthrough [ZONES...]`. */
  fall: Fall;
  /** false with `noendpoints`: no endpoint cache (no headless or endpoint records). */
  endpoints: boolean;
  /** `ignore empty_service`: a service without ready endpoints is NXDOMAIN. */
  ignoreEmptyService: boolean;
  /** `multicluster [ZONES...]`: zones for multicluster services (each one of `zones`). */
  multiclusterZones: string[];
  /** `zonal` (nodens). */
  zonal: boolean;
  /** `startup_timeout` in ms (default 5s). */
  startupTimeoutMs: number;
  /** `apiserver_qps`, `apiserver_burst`, `apiserver_max_inflight` (0: the client's default). */
  qps: number;
  burst: number;
  maxInflight: number;
}

/**
 * Reads the block's `kubernetes` directive (once per block). Selectors are
 * checked here; the kubeconfig and TLS files are read by setup.
 */
export function parse(c: SetupContext): KubernetesSetupOptions {
  const d = c.dispenser;
  const o: KubernetesSetupOptions = {
    zones: [], conn: {}, ttl: 5, podMode: 'disabled', endpointNameMode: false, namespaces: [], labelSelector: '',
    namespaceLabelSelector: '', fall: new Fall(), endpoints: true, ignoreEmptyService: false, multiclusterZones: [],
    zonal: false, startupTimeoutMs: 5000, qps: 0, burst: 0, maxInflight: 0,
  };
  const { conn, namespaces, fall } = o;
  let i = 0;
  while (d.next()) {
    if (i > 0) throw new Error('plugin/kubernetes: this plugin can only be used once per Server Block');
    i++;
    o.zones = originsFromArgsOrServerBlock(d.remainingArgs(), c.config.keys);
    while (d.nextBlock()) {
      const opt = d.val();
      switch (opt) {
        case 'endpoint_pod_names':
          if (d.remainingArgs().length > 0) throw d.argErr();
          o.endpointNameMode = true;
          break;
        case 'pods': {
          const args = d.remainingArgs();
          if (args.length !== 1) throw d.argErr();
          if (args[0] !== 'disabled' && args[0] !== 'insecure' && args[0] !== 'verified') {
            throw new Error(`wrong value for pods: ${args[0]},  must be one of: disabled, verified, insecure`);
          }
          o.podMode = args[0];
          break;
        }
        case 'namespaces': {
          const args = d.remainingArgs();
          if (args.length === 0) throw d.argErr();
          for (const a of args) if (!namespaces.includes(a)) namespaces.push(a);
          break;
        }
        case 'endpoint': {
          const args = d.remainingArgs();
          if (args.length === 0) throw d.argErr();
          if (args.length > 1) c.log.warning(`Multiple endpoints have been deprecated, only the first specified endpoint '${args[0]}' is used`);
          conn.endpoint = args[0];
          break;
        }
        case 'tls': {
          const args = d.remainingArgs();
          if (args.length !== 3) throw d.argErr();
          conn.tls = { cert: args[0], key: args[1], ca: args[2] };
          break;
        }
        case 'labels': {
          const args = d.remainingArgs();
          if (args.length === 0) throw d.argErr();
          o.labelSelector = args.join(' ');
          checkSelector(o.labelSelector, 'label');
          break;
        }
        case 'namespace_labels': {
          const args = d.remainingArgs();
          if (args.length === 0) throw d.argErr();
          o.namespaceLabelSelector = args.join(' ');
          checkSelector(o.namespaceLabelSelector, 'namespace_label');
          break;
        }
        case 'fallthrough':
          fall.setZonesFromArgs(d.remainingArgs());
          break;
        case 'ttl': {
          const args = d.remainingArgs();
          if (args.length === 0) throw d.argErr();
          const t = atoi(args[0]);
          if (t === undefined) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(args[0])}: invalid syntax`);
          if (t < 0 || t > 3600) throw d.errf(`ttl must be in range [0, 3600]: ${t}`);
          o.ttl = t;
          break;
        }
        case 'noendpoints':
          if (d.remainingArgs().length !== 0) throw d.argErr();
          o.endpoints = false;
          break;
        case 'ignore': {
          const args = d.remainingArgs();
          if (args.length > 0) {
            if (args[0] !== 'empty_service') throw new Error(`unable to parse ignore value: '${args[0]}'`);
            o.ignoreEmptyService = true;
          }
          break;
        }
        case 'kubeconfig': {
          const args = d.remainingArgs();
          if (args.length !== 1 && args.length !== 2) throw d.argErr();
          conn.kubeconfig = { path: args[0], context: args[1] };
          break;
        }
        case 'multicluster': {
          const args = d.remainingArgs();
          const mz = originsFromArgsOrServerBlock(args, []);
          for (const z of mz) {
            if (zonesMatches(o.zones, z) === '' || !o.zones.includes(z)) {
              throw d.errf(`is not authoritative for the multicluster zone ${z} (authoritative zones: [${o.zones.join(' ')}])`);
            }
          }
          o.multiclusterZones = mz;
          break;
        }
        case 'zonal':
          if (d.remainingArgs().length !== 0) throw d.argErr();
          o.zonal = true;
          break;
        case 'startup_timeout': {
          const args = d.remainingArgs();
          if (args.length !== 1) throw d.argErr();
          try {
            o.startupTimeoutMs = toMillis(parseDuration(args[0]));
          } catch (e) {
            throw new Error(`failed to parse startup_timeout: ${args[0]}, ${(e as Error).message}`);
          }
          break;
        }
        case 'apiserver_qps': {
          const args = d.remainingArgs();
          if (args.length !== 1) throw d.argErr();
          const v = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(args[0]) ? Number(args[0]) : NaN;
          if (Number.isNaN(v)) throw d.errf(`invalid apiserver_qps ${JSON.stringify(args[0])}: strconv.ParseFloat: parsing ${JSON.stringify(args[0])}: invalid syntax`);
          if (v < 0) throw d.errf('apiserver_qps must be >= 0');
          o.qps = v;
          break;
        }
        case 'apiserver_burst':
        case 'apiserver_max_inflight': {
          const args = d.remainingArgs();
          if (args.length !== 1) throw d.argErr();
          const v = atoi(args[0]);
          if (v === undefined) throw d.errf(`invalid ${opt} ${JSON.stringify(args[0])}: strconv.Atoi: parsing ${JSON.stringify(args[0])}: invalid syntax`);
          if (v < 0) throw d.errf(`${opt} must be >= 0`);
          if (opt === 'apiserver_burst') o.burst = v;
          else o.maxInflight = v;
          break;
        }
        default:
          throw d.errf(`unknown property '${opt}'`);
      }
      if (opt === 'namespace_labels' || opt === 'namespaces') {
        if (namespaces.length > 0 && o.namespaceLabelSelector !== '') throw d.errf('namespaces and namespace_labels cannot both be set');
      }
      if ((opt === 'noendpoints' || opt === 'zonal') && o.zonal && !o.endpoints) {
        throw d.errf('zonal requires the endpoint cache; remove noendpoints');
      }
    }
  }
  return o;
}

export const plugin: PluginDefinition = {
  name: 'kubernetes',
  async setup(c) {
    const {
      zones, conn, ttl, podMode, endpointNameMode, namespaces, labelSelector, namespaceLabelSelector, fall, endpoints,
      ignoreEmptyService, multiclusterZones, zonal, startupTimeoutMs, qps, burst, maxInflight,
    } = parse(c);
    let primaryZoneIndex = zones.findIndex((z) => !isReverse(z));
    if (primaryZoneIndex < 0) primaryZoneIndex = 0;
    // Multicluster zones are served too.
    const allZones = [...zones];
    for (const z of multiclusterZones) if (!allZones.includes(z)) allZones.push(z);

    const kc = await loadKubeConfig(conn);
    const client = new ApiClient(kc, { qps: qps > 0 ? qps : 5, burst: burst > 0 ? burst : 10, maxInflight }, `nodens (kubernetes plugin) ${process.platform}/${process.arch}`, kubernetesMetrics(c.instance.metrics));
    const controller = new Controller();
    controller.metrics = kubernetesMetrics(c.instance.metrics);
    controller.connect(client, {
      labelSelector, namespaceLabelSelector, endpoints, pods: podMode === 'verified',
      multicluster: multiclusterZones.length > 0, resyncMs: resyncMs(), log: c.log,
    });
    const hosts = c.config.listenHosts;
    const bound = hosts.length > 0 && hosts[0] !== '';
    let cachedIPs: string[] | undefined;
    const localIPs = () => (cachedIPs ??= bound ? [] : interfaceIPs());
    const opts: KubernetesOptions = {
      zones: allZones, primaryZoneIndex, ttl, podMode, endpointNameMode, namespaces, fall, ignoreEmptyService,
      multiclusterZones, zonal, localIPs, upstream: lookupThroughServer, autoPathSearch: hostSearchList(),
    };
    let started = false;
    c.onStartup(async () => {
      if (started) return;
      started = true;
      controller.start();
      const t0 = Date.now();
      let lastLog = t0;
      while (!controller.hasSynced()) {
        const now = Date.now();
        if (now - t0 >= startupTimeoutMs) {
          c.log.warning('starting server with unsynced Kubernetes API');
          break;
        }
        if (now - lastLog >= 500) {
          lastLog = now;
          c.log.info('waiting for Kubernetes API before starting server');
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    });
    c.onShutdown(() => { controller.stop(); });
    c.addPlugin((next) => new Kubernetes(next, opts, controller));
  },
};

/** ExternalName targets outside the cluster zones resolve through the server itself (CoreDNS's upstream package). */
function lookupThroughServer(req: Request, name: string, qtype: number): Promise<Message | undefined> {
  return req.lookup(name, qtype);
}

/** The search list of /etc/resolv.conf, lower-cased FQDNs (CoreDNS's searchFromResolvConf); [] when unreadable. */
function hostSearchList(): string[] {
  let text: string;
  try {
    text = readFileSync('/etc/resolv.conf', 'utf8');
  } catch {
    return [];
  }
  return parseResolvConfSearch(text).map((n) => fqdn(asciiLower(n)));
}
