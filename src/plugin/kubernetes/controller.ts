// The in-memory view of the cluster the plugin answers from (CoreDNS's
// dnsController + object package): compact copies of Services,
// EndpointSlices, Pods and Namespaces, and the indexes the query path uses.
// Every index is keyed by exact (lower-case) names or IP text, so a query
// never scans all services.

import type { PluginLogger } from '../plugin.ts';
import type { ApiClient } from './client.ts';
import { Reflector, type ReflectorOptions } from './reflector.ts';
import { kubernetesMetrics, type KubernetesMetrics } from './metrics.ts';
import { decodeEndpointSlice, decodeNamespace, decodePod, decodeService } from './protobuf.ts';

export interface Port { name: string; protocol: string; port: number }

export interface Service {
  rv: string;
  name: string;
  namespace: string;
  /** `<namespace>/<name>` */
  key: string;
  type: string;
  clusterIPs: string[];
  externalName: string;
  headless: boolean;
  ports: Port[];
  /**
   * `spec.externalIPs`, then each `status.loadBalancer.ingress[]` entry's `ip` (or its `hostname`
   * when it has no IP): the addresses the k8s_external zone answers with (CoreDNS's ExternalIPs).
   */
  externalIPs: readonly string[];
}

export interface EndpointAddress {
  ip: string;
  hostname: string;
  targetRefName: string;
  nodeName: string;
  zone: string;
}

export interface Slice {
  rv: string;
  name: string;
  namespace: string;
  key: string;
  /** `<namespace>/<service>` from the kubernetes.io/service-name label ('' = never matched) */
  svcKey: string;
  /** multicluster: cluster id from multicluster.kubernetes.io/source-cluster */
  cluster: string;
  /** ready addresses only */
  addresses: EndpointAddress[];
  ports: Port[];
  /** the endpoints.kubernetes.io/last-change-trigger-time annotation ('' = none) */
  trigger: string;
}

export interface Pod {
  rv: string;
  name: string;
  namespace: string;
  key: string;
  /** status.podIPs (CoreDNS 1.15.0 indexes every one; status.podIP alone is not read). */
  podIPs: string[];
  deleting: boolean;
  /** The pod's labels (the `kubernetes/client-label/<key>` metadata). */
  labels: Readonly<Record<string, string>>;
}

export interface ServiceImport {
  rv: string;
  name: string;
  namespace: string;
  key: string;
  type: string;
  ips: string[];
  ports: Port[];
}

/** Raw API objects: only the fields read here are typed. */
interface Meta { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string>; deletionTimestamp?: string }
export interface RawObject { metadata: Meta; [k: string]: unknown }

interface RawPort { name?: string; protocol?: string; port?: number }

const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
const MCS_SERVICE_NAME_LABEL = 'multicluster.kubernetes.io/service-name';
const MCS_SOURCE_CLUSTER_LABEL = 'multicluster.kubernetes.io/source-cluster';
const TRIGGER_TIME = 'endpoints.kubernetes.io/last-change-trigger-time';

export function toService(o: RawObject): Service {
  const spec = (o.spec ?? {}) as { type?: string; clusterIP?: string; clusterIPs?: string[]; externalName?: string; ports?: RawPort[]; externalIPs?: string[] };
  const ingress = ((o.status ?? {}) as { loadBalancer?: { ingress?: { ip?: string; hostname?: string }[] } }).loadBalancer?.ingress ?? NONE;
  const ns = o.metadata.namespace ?? '';
  let ips = spec.clusterIPs ?? [];
  if (ips.length === 0) ips = spec.clusterIP ? [spec.clusterIP] : [];
  const ports: Port[] = (spec.ports ?? []).map((p) => ({ name: p.name ?? '', protocol: p.protocol ?? 'TCP', port: p.port ?? 0 }));
  if (ports.length === 0) ports.push({ name: '', protocol: '', port: -1 });
  let externalIPs: readonly string[] = NONE;
  if ((spec.externalIPs?.length ?? 0) > 0 || ingress.length > 0) {
    externalIPs = [...(spec.externalIPs ?? NONE), ...ingress.map((i) => i.ip || i.hostname || '')].filter((a) => a !== '');
  }
  return {
    rv: o.metadata.resourceVersion ?? '', name: o.metadata.name, namespace: ns, key: `${ns}/${o.metadata.name}`,
    type: spec.type ?? 'ClusterIP', clusterIPs: ips, externalName: spec.externalName ?? '',
    headless: ips.length > 0 && ips[0] === 'None', ports, externalIPs: externalIPs.length === 0 ? NONE : externalIPs,
  };
}

