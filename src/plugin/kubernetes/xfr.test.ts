import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Controller, toServiceImport, toSlice, type RawObject } from './controller.ts';
import { Kubernetes, type KubernetesOptions } from './kubernetes.ts';
import { Fall } from '../pkg/fall.ts';
import { NotAuthoritativeError, isTransferer } from '../pkg/transfer.ts';
import { Request } from '../../core/request.ts';
import { newQuery } from '../../wire/message.ts';
import { formatRecord } from '../../wire/text.ts';
import { RRType } from '../../wire/constants.ts';
import type { Message, ResourceRecord } from '../../wire/types.ts';

// The cluster of CoreDNS's plugin/kubernetes/handler_test.go (APIConnServeTest), which its xfr_test.go transfers.

function svc(name: string, namespace: string, spec: Record<string, unknown>): RawObject {
  return { metadata: { name, namespace, resourceVersion: '1' }, spec };
}

function slice(name: string, namespace: string, service: string, endpoints: { ip: string; hostname?: string }[], ports: { name: string; protocol: string; port: number }[]): RawObject {
  return {
    metadata: { name, namespace, resourceVersion: '1', labels: { 'kubernetes.io/service-name': service } },
    endpoints: endpoints.map((e) => ({ addresses: [e.ip], hostname: e.hostname, conditions: { ready: true } })),
    ports,
  };
}

const http = [{ name: 'http', protocol: 'TCP', port: 80 }];

function cluster(extra: Partial<KubernetesOptions> = {}): { c: Controller; k: Kubernetes } {
  const c = new Controller();
  for (const ns of ['testns', 'kube-system', 'unexposedns']) c.namespaces.add(ns);
  c.upsertService(svc('kubedns', 'kube-system', { clusterIPs: ['10.0.0.10'], ports: [{ name: 'dns', protocol: 'UDP', port: 53 }] }));
  c.upsertService(svc('svc1', 'testns', { clusterIPs: ['10.0.0.1'], ports: http }));
  c.upsertService(svc('svcempty', 'testns', { clusterIPs: ['10.0.0.1'], ports: http }));
  c.upsertService(svc('svc6', 'testns', { clusterIPs: ['1234:abcd::1'], ports: http }));
  c.upsertService(svc('hdls1', 'testns', { clusterIPs: ['None'] }));
  c.upsertService(svc('external', 'testns', { type: 'ExternalName', externalName: 'ext.interwebs.test', ports: http }));
  c.upsertService(svc('external-to-service', 'testns', { type: 'ExternalName', externalName: 'svc1.testns.svc.cluster.local.', ports: http }));
  c.upsertService(svc('hdlsprtls', 'testns', { clusterIPs: ['None'] }));
  c.upsertService(svc('svc1', 'unexposedns', { clusterIPs: ['10.0.0.2'], ports: http }));
  c.upsertService(svc('svc-dual-stack', 'testns', { clusterIPs: ['10.0.0.3', '10::3'], ports: http }));
  c.upsertSlice(slice('kubedns', 'kube-system', 'kubedns', [{ ip: '172.0.0.100' }], [{ name: 'dns', protocol: 'UDP', port: 53 }]));
  c.upsertSlice(slice('svc1-slice1', 'testns', 'svc1', [{ ip: '172.0.0.1', hostname: 'ep1a' }], http));
  c.upsertSlice(slice('svcempty-slice1', 'testns', 'svcempty', [], http));
  c.upsertSlice(slice('hdls1-slice1', 'testns', 'hdls1', [
    { ip: '172.0.0.2' }, { ip: '172.0.0.3' }, { ip: '172.0.0.4', hostname: 'dup-name' }, { ip: '172.0.0.5', hostname: 'dup-name' },
    { ip: '5678:abcd::1' }, { ip: '5678:abcd::2' },
  ], http));
  c.upsertSlice(slice('hdlsprtls-slice1', 'testns', 'hdlsprtls', [{ ip: '172.0.0.20' }], []));
  c.modified = 3;
  c.hasSynced = () => true;
  const k = new Kubernetes(undefined, {
    zones: ['cluster.local.'], primaryZoneIndex: 0, ttl: 5, podMode: 'disabled', endpointNameMode: false,
    namespaces: ['testns', 'kube-system'], fall: new Fall(), ignoreEmptyService: false, multiclusterZones: [], zonal: false,
    localIPs: () => ['10.0.0.10'], upstream: undefined, autoPathSearch: [], ...extra,
  }, c);
  return { c, k };
}

