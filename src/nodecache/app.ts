// node-cache's supervisor (kubernetes/dns cmd/node-cache/app/cache_app.go,
// configmap.go): writes the Corefile from its template, keeps it in step with
// the two mounted ConfigMap directories, holds the local IPs on an interface,
// installs and repairs the firewall rules, and tears both down. The server
// itself is started by the caller (src/cli/nodecache.ts), as node-cache calls
// coremain.Run.

import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { ConfigParams } from './params.ts';
import { expandEnv, goIPString, toSvcEnv } from './params.ts';
import { renderCorefile } from './corefile.ts';
import { ConfigDirSync, emptyKubeDNSConfig, fsErrorText, validateNodeLocalCache, type KubeDNSConfig } from './kubedns.ts';
import { NetifManager, runIp, type IpRunner } from './netif.ts';
import { chooseFirewall, nodeCacheRules, ruleText, type Firewall, type Rule } from './firewall.ts';
import { SetupMetrics } from './metrics.ts';
import { parseIP } from '../wire/ip.ts';

export interface AppLog {
  debug(msg: string): void;
  info(msg: string): void;
  warning(msg: string): void;
  error(msg: string): void;
}

/** kube-dns's ConfigMap mount point when -kubednscm is empty. */
export const DEFAULT_KUBEDNS_CM_PATH = '/etc/kube-dns';
/** How often both ConfigMap directories are scanned (node-cache's DefaultConfigSyncPeriod and kube-dns's ConfigPeriod). */
export const CONFIG_SYNC_PERIOD_MS = 10_000;

export interface CacheAppOptions {
  env?: Record<string, string | undefined>;
  ip?: IpRunner;
  /** Sends SIGUSR1 to this process (-reloadwithsignal). */
  reloadSignal?: () => void;
}

export class CacheApp {
  readonly params: ConfigParams;
  readonly metrics = new SetupMetrics();
  readonly log: AppLog;
  /** The upstream Service's ClusterIP as Go prints it (`<nil>` when missing). */
  readonly clusterDNS: string;
  readonly netif: NetifManager | undefined;
  readonly rules: Rule[];
  firewall: Firewall | undefined;
  private readonly reloadSignal: (() => void) | undefined;
  private timers: NodeJS.Timeout[] = [];
  private stopped = false;

  constructor(params: ConfigParams, log: AppLog, opts: CacheAppOptions = {}) {
    this.params = params;
    this.log = log;
    this.reloadSignal = params.reloadWithSignal ? (opts.reloadSignal ?? (() => { process.kill(process.pid, 'SIGUSR1'); })) : undefined;
    const env = opts.env ?? process.env;
    const svcEnv = toSvcEnv(params.upstreamSvcName);
    const value = expandEnv(svcEnv, env);
    const ip = parseIP(value);
    this.clusterDNS = ip === undefined ? '<nil>' : goIPString(ip);
    if (ip === undefined) log.warning(`Unable to lookup IP address of Upstream service ${params.upstreamSvcName}, env ${svcEnv} \`${value}\``);
    else if (params.localIPs.includes(this.clusterDNS)) {
      // nodens: the cluster-domain upstream would be delivered straight back to this cache (spec §9.1).
      log.warning(`Upstream service ${params.upstreamSvcName} (${this.clusterDNS}) is one of -localip: the cluster domain would be forwarded to this cache itself; use a Service whose ClusterIP is not bound here (kube-dns-upstream)`);
    }
    this.netif = params.setupInterface ? new NetifManager(params.interfaceName, params.localIPs, params.ipv6, (m) => { log.info(m); }, opts.ip ?? runIp) : undefined;
    this.rules = params.setupIptables ? nodeCacheRules(params.localIPStr, params.localPort, params.healthPort) : [];
  }

