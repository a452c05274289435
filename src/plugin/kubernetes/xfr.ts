// The kubernetes plugin's Transferer (CoreDNS's plugin/kubernetes/xfr.go): the
// whole zone for the transfer plugin's AXFR/IXFR. Every record is taken from
// the answer the plugin gives to the equivalent query (the same builders), and
// laid out in CoreDNS's order: SOA, NS, glue, then per service (by name)
// its addresses and SRV records, and the SOA again.

import type { AData, ResourceRecord, SOAData, SRVData } from '../../wire/types.ts';
import { RRType } from '../../wire/constants.ts';
import { addressToReverse, isSubdomain, lowerName } from '../../wire/name.ts';
import { NotAuthoritativeError } from '../pkg/transfer.ts';
import type { Port, Slice } from './controller.ts';
import { endpointHostname, ipFamily, type Kubernetes, type Scope } from './kubernetes.ts';
import { sortedServices, under } from './external.ts';

/** Transferer.transfer. */
export function transfer(k: Kubernetes, zone: string, serial: number): AsyncIterable<ResourceRecord[]> {
  const z = lowerName(zone);
  if (!k.o.zones.includes(z)) throw new NotAuthoritativeError(zone);
  // An unsynced view would hand out an empty zone for a secondary to serve until its next refresh.
  if (!k.c.hasSynced()) throw new Error(`kubernetes: ${z} is not synced with the API server yet`);
  const scope: Scope = { zone: z, zoneLower: z, multicluster: k.o.multiclusterZones.includes(z), upstream: undefined, needs: undefined };
  const soa = k.soa(scope);
  // IXFR: the serial is the time of the last change, so anything but the current one gets the whole zone.
  if (serial !== 0 && serial === (soa.data as SOAData).serial) return batches([[soa]]);
  return batches(zoneRecords(k, scope, soa));
}

async function* batches(it: Iterable<ResourceRecord[]>): AsyncGenerator<ResourceRecord[]> {
  for (const b of it) if (b.length > 0) yield b;
}

function* zoneRecords(k: Kubernetes, scope: Scope, soa: ResourceRecord): Generator<ResourceRecord[]> {
  yield [soa];
  const ns = k.ns(scope);
  yield ns.records;
  yield ns.extra;
  const z = scope.zoneLower;
  const reverse = z === '.' || z === 'arpa.' || isSubdomain(z, 'in-addr.arpa.') || isSubdomain(z, 'ip6.arpa.');
  const forward = !isSubdomain(z, 'in-addr.arpa.') && !isSubdomain(z, 'ip6.arpa.');
  if (forward && scope.multicluster) {
    for (const si of sortedServices(k.c.imports.values())) {
      if (!k.namespaceExposed(si.namespace)) continue;
      const name = `${si.name}.${si.namespace}.svc.${under(z)}`;
      yield si.type === 'Headless'
        ? headlessRecords(k, scope, name, k.c.mcsSlicesBySvc.get(si.key) ?? [], (s, host) => `${host}.${s.cluster}.${name}`)
        : clusterIPRecords(k, scope, name, si.ips, si.ports);
    }
  } else if (forward) {
    for (const svc of sortedServices(k.c.services.values())) {
      if (!k.namespaceExposed(svc.namespace)) continue;
      const name = `${svc.name}.${svc.namespace}.svc.${under(z)}`;
      if (svc.type === 'ExternalName') yield k.cnameOnly(scope, name, name).records;
      else if (svc.headless) yield headlessRecords(k, scope, name, k.c.slicesOf(svc.key), (_s, host) => `${host}.${name}`);
      else yield clusterIPRecords(k, scope, name, svc.clusterIPs, svc.ports);
    }
  }
  if (reverse) yield* reverseRecords(k, scope);
  yield [soa];
}

/** The answer to `name`/`qtype`, as the plugin gives it (nothing for a name error). */
function answer(k: Kubernetes, scope: Scope, name: string, qtype: number): ResourceRecord[] {
  const lower = lowerName(name);
  const r = qtype === RRType.SRV ? k.srv(scope, name, lower) : k.addresses(scope, name, lower, qtype, []);
  return r.err === 0 /* no name error */ ? r.records : [];
}