export function toSlice(o: RawObject, mcs: boolean): Slice {
  const ns = o.metadata.namespace ?? '';
  const labels = o.metadata.labels ?? {};
  const svc = labels[mcs ? MCS_SERVICE_NAME_LABEL : SERVICE_NAME_LABEL];
  const eps = (o.endpoints ?? []) as { addresses?: string[]; conditions?: { ready?: boolean | null }; hostname?: string; nodeName?: string; zone?: string; targetRef?: { name?: string } }[];
  const addresses: EndpointAddress[] = [];
  for (const e of eps) {
    const ready = e.conditions?.ready;
    if (ready === false) continue;
    for (const ip of e.addresses ?? []) {
      addresses.push({ ip, hostname: e.hostname ?? '', targetRefName: e.targetRef?.name ?? '', nodeName: e.nodeName ?? '', zone: e.zone ?? '' });
    }
  }
  const rawPorts = (o.ports ?? []) as RawPort[];
  const ports: Port[] = rawPorts.map((p) => ({ name: p.name ?? '', protocol: p.protocol ?? '', port: p.port ?? -1 }));
  if (ports.length === 0) ports.push({ name: '', protocol: '', port: -1 });
  return {
    rv: o.metadata.resourceVersion ?? '', name: o.metadata.name, namespace: ns, key: `${ns}/${o.metadata.name}`,
    svcKey: svc ? `${ns}/${svc}` : '', cluster: mcs ? (labels[MCS_SOURCE_CLUSTER_LABEL] ?? '') : '', addresses, ports,
    trigger: o.metadata.annotations?.[TRIGGER_TIME] ?? '',
  };
}

function sameIPs(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function toPod(o: RawObject): Pod {
  const ns = o.metadata.namespace ?? '';
  const status = (o.status ?? {}) as { podIPs?: { ip?: string }[] | null };
  const podIPs = [...new Set((status.podIPs ?? []).map((x) => x.ip ?? ''))];
  return {
    rv: o.metadata.resourceVersion ?? '', name: o.metadata.name, namespace: ns, key: `${ns}/${o.metadata.name}`,
    podIPs, deleting: o.metadata.deletionTimestamp !== undefined && o.metadata.deletionTimestamp !== null,
    labels: o.metadata.labels ?? {},
  };
}

export function toServiceImport(o: RawObject): ServiceImport {
  const ns = o.metadata.namespace ?? '';
  const spec = (o.spec ?? {}) as { type?: string; ips?: string[]; ports?: RawPort[] };
  const ports: Port[] = (spec.ports ?? []).map((p) => ({ name: p.name ?? '', protocol: p.protocol ?? 'TCP', port: p.port ?? 0 }));
  if (ports.length === 0) ports.push({ name: '', protocol: '', port: -1 });
  return { rv: o.metadata.resourceVersion ?? '', name: o.metadata.name, namespace: ns, key: `${ns}/${o.metadata.name}`, type: spec.type ?? 'ClusterSetIP', ips: spec.ips ?? [], ports };
}

function portsEqual(a: Port[], b: Port[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i].name !== b[i].name || a[i].port !== b[i].port || a[i].protocol !== b[i].protocol) return false;
  return true;
}

function stringsEqual(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** A service is in the k8s_external zone with external addresses, or (with its `headless` option) as a headless service. */
function externallyVisible(s: Service): boolean {
  return s.externalIPs.length > 0 || s.headless;
}

function addressesEqual(a: EndpointAddress[], b: EndpointAddress[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i].ip !== b[i].ip || a[i].hostname !== b[i].hostname) return false;
  return true;
}