  /** Init: firewall backend, metrics, the first Corefile, ConfigMap syncs, the interface (rules come later). */
  async init(): Promise<void> {
    if (this.params.setupIptables) {
      const { firewall, reason } = chooseFirewall(this.params.firewall, this.params.ipv6);
      this.firewall = firewall;
      if (firewall !== undefined) this.log.info(`Using ${firewall.description} for the nodelocaldns rules (${reason})`);
      else this.log.error(`No firewall tool for the nodelocaldns rules: ${reason}`);
    }
    const err = await this.metrics.serve(this.params.metricsListenAddress);
    if (err !== undefined) this.log.error(`Failed to start metrics handler: ${err.message}`);
    // A valid file exists even when the kube-dns directory is missing or invalid.
    this.updateCorefile(emptyKubeDNSConfig());
    this.initDNSConfigSync();
    // Rules wait until the server runs (pidfile or first tick), so traffic is never steered to a cache that failed to start.
    this.setupNetworking(false);
  }

  /** The rules' and interface's check (setupNetworking). */
  setupNetworking(withRules: boolean): void {
    if (withRules && this.params.setupIptables) {
      if (this.firewall === undefined) {
        this.log.error('Error checking/adding iptables rules: no firewall tool');
        this.metrics.inc('iptables');
      } else {
        for (const o of this.firewall.ensureAll(this.rules)) {
          if (o.error !== undefined) {
            this.log.error(`Error checking/adding iptables rule ${ruleText(o.rule)}, error - ${o.error}`);
            this.metrics.inc(/holding the xtables lock/.test(o.error) ? 'iptables_lock' : 'iptables');
          } else if (o.existed) {
            this.log.debug(`iptables rule ${ruleText(o.rule)} for nodelocaldns already exists`);
          } else {
            this.log.info(`Added back nodelocaldns rule - ${ruleText(o.rule)}`);
          }
        }
      }
    }
    if (this.netif !== undefined) {
      const name = this.params.interfaceName;
      const r = this.netif.ensure();
      if (!r.existed) {
        if (r.error !== undefined) {
          this.log.error(`Failed to add non-existent interface ${name}: ${r.error}`);
          this.metrics.inc('interface_add');
        }
        this.log.info(`Added interface - ${name}`);
      }
      if (r.error !== undefined) {
        this.log.error(`Error checking dummy device ${name} - ${r.error}`);
        this.metrics.inc('interface_check');
      }
    }
  }

  /** runPeriodic: rules as soon as the pidfile exists (if one is set), then a check every -syncinterval. */
  startPeriodic(): void {
    const tick = (): void => {
      if (this.stopped) return;
      this.setupNetworking(true);
    };
    const every = (): void => {
      const t = setInterval(tick, this.params.intervalMs);
      t.unref();
      this.timers.push(t);
    };
    if (this.params.pidfile === '') { every(); return; }
    const wait = (): void => {
      if (this.stopped) return;
      if (isFile(this.params.pidfile)) {
        this.setupNetworking(true);
        every();
        return;
      }
      this.log.info(`waiting for coredns pidfile '${this.params.pidfile}'`);
      const t = setTimeout(wait, 1000);
      t.unref();
      this.timers.push(t);
    };
    wait();
  }

  private stopTimers(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
  }

  /** Stops the periodic work (tests; teardown does it too). */
  stop(): void {
    this.stopped = true;
    this.stopTimers();
    this.metrics.close();
  }

  /** TeardownNetworking: every rule deleted as often as it is present, then the interface. Synchronous. */
  teardown(): void {
    this.log.info('Tearing down');
    if (!this.stopped) this.log.warning('Exiting iptables/interface check goroutine');
    this.stop();
    if (this.params.setupIptables && this.firewall !== undefined) {
      for (const e of this.firewall.removeAll(this.rules)) {
        this.log.error(e);
        this.metrics.inc(/holding the xtables lock/.test(e) ? 'iptables_lock' : 'iptables');
      }
    }
    if (this.netif !== undefined) {
      const e = this.netif.remove();
      if (e !== undefined) this.log.error(`Failed to remove interface ${this.params.interfaceName}: ${e}`);
    }
  }

