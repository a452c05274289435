import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Controller, toService, type RawObject } from './controller.ts';
import { Kubernetes, type KubernetesOptions } from './kubernetes.ts';
import { Fall } from '../pkg/fall.ts';
import { isExternaler, type ExternalEndpoint } from '../pkg/external.ts';
import { Rcode } from '../../wire/constants.ts';

// The services of CoreDNS's plugin/kubernetes/external_test.go and plugin/k8s_external/external_test.go.

function svc(name: string, namespace: string, spec: Record<string, unknown>, status?: Record<string, unknown>): RawObject {
  return { metadata: { name, namespace, resourceVersion: '1' }, spec, ...(status === undefined ? {} : { status }) };
}

const http = [{ name: 'http', protocol: 'TCP', port: 80 }];

function cluster(extra: Partial<KubernetesOptions> = {}): { c: Controller; k: Kubernetes } {
  const c = new Controller();
  for (const ns of ['testns', 'hidden']) c.namespaces.add(ns);
  c.upsertService(svc('svc1', 'testns', { clusterIPs: ['10.0.0.1'], externalIPs: ['1.2.3.4'], ports: http }));
  c.upsertService(svc('svc6', 'testns', { clusterIPs: ['10.0.0.3'], externalIPs: ['1:2::5'], ports: http }));
  c.upsertService(svc('svc11', 'testns', { type: 'LoadBalancer', clusterIPs: ['10.0.0.3'], ports: http }, { loadBalancer: { ingress: [{ ip: '2.3.4.5' }] } }));
  c.upsertService(svc('svc12', 'testns', { type: 'LoadBalancer', clusterIPs: ['10.0.0.3'], ports: http }, { loadBalancer: { ingress: [{ hostname: 'dummy.hostname' }] } }));
  c.upsertService(svc('svc-headless', 'testns', { clusterIPs: ['None'], ports: http }));
  c.upsertService(svc('internal', 'testns', { clusterIPs: ['10.0.0.9'], ports: http }));
  c.upsertService(svc('svc1', 'hidden', { clusterIPs: ['10.0.0.2'], externalIPs: ['1.2.3.4'], ports: http }));
  c.upsertSlice({
    metadata: { name: 'svc-headless', namespace: 'testns', resourceVersion: '1', labels: { 'kubernetes.io/service-name': 'svc-headless' } },
    endpoints: [{ addresses: ['1.2.3.4'], hostname: 'endpoint-svc-0' }, { addresses: ['1.2.3.5'], hostname: 'endpoint-svc-1' }],
    ports: http,
  });
  const k = new Kubernetes(undefined, {
    zones: ['cluster.local.'], primaryZoneIndex: 0, ttl: 5, podMode: 'disabled', endpointNameMode: false,
    namespaces: ['testns'], fall: new Fall(), ignoreEmptyService: false, multiclusterZones: [], zonal: false,
    localIPs: () => ['10.244.0.20'], upstream: undefined, autoPathSearch: [], ...extra,
  }, c);
  return { c, k };
}

const ep = (address: string, target: string, port = 80): ExternalEndpoint => ({ address, port, ttl: 5, target });

test('controller: a Service keeps its external IPs, then its load-balancer ingress (IP, else hostname)', () => {
  const s = toService(svc('lb', 'ns', { type: 'LoadBalancer', clusterIPs: ['10.0.0.1'], externalIPs: ['192.0.2.1'] },
    { loadBalancer: { ingress: [{ ip: '198.51.100.7', hostname: 'ignored.example' }, { hostname: 'lb.example.com' }, {}] } }));
  assert.deepEqual(s.externalIPs, ['192.0.2.1', '198.51.100.7', 'lb.example.com']);
  const plain = toService(svc('plain', 'ns', { clusterIPs: ['10.0.0.2'] }));
  assert.deepEqual(plain.externalIPs, []);
  assert.equal(plain.externalIPs, toService(svc('other', 'ns', { clusterIPs: ['10.0.0.3'] })).externalIPs); // one shared empty list
});