/** A multimap of string → items, kept as small arrays. */
class MultiIndex<T> {
  readonly m = new Map<string, T[]>();
  add(k: string, v: T): void {
    const a = this.m.get(k);
    if (a === undefined) this.m.set(k, [v]);
    else a.push(v);
  }
  remove(k: string, v: T): void {
    const a = this.m.get(k);
    if (a === undefined) return;
    const i = a.indexOf(v);
    if (i >= 0) a.splice(i, 1);
    if (a.length === 0) this.m.delete(k);
  }
  get(k: string): T[] | undefined { return this.m.get(k); }
}

const NONE: never[] = [];

/**
 * A multimap of string → items for keys that nearly always have one item (an endpoint IP is in one slice): the
 * lone item is stored as itself, an array only from the second on. At 100k endpoints that is 100k arrays fewer
 * to allocate (and collect) during a sync, and one lookup per add. The one-item array a lookup returns is made
 * once per item, on the first lookup that needs it.
 */
class SoloIndex<T extends object> {
  private readonly m = new Map<string, T | T[]>();
  private readonly alone = new WeakMap<T, readonly T[]>();
  /** Adds v under k unless it is there already. */
  add(k: string, v: T): void {
    const cur = this.m.get(k);
    if (cur === undefined) this.m.set(k, v);
    else if (Array.isArray(cur)) { if (!cur.includes(v)) cur.push(v); } else if (cur !== v) this.m.set(k, [cur, v]);
  }
  remove(k: string, v: T): void {
    const cur = this.m.get(k);
    if (cur === undefined) return;
    if (!Array.isArray(cur)) {
      if (cur === v) this.m.delete(k);
      return;
    }
    const i = cur.indexOf(v);
    if (i >= 0) cur.splice(i, 1);
    if (cur.length === 0) this.m.delete(k);
  }
  get(k: string): readonly T[] | undefined {
    const cur = this.m.get(k);
    if (cur === undefined || Array.isArray(cur)) return cur;
    let a = this.alone.get(cur);
    if (a === undefined) {
      a = [cur];
      this.alone.set(cur, a);
    }
    return a;
  }
}

export interface ControllerOptions {
  labelSelector: string;
  namespaceLabelSelector: string;
  endpoints: boolean;
  pods: boolean;
  multicluster: boolean;
  resyncMs: number;
  log: PluginLogger;
}

export class Controller {
  /** Where dns programming latency is observed (set by setup to the server's registry). */
  metrics: KubernetesMetrics = kubernetesMetrics();
  readonly services = new Map<string, Service>();
  readonly svcByIP = new MultiIndex<Service>();
  /** external IP (or load-balancer hostname) → services */
  readonly svcByExternalIP = new MultiIndex<Service>();
  readonly slices = new Map<string, Slice>();
  /** service key → slices of that service */
  readonly slicesBySvc = new MultiIndex<Slice>();
  readonly sliceByIP = new SoloIndex<Slice>();
  readonly pods = new Map<string, Pod>();
  readonly podByIP = new MultiIndex<Pod>();
  readonly namespaces = new Set<string>();
  readonly imports = new Map<string, ServiceImport>();
  readonly mcsSlices = new Map<string, Slice>();
  readonly mcsSlicesBySvc = new MultiIndex<Slice>();
  /** Unix seconds of the last DNS-relevant change (SOA serial). */
  modified = 0;
  modifiedMulticluster = 0;
  /** Unix seconds of the last change visible in the k8s_external zone (its SOA serial). */
  modifiedExternal = 0;
  private readonly reflectors: Reflector<unknown>[] = [];
  private client: ApiClient | undefined;
  private syncedOnce = false;