async function collect(it: AsyncIterable<ResourceRecord[]>): Promise<ResourceRecord[][]> {
  const out: ResourceRecord[][] = [];
  for await (const b of it) out.push(b);
  return out;
}

async function axfr(k: Kubernetes, zone: string, serial = 0): Promise<string[]> {
  return (await collect(k.transfer(zone, serial))).flat().map(formatRecord);
}

async function ask(k: Kubernetes, name: string, type: number): Promise<string[]> {
  const req = new Request(newQuery(name, type), undefined, 'udp', '127.0.0.1', 1, '127.0.0.1', 53, 'dns://:53', 0n);
  let out: Message | undefined;
  await k.serveDNS(req, { writeMsg: (m) => { out = m; }, writeWire: () => { throw new Error('unexpected'); } });
  return out === undefined ? [] : out.answer.map(formatRecord);
}

const lines = (s: string) => s.trim().split('\n').map((l) => l.trim().split(/\s+/).join('\t').replace(/^(\S+\t\d+\tIN\t\S+)\t(.*)$/, (_m, h: string, d: string) => `${h}\t${d.split('\t').join(' ')}`));

// CoreDNS's expectedZone (xfr_test.go), with the glue's TTL as the 1.15.0 binary sends it: 0 (nsAddrs sets none).
const expectedZone = lines(`
cluster.local.	5	IN	SOA	ns.dns.cluster.local. hostmaster.cluster.local. 3 7200 1800 86400 5
cluster.local.	5	IN	NS	ns.dns.cluster.local.
ns.dns.cluster.local.	0	IN	A	10.0.0.10
external.testns.svc.cluster.local.	5	IN	CNAME	ext.interwebs.test.
external-to-service.testns.svc.cluster.local.	5	IN	CNAME	svc1.testns.svc.cluster.local.
hdls1.testns.svc.cluster.local.	5	IN	A	172.0.0.2
172-0-0-2.hdls1.testns.svc.cluster.local.	5	IN	A	172.0.0.2
_http._tcp.hdls1.testns.svc.cluster.local.	5	IN	SRV	0 16 80 172-0-0-2.hdls1.testns.svc.cluster.local.
hdls1.testns.svc.cluster.local.	5	IN	A	172.0.0.3
172-0-0-3.hdls1.testns.svc.cluster.local.	5	IN	A	172.0.0.3
_http._tcp.hdls1.testns.svc.cluster.local.	5	IN	SRV	0 16 80 172-0-0-3.hdls1.testns.svc.cluster.local.
hdls1.testns.svc.cluster.local.	5	IN	A	172.0.0.4
dup-name.hdls1.testns.svc.cluster.local.	5	IN	A	172.0.0.4
_http._tcp.hdls1.testns.svc.cluster.local.	5	IN	SRV	0 16 80 dup-name.hdls1.testns.svc.cluster.local.
hdls1.testns.svc.cluster.local.	5	IN	A	172.0.0.5
dup-name.hdls1.testns.svc.cluster.local.	5	IN	A	172.0.0.5
_http._tcp.hdls1.testns.svc.cluster.local.	5	IN	SRV	0 16 80 dup-name.hdls1.testns.svc.cluster.local.
hdls1.testns.svc.cluster.local.	5	IN	AAAA	5678:abcd::1
5678-abcd--1.hdls1.testns.svc.cluster.local.	5	IN	AAAA	5678:abcd::1
_http._tcp.hdls1.testns.svc.cluster.local.	5	IN	SRV	0 16 80 5678-abcd--1.hdls1.testns.svc.cluster.local.
hdls1.testns.svc.cluster.local.	5	IN	AAAA	5678:abcd::2
5678-abcd--2.hdls1.testns.svc.cluster.local.	5	IN	AAAA	5678:abcd::2
_http._tcp.hdls1.testns.svc.cluster.local.	5	IN	SRV	0 16 80 5678-abcd--2.hdls1.testns.svc.cluster.local.
hdlsprtls.testns.svc.cluster.local.	5	IN	A	172.0.0.20
172-0-0-20.hdlsprtls.testns.svc.cluster.local.	5	IN	A	172.0.0.20
kubedns.kube-system.svc.cluster.local.	5	IN	A	10.0.0.10
kubedns.kube-system.svc.cluster.local.	5	IN	SRV	0 100 53 kubedns.kube-system.svc.cluster.local.
_dns._udp.kubedns.kube-system.svc.cluster.local.	5	IN	SRV	0 100 53 kubedns.kube-system.svc.cluster.local.
svc-dual-stack.testns.svc.cluster.local.	5	IN	A	10.0.0.3
svc-dual-stack.testns.svc.cluster.local.	5	IN	AAAA	10::3
svc-dual-stack.testns.svc.cluster.local.	5	IN	SRV	0 100 80 svc-dual-stack.testns.svc.cluster.local.
_http._tcp.svc-dual-stack.testns.svc.cluster.local.	5	IN	SRV	0 100 80 svc-dual-stack.testns.svc.cluster.local.
svc1.testns.svc.cluster.local.	5	IN	A	10.0.0.1
svc1.testns.svc.cluster.local.	5	IN	SRV	0 100 80 svc1.testns.svc.cluster.local.
_http._tcp.svc1.testns.svc.cluster.local.	5	IN	SRV	0 100 80 svc1.testns.svc.cluster.local.
svc6.testns.svc.cluster.local.	5	IN	AAAA	1234:abcd::1
svc6.testns.svc.cluster.local.	5	IN	SRV	0 100 80 svc6.testns.svc.cluster.local.
_http._tcp.svc6.testns.svc.cluster.local.	5	IN	SRV	0 100 80 svc6.testns.svc.cluster.local.
svcempty.testns.svc.cluster.local.	5	IN	A	10.0.0.1
svcempty.testns.svc.cluster.local.	5	IN	SRV	0 100 80 svcempty.testns.svc.cluster.local.
_http._tcp.svcempty.testns.svc.cluster.local.	5	IN	SRV	0 100 80 svcempty.testns.svc.cluster.local.
cluster.local.	5	IN	SOA	ns.dns.cluster.local. hostmaster.cluster.local. 3 7200 1800 86400 5
`);