  /** updateCorefile: validate, render, write (mode 0666), log the result, SIGUSR1 with -reloadwithsignal. */
  updateCorefile(cfg: KubeDNSConfig): void {
    try { validateNodeLocalCache(cfg); } catch (e) {
      this.log.error(`Invalid config: ${(e as Error).message}`);
      this.metrics.inc('configmap');
      return;
    }
    let base: string;
    try { base = readFileSync(this.params.baseCoreFile, 'utf8'); } catch (e) {
      this.log.error(`Failed to read node-cache coreFile ${this.params.baseCoreFile} - ${fsErrorText(e, 'open', this.params.baseCoreFile)}`);
      this.metrics.inc('configmap');
      return;
    }
    const r = renderCorefile({ base, localIPStr: this.params.localIPStr, localPort: this.params.localPort, clusterDNS: this.clusterDNS, kubeDNS: cfg });
    if (r.udpBlockNotFound) this.log.warning('Did not find TCP upstream block to replace, assuming upstreams already use UDP.');
    try { writeFileSync(this.params.coreFile, r.text, { mode: 0o666 }); } catch (e) {
      this.log.error(`Failed to write config file ${this.params.coreFile} - err ${fsErrorText(e, 'open', this.params.coreFile)}`);
      this.metrics.inc('configmap');
      return;
    }
    this.log.info(`Updated Corefile with ${cfg.stubDomains.size} custom stubdomains and upstream servers ${r.upstreamServers}`);
    this.log.info(`Using config file:\n${r.text}`);
    if (this.reloadSignal !== undefined) {
      this.log.info(`Sending reload signal to PID ${process.pid}`);
      this.reloadSignal();
    }
  }

  /** initDNSConfigSync: the kube-dns ConfigMap directory and the template's directory, each scanned every 10 s. */
  private initDNSConfigSync(): void {
    let kubednsDir = this.params.kubednsCMPath;
    if (kubednsDir === '' && existsSync(DEFAULT_KUBEDNS_CM_PATH)) kubednsDir = DEFAULT_KUBEDNS_CM_PATH;
    if (kubednsDir === '') this.log.info('Skipping kube-dns configmap sync as no directory was specified');
    let current = emptyKubeDNSConfig();
    const onError = (m: string): void => { this.log.error(m); };
    const syncs: Array<{ name: string; sync: ConfigDirSync; onChange: (c: KubeDNSConfig) => void }> = [];
    if (kubednsDir !== '') syncs.push({ name: 'kube-dns', sync: new ConfigDirSync(kubednsDir, onError), onChange: (c) => { current = c; this.updateCorefile(c); } });
    // The template's directory: a change re-renders with the latest kube-dns config (the file is read again).
    syncs.push({ name: 'node-local-dns', sync: new ConfigDirSync(dirname(this.params.baseCoreFile), onError), onChange: () => { this.updateCorefile(current); } });
    for (const s of syncs) {
      let initial: KubeDNSConfig;
      try { initial = s.sync.once(); } catch (e) {
        // As in node-cache, a directory that fails here is not polled later (a fix needs a restart).
        this.log.error(`Failed to sync ${s.name} config directory ${s.sync.dir}, err: ${(e as Error).message}`);
        continue;
      }
      if (s.name === 'kube-dns') { current = initial; this.updateCorefile(initial); }
      const t = setInterval(() => {
        if (this.stopped) return;
        const c = s.sync.poll();
        if (c !== undefined) s.onChange(c);
      }, CONFIG_SYNC_PERIOD_MS);
      t.unref();
      this.timers.push(t);
    }
  }
}

function isFile(path: string): boolean {
  try { return !statSync(path).isDirectory(); } catch { return false; }
}