  /** Wire the reflectors to a client (not started). */
  connect(client: ApiClient, o: ControllerOptions): void {
    this.client = client;
    const common = { client, log: o.log, resyncMs: o.resyncMs } satisfies Partial<ReflectorOptions>;
    const lsel = o.labelSelector;
    const raw = (o2: RawObject) => o2;
    this.reflectors.push(new Reflector<Service>({ ...common, name: 'services', type: '*v1.Service', path: '/api/v1/services', labelSelector: lsel, decoder: decodeService }, {
      record: toService,
      replace: (items) => { this.replaceServices(items); },
      upsert: (o2) => { this.upsertService(o2); },
      remove: (o2) => { this.removeService(o2.metadata.namespace ?? '', o2.metadata.name); },
    }));
    this.reflectors.push(new Reflector({ ...common, name: 'namespaces', type: '*v1.Namespace', path: '/api/v1/namespaces', labelSelector: o.namespaceLabelSelector, decoder: decodeNamespace }, {
      record: raw,
      replace: (items) => {
        this.namespaces.clear();
        for (const n of items) this.namespaces.add(n.metadata.name);
      },
      upsert: (n) => { this.namespaces.add(n.metadata.name); },
      remove: (n) => { this.namespaces.delete(n.metadata.name); },
    }));
    if (o.endpoints) {
      this.reflectors.push(new Reflector<Slice>({ ...common, name: 'endpointslices', type: '*v1.EndpointSlice', path: '/apis/discovery.k8s.io/v1/endpointslices', labelSelector: lsel, decoder: decodeEndpointSlice }, {
        record: (o2) => toSlice(o2, false),
        replace: (items) => { this.replaceSlices(items); },
        upsert: (s) => { this.upsertSlice(s); },
        remove: (s) => { this.removeSlice(`${s.metadata.namespace ?? ''}/${s.metadata.name}`); },
      }));
    }
    if (o.pods) {
      this.reflectors.push(new Reflector<Pod>({
        ...common, name: 'pods', type: '*v1.Pod', path: '/api/v1/pods', labelSelector: lsel,
        fieldSelector: 'status.phase!=Succeeded,status.phase!=Failed,status.phase!=Unknown', decoder: decodePod,
      }, {
        record: toPod,
        replace: (items) => { this.replacePods(items); },
        upsert: (p) => { this.upsertPod(p); },
        remove: (p) => { this.removePod(`${p.metadata.namespace ?? ''}/${p.metadata.name}`); },
      }));
    }
    if (o.multicluster) {
      this.reflectors.push(new Reflector({ ...common, name: 'serviceimports', type: '*v1alpha1.ServiceImport', path: '/apis/multicluster.x-k8s.io/v1alpha1/serviceimports', labelSelector: o.namespaceLabelSelector }, {
        record: raw,
        replace: (items) => {
          const seen = new Set<string>();
          for (const i of items) { seen.add(this.upsertImport(i)); }
          for (const k of [...this.imports.keys()]) if (!seen.has(k)) { this.imports.delete(k); this.touchMC(); }
        },
        upsert: (i) => { this.upsertImport(i); },
        remove: (i) => { if (this.imports.delete(`${i.metadata.namespace ?? ''}/${i.metadata.name}`)) this.touchMC(); },
      }));
      const mcsSel = lsel === '' ? MCS_SERVICE_NAME_LABEL : `${lsel},${MCS_SERVICE_NAME_LABEL}`;
      this.reflectors.push(new Reflector({ ...common, name: 'multicluster endpointslices', type: '*v1.EndpointSlice', path: '/apis/discovery.k8s.io/v1/endpointslices', labelSelector: mcsSel, decoder: decodeEndpointSlice }, {
        record: raw,
        replace: (items) => {
          const seen = new Set<string>();
          for (const s of items) seen.add(this.upsertMcsSlice(s));
          for (const k of [...this.mcsSlices.keys()]) if (!seen.has(k)) this.removeMcsSlice(k);
        },
        upsert: (s) => { this.upsertMcsSlice(s); },
        remove: (s) => { this.removeMcsSlice(`${s.metadata.namespace ?? ''}/${s.metadata.name}`); },
      }));
    }
  }

  start(): void {
    for (const r of this.reflectors) r.start();
  }

  stop(): void {
    for (const r of this.reflectors) r.stop();
    this.client?.close();
  }

  /** Every informer delivered its initial list (stays true afterwards). */
  hasSynced(): boolean {
    if (this.syncedOnce) return true;
    if (this.reflectors.length === 0) return false;
    for (const r of this.reflectors) if (!r.synced) return false;
    this.syncedOnce = true;
    return true;
  }