test('transfer: the AXFR of the cluster zone in CoreDNS\'s order (xfr_test.go TestKubernetesAXFR)', async () => {
  const { k } = cluster();
  assert.ok(isTransferer(k));
  assert.deepEqual(await axfr(k, 'cluster.local.'), expectedZone);
  const batches = await collect(k.transfer('cluster.local.', 0));
  assert.equal(batches[0].length, 1);
  assert.equal(batches.at(-1)!.length, 1);
  assert.ok(batches.every((b) => b.length > 0));
});

test('transfer: SRV weights as CoreDNS writes them: 100 for ClusterIP services, 100 shared by a slice\'s addresses', async () => {
  const zone = await axfr(cluster().k, 'cluster.local.');
  // hdls1's slice has 6 addresses: floor(100 / 6); the dual-stack service's SRV records keep 100 (its answers say 50)
  assert.ok(zone.includes('_http._tcp.hdls1.testns.svc.cluster.local.\t5\tIN\tSRV\t0 16 80 dup-name.hdls1.testns.svc.cluster.local.'));
  assert.equal(zone.filter((l) => l.endsWith('SRV\t0 16 80 dup-name.hdls1.testns.svc.cluster.local.')).length, 2);
  assert.ok(zone.includes('svc-dual-stack.testns.svc.cluster.local.\t5\tIN\tSRV\t0 100 80 svc-dual-stack.testns.svc.cluster.local.'));
});

test('transfer: its zones and the names below them (plugin.Zones.Contains, CoreDNS 1.15.0)', async () => {
  const { k } = cluster();
  assert.throws(() => k.transfer('example.com.', 0), NotAuthoritativeError);
  assert.doesNotThrow(() => k.transfer('Cluster.Local.', 0));
  // CoreDNS builds the records under the name asked for, as if it were the zone
  const sub = await axfr(k, 'svc.cluster.local.');
  assert.equal(sub[0], 'svc.cluster.local.\t5\tIN\tSOA\tns.dns.svc.cluster.local. hostmaster.svc.cluster.local. 3 7200 1800 86400 5');
  assert.ok(sub.includes('svc1.testns.svc.svc.cluster.local.\t5\tIN\tA\t10.0.0.1'));
});

test('transfer: IXFR with the current serial is the SOA alone, any other serial the whole zone', async () => {
  const { k } = cluster();
  assert.deepEqual(await axfr(k, 'cluster.local.', 3), [expectedZone[0]]);
  assert.deepEqual(await axfr(k, 'cluster.local.', 1), expectedZone);
  assert.deepEqual(await axfr(k, 'cluster.local.', 4), expectedZone);
});

test('transfer: before the first sync, what the plugin has (CoreDNS does not wait either)', async () => {
  const { c, k } = cluster();
  c.hasSynced = () => false;
  assert.deepEqual(await axfr(k, 'cluster.local.'), expectedZone);
});

