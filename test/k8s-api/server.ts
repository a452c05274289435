// A test Kubernetes API server: just enough of kube-apiserver's list/watch
// protocol for the kubernetes plugin (and for the real CoreDNS) to sync from it.
//
//   node test/k8s-api/server.ts --state cluster.json --port 8080 [--bookmark-ms 1000] [--history 1000]
//
// What it speaks (JSON only, plain HTTP, any bearer token accepted):
//   GET /api/v1/{services,pods,namespaces}, /apis/discovery.k8s.io/v1/endpointslices,
//       /apis/multicluster.x-k8s.io/v1alpha1/serviceimports (cluster-wide and /namespaces/{ns}/...),
//       single objects (.../{name}), /version, /api, /apis, discovery of each group version.
//   LIST: labelSelector, fieldSelector, limit/continue, resourceVersion(+Match=Exact → 410 when not current).
//   WATCH (watch=true|1): resourceVersion unset/0 (synthetic ADDED) or N (history replay, 410 Expired
//       ERROR event when N has left the bounded history), allowWatchBookmarks (periodic BOOKMARK),
//       timeoutSeconds, sendInitialEvents=true + resourceVersionMatch=NotOlderThan (ADDED for every
//       object, then the `k8s.io/initial-events-end` BOOKMARK), selector transitions as ADDED/DELETED.
//   One global resourceVersion counter bumped on every write.
//   Writes: POST collection, PUT/DELETE object (real REST shape), and the admin API below.
//   Admin (fault injection, test control), all POST unless noted:
//     /_admin/apply {upsert?: obj[], delete?: {kind,namespace?,name}[]}   batch write
//     /_admin/reset  <state>        replace the whole state (diffed into events)
//     /_admin/compact               forget the event history (old resourceVersions → 410)
//     /_admin/close-watches         end every open watch cleanly
//     /_admin/drop-events {count}   record the next N events but do not send them to open watches
//     /_admin/fail {status,count,match?}  answer the next N matching requests with that HTTP status
//     /_admin/pause {on}            hold every new response (the server looks hung) until pause off
//     GET /_admin/requests          the request log ([{method,url,time}])
//     GET /_admin/stats             {resourceVersion, watches}
//
// State file: {"namespaces":[...], "services":[...], "endpointslices":[...], "pods":[...],
// "serviceimports":[...]} with Kubernetes objects as the API serves them (kind/apiVersion optional).

import http from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { parseSelector, type Requirement } from '../../src/plugin/kubernetes/selector.ts';

export interface KObject {
  kind?: string;
  apiVersion?: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}

interface ResourceDef {
  resource: string;
  kind: string;
  listKind: string;
  apiVersion: string;
  /** URL prefix of the group version: /api/v1 or /apis/<group>/<version> */
  prefix: string;
  namespaced: boolean;
}

export const RESOURCES: ResourceDef[] = [
  { resource: 'namespaces', kind: 'Namespace', listKind: 'NamespaceList', apiVersion: 'v1', prefix: '/api/v1', namespaced: false },
  { resource: 'services', kind: 'Service', listKind: 'ServiceList', apiVersion: 'v1', prefix: '/api/v1', namespaced: true },
  { resource: 'pods', kind: 'Pod', listKind: 'PodList', apiVersion: 'v1', prefix: '/api/v1', namespaced: true },
  { resource: 'endpoints', kind: 'Endpoints', listKind: 'EndpointsList', apiVersion: 'v1', prefix: '/api/v1', namespaced: true },
  { resource: 'nodes', kind: 'Node', listKind: 'NodeList', apiVersion: 'v1', prefix: '/api/v1', namespaced: false },
  { resource: 'endpointslices', kind: 'EndpointSlice', listKind: 'EndpointSliceList', apiVersion: 'discovery.k8s.io/v1', prefix: '/apis/discovery.k8s.io/v1', namespaced: true },
  { resource: 'serviceimports', kind: 'ServiceImport', listKind: 'ServiceImportList', apiVersion: 'multicluster.x-k8s.io/v1alpha1', prefix: '/apis/multicluster.x-k8s.io/v1alpha1', namespaced: true },
];