  /** For tests: resolves when every reflector has an open watch (or the time is up). */
  reflectorStates(): { name: string; synced: boolean; watching: boolean; lastRv: string; relists: number; streamed: number }[] {
    return this.reflectors.map((r) => ({ name: r.opts.name, synced: r.synced, watching: r.watching, lastRv: r.lastRv, relists: r.lists, streamed: r.streamedLists }));
  }

  private touch(): void {
    this.modified = Math.floor(Date.now() / 1000);
  }

  private touchMC(): void {
    this.modifiedMulticluster = Math.floor(Date.now() / 1000);
  }

  private touchExternal(): void {
    this.modifiedExternal = Math.floor(Date.now() / 1000);
  }

  // ---------- services ----------

  private indexService(s: Service, add: boolean): void {
    for (const ip of s.clusterIPs) {
      if (ip === 'None' || ip === '') continue;
      if (add) this.svcByIP.add(ip, s);
      else this.svcByIP.remove(ip, s);
    }
    for (const ip of s.externalIPs) {
      if (add) this.svcByExternalIP.add(ip, s);
      else this.svcByExternalIP.remove(ip, s);
    }
  }

  upsertService(o: RawObject): void {
    this.putService(toService(o));
  }

  private putService(s: Service): void {
    const old = this.services.get(s.key);
    if (old !== undefined) {
      if (old.rv === s.rv && s.rv !== '') return;
      this.indexService(old, false);
    }
    this.services.set(s.key, s);
    this.indexService(s, true);
    const portsChanged = old === undefined || !portsEqual(old.ports, s.ports);
    if (portsChanged || old.externalName !== s.externalName) this.touch();
    if (old === undefined ? externallyVisible(s)
      : !stringsEqual(old.externalIPs, s.externalIPs) || (portsChanged && (externallyVisible(old) || externallyVisible(s)))) this.touchExternal();
  }

  removeService(ns: string, name: string): void {
    const key = `${ns}/${name}`;
    const old = this.services.get(key);
    if (old === undefined) return;
    this.services.delete(key);
    this.indexService(old, false);
    this.touch();
    if (externallyVisible(old)) this.touchExternal();
  }

  private replaceServices(items: Service[]): void {
    const seen = new Set<string>();
    for (const s of items) {
      seen.add(s.key);
      this.putService(s);
    }
    for (const [k, s] of [...this.services]) if (!seen.has(k)) this.removeService(s.namespace, s.name);
  }

  // ---------- endpoint slices ----------

  private indexSlice(s: Slice, add: boolean, bySvc: MultiIndex<Slice>, byIP: SoloIndex<Slice> | undefined): void {
    if (s.svcKey !== '') {
      if (add) bySvc.add(s.svcKey, s);
      else bySvc.remove(s.svcKey, s);
    }
    // A slice that names no service has no PTR target (CoreDNS would build an
    // unencodable name with an empty label and send nothing).
    if (byIP === undefined || s.svcKey === '') return;
    let prev = '';
    for (const a of s.addresses) {
      if (a.ip === prev) continue;
      prev = a.ip;
      if (add) byIP.add(a.ip, s);
      else byIP.remove(a.ip, s);
    }
  }

  upsertSlice(o: RawObject): void {
    this.putSlice(toSlice(o, false));
  }

  private putSlice(s: Slice): void {
    const old = this.slices.get(s.key);
    if (old !== undefined) {
      if (old.rv === s.rv && s.rv !== '') return;
      this.indexSlice(old, false, this.slicesBySvc, this.sliceByIP);
    }
    this.slices.set(s.key, s);
    this.indexSlice(s, true, this.slicesBySvc, this.sliceByIP);
    const changed = old === undefined || !addressesEqual(old.addresses, s.addresses) || !portsEqual(old.ports, s.ports);
    if (changed) {
      this.touch();
      this.touchExternalHeadless(s);
      this.recordProgramming(s);
    }
  }

  /** Endpoints of a headless service are in the k8s_external zone (with its `headless` option). */
  private touchExternalHeadless(s: Slice): void {
    if (this.services.get(s.svcKey)?.headless === true) this.touchExternal();
  }