test('transfer: one NS with both glue records for a dual-stack server (TestKubernetesAXFRMultipleNSAddrs)', async () => {
  const { k } = cluster({ localIPs: () => ['10.0.0.10', 'fd00::10'] });
  assert.deepEqual((await axfr(k, 'cluster.local.')).slice(0, 4), [
    expectedZone[0],
    'cluster.local.\t5\tIN\tNS\tns.dns.cluster.local.',
    'ns.dns.cluster.local.\t0\tIN\tA\t10.0.0.10',
    'ns.dns.cluster.local.\t0\tIN\tAAAA\tfd00::10',
  ]);
});

test('transfer: the NS of the in-cluster server is its service, with the service\'s address as glue', async () => {
  const { k } = cluster({ localIPs: () => ['172.0.0.100'] });
  assert.deepEqual((await axfr(k, 'cluster.local.')).slice(1, 3), [
    'cluster.local.\t5\tIN\tNS\tkubedns.kube-system.svc.cluster.local.',
    'kubedns.kube-system.svc.cluster.local.\t0\tIN\tA\t10.0.0.10',
  ]);
});

test('transfer: ignore empty_service does not change the transfer (CoreDNS\'s xfr.go does not read it)', async () => {
  const { k } = cluster({ ignoreEmptyService: true });
  assert.deepEqual(await axfr(k, 'cluster.local.'), expectedZone);
});

test('transfer: a multicluster zone from the ServiceImports, endpoints named without their cluster (as CoreDNS\'s xfr.go)', async () => {
  const { c, k } = cluster({ zones: ['cluster.local.', 'clusterset.local.'], multiclusterZones: ['clusterset.local.'] });
  const imp = (name: string, spec: Record<string, unknown>) => {
    const i = toServiceImport({ metadata: { name, namespace: 'testns', resourceVersion: '1' }, spec });
    c.imports.set(i.key, i);
  };
  imp('svc1', { type: 'ClusterSetIP', ips: ['10.0.0.1'], ports: http });
  imp('hdls1', { type: 'Headless', ports: http });
  const s = toSlice({
    metadata: { name: 'hdls1-c1', namespace: 'testns', resourceVersion: '1', labels: { 'multicluster.kubernetes.io/service-name': 'hdls1', 'multicluster.kubernetes.io/source-cluster': 'cluster1' } },
    endpoints: [{ addresses: ['172.0.0.2'] }, { addresses: ['172.0.0.3'], hostname: 'web-0' }],
    ports: http,
  }, true);
  c.mcsSlices.set(s.key, s);
  c.mcsSlicesBySvc.add(s.svcKey, s);
  c.modifiedMulticluster = 7;
  assert.deepEqual(await axfr(k, 'clusterset.local.'), lines(`
clusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. 7 7200 1800 86400 5
clusterset.local. 5 IN NS ns.dns.clusterset.local.
ns.dns.clusterset.local. 0 IN A 10.0.0.10
hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.2
172-0-0-2.hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.2
_http._tcp.hdls1.testns.svc.clusterset.local. 5 IN SRV 0 50 80 172-0-0-2.hdls1.testns.svc.clusterset.local.
hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.3
web-0.hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.3
_http._tcp.hdls1.testns.svc.clusterset.local. 5 IN SRV 0 50 80 web-0.hdls1.testns.svc.clusterset.local.
svc1.testns.svc.clusterset.local. 5 IN A 10.0.0.1
svc1.testns.svc.clusterset.local. 5 IN SRV 0 100 80 svc1.testns.svc.clusterset.local.
_http._tcp.svc1.testns.svc.clusterset.local. 5 IN SRV 0 100 80 svc1.testns.svc.clusterset.local.
clusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. 7 7200 1800 86400 5
`));
  assert.deepEqual(await ask(k, 'web-0.cluster1.hdls1.testns.svc.clusterset.local.', RRType.A), ['web-0.cluster1.hdls1.testns.svc.clusterset.local.\t5\tIN\tA\t172.0.0.3']);
});

test('transfer: a reverse zone gets what CoreDNS builds for it: SOA, NS, glue, the services under svc.ZONE, no PTR records', async () => {
  const { k } = cluster({ zones: ['cluster.local.', '0.10.in-addr.arpa.'] });
  const zone = await axfr(k, '0.10.in-addr.arpa.');
  assert.equal(zone[0], '0.10.in-addr.arpa.\t5\tIN\tSOA\tns.dns.0.10.in-addr.arpa. hostmaster.0.10.in-addr.arpa. 3 7200 1800 86400 5');
  assert.ok(zone.includes('svc1.testns.svc.0.10.in-addr.arpa.\t5\tIN\tA\t10.0.0.1'));
  assert.ok(!zone.some((l) => l.includes('\tPTR\t')));
});