test('external: the services\' external addresses and headless endpoints (external_test.go TestExternal)', () => {
  const { k } = cluster();
  assert.ok(isExternaler(k));
  const z = 'example.org.';
  const ask = (name: string, headless = true) => k.external(name, z, headless);
  assert.deepEqual(ask('svc1.testns.example.org.'), { endpoints: [ep('1.2.3.4', 'svc1.testns.example.org.')], rcode: Rcode.NOERROR });
  assert.deepEqual(ask('svc6.testns.example.org.').endpoints, [ep('1:2::5', 'svc6.testns.example.org.')]);
  assert.deepEqual(ask('_http._tcp.svc1.testns.example.org.').endpoints, [ep('1.2.3.4', 'svc1.testns.example.org.')]);
  assert.deepEqual(ask('http.tcp.svc1.testns.example.org.').endpoints, [ep('1.2.3.4', 'svc1.testns.example.org.')]);
  assert.deepEqual(ask('_https._tcp.svc1.testns.example.org.'), { endpoints: [], rcode: Rcode.NXDOMAIN });
  assert.deepEqual(ask('_http._udp.svc1.testns.example.org.'), { endpoints: [], rcode: Rcode.NXDOMAIN });
  // Load-balancer ingress: an IP, or a hostname (the consumer's CNAME / SRV target).
  assert.deepEqual(ask('svc11.testns.example.org.').endpoints, [ep('2.3.4.5', 'svc11.testns.example.org.')]);
  assert.deepEqual(ask('svc12.testns.example.org.').endpoints, [ep('dummy.hostname', 'svc12.testns.example.org.')]);
  // Headless: the ready endpoints, only with `headless`.
  assert.deepEqual(ask('svc-headless.testns.example.org.').endpoints, [
    ep('1.2.3.4', 'endpoint-svc-0.svc-headless.testns.example.org.'), ep('1.2.3.5', 'endpoint-svc-1.svc-headless.testns.example.org.'),
  ]);
  assert.deepEqual(ask('endpoint-svc-0.svc-headless.testns.example.org.').endpoints, [ep('1.2.3.4', 'endpoint-svc-0.svc-headless.testns.example.org.')]);
  assert.deepEqual(ask('_http._tcp.svc-headless.testns.example.org.').endpoints.length, 2);
  assert.equal(ask('svc-headless.testns.example.org.', false).rcode, Rcode.NXDOMAIN);
  assert.equal(ask('endpoint-svc-9.svc-headless.testns.example.org.').rcode, Rcode.NXDOMAIN);
  // No such service, namespace, or not exposed; a service without external addresses.
  assert.equal(ask('svc0.testns.example.org.').rcode, Rcode.NXDOMAIN);
  assert.equal(ask('svc0.svc-nons.example.org.').rcode, Rcode.NXDOMAIN);
  assert.equal(ask('endpoint-1.svc-nons.testns.example.org.').rcode, Rcode.NXDOMAIN);
  assert.equal(ask('svc1.hidden.example.org.').rcode, Rcode.NXDOMAIN);
  assert.equal(ask('internal.testns.example.org.').rcode, Rcode.NXDOMAIN);
  // The namespace alone is NODATA, a name too long NXDOMAIN, the apex the consumer's own.
  assert.deepEqual(ask('testns.example.org.'), { endpoints: [], rcode: Rcode.NOERROR });
  assert.equal(ask('a.b.c.svc1.testns.example.org.').rcode, Rcode.NXDOMAIN);
  assert.equal(ask('example.org.').rcode, Rcode.SERVFAIL);
  assert.equal(ask('svc1.testns.example.net.').rcode, Rcode.NXDOMAIN);
  // As in CoreDNS, an endpoint label is not read for a service answered from its external addresses.
  assert.deepEqual(ask('anything.svc1.testns.example.org.').endpoints, [ep('1.2.3.4', 'svc1.testns.example.org.')]);
  // The root zone.
  assert.deepEqual(k.external('svc1.testns.', '.', true).endpoints, [ep('1.2.3.4', 'svc1.testns.')]);
});

