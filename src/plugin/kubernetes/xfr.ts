// The kubernetes plugin's Transferer (CoreDNS's plugin/kubernetes/xfr.go): the whole zone for the
// transfer plugin's AXFR/IXFR, generated as CoreDNS generates it (not from the query answers): the
// SOA, one NS per name server, their addresses (TTL 0), then per service, by name, its records, and
// the SOA again. A zone below one of the plugin's zones is transferred too, its records built under
// that name, as CoreDNS does.

import type { ResourceRecord, SOAData } from '../../wire/types.ts';
import { RRClass, RRType } from '../../wire/constants.ts';
import { isSubdomain, lowerName } from '../../wire/name.ts';
import { NotAuthoritativeError } from '../pkg/transfer.ts';
import type { EndpointAddress, Port, Slice } from './controller.ts';
import { endpointHostname, ipFamily, type Kubernetes, type Scope } from './kubernetes.ts';
import { sortedServices } from './external.ts';

/** Transferer.transfer. */
export function transfer(k: Kubernetes, zone: string, serial: number): AsyncIterable<ResourceRecord[]> {
  const z = lowerName(zone);
  if (!k.o.zones.some((p) => isSubdomain(z, p))) throw new NotAuthoritativeError(zone);
  const scope: Scope = { zone: z, zoneLower: z, multicluster: k.o.multiclusterZones.includes(z), upstream: undefined, needs: undefined };
  const soa = k.soa(scope);
  if (serial !== 0 && serial === (soa.data as SOAData).serial) return batches([[soa]]);
  return batches(zoneRecords(k, scope, soa));
}

async function* batches(it: Iterable<ResourceRecord[]>): AsyncGenerator<ResourceRecord[]> {
  for (const b of it) if (b.length > 0) yield b;
}

/** CoreDNS's calcSRVWeight: 100 shared among `n` records, at least 1. */
function srvWeight(n: number): number {
  const w = Math.floor((100 / (100 * n)) * 100);
  return w === 0 ? 1 : w;
}

function zoneRecords(k: Kubernetes, scope: Scope, soa: ResourceRecord): ResourceRecord[][] {
  const out: ResourceRecord[][] = [[soa]];
  const ns = k.ns(scope);
  out.push(ns.records);
  // miekg's records made by nsAddrs carry no TTL
  out.push(ns.extra.map((r) => ({ ...r, ttl: 0 })));
  const zone = scope.zone;
  const ttl = k.o.ttl;
  const rr = (name: string, type: number, data: ResourceRecord['data']): ResourceRecord => ({ name, type, class: RRClass.IN, ttl, data });
  /** emitAddressRecord: an A or AAAA record for `ip` (nothing for what is not an IP); returns its owner. */
  const address = (name: string, ip: string): string => {
    const fam = ipFamily(ip);
    if (fam === 0) return '';
    out.push([rr(name, fam === 4 ? RRType.A : RRType.AAAA, { address: ip })]);
    return name;
  };
  const srv = (name: string, weight: number, port: number, target: string): void => {
    out.push([rr(name, RRType.SRV, { priority: 0, weight, port: port & 0xffff, target: target === '' ? '.' : target.endsWith('.') ? target : target + '.' })]);
  };
  const clusterIP = (base: string, ips: readonly string[], ports: readonly Port[]): void => {
    let host = '';
    for (const ip of ips) host = address(base, ip);
    for (const p of ports) {
      srv(base, 100, p.port, host);
      if (p.name === '') continue;
      srv(`_${p.name.toLowerCase()}._${p.protocol.toLowerCase()}.${base}`, 100, p.port, host);
    }
  };
  const headless = (base: string, slices: readonly Slice[]): void => {
    for (const s of slices) {
      const weight = srvWeight(s.addresses.length);
      for (const a of s.addresses as readonly EndpointAddress[]) {
        address(base, a.ip);
        const host = address(`${endpointHostname(a, k.o.endpointNameMode)}.${base}`, a.ip);
        for (const p of s.ports) {
          if (p.name === '') continue;
          srv(`_${p.name.toLowerCase()}._${p.protocol.toLowerCase()}.${base}`, weight, p.port, host);
        }
      }
    }
  };
  const suffix = zone === '.' ? 'svc.' : `svc.${zone}`;
  if (scope.multicluster) {
    for (const si of sortedServices(k.c.imports.values())) {
      if (!k.namespaceExposed(si.namespace)) continue;
      const base = `${si.name}.${si.namespace}.${suffix}`;
      if (si.ips.length > 0 && ipFamily(si.ips[0]!) !== 0) clusterIP(base, si.ips, si.ports);
      else headless(base, k.c.mcsSlicesBySvc.get(si.key) ?? []);
    }
  } else {
    for (const svc of sortedServices(k.c.services.values())) {
      if (!k.namespaceExposed(svc.namespace)) continue;
      const base = `${svc.name}.${svc.namespace}.${suffix}`;
      if (svc.type === 'ExternalName') {
        if (ipFamily(svc.externalName) === 0) out.push([rr(base, RRType.CNAME, { target: svc.externalName.endsWith('.') ? svc.externalName : svc.externalName + '.' })]);
        continue;
      }
      if (svc.type !== 'ClusterIP' && svc.type !== 'NodePort' && svc.type !== 'LoadBalancer' && svc.type !== '') continue;
      if (svc.clusterIPs.length > 0 && ipFamily(svc.clusterIPs[0]!) !== 0) clusterIP(base, svc.clusterIPs, svc.ports);
      else headless(base, k.c.slicesOf(svc.key));
    }
  }
  out.push([soa]);
  return out;
}