const BY_KIND = new Map(RESOURCES.map((r) => [r.kind, r]));

export interface ClusterState {
  namespaces?: KObject[];
  services?: KObject[];
  endpointslices?: KObject[];
  pods?: KObject[];
  serviceimports?: KObject[];
  nodes?: KObject[];
  endpoints?: KObject[];
}

type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface HistoryEvent {
  rv: number;
  type: EventType;
  res: ResourceDef;
  obj: KObject;
  /** the object before the change (for selector transitions) */
  old: KObject | undefined;
}

interface Watcher {
  res: ResourceDef;
  namespace: string | undefined;
  labels: Requirement[];
  fields: FieldReq[];
  bookmarks: boolean;
  res_: http.ServerResponse;
  /** highest rv sent (or covered by a bookmark) */
  rv: number;
  timer: NodeJS.Timeout | undefined;
  end(): void;
}

interface FieldReq { path: string; op: '=' | '!='; value: string }

export interface ServerOptions {
  /** How often an idle watch with allowWatchBookmarks gets a BOOKMARK (ms). Real servers: ~60 s. */
  bookmarkMs?: number;
  /** How many events are kept for watch resumption (older resourceVersions → 410). */
  history?: number;
  /** First resourceVersion handed out. */
  startRv?: number;
  /** Log each request to stderr. */
  verbose?: boolean;
}

function kindOf(o: KObject, fallback?: ResourceDef): ResourceDef {
  const r = o.kind !== undefined ? BY_KIND.get(o.kind) : fallback;
  if (r === undefined) throw new Error(`unknown kind ${String(o.kind)}`);
  return r;
}

function keyOf(res: ResourceDef, ns: string | undefined, name: string): string {
  return res.namespaced ? `${ns ?? ''}/${name}` : name;
}

function statusBody(code: number, reason: string, message: string): string {
  return JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code });
}