test('externalReverse: the services with that external address, in exposed namespaces', () => {
  const { k } = cluster();
  assert.deepEqual(k.externalReverse('1.2.3.4', 'example.org.'), ['svc1.testns.example.org.']);
  assert.deepEqual(k.externalReverse('2.3.4.5', 'example.org.'), ['svc11.testns.example.org.']);
  assert.deepEqual(k.externalReverse('10.0.0.1', 'example.org.'), []);
  const all = cluster({ namespaces: [] });
  assert.deepEqual(all.k.externalReverse('1.2.3.4', 'example.org.'), ['svc1.testns.example.org.', 'svc1.hidden.example.org.']);
});

test('externalAddress: the external IPs of the services this server is an endpoint of (ns_test.go TestNsAddrsExternal*)', () => {
  const { c, k } = cluster();
  // Not an endpoint of anything: the server's own addresses.
  assert.deepEqual(k.externalAddress(false), ['10.244.0.20']);
  c.upsertService(svc('dns-service', 'kube-system', { clusterIPs: ['10.0.0.111'], ports: http }));
  c.upsertService(svc('hdls-dns-service', 'kube-system', { clusterIPs: ['None'], ports: http }));
  for (const name of ['dns-service', 'hdls-dns-service']) {
    c.upsertSlice({
      metadata: { name: `${name}-slice1`, namespace: 'kube-system', resourceVersion: '1', labels: { 'kubernetes.io/service-name': name } },
      endpoints: [{ addresses: ['10.244.0.20'] }], ports: http,
    });
  }
  assert.deepEqual(k.externalAddress(false), []); // no external IPs yet
  assert.deepEqual(k.externalAddress(true), ['10.244.0.20']); // the headless service's endpoints
  c.upsertService({ ...svc('dns-service', 'kube-system', { clusterIPs: ['10.0.0.111'], externalIPs: ['1.2.3.4'], ports: http }, { loadBalancer: { ingress: [{ hostname: 'lb.example.com' }] } }), metadata: { name: 'dns-service', namespace: 'kube-system', resourceVersion: '2' } });
  assert.deepEqual(k.externalAddress(false), ['1.2.3.4']); // a hostname is no glue
  assert.deepEqual(k.externalAddress(true), ['1.2.3.4', '10.244.0.20']);
});