/** The records of `answer()` by a key, each handed out once. */
class Pool {
  private readonly m = new Map<string, ResourceRecord>();
  constructor(records: ResourceRecord[], key: (r: ResourceRecord) => string) {
    for (const r of records) if (!this.m.has(key(r))) this.m.set(key(r), r);
  }
  take(key: string, out: ResourceRecord[]): void {
    const r = this.m.get(key);
    if (r === undefined) return;
    this.m.delete(key);
    out.push(r);
  }
}

const byAddress = (r: ResourceRecord): string => (r.data as AData).address;
const byTargetPort = (r: ResourceRecord): string => `${lowerName((r.data as SRVData).target)}|${(r.data as SRVData).port}`;

function addressPool(k: Kubernetes, scope: Scope, name: string): Pool {
  return new Pool([...answer(k, scope, name, RRType.A), ...answer(k, scope, name, RRType.AAAA)], byAddress);
}

/** A ClusterIP service (or ClusterSetIP import): its addresses in ClusterIP order, then per port the bare and the `_port._proto` SRV. */
function clusterIPRecords(k: Kubernetes, scope: Scope, name: string, ips: readonly string[], ports: readonly Port[]): ResourceRecord[] {
  const out: ResourceRecord[] = [];
  const addrs = addressPool(k, scope, name);
  for (const ip of ips) addrs.take(ip, out);
  const bare = new Pool(answer(k, scope, name, RRType.SRV), (r) => String((r.data as SRVData).port));
  const named = new Set<string>();
  for (const p of ports) {
    bare.take(String(p.port), out);
    if (p.name === '') continue;
    const owner = lowerName(`_${p.name}._${p.protocol}.${name}`);
    if (named.has(owner)) continue;
    named.add(owner);
    out.push(...answer(k, scope, owner, RRType.SRV));
  }
  return out;
}

/**
 * A headless service (or import): per ready endpoint, in slice order, the service name's and the
 * endpoint name's address and the `_port._proto` SRV records pointing at the endpoint name.
 */
function headlessRecords(k: Kubernetes, scope: Scope, name: string, slices: readonly Slice[], endpointName: (s: Slice, host: string) => string): ResourceRecord[] {
  const out: ResourceRecord[] = [];
  const addrs = addressPool(k, scope, name);
  const endpoints = new Map<string, Pool>();
  const srvs = new Map<string, Pool>();
  for (const s of slices) {
    for (const a of s.addresses) {
      addrs.take(a.ip, out);
      const ep = endpointName(s, endpointHostname(a, k.o.endpointNameMode));
      const epKey = lowerName(ep);
      let pool = endpoints.get(epKey);
      if (pool === undefined) endpoints.set(epKey, pool = addressPool(k, scope, ep));
      pool.take(a.ip, out);
      for (const p of s.ports) {
        if (p.name === '') continue; // unnamed ports have no `_port._proto` name
        const owner = lowerName(`_${p.name}._${p.protocol}.${name}`);
        let srv = srvs.get(owner);
        if (srv === undefined) srvs.set(owner, srv = new Pool(answer(k, scope, owner, RRType.SRV), byTargetPort));
        srv.take(`${epKey}|${p.port}`, out);
      }
    }
  }
  return out;
}

/** PTR records of a reverse zone: services' ClusterIPs (by service name), then endpoint addresses (by slice). */
function* reverseRecords(k: Kubernetes, scope: Scope): Generator<ResourceRecord[]> {
  const done = new Set<string>();
  const ptr = (ip: string): ResourceRecord[] => {
    if (ipFamily(ip) === 0) return [];
    const owner = addressToReverse(ip);
    if (done.has(owner) || !isSubdomain(owner, scope.zoneLower)) return [];
    done.add(owner);
    return k.ptr(scope, owner, owner).records;
  };
  for (const svc of sortedServices(k.c.services.values())) yield svc.clusterIPs.flatMap(ptr);
  const slices = [...k.c.slices.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (const s of slices) yield s.addresses.flatMap((a) => ptr(a.ip));
}