  private recordProgramming(s: Slice): void {
    const t = s.trigger;
    if (t === '' || s.svcKey === '') return;
    const svc = this.services.get(s.svcKey);
    if (svc === undefined) return;
    const at = Date.parse(t);
    if (Number.isNaN(at)) return;
    this.metrics.dnsProgrammingLatency.observe({ service_kind: svc.headless ? 'headless_with_selector' : 'cluster_ip' }, Math.max(0, (Date.now() - at) / 1000));
  }

  removeSlice(key: string): void {
    const old = this.slices.get(key);
    if (old === undefined) return;
    this.slices.delete(key);
    this.indexSlice(old, false, this.slicesBySvc, this.sliceByIP);
    this.touch();
    this.touchExternalHeadless(old);
  }

  private replaceSlices(items: Slice[]): void {
    const seen = new Set<string>();
    for (const s of items) {
      seen.add(s.key);
      this.putSlice(s);
    }
    for (const k of [...this.slices.keys()]) if (!seen.has(k)) this.removeSlice(k);
  }

  private upsertMcsSlice(o: RawObject): string {
    const s = toSlice(o, true);
    const old = this.mcsSlices.get(s.key);
    if (old !== undefined) {
      if (old.rv === s.rv && s.rv !== '') return s.key;
      this.indexSlice(old, false, this.mcsSlicesBySvc, undefined);
    }
    this.mcsSlices.set(s.key, s);
    this.indexSlice(s, true, this.mcsSlicesBySvc, undefined);
    if (old === undefined || !addressesEqual(old.addresses, s.addresses) || !portsEqual(old.ports, s.ports)) this.touchMC();
    return s.key;
  }

  private removeMcsSlice(key: string): void {
    const old = this.mcsSlices.get(key);
    if (old === undefined) return;
    this.mcsSlices.delete(key);
    this.indexSlice(old, false, this.mcsSlicesBySvc, undefined);
    this.touchMC();
  }

  private upsertImport(o: RawObject): string {
    const i = toServiceImport(o);
    const old = this.imports.get(i.key);
    if (old !== undefined && old.rv === i.rv && i.rv !== '') return i.key;
    this.imports.set(i.key, i);
    if (old === undefined || !portsEqual(old.ports, i.ports)) this.touchMC();
    return i.key;
  }

  // ---------- pods ----------

  upsertPod(o: RawObject): void {
    this.putPod(toPod(o));
  }

  private putPod(p: Pod): void {
    const old = this.pods.get(p.key);
    if (p.deleting) return; // first seen terminating: not cached; update adding the timestamp: ignored
    if (old !== undefined) {
      if (old.rv === p.rv && p.rv !== '') return;
      for (const ip of old.podIPs) this.podByIP.remove(ip, old);
    }
    this.pods.set(p.key, p);
    for (const ip of p.podIPs) this.podByIP.add(ip, p);
    if (old === undefined || !sameIPs(old.podIPs, p.podIPs)) this.touch();
  }

  removePod(key: string): void {
    const old = this.pods.get(key);
    if (old === undefined) return;
    this.pods.delete(key);
    for (const ip of old.podIPs) this.podByIP.remove(ip, old);
    this.touch();
  }

  private replacePods(items: Pod[]): void {
    const seen = new Set<string>();
    for (const p of items) {
      seen.add(p.key);
      this.putPod(p);
    }
    for (const k of [...this.pods.keys()]) if (!seen.has(k)) this.removePod(k);
  }

  // ---------- queries ----------

  service(namespace: string, name: string): Service | undefined {
    return this.services.get(`${namespace}/${name}`);
  }

  slicesOf(svcKey: string): readonly Slice[] {
    return this.slicesBySvc.get(svcKey) ?? NONE;
  }

  servicesByIP(ip: string): readonly Service[] {
    return this.svcByIP.get(ip) ?? NONE;
  }

  servicesByExternalIP(ip: string): readonly Service[] {
    return this.svcByExternalIP.get(ip) ?? NONE;
  }

  slicesByIP(ip: string): readonly Slice[] {
    return this.sliceByIP.get(ip) ?? NONE;
  }

  podsByIP(ip: string): readonly Pod[] {
    return this.podByIP.get(ip) ?? NONE;
  }
}