test('externalServices: the external zone as CoreDNS\'s ExternalServices lists it, for transfers', () => {
  const { k } = cluster();
  const z = 'example.org.';
  const zone = k.externalServices(z, true);
  const show = (n: { name: string; srvOnly: boolean; endpoints: ExternalEndpoint[] }) =>
    `${n.name}${n.srvOnly ? ' (SRV)' : ''} ${n.endpoints.map((e) => `${e.address}:${e.port}>${e.target}`).join(' ')}`;
  // Every namespace (svc1.hidden too: CoreDNS reads the whole service list), by name then namespace,
  // per address × port the service's name then its port name.
  assert.deepEqual(zone.services.map(show), [
    'svc1.hidden.example.org. 1.2.3.4:80>svc1.hidden.example.org.',
    '_http._tcp.svc1.hidden.example.org. (SRV) 1.2.3.4:80>svc1.hidden.example.org.',
    'svc1.testns.example.org. 1.2.3.4:80>svc1.testns.example.org.',
    '_http._tcp.svc1.testns.example.org. (SRV) 1.2.3.4:80>svc1.testns.example.org.',
    'svc11.testns.example.org. 2.3.4.5:80>svc11.testns.example.org.',
    '_http._tcp.svc11.testns.example.org. (SRV) 2.3.4.5:80>svc11.testns.example.org.',
    'svc12.testns.example.org. dummy.hostname:80>svc12.testns.example.org.',
    '_http._tcp.svc12.testns.example.org. (SRV) dummy.hostname:80>svc12.testns.example.org.',
    'svc6.testns.example.org. 1:2::5:80>svc6.testns.example.org.',
    '_http._tcp.svc6.testns.example.org. (SRV) 1:2::5:80>svc6.testns.example.org.',
  ]);
  // The headless service: its endpoints under its name, and under its named port with their names as addresses.
  assert.deepEqual(zone.headless.map(show), [
    'svc-headless.testns.example.org. 1.2.3.4:80>endpoint-svc-0.svc-headless.testns.example.org. 1.2.3.5:80>endpoint-svc-1.svc-headless.testns.example.org.',
    '_http._tcp.svc-headless.testns.example.org. (SRV) endpoint-svc-0.svc-headless.testns.example.org.:80>endpoint-svc-0.svc-headless.testns.example.org. '
      + 'endpoint-svc-1.svc-headless.testns.example.org.:80>endpoint-svc-1.svc-headless.testns.example.org.',
  ]);
  assert.deepEqual(k.externalServices(z, false).headless, []);
  // A service without ports keeps CoreDNS's port -1 sentinel (no SRV record is made of it); an unnamed port is `_`.
  const { c, k: k2 } = cluster();
  c.upsertService(svc('bare', 'testns', { clusterIPs: ['10.0.0.60'], externalIPs: ['192.0.2.60'] }));
  c.upsertService(svc('anon', 'testns', { clusterIPs: ['10.0.0.61'], externalIPs: ['192.0.2.61'], ports: [{ protocol: 'UDP', port: 53 }] }));
  const names = k2.externalServices(z, true).services.filter((n) => n.name.includes('bare') || n.name.includes('anon'));
  assert.deepEqual(names.map(show), [
    'anon.testns.example.org. 192.0.2.61:53>anon.testns.example.org.',
    '_._udp.anon.testns.example.org. (SRV) 192.0.2.61:53>anon.testns.example.org.',
    'bare.testns.example.org. 192.0.2.60:-1>bare.testns.example.org.',
    '_._.bare.testns.example.org. (SRV) 192.0.2.60:-1>bare.testns.example.org.',
  ]);
});

test('externalSerial: bumped by changes to what the external zone shows only', () => {
  const { c, k } = cluster();
  const reset = () => { c.modified = 0; c.modifiedExternal = 0; };
  reset();
  c.upsertService(svc('plain', 'testns', { clusterIPs: ['10.0.0.50'], ports: http }));
  assert.equal(k.externalSerial('example.org.'), 0);
  assert.ok(c.modified > 0);
  reset();
  c.upsertService(svc('lb', 'testns', { type: 'LoadBalancer', clusterIPs: ['10.0.0.51'], ports: http }));
  assert.equal(k.externalSerial('example.org.'), 0);
  reset();
  // The load balancer gets its address: the external zone changes, the cluster zone does not.
  c.upsertService({ ...svc('lb', 'testns', { type: 'LoadBalancer', clusterIPs: ['10.0.0.51'], ports: http }, { loadBalancer: { ingress: [{ ip: '203.0.113.9' }] } }), metadata: { name: 'lb', namespace: 'testns', resourceVersion: '2' } });
  assert.ok(k.externalSerial('example.org.') > 0);
  assert.equal(c.modified, 0);
  reset();
  c.removeService('testns', 'lb');
  assert.ok(k.externalSerial('example.org.') > 0);
  reset();
  // A headless service's endpoints are in the external zone (with its `headless` option).
  c.upsertSlice({
    metadata: { name: 'svc-headless', namespace: 'testns', resourceVersion: '2', labels: { 'kubernetes.io/service-name': 'svc-headless' } },
    endpoints: [{ addresses: ['1.2.3.4'], hostname: 'endpoint-svc-0' }], ports: http,
  });
  assert.ok(k.externalSerial('example.org.') > 0);
});
