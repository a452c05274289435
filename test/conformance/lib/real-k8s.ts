// The conformance fixtures (test/k8s-api state files) loaded into a real kube-apiserver with kubectl, so that the
// kubernetes cases run once against the in-repo test API server and once against the real one with the same
// cluster content.
//
// What a real cluster needs beyond the state file:
// - Service IPs: the API server allocates only from its service CIDRs. It starts dual-stack with 10.96.0.0/16
//   (its own default/kubernetes service gets 10.96.0.1, as in the fixture) and 1234:abcd::/112; a ServiceCIDR
//   object adds 10.0.0.0/16 (the fixture's testns/other services). The allocator treats a ServiceCIDR as ready
//   when no controller-manager has set its condition.
// - Services carry ipFamilies/ipFamilyPolicy matching their clusterIPs (the API server refuses an IPv6 or a
//   dual-stack clusterIPs list under the default SingleStack IPv4 policy).
// - EndpointSlices get endpointslice.kubernetes.io/managed-by, so that no endpointslice controller would take
//   them for its own; none runs here anyway (no controller-manager).
// - Pods get a container (required) and their status (podIP, phase) through the status subresource, as a kubelet
//   writes it; Service load-balancer addresses likewise, as a cloud controller writes them.
// - ServiceImports need their CRD (multicluster.x-k8s.io/v1alpha1), established before the objects.
// - The API server writes no endpoints for default/kubernetes (--endpoint-reconciler-type=none): the fixture's
//   EndpointSlice for it is the only one.
// Objects a real API server refuses (a non-headless ClusterIP Service without ports, an unnamed port among a
// Service's several: neither can exist in a cluster) are left out and named, so the harness can say which queries see a smaller cluster there.

import https from 'node:https';
import { readFileSync } from 'node:fs';
import { startKubeApiServer, type KubeApiServer } from '../../helpers/kube-apiserver.ts';

interface KObject {
  kind?: string;
  apiVersion?: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}

type State = Partial<Record<'namespaces' | 'services' | 'endpointslices' | 'pods' | 'serviceimports' | 'nodes' | 'endpoints', KObject[]>>;

export const SERVICE_CIDRS = '10.96.0.0/16,1234:abcd::/112';
const EXTRA_SERVICE_CIDR = '10.0.0.0/16';
const MANAGED_BY = 'nodens-conformance';

const SERVICE_IMPORT_CRD = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'serviceimports.multicluster.x-k8s.io' },
  spec: {
    group: 'multicluster.x-k8s.io',
    scope: 'Namespaced',
    names: { plural: 'serviceimports', singular: 'serviceimport', kind: 'ServiceImport', listKind: 'ServiceImportList', shortNames: ['svcim'] },
    versions: [{
      name: 'v1alpha1', served: true, storage: true,
      schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
    }],
  },
};

/** A state's objects the real API server cannot hold, each with the reason. */
export interface Omitted { object: string; why: string }

export interface Loaded {
  api: KubeApiServer;
  omitted: Omitted[];
}

function strip(o: KObject): KObject {
  const { metadata, ...rest } = o;
  const md: KObject['metadata'] = { name: metadata.name };
  if (metadata.namespace !== undefined) md.namespace = metadata.namespace;
  if (metadata.labels !== undefined) md.labels = metadata.labels;
  if (metadata.annotations !== undefined) md.annotations = metadata.annotations;
  return { ...rest, metadata: md };
}

const isV6 = (ip: string) => ip.includes(':');

function service(o: KObject): KObject {
  const s = strip(o);
  delete s.status;
  const spec = { ...(s.spec as Record<string, unknown>) };
  const ips = (spec.clusterIPs as string[] | undefined) ?? (typeof spec.clusterIP === 'string' ? [spec.clusterIP] : []);
  if (ips.length > 0 && ips[0] !== 'None' && spec.ipFamilies === undefined) {
    spec.ipFamilies = ips.map((ip) => (isV6(ip) ? 'IPv6' : 'IPv4'));
    spec.ipFamilyPolicy = ips.length > 1 ? 'RequireDualStack' : 'SingleStack';
  }
  return { apiVersion: 'v1', kind: 'Service', ...s, spec };
}

