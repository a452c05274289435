import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseRequest, INVALID } from './parse.ts';
import { parseSelector } from './selector.ts';
import { Controller } from './controller.ts';
import { Kubernetes, endpointHostname, type KubernetesOptions } from './kubernetes.ts';
import { Fall } from '../pkg/fall.ts';
import { Request } from '../../core/request.ts';
import { newQuery } from '../../wire/message.ts';
import { formatRecord } from '../../wire/text.ts';
import type { Message } from '../../wire/types.ts';

test('parseRequest: the grammar read right to left', () => {
  const z = 'cluster.local.';
  assert.deepEqual(parseRequest('cluster.local.', z, false, false), { port: '', protocol: '', endpoint: '', cluster: '', zone: '', zoneMode: '', service: '', namespace: '', podOrSvc: '' });
  assert.equal(parseRequest('foo.cluster.local.', z, false, false), INVALID);
  assert.equal(parseRequest('a.b.c.svc1.ns.svc.cluster.local.', z, false, false), INVALID);
  const srv = parseRequest('_http._tcp.svc1.ns.svc.cluster.local.', z, false, false);
  assert.ok(srv !== INVALID);
  assert.equal(srv.port, 'http');
  assert.equal(srv.protocol, 'tcp');
  const nounder = parseRequest('http.tcp.svc1.ns.svc.cluster.local.', z, false, false);
  assert.ok(nounder !== INVALID && nounder.port === 'http');
  const ep = parseRequest('ep1.svc1.ns.svc.cluster.local.', z, false, false);
  assert.ok(ep !== INVALID && ep.endpoint === 'ep1' && ep.service === 'svc1' && ep.namespace === 'ns');
  const mc = parseRequest('ep1.c1.svc1.ns.svc.clusterset.local.', 'clusterset.local.', true, false);
  assert.ok(mc !== INVALID && mc.cluster === 'c1' && mc.endpoint === 'ep1');
  const pod = parseRequest('1-2-3-4.ns.pod.cluster.local.', z, false, false);
  assert.ok(pod !== INVALID && pod.podOrSvc === 'pod' && pod.service === '1-2-3-4');
});

test('label selectors: equality and set based', () => {
  assert.deepEqual(parseSelector('environment in (staging, qa),application=nginx,!legacy').map((r) => r.op), ['in', '=', '!']);
  assert.throws(() => parseSelector('a=b c=d'), /found 'c', expected: ',' or 'end of string'/);
  assert.throws(() => parseSelector('a in b'));
});

test('endpoint hostnames: hostname, pod name, dashed IP', () => {
  const a = { ip: '10.0.0.1', hostname: '', targetRefName: 'pod-a', nodeName: '', zone: '' };
  assert.equal(endpointHostname(a, false), '10-0-0-1');
  assert.equal(endpointHostname(a, true), 'pod-a');
  assert.equal(endpointHostname({ ...a, hostname: 'h' }, true), 'h');
  assert.equal(endpointHostname({ ...a, ip: 'fd00::' }, false), 'fd00--0');
  assert.equal(endpointHostname({ ...a, ip: '5678:abcd::1' }, false), '5678-abcd--1');
});

function handler(extra: Partial<KubernetesOptions> = {}) {
  const c = new Controller();
  const ns = (name: string) => ({ metadata: { name } });
  c.namespaces.add(ns('prod').metadata.name);
  c.upsertService({ metadata: { name: 'api', namespace: 'prod', resourceVersion: '1' }, spec: { clusterIP: '10.96.5.5', clusterIPs: ['10.96.5.5'], ports: [{ name: 'http', protocol: 'TCP', port: 80 }, { protocol: 'TCP', port: 9090 }] } });
  c.upsertService({ metadata: { name: 'web', namespace: 'prod', resourceVersion: '2' }, spec: { clusterIP: 'None', clusterIPs: ['None'], ports: [{ name: 'http', protocol: 'TCP', port: 8080 }] } });
  c.upsertSlice({
    metadata: { name: 'web-1', namespace: 'prod', resourceVersion: '3', labels: { 'kubernetes.io/service-name': 'web' } },
    endpoints: [{ addresses: ['10.244.1.7'], hostname: 'web-0', conditions: { ready: true } }, { addresses: ['10.244.2.9'] }, { addresses: ['10.244.3.3'], conditions: { ready: false } }],
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
  });
  const fall = new Fall();
  const k = new Kubernetes(undefined, {
    zones: ['cluster.local.', 'in-addr.arpa.'], primaryZoneIndex: 0, ttl: 5, podMode: 'disabled', endpointNameMode: false,
    namespaces: [], fall, ignoreEmptyService: false, multiclusterZones: [], zonal: false, localIPs: () => ['127.0.0.9'], upstream: undefined, autoPathSearch: [], ...extra,
  }, c);
  return { c, k };
}