const REASONS: Record<number, string> = { 400: 'BadRequest', 404: 'NotFound', 409: 'AlreadyExists', 410: 'Expired', 422: 'Invalid', 429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable', 504: 'Timeout' };

function getPath(o: unknown, path: string): string {
  let cur: unknown = o;
  for (const p of path.split('.')) {
    if (cur === null || typeof cur !== 'object') return '';
    cur = (cur as Record<string, unknown>)[p];
  }
  return cur === undefined || cur === null ? '' : String(cur);
}

function parseFieldSelector(s: string | null): FieldReq[] {
  if (!s) return [];
  return s.split(',').filter(Boolean).map((part) => {
    const m = /^([^!=]+)(==|!=|=)(.*)$/.exec(part);
    if (m === null) throw new Error(`invalid field selector: ${part}`);
    return { path: m[1], op: m[2] === '!=' ? '!=' : '=', value: m[3] };
  });
}

/** Whether `labels` satisfy every requirement of a parsed label selector (kube-apiserver's filtering). */
export function matchesSelector(reqs: readonly Requirement[], labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  for (const r of reqs) {
    const has = Object.prototype.hasOwnProperty.call(l, r.key);
    const v = l[r.key];
    switch (r.op) {
      case 'exists': if (!has) return false; break;
      case '!': if (has) return false; break;
      case '=': case '==': if (!has || v !== r.values[0]) return false; break;
      case '!=': if (has && v === r.values[0]) return false; break;
      case 'in': if (!has || !r.values.includes(v)) return false; break;
      case 'notin': if (has && r.values.includes(v)) return false; break;
    }
  }
  return true;
}

function fieldsMatch(reqs: FieldReq[], o: KObject): boolean {
  for (const r of reqs) {
    const v = getPath(o, r.path);
    if (r.op === '=' ? v !== r.value : v === r.value) return false;
  }
  return true;
}

export class K8sApiServer {
  readonly opts: Required<ServerOptions>;
  /** resource name → key → object (as served: with kind, apiVersion and resourceVersion) */
  private store = new Map<string, Map<string, KObject>>();
  private rv: number;
  private history: HistoryEvent[] = [];
  /** lowest rv whose successors are all still in history */
  private compactedRv: number;
  private watchers = new Set<Watcher>();
  private server: http.Server | undefined;
  private sockets = new Set<import('node:net').Socket>();
  private dropEvents = 0;
  private failures: { status: number; count: number; match: RegExp | undefined }[] = [];
  private paused = false;
  private pausedQueue: (() => void)[] = [];
  readonly requests: { method: string; url: string; time: number }[] = [];
  port = 0;

  constructor(state: ClusterState = {}, opts: ServerOptions = {}) {
    this.opts = { bookmarkMs: opts.bookmarkMs ?? 1000, history: opts.history ?? 10000, startRv: opts.startRv ?? 1000, verbose: opts.verbose ?? false };
    for (const r of RESOURCES) this.store.set(r.resource, new Map());
    this.rv = this.opts.startRv;
    this.compactedRv = this.rv;
    this.load(state);
  }

  /** Loads a state without producing events (initial contents). */
  private load(state: ClusterState): void {
    for (const r of RESOURCES) {
      for (const o of (state as Record<string, KObject[] | undefined>)[r.resource] ?? []) {
        const obj = this.stamp(structuredClone(o), r, ++this.rv);
        this.store.get(r.resource)!.set(keyOf(r, obj.metadata.namespace, obj.metadata.name), obj);
      }
    }
    this.compactedRv = this.rv;
  }

  private stamp(o: KObject, r: ResourceDef, rv: number): KObject {
    const out: KObject = { kind: r.kind, apiVersion: r.apiVersion, ...o, metadata: { ...o.metadata, resourceVersion: String(rv) } };
    out.kind = r.kind;
    out.apiVersion = r.apiVersion;
    if (!r.namespaced) delete out.metadata.namespace;
    else if (out.metadata.namespace === undefined) out.metadata.namespace = 'default';
    if (out.metadata.uid === undefined) out.metadata.uid = `uid-${r.resource}-${out.metadata.namespace ?? ''}-${out.metadata.name}`;
    return out;
  }

  get resourceVersion(): number { return this.rv; }

  get openWatches(): number { return this.watchers.size; }

  // ---------- writes ----------

  /** Create or replace an object; returns the stored copy. */
  upsert(o: KObject): KObject {
    const r = kindOf(o);
    const m = this.store.get(r.resource)!;
    const key = keyOf(r, r.namespaced ? (o.metadata.namespace ?? 'default') : undefined, o.metadata.name);
    const old = m.get(key);
    const obj = this.stamp(structuredClone(o), r, ++this.rv);
    m.set(key, obj);
    this.emit({ rv: this.rv, type: old ? 'MODIFIED' : 'ADDED', res: r, obj, old });
    return obj;
  }

  delete(kind: string, namespace: string | undefined, name: string): boolean {
    const r = BY_KIND.get(kind);
    if (r === undefined) throw new Error(`unknown kind ${kind}`);
    const m = this.store.get(r.resource)!;
    const key = keyOf(r, r.namespaced ? (namespace ?? 'default') : undefined, name);
    const old = m.get(key);
    if (old === undefined) return false;
    m.delete(key);
    const obj = { ...old, metadata: { ...old.metadata, resourceVersion: String(++this.rv) } };
    this.emit({ rv: this.rv, type: 'DELETED', res: r, obj, old });
    return true;
  }

  /** Replace everything with `state`: unchanged objects stay, others become events. */
  reset(state: ClusterState): void {
    for (const r of RESOURCES) {
      const want = new Map<string, KObject>();
      for (const o of (state as Record<string, KObject[] | undefined>)[r.resource] ?? []) {
        const withKind = { ...o, kind: r.kind };
        want.set(keyOf(r, r.namespaced ? (o.metadata.namespace ?? 'default') : undefined, o.metadata.name), withKind);
      }
      const m = this.store.get(r.resource)!;
      for (const [k, old] of [...m]) if (!want.has(k)) this.delete(r.kind, old.metadata.namespace, old.metadata.name);
      for (const [k, o] of want) {
        const cur = m.get(k);
        if (cur !== undefined && sameContent(cur, o)) continue;
        this.upsert(o);
      }
    }
  }

  /** The current state in the state-file shape. */
  snapshot(): ClusterState {
    const out: Record<string, KObject[]> = {};
    for (const r of RESOURCES) out[r.resource] = [...this.store.get(r.resource)!.values()];
    return out as ClusterState;
  }

  /** Forget the event history: watches resuming from an older resourceVersion get 410 Expired. */
  compact(): void {
    this.history = [];
    this.compactedRv = this.rv;
  }

  /** End every open watch (the chunked body finishes, as on a server-side timeout). */
  closeWatches(): void {
    for (const w of [...this.watchers]) w.end();
  }

  /** The next `n` events are recorded but never sent to currently open watches. */
  dropNextEvents(n: number): void {
    this.dropEvents = n;
  }

  /** The next `count` requests whose URL matches `match` get `status`. */
  failNext(status: number, count: number, match?: string): void {
    this.failures.push({ status, count, match: match ? new RegExp(match) : undefined });
  }

  pause(on: boolean): void {
    this.paused = on;
    if (!on) for (const f of this.pausedQueue.splice(0)) f();
  }

  private emit(ev: HistoryEvent): void {
    this.history.push(ev);
    if (this.history.length > this.opts.history) {
      const dropped = this.history.splice(0, this.history.length - this.opts.history);
      this.compactedRv = dropped[dropped.length - 1].rv;
    }
    if (this.dropEvents > 0) {
      this.dropEvents--;
      return;
    }
    for (const w of this.watchers) if (w.res === ev.res) this.deliver(w, ev);
  }

  private deliver(w: Watcher, ev: HistoryEvent): void {
    if (ev.rv <= w.rv) return;
    const inNs = (o: KObject | undefined) => o !== undefined && (w.namespace === undefined || o.metadata.namespace === w.namespace);
    const matches = (o: KObject | undefined) => inNs(o) && matchesSelector(w.labels, o!.metadata.labels) && fieldsMatch(w.fields, o!);
    const now = ev.type === 'DELETED' ? false : matches(ev.obj);
    const before = ev.type === 'ADDED' ? false : matches(ev.old);
    let type: string | undefined;
    if (ev.type === 'DELETED') type = before ? 'DELETED' : undefined;
    else if (now && before) type = 'MODIFIED';
    else if (now) type = 'ADDED';
    else if (before) type = 'DELETED';
    w.rv = ev.rv;
    if (type === undefined) return;
    w.res_.write(JSON.stringify({ type, object: ev.obj }) + '\n');
  }

  // ---------- HTTP ----------

  async start(port = 0, host = '127.0.0.1'): Promise<number> {
    const server = http.createServer((req, res) => { this.handle(req, res); });
    server.keepAliveTimeout = 60_000;
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => { this.sockets.delete(s); });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => { resolve(); });
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
    return this.port;
  }

  /** Stop abruptly: every connection is destroyed (as when the process is killed). */
  async stop(): Promise<void> {
    for (const w of [...this.watchers]) {
      if (w.timer) clearInterval(w.timer);
      this.watchers.delete(w);
    }
    for (const s of this.sockets) s.destroy();
    const srv = this.server;
    this.server = undefined;
    if (srv) await new Promise<void>((resolve) => { srv.close(() => { resolve(); }); });
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const run = () => {
      const url = new URL(req.url ?? '/', 'http://x');
      this.requests.push({ method: req.method ?? 'GET', url: req.url ?? '/', time: Date.now() });
      if (this.requests.length > 20000) this.requests.splice(0, 10000);
      if (this.opts.verbose) process.stderr.write(`${req.method} ${req.url}\n`);
      if (url.pathname.startsWith('/_admin/')) {
        this.admin(req, res, url);
        return;
      }
      for (const f of this.failures) {
        if (f.count > 0 && (f.match === undefined || f.match.test(req.url ?? ''))) {
          f.count--;
          this.error(res, f.status, REASONS[f.status] ?? 'InternalError', `injected failure ${f.status}`);
          return;
        }
      }
      this.failures = this.failures.filter((f) => f.count > 0);
      if (req.method === 'GET') this.get(req, res, url);
      else this.write(req, res, url);
    };
    if (this.paused && !(req.url ?? '').startsWith('/_admin/')) this.pausedQueue.push(run);
    else run();
  }

  private error(res: http.ServerResponse, code: number, reason: string, message: string): void {
    res.writeHead(code, { 'Content-Type': 'application/json' });
    res.end(statusBody(code, reason, message));
  }

  private json(res: http.ServerResponse, body: unknown, code = 200): void {
    const text = JSON.stringify(body);
    res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  }

  /** Which resource (and namespace / name) a path names, or undefined. */
  private route(path: string): { res: ResourceDef; namespace?: string; name?: string } | undefined {
    for (const r of RESOURCES) {
      if (!path.startsWith(r.prefix + '/')) continue;
      const rest = path.slice(r.prefix.length + 1).split('/').filter(Boolean);
      if (rest[0] === 'watch') rest.shift(); // deprecated watch paths
      if (rest[0] === r.resource) {
        if (rest.length === 1) return { res: r };
        if (rest.length === 2 && !r.namespaced) return { res: r, name: rest[1] };
      }
      if (r.namespaced && rest[0] === 'namespaces' && rest[2] === r.resource) {
        if (rest.length === 3) return { res: r, namespace: rest[1] };
        if (rest.length === 4) return { res: r, namespace: rest[1], name: rest[3] };
      }
    }
    return undefined;
  }

  private discovery(path: string): unknown {
    if (path === '/version' || path === '/version/') {
      return { major: '1', minor: '34', gitVersion: 'v1.34.0-nodens-test', gitCommit: '0000000', gitTreeState: 'clean', buildDate: '2025-01-01T00:00:00Z', goVersion: 'go1.24', compiler: 'gc', platform: 'linux/amd64' };
    }
    if (path === '/api') return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1' }] };
    if (path === '/apis') {
      const groups = new Map<string, string>();
      for (const r of RESOURCES) if (r.prefix.startsWith('/apis/')) groups.set(r.apiVersion.split('/')[0], r.apiVersion.split('/')[1]);
      return {
        kind: 'APIGroupList', apiVersion: 'v1',
        groups: [...groups].map(([g, v]) => ({ name: g, versions: [{ groupVersion: `${g}/${v}`, version: v }], preferredVersion: { groupVersion: `${g}/${v}`, version: v } })),
      };
    }
    const rs = RESOURCES.filter((r) => r.prefix === path);
    if (rs.length > 0) {
      return {
        kind: 'APIResourceList', apiVersion: 'v1', groupVersion: rs[0].apiVersion,
        resources: rs.map((r) => ({ name: r.resource, singularName: r.kind.toLowerCase(), namespaced: r.namespaced, kind: r.kind, verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] })),
      };
    }
    return undefined;
  }

  private get(req: http.IncomingMessage, res: http.ServerResponse, url: URL): void {
    const d = this.discovery(url.pathname);
    if (d !== undefined) {
      this.json(res, d);
      return;
    }
    const rt = this.route(url.pathname);
    if (rt === undefined) {
      this.error(res, 404, 'NotFound', 'the server could not find the requested resource');
      return;
    }
    const q = url.searchParams;
    let labels: Requirement[];
    let fields: FieldReq[];
    try {
      labels = parseSelector(q.get('labelSelector') ?? '');
      fields = parseFieldSelector(q.get('fieldSelector'));
    } catch (e) {
      this.error(res, 400, 'BadRequest', (e as Error).message);
      return;
    }
    if (rt.name !== undefined) {
      const o = this.store.get(rt.res.resource)!.get(keyOf(rt.res, rt.namespace, rt.name));
      if (o === undefined) this.error(res, 404, 'NotFound', `${rt.res.resource} "${rt.name}" not found`);
      else this.json(res, o);
      return;
    }
    const watch = q.get('watch');
    if (watch === 'true' || watch === '1') this.watch(req, res, rt.res, rt.namespace, labels, fields, q);
    else this.list(res, rt.res, rt.namespace, labels, fields, q);
  }

  private select(r: ResourceDef, namespace: string | undefined, labels: Requirement[], fields: FieldReq[]): KObject[] {
    const out: KObject[] = [];
    for (const o of this.store.get(r.resource)!.values()) {
      if (namespace !== undefined && o.metadata.namespace !== namespace) continue;
      if (!matchesSelector(labels, o.metadata.labels) || !fieldsMatch(fields, o)) continue;
      out.push(o);
    }
    out.sort((a, b) => keyOf(r, a.metadata.namespace, a.metadata.name) < keyOf(r, b.metadata.namespace, b.metadata.name) ? -1 : 1);
    return out;
  }

  private list(res: http.ServerResponse, r: ResourceDef, namespace: string | undefined, labels: Requirement[], fields: FieldReq[], q: URLSearchParams): void {
    const rvMatch = q.get('resourceVersionMatch');
    const rvParam = q.get('resourceVersion');
    if (rvMatch === 'Exact' && rvParam !== String(this.rv)) {
      this.error(res, 410, 'Expired', `too old resource version: ${rvParam ?? ''} (${this.rv})`);
      return;
    }
    let items: KObject[];
    let listRv = this.rv;
    let offset = 0;
    const cont = q.get('continue');
    if (cont) {
      try {
        const t = JSON.parse(Buffer.from(cont, 'base64').toString()) as { rv: number; offset: number };
        if (t.rv !== this.rv) {
          this.error(res, 410, 'Expired', 'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.');
          return;
        }
        listRv = t.rv;
        offset = t.offset;
      } catch {
        this.error(res, 400, 'BadRequest', 'invalid continue token');
        return;
      }
    }
    items = this.select(r, namespace, labels, fields);
    const limit = Number(q.get('limit') ?? '0');
    let next: string | undefined;
    if (limit > 0 && items.length - offset > limit) {
      next = Buffer.from(JSON.stringify({ rv: listRv, offset: offset + limit })).toString('base64');
      items = items.slice(offset, offset + limit);
    } else if (offset > 0) {
      items = items.slice(offset);
    }
    const metadata: Record<string, unknown> = { resourceVersion: String(listRv) };
    if (next !== undefined) metadata.continue = next;
    // Items of a list carry no kind/apiVersion on real servers.
    const stripped = items.map((o) => { const { kind: _k, apiVersion: _a, ...rest } = o; return rest; });
    const body = JSON.stringify({ kind: r.listKind, apiVersion: r.apiVersion, metadata, items: stripped });
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  }

  private watch(req: http.IncomingMessage, res: http.ServerResponse, r: ResourceDef, namespace: string | undefined, labels: Requirement[], fields: FieldReq[], q: URLSearchParams): void {
    const sendInitial = q.get('sendInitialEvents');
    const rvMatch = q.get('resourceVersionMatch');
    const rvParam = q.get('resourceVersion') ?? '';
    if (sendInitial !== null && rvMatch !== 'NotOlderThan') {
      this.error(res, 422, 'Invalid', 'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan');
      return;
    }
    if (sendInitial === null && rvMatch !== null && rvMatch !== '') {
      this.error(res, 422, 'Invalid', 'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided');
      return;
    }
    const bookmarks = q.get('allowWatchBookmarks') === 'true';
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked', 'Cache-Control': 'no-cache, private' });
    res.flushHeaders();
    let timeout: NodeJS.Timeout | undefined;
    const w: Watcher = {
      res: r, namespace, labels, fields, bookmarks, res_: res, rv: this.rv, timer: undefined,
      end: () => {
        if (w.timer) clearInterval(w.timer);
        if (timeout) clearTimeout(timeout);
        this.watchers.delete(w);
        if (!res.writableEnded) res.end();
      },
    };
    const send = (type: string, object: unknown) => { res.write(JSON.stringify({ type, object }) + '\n'); };
    const initial = sendInitial === 'true' || (sendInitial === null && (rvParam === '' || rvParam === '0'));
    if (!initial) {
      const from = Number(rvParam);
      if (!Number.isFinite(from) || from < this.compactedRv || from > this.rv) {
        send('ERROR', JSON.parse(statusBody(410, 'Expired', `too old resource version: ${rvParam} (${this.compactedRv})`)));
        res.end();
        return;
      }
      w.rv = from;
      for (const ev of this.history) if (ev.res === r && ev.rv > from) this.deliver(w, ev);
      w.rv = this.rv;
    } else {
      if (sendInitial === 'true' && rvParam !== '' && rvParam !== '0') {
        const from = Number(rvParam);
        if (!Number.isFinite(from) || from > this.rv) {
          send('ERROR', JSON.parse(statusBody(410, 'Expired', `too old resource version: ${rvParam} (${this.compactedRv})`)));
          res.end();
          return;
        }
      }
      for (const o of this.select(r, namespace, labels, fields)) send('ADDED', o);
      if (sendInitial === 'true') {
        send('BOOKMARK', { kind: r.kind, apiVersion: r.apiVersion, metadata: { resourceVersion: String(this.rv), annotations: { 'k8s.io/initial-events-end': 'true' } } });
      }
      w.rv = this.rv;
    }
    this.watchers.add(w);
    if (bookmarks && this.opts.bookmarkMs > 0) {
      w.timer = setInterval(() => {
        // Every event up to the global version has been offered to this watch already.
        w.rv = this.rv;
        send('BOOKMARK', { kind: r.kind, apiVersion: r.apiVersion, metadata: { resourceVersion: String(w.rv) } });
      }, this.opts.bookmarkMs);
    }
    const ts = Number(q.get('timeoutSeconds') ?? '0');
    if (ts > 0) timeout = setTimeout(() => { w.end(); }, ts * 1000);
    req.on('close', () => { w.end(); });
  }

  private readBody(req: http.IncomingMessage): Promise<string> {
    return new Promise((resolve, reject) => {
      let s = '';
      req.setEncoding('utf8');
      req.on('data', (d: string) => { s += d; });
      req.on('end', () => { resolve(s); });
      req.on('error', reject);
    });
  }

  private write(req: http.IncomingMessage, res: http.ServerResponse, url: URL): void {
    const rt = this.route(url.pathname);
    if (rt === undefined) {
      this.error(res, 404, 'NotFound', 'the server could not find the requested resource');
      return;
    }
    void this.readBody(req).then((body) => {
      if (req.method === 'DELETE' && rt.name !== undefined) {
        const m = this.store.get(rt.res.resource)!;
        const o = m.get(keyOf(rt.res, rt.namespace, rt.name));
        if (o === undefined || !this.delete(rt.res.kind, rt.namespace, rt.name)) {
          this.error(res, 404, 'NotFound', `${rt.res.resource} "${rt.name}" not found`);
          return;
        }
        this.json(res, o);
        return;
      }
      if (req.method === 'POST' || req.method === 'PUT') {
        const o = JSON.parse(body) as KObject;
        o.kind = rt.res.kind;
        if (rt.namespace !== undefined) o.metadata.namespace = rt.namespace;
        if (req.method === 'POST' && this.store.get(rt.res.resource)!.has(keyOf(rt.res, rt.res.namespaced ? (o.metadata.namespace ?? 'default') : undefined, o.metadata.name))) {
          this.error(res, 409, 'AlreadyExists', `${rt.res.resource} "${o.metadata.name}" already exists`);
          return;
        }
        this.json(res, this.upsert(o), req.method === 'POST' ? 201 : 200);
        return;
      }
      this.error(res, 405, 'MethodNotAllowed', 'method not allowed');
    }, (e: unknown) => { this.error(res, 400, 'BadRequest', String(e)); });
  }

  private admin(req: http.IncomingMessage, res: http.ServerResponse, url: URL): void {
    void this.readBody(req).then((body) => {
      const arg = body ? JSON.parse(body) as Record<string, unknown> : {};
      switch (url.pathname) {
        case '/_admin/apply': {
          for (const o of (arg.upsert as KObject[] | undefined) ?? []) this.upsert(o);
          for (const d of (arg.delete as { kind: string; namespace?: string; name: string }[] | undefined) ?? []) this.delete(d.kind, d.namespace, d.name);
          break;
        }
        case '/_admin/reset': this.reset(arg as ClusterState); break;
        case '/_admin/compact': this.compact(); break;
        case '/_admin/close-watches': this.closeWatches(); break;
        case '/_admin/drop-events': this.dropNextEvents(Number(arg.count ?? 1)); break;
        case '/_admin/fail': this.failNext(Number(arg.status ?? 500), Number(arg.count ?? 1), arg.match as string | undefined); break;
        case '/_admin/pause': this.pause(arg.on !== false); break;
        case '/_admin/requests': this.json(res, this.requests); return;
        case '/_admin/stats': this.json(res, { resourceVersion: this.rv, watches: this.watchers.size }); return;
        case '/_admin/state': this.json(res, this.snapshot()); return;
        default: this.error(res, 404, 'NotFound', 'unknown admin path'); return;
      }
      this.json(res, { resourceVersion: this.rv });
    }, (e: unknown) => { this.error(res, 400, 'BadRequest', String(e)); });
  }
}