/** The manifests for a state file's content, the status each object needs afterwards, and what was left out. */
export function manifestsFor(state: State): { crds: KObject[]; objects: KObject[]; statuses: { path: string; status: unknown }[]; omitted: Omitted[] } {
  const objects: KObject[] = [];
  const statuses: { path: string; status: unknown }[] = [];
  const omitted: Omitted[] = [];
  objects.push({ apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: 'conformance-fixture' }, spec: { cidrs: [EXTRA_SERVICE_CIDR] } });
  for (const n of state.namespaces ?? []) objects.push({ apiVersion: 'v1', kind: 'Namespace', ...strip(n) });
  for (const o of state.services ?? []) {
    const spec = o.spec as { type?: string; clusterIP?: string; ports?: unknown[] };
    const ref = `Service ${o.metadata.namespace ?? ''}/${o.metadata.name}`;
    if (spec.type !== 'ExternalName' && spec.clusterIP !== 'None' && (spec.ports ?? []).length === 0) {
      omitted.push({ object: ref, why: 'spec.ports is required for a non-headless Service' });
      continue;
    }
    const svc = service(o);
    const ports = (svc.spec as { ports?: { name?: string; port: number }[] }).ports ?? [];
    if (ports.length > 1) {
      for (const p of ports.filter((x) => (x.name ?? '') === '')) {
        omitted.push({ object: `${ref} port ${p.port}`, why: 'a Service with several ports needs a name on each' });
      }
      (svc.spec as { ports: unknown[] }).ports = ports.filter((x) => (x.name ?? '') !== '');
    }
    objects.push(svc);
    if (o.status !== undefined) statuses.push({ path: `/api/v1/namespaces/${o.metadata.namespace}/services/${o.metadata.name}/status`, status: o.status });
  }
  for (const o of state.endpointslices ?? []) {
    const e = strip(o);
    e.metadata.labels = { ...e.metadata.labels, 'endpointslice.kubernetes.io/managed-by': MANAGED_BY };
    objects.push({ apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', ...e });
  }
  for (const o of state.pods ?? []) {
    const p = strip(o);
    delete p.status;
    const spec = (p.spec as Record<string, unknown> | undefined) ?? {};
    objects.push({ apiVersion: 'v1', kind: 'Pod', ...p, spec: { containers: [{ name: 'c', image: 'registry.invalid/none' }], ...spec } });
    if (o.status !== undefined) statuses.push({ path: `/api/v1/namespaces/${o.metadata.namespace}/pods/${o.metadata.name}/status`, status: o.status });
  }
  for (const o of state.serviceimports ?? []) objects.push({ apiVersion: 'multicluster.x-k8s.io/v1alpha1', kind: 'ServiceImport', ...strip(o) });
  for (const kind of ['nodes', 'endpoints'] as const) {
    for (const o of state[kind] ?? []) omitted.push({ object: `${kind} ${o.metadata.name}`, why: 'not loaded into the real API server (no conformance case reads them)' });
  }
  return { crds: (state.serviceimports ?? []).length > 0 ? [SERVICE_IMPORT_CRD] : [], objects, statuses, omitted };
}

function patch(api: KubeApiServer, urlPath: string, body: unknown): Promise<void> {
  const ca = readFileSync(api.caFile);
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = https.request(`${api.url}${urlPath}`, {
      method: 'PATCH', ca, timeout: 30_000,
      headers: { Authorization: `Bearer ${api.token}`, 'Content-Type': 'application/merge-patch+json', 'Content-Length': Buffer.byteLength(data) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { text += d; });
      res.on('end', () => {
        if (res.statusCode === 200) resolve();
        else reject(new Error(`PATCH ${urlPath}: ${res.statusCode} ${text}`));
      });
    });
    req.on('timeout', () => { req.destroy(new Error(`PATCH ${urlPath}: timed out`)); });
    req.on('error', reject);
    req.end(data);
  });
}

const asList = (items: KObject[]) => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });

/** Starts a real kube-apiserver and loads the state file into it. */
export async function startRealCluster(stateFile: string): Promise<Loaded> {
  const state = JSON.parse(readFileSync(stateFile, 'utf8')) as State;
  const m = manifestsFor(state);
  const api = await startKubeApiServer({ extraArgs: ['--service-cluster-ip-range', SERVICE_CIDRS, '--endpoint-reconciler-type', 'none'] });
  try {
    if (m.crds.length > 0) {
      await api.kubectl(['apply', '-f', '-'], { input: asList(m.crds) });
      await api.kubectl(['wait', '--for', 'condition=Established', '--timeout', '60s', ...m.crds.map((c) => `crd/${c.metadata.name}`)]);
    }
    // Namespaces and the service CIDR before the objects in them (one apply does not order them).
    const first = m.objects.filter((o) => o.kind === 'Namespace' || o.kind === 'ServiceCIDR');
    await api.kubectl(['apply', '-f', '-'], { input: asList(first) });
    await api.kubectl(['apply', '-f', '-'], { input: asList(m.objects.filter((o) => !first.includes(o))) });
    for (const s of m.statuses) await patch(api, s.path, { status: s.status });
  } catch (e) {
    await api.stop();
    throw e;
  }
  return { api, omitted: m.omitted };
}
