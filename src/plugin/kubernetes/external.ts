// The kubernetes plugin's Externaler (CoreDNS's plugin/kubernetes/external.go):
// services' external addresses (spec.externalIPs, load-balancer ingress) and,
// with `headless`, headless services' ready endpoints, named in the
// k8s_external plugin's zone as `[<endpoint>.]<service>.<namespace>.<zone>`.

import type { ExternalEndpoint, ExternalLookup, ExternalZone, ExternalZoneName } from '../pkg/external.ts';
import { Rcode } from '../../wire/constants.ts';
import { isSubdomain } from '../../wire/name.ts';
import type { Service } from './controller.ts';
import { endpointHostname, ipFamily, matchPortAndProtocol, type Kubernetes } from './kubernetes.ts';

function stripUnderscore(s: string): string {
  return s.charCodeAt(0) === 95 ? s.slice(1) : s;
}

/** The zone as the tail of `<labels>.<zone>`: the root zone written as nothing. */
export function under(zone: string): string {
  return zone === '.' ? '' : zone;
}

/** Externaler.external: the name read right to left as namespace, service, then endpoint or port and protocol. */
export function external(k: Kubernetes, name: string, zone: string, headless: boolean): ExternalLookup {
  if (!isSubdomain(name, zone)) return { endpoints: [], rcode: Rcode.NXDOMAIN };
  const base = zone === '.' ? name.slice(0, -1) : name.slice(0, Math.max(0, name.length - zone.length - 1));
  if (base === '') return { endpoints: [], rcode: Rcode.SERVFAIL };
  const segs = base.split('.');
  let last = segs.length - 1;
  const namespace = segs[last];
  if (!k.namespaceExposed(namespace)) return { endpoints: [], rcode: Rcode.NXDOMAIN };
  last--;
  if (last < 0) return { endpoints: [], rcode: Rcode.NOERROR };
  const service = segs[last];
  last--;
  let endpoint = '', port = '', protocol = '';
  if (last === 0) {
    endpoint = stripUnderscore(segs[0]);
  } else if (last === 1) {
    protocol = stripUnderscore(segs[1]);
    port = stripUnderscore(segs[0]);
  } else if (last > 1) {
    return { endpoints: [], rcode: Rcode.NXDOMAIN }; // too long
  }
  const svc = k.c.service(namespace, service);
  if (svc === undefined) return { endpoints: [], rcode: Rcode.NXDOMAIN };
  const endpoints = serviceEndpoints(k, svc, zone, headless, endpoint, port, protocol);
  return { endpoints, rcode: endpoints.length > 0 ? Rcode.NOERROR : Rcode.NXDOMAIN };
}

function serviceEndpoints(k: Kubernetes, svc: Service, zone: string, headless: boolean, endpoint: string, port: string, protocol: string): ExternalEndpoint[] {
  const ttl = k.o.ttl;
  const target = `${svc.name}.${svc.namespace}.${under(zone)}`;
  const out: ExternalEndpoint[] = [];
  if (headless && svc.externalIPs.length === 0 && (svc.headless || endpoint !== '')) {
    for (const s of k.c.slicesOf(svc.key)) {
      for (const a of s.addresses) {
        const host = endpointHostname(a, k.o.endpointNameMode);
        if (endpoint !== '' && endpoint !== host.toLowerCase()) continue;
        for (const p of s.ports) {
          if (!matchPortAndProtocol(port, p.name, protocol, p.protocol)) continue;
          out.push({ address: a.ip, port: p.port, ttl, target: `${host}.${target}` });
        }
      }
    }
    return out;
  }
  // CoreDNS reads no endpoint label here: `<anything>.<service>...` is the service's own data.
  for (const ip of svc.externalIPs) {
    for (const p of svc.ports) {
      if (!matchPortAndProtocol(port, p.name, protocol, p.protocol)) continue;
      out.push({ address: ip, port: p.port, ttl, target });
    }
  }
  return out;
}

/** Externaler.externalReverse (CoreDNS's ExternalReverse). */
export function externalReverse(k: Kubernetes, address: string, zone: string): string[] {
  const out: string[] = [];
  for (const s of k.c.servicesByExternalIP(address)) {
    if (k.o.namespaces.length > 0 && !k.namespaceExposed(s.namespace)) continue;
    const n = `${s.name}.${s.namespace}.${under(zone)}`;
    if (!out.includes(n)) out.push(n);
  }
  return out;
}

/** Externaler.externalAddress (CoreDNS's nsAddrs with `external` set). */
export function externalAddress(k: Kubernetes, headless: boolean): string[] {
  const out: string[] = [];
  const add = (ip: string) => { if (ipFamily(ip) !== 0 && !out.includes(ip)) out.push(ip); };
  const local = k.o.localIPs();
  let found = false;
  for (const lip of local) {
    for (const s of k.c.slicesByIP(lip)) {
      found = true;
      const svc = k.c.services.get(s.svcKey);
      if (svc === undefined) continue;
      if (headless && svc.headless) {
        for (const a of s.addresses) add(a.ip);
      } else {
        for (const ip of svc.externalIPs) add(ip);
      }
    }
  }
  if (!found) for (const ip of local) add(ip);
  return out;
}

/**
 * Externaler.externalServices (CoreDNS's ExternalServices): every service with external addresses,
 * whatever its namespace (CoreDNS lists them all here), per address × port; with `headless`, a
 * headless service's ready endpoints grouped under the service's name and under each named port.
 */
export function externalServices(k: Kubernetes, zone: string, headless: boolean): ExternalZone {
  const services: ExternalZoneName[] = [];
  const groups = new Map<string, ExternalZoneName>();
  const ttl = k.o.ttl;
  const group = (name: string, srvOnly: boolean): ExternalEndpoint[] => {
    let g = groups.get(name);
    if (g === undefined) { g = { name, srvOnly, endpoints: [] }; groups.set(name, g); }
    return g.endpoints;
  };
  for (const svc of sortedServices(k.c.services.values())) {
    const base = `${svc.name}.${svc.namespace}.${under(zone)}`;
    if (headless && svc.externalIPs.length === 0 && svc.headless) {
      for (const s of k.c.slicesOf(svc.key)) {
        for (const a of s.addresses) {
          const target = `${endpointHostname(a, k.o.endpointNameMode)}.${base}`;
          for (const p of s.ports) {
            group(base, false).push({ address: a.ip, port: p.port, ttl, target });
            if (p.name === '') continue;
            group(`_${p.name.toLowerCase()}._${p.protocol.toLowerCase()}.${base}`, true).push({ address: target, port: p.port, ttl, target });
          }
        }
      }
      continue;
    }
    for (const ip of svc.externalIPs) {
      for (const p of svc.ports) {
        const e: ExternalEndpoint = { address: ip, port: p.port, ttl, target: base };
        services.push({ name: base, srvOnly: false, endpoints: [e] });
        services.push({ name: `_${p.name.toLowerCase()}._${p.protocol.toLowerCase()}.${base}`, srvOnly: true, endpoints: [e] });
      }
    }
  }
  return { services, headless: [...groups.values()] };
}

/** Services (or service imports) in zone-transfer order: by name, then namespace (CoreDNS sorts by name only). */
export function sortedServices<T extends { name: string; namespace: string }>(list: Iterable<T>): T[] {
  return [...list].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : 0));
}