function sameContent(a: KObject, b: KObject): boolean {
  const strip = (o: KObject) => JSON.stringify({ ...o, kind: undefined, apiVersion: undefined, metadata: { ...o.metadata, resourceVersion: undefined, uid: undefined, namespace: o.metadata.namespace ?? 'default' } });
  return strip(a) === strip(b);
}

/** Reads a state file (JSON). */
export function readState(file: string): ClusterState {
  return JSON.parse(readFileSync(file, 'utf8')) as ClusterState;
}

/** A kubeconfig (YAML-compatible JSON) pointing at `server` with a dummy bearer token. */
export function kubeconfigFor(server: string, context = 'nodens-test'): string {
  return JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': context,
    clusters: [{ name: 'test', cluster: { server } }],
    users: [{ name: 'test', user: { token: 'test-token' } }],
    contexts: [{ name: context, context: { cluster: 'test', user: 'test' } }],
  }, null, 2) + '\n';
}

async function main(argv: string[]): Promise<void> {
  let state: ClusterState = {};
  let port = 0;
  const opts: ServerOptions = {};
  let kubeconfigOut: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--state') state = readState(argv[++i]);
    else if (a === '--port') port = Number(argv[++i]);
    else if (a === '--bookmark-ms') opts.bookmarkMs = Number(argv[++i]);
    else if (a === '--history') opts.history = Number(argv[++i]);
    else if (a === '--start-rv') opts.startRv = Number(argv[++i]);
    else if (a === '--kubeconfig') kubeconfigOut = argv[++i];
    else if (a === '-v') opts.verbose = true;
    else throw new Error(`unknown flag ${a}`);
  }
  const s = new K8sApiServer(state, opts);
  const p = await s.start(port);
  if (kubeconfigOut !== undefined) {
    const { writeFileSync } = await import('node:fs');
    writeFileSync(kubeconfigOut, kubeconfigFor(`http://127.0.0.1:${p}`));
  }
  process.stdout.write(`k8s-api listening on http://127.0.0.1:${p} resourceVersion=${s.resourceVersion}\n`);
  const stop = () => { void s.stop().then(() => { process.exit(0); }); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).catch((e: unknown) => {
    process.stderr.write(`${String((e as Error).stack ?? e)}\n`);
    process.exit(1);
  });
}