async function ask(k: Kubernetes, name: string, type: number): Promise<{ rcode: number; answer: string[]; ns: string[]; extra: string[] }> {
  const q = newQuery(name, type);
  const req = new Request(q, new Uint8Array(0), 'udp', '127.0.0.1', 1, '127.0.0.1', 53, 'dns://:53', 0n);
  let out: Message | undefined;
  const rc = await k.serveDNS(req, { writeMsg: (m) => { out = m; }, writeWire: () => { throw new Error('unexpected'); } });
  if (out === undefined) return { rcode: rc, answer: [], ns: [], extra: [] };
  return { rcode: out.rcode, answer: out.answer.map(formatRecord), ns: out.authority.map(formatRecord), extra: out.additional.map(formatRecord) };
}

test('handler: the spec worked examples', async () => {
  const { k, c } = handler();
  assert.equal(k.ready(), false); // no reflector ever synced
  c.hasSynced = () => true;
  assert.deepEqual((await ask(k, 'api.prod.svc.cluster.local.', 1)).answer, ['api.prod.svc.cluster.local.\t5\tIN\tA\t10.96.5.5']);
  const srv = await ask(k, 'api.prod.svc.cluster.local.', 33);
  assert.deepEqual(srv.answer, ['api.prod.svc.cluster.local.\t5\tIN\tSRV\t0 50 80 api.prod.svc.cluster.local.', 'api.prod.svc.cluster.local.\t5\tIN\tSRV\t0 50 9090 api.prod.svc.cluster.local.']);
  assert.deepEqual(srv.extra, ['api.prod.svc.cluster.local.\t5\tIN\tA\t10.96.5.5']);
  const h = await ask(k, '_http._tcp.web.prod.svc.cluster.local.', 33);
  assert.deepEqual(h.answer.sort(), ['_http._tcp.web.prod.svc.cluster.local.\t5\tIN\tSRV\t0 50 8080 10-244-2-9.web.prod.svc.cluster.local.', '_http._tcp.web.prod.svc.cluster.local.\t5\tIN\tSRV\t0 50 8080 web-0.web.prod.svc.cluster.local.']);
  const nodata = await ask(k, 'api.prod.svc.cluster.local.', 28);
  assert.equal(nodata.rcode, 0);
  assert.equal(nodata.answer.length, 0);
  assert.match(nodata.ns[0], /^cluster\.local\.\t5\tIN\tSOA\tns\.dns\.cluster\.local\. hostmaster\.cluster\.local\. \d+ 7200 1800 86400 5$/);
  assert.equal((await ask(k, 'nope.prod.svc.cluster.local.', 1)).rcode, 3);
  assert.deepEqual((await ask(k, '7.1.244.10.in-addr.arpa.', 12)).answer, ['7.1.244.10.in-addr.arpa.\t5\tIN\tPTR\tweb-0.web.prod.svc.cluster.local.']);
  assert.equal((await ask(k, '3.3.244.10.in-addr.arpa.', 12)).rcode, 3);
  assert.deepEqual((await ask(k, 'dns-version.cluster.local.', 16)).answer, ['dns-version.cluster.local.\t28800\tIN\tTXT\t"1.1.0"']);
  assert.deepEqual((await ask(k, 'Api.Prod.Svc.Cluster.Local.', 1)).answer, ['Api.Prod.Svc.Cluster.Local.\t5\tIN\tA\t10.96.5.5']);
  assert.match((await ask(k, 'Nope.Cluster.Local.', 1)).ns[0], /^Cluster\.Local\.\t5\tIN\tSOA\tns\.dns\.Cluster\.Local\. hostmaster\.Cluster\.Local\./);
  assert.deepEqual((await ask(k, 'ns.dns.cluster.local.', 1)).answer, ['ns.dns.cluster.local.\t5\tIN\tA\t127.0.0.9']);
  assert.equal(await (async () => { const q = newQuery('x.cluster.local.', 252); const req = new Request(q, new Uint8Array(0), 'tcp', '', 0, '', 0, '', 0n); return k.serveDNS(req, { writeMsg: () => {}, writeWire: () => {} }); })(), 5);
});

test('handler: unsynced turns NXDOMAIN into SERVFAIL with the SOA', async () => {
  const { k } = handler();
  const r = await ask(k, 'nope.prod.svc.cluster.local.', 1);
  assert.equal(r.rcode, 2);
  assert.equal(r.ns.length, 1);
  assert.equal((await ask(k, 'api.prod.svc.cluster.local.', 1)).rcode, 0);
});

test('pods verified: every address of status.podIPs answers, status.podIP alone does not (CoreDNS 1.15.0)', async () => {
  const { c, k } = handler({ podMode: 'verified' });
  c.hasSynced = () => true;
  c.upsertPod({ metadata: { name: 'dual', namespace: 'prod', resourceVersion: '1' }, status: { podIP: '10.244.2.9', podIPs: [{ ip: '10.244.2.9' }, { ip: 'fd00::9' }] } });
  c.upsertPod({ metadata: { name: 'old', namespace: 'prod', resourceVersion: '1' }, status: { podIP: '10.244.2.10' } });
  assert.deepEqual((await ask(k, '10-244-2-9.prod.pod.cluster.local.', 1)).answer, ['10-244-2-9.prod.pod.cluster.local.\t5\tIN\tA\t10.244.2.9']);
  assert.deepEqual((await ask(k, 'fd00--9.prod.pod.cluster.local.', 28)).answer, ['fd00--9.prod.pod.cluster.local.\t5\tIN\tAAAA\tfd00::9']);
  assert.equal((await ask(k, 'fd00--9.other.pod.cluster.local.', 28)).rcode, 3, 'another namespace');
  assert.equal((await ask(k, '10-244-2-10.prod.pod.cluster.local.', 1)).rcode, 3, 'podIP without podIPs');
  // An update that drops an address unindexes it; a deleted pod leaves no address behind.
  c.upsertPod({ metadata: { name: 'dual', namespace: 'prod', resourceVersion: '2' }, status: { podIPs: [{ ip: 'fd00::9' }] } });
  assert.equal((await ask(k, '10-244-2-9.prod.pod.cluster.local.', 1)).rcode, 3);
  assert.equal((await ask(k, 'fd00--9.prod.pod.cluster.local.', 28)).rcode, 0);
  c.removePod('prod/dual');
  assert.equal((await ask(k, 'fd00--9.prod.pod.cluster.local.', 28)).rcode, 3);
});

test('autoPath: a verified pod\'s search path, the host\'s search list, the sentinel (CoreDNS Kubernetes.AutoPath)', () => {
  const from = (ip: string, name: string) => new Request(newQuery(name, 1), undefined, 'udp', ip, 1, '127.0.0.1', 53, 'dns://:53', 0n);
  const { c, k } = handler({ podMode: 'verified', autoPathSearch: ['example.org.'] });
  c.upsertPod({ metadata: { name: 'client', namespace: 'prod', resourceVersion: '9' }, status: { podIP: '10.244.1.50', podIPs: [{ ip: '10.244.1.50' }] } });
  assert.deepEqual(k.autoPath(from('10.244.1.50', 'api.prod.svc.cluster.local.')),
    ['prod.svc.cluster.local.', 'svc.cluster.local.', 'cluster.local.', 'example.org.', '']);
  // Outside the plugin's zones, or from an address that is no pod: no search-pathing.
  assert.equal(k.autoPath(from('10.244.1.50', 'www.example.net.')), undefined);
  assert.equal(k.autoPath(from('10.244.9.9', 'api.prod.svc.cluster.local.')), undefined);
  // Only with `pods verified`.
  const insecure = handler({ podMode: 'insecure' });
  insecure.c.upsertPod({ metadata: { name: 'client', namespace: 'prod', resourceVersion: '9' }, status: { podIP: '10.244.1.50', podIPs: [{ ip: '10.244.1.50' }] } });
  assert.equal(insecure.k.autoPath(from('10.244.1.50', 'api.prod.svc.cluster.local.')), undefined);
  // The root zone gives the short forms.
  const root = handler({ zones: ['.'], podMode: 'verified' });
  root.c.upsertPod({ metadata: { name: 'client', namespace: 'dev', resourceVersion: '9' }, status: { podIP: '10.244.1.51', podIPs: [{ ip: '10.244.1.51' }] } });
  assert.deepEqual(root.k.autoPath(from('10.244.1.51', 'x.y.')), ['dev.svc.', 'svc.', '.', '']);
});

test('metadata: CoreDNS\'s labels for the client pod and the parts of the name', () => {
  const labels = (k: Kubernetes, ip: string, name: string) => {
    const req = new Request(newQuery(name, 1), undefined, 'udp', ip, 1, '127.0.0.1', 53, 'dns://:53', 0n);
    req.beginMetadata();
    k.metadata(req);
    return Object.fromEntries(req.metadataLabels().map((l) => [l, req.metadata(l)]));
  };
  const { c, k } = handler({ podMode: 'verified' });
  c.upsertPod({ metadata: { name: 'client', namespace: 'prod', resourceVersion: '9', labels: { app: 'web', tier: 'front' } }, status: { podIP: '10.244.1.50', podIPs: [{ ip: '10.244.1.50' }] } });
  assert.deepEqual(labels(k, '10.244.1.50', '_http._tcp.api.prod.svc.cluster.local.'), {
    'kubernetes/client-namespace': 'prod', 'kubernetes/client-pod-name': 'client',
    'kubernetes/client-label/app': 'web', 'kubernetes/client-label/tier': 'front',
    'kubernetes/port-name': 'http', 'kubernetes/protocol': 'tcp', 'kubernetes/endpoint': '',
    'kubernetes/service': 'api', 'kubernetes/namespace': 'prod', 'kubernetes/kind': 'svc',
  });
  assert.deepEqual(labels(k, '10.244.9.9', 'web-0.web.prod.svc.cluster.local.'), {
    'kubernetes/port-name': '', 'kubernetes/protocol': '', 'kubernetes/endpoint': 'web-0',
    'kubernetes/service': 'web', 'kubernetes/namespace': 'prod', 'kubernetes/kind': 'svc',
  });
  assert.deepEqual(labels(k, '10.244.9.9', 'a.b.c.d.prod.svc.cluster.local.'), { 'kubernetes/parse-error': 'invalid query name' });
  assert.deepEqual(labels(k, '10.244.1.50', 'www.example.net.'), {
    'kubernetes/client-namespace': 'prod', 'kubernetes/client-pod-name': 'client',
    'kubernetes/client-label/app': 'web', 'kubernetes/client-label/tier': 'front',
  });
  // The client pod only with `pods verified`; `kubernetes/zone` with zonal names.
  const zonal = handler({ podMode: 'insecure', zonal: true });
  zonal.c.upsertPod({ metadata: { name: 'client', namespace: 'prod', resourceVersion: '9' }, status: { podIP: '10.244.1.50' } });
  assert.deepEqual(labels(zonal.k, '10.244.1.50', 'us-east-1a._zone.api.prod.svc.cluster.local.'), {
    'kubernetes/port-name': '', 'kubernetes/protocol': '', 'kubernetes/endpoint': '', 'kubernetes/zone': 'us-east-1a',
    'kubernetes/service': 'api', 'kubernetes/namespace': 'prod', 'kubernetes/kind': 'svc',
  });
});

test('the endpoint IP index: one slice, two slices sharing an IP, updates and removals', () => {
  const c = new Controller();
  const slice = (name: string, svc: string, ips: string[], rv: string) => ({
    metadata: { name, namespace: 'ns', resourceVersion: rv, labels: { 'kubernetes.io/service-name': svc } },
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })),
  });
  const names = (ip: string) => c.slicesByIP(ip).map((s) => s.name);
  c.upsertSlice(slice('a', 'svc-a', ['10.0.0.1', '10.0.0.2', '10.0.0.2'], '1'));
  assert.deepEqual(names('10.0.0.1'), ['a']);
  assert.deepEqual(names('10.0.0.2'), ['a']);
  // The same array for the same lone slice (made once, not per query).
  assert.equal(c.slicesByIP('10.0.0.1'), c.slicesByIP('10.0.0.1'));
  c.upsertSlice(slice('b', 'svc-b', ['10.0.0.2', '10.0.0.3'], '2'));
  assert.deepEqual(names('10.0.0.2'), ['a', 'b']);
  // a moves off 10.0.0.2: b alone there; a's old record leaves the index
  c.upsertSlice(slice('a', 'svc-a', ['10.0.0.1'], '3'));
  assert.deepEqual(names('10.0.0.2'), ['b']);
  assert.deepEqual(names('10.0.0.1'), ['a']);
  c.upsertSlice(slice('a', 'svc-a', ['10.0.0.2'], '4'));
  assert.deepEqual(names('10.0.0.2'), ['b', 'a']);
  assert.deepEqual(names('10.0.0.1'), []);
  c.removeSlice('ns/b');
  assert.deepEqual(names('10.0.0.2'), ['a']);
  assert.deepEqual(names('10.0.0.3'), []);
  c.removeSlice('ns/a');
  assert.deepEqual(names('10.0.0.2'), []);
  // A slice naming no service gives no PTR target.
  c.upsertSlice({ metadata: { name: 'x', namespace: 'ns', resourceVersion: '5' }, endpoints: [{ addresses: ['10.0.0.9'], conditions: {} }] });
  assert.deepEqual(names('10.0.0.9'), []);
});
