// k8s_external's Transferer (CoreDNS plugin/k8s_external/transfer.go): its zones for the transfer
// plugin's AXFR/IXFR, built as CoreDNS builds them from the provider's ExternalServices list — not
// from the query answers. The SOA, the NS and its glue, then per service entry (address × port) its
// A/AAAA (a CNAME for a host name, once from the A pass and once from the AAAA pass) and the first
// SRV record of each owner name; with `headless`, per headless service its endpoints' records under
// the service's name and under each endpoint's name (SRV records twice there, as CoreDNS sends them),
// and the named ports' SRV records; the SOA again. Host names are not looked up (CoreDNS's upstream
// lookups fail outside a query), so no addresses of them appear.

import type { ResourceRecord, SOAData } from '../../wire/types.ts';
import { RRClass, RRType } from '../../wire/constants.ts';
import { countLabels, fqdn, nextLabel } from '../../wire/name.ts';
import type { ExternalEndpoint, Externaler } from '../pkg/external.ts';
import { NotAuthoritativeError } from '../pkg/transfer.ts';
import { addressType, goAddress, join, type ExternalConfig } from './external.ts';

/** Transferer.transfer for the zones `o.zones` (exactly one of them; a name below is not a zone here). */
export function transfer(o: ExternalConfig, x: Externaler, soa: ResourceRecord<SOAData>, zone: string, serial: number): AsyncIterable<ResourceRecord[]> {
  if (serial !== 0 && serial >= soa.data.serial) return batches([[soa]]);
  return batches(zoneRecords(o, x, soa, zone));
}

/** Rejects a zone that is not one of `zones` (CoreDNS: the longest matching zone must be the zone itself). */
export function checkZone(zones: readonly string[], zone: string): void {
  if (!zones.includes(zone)) throw new NotAuthoritativeError(zone);
}

async function* batches(it: Iterable<ResourceRecord[]>): AsyncGenerator<ResourceRecord[]> {
  for (const b of it) if (b.length > 0) yield b;
}

/** msg.Service's targetStrip: drop the first `n` labels, keeping the name when it has no more than `n`. */
function stripLabels(name: string, n: number): string {
  if (countLabels(name) <= n) return name;
  let off = 0;
  for (let i = 0; i < n; i++) off = nextLabel(name, off);
  return name.slice(off);
}

/** msg_to_dns.go's SRV weight: 100 shared among `n` entries of priority 0, at least 1. */
function srvWeight(n: number): number {
  return Math.max(1, Math.floor((100 / (100 * n)) * 100) & 0xffff);
}

function zoneRecords(o: ExternalConfig, x: Externaler, soa: ResourceRecord, zone: string): ResourceRecord[][] {
  const out: ResourceRecord[][] = [[soa]];
  const ttl = o.ttl;
  const nsName = join('ns1', o.apex, zone);
  out.push([{ name: zone, type: RRType.NS, class: RRClass.IN, ttl, data: { target: nsName } }]);
  for (const ip of x.externalAddress(o.headless)) {
    const t = addressType(ip);
    if (t !== RRType.CNAME) out.push([{ name: nsName, type: t, class: RRClass.IN, ttl, data: { address: goAddress(ip) } }]);
  }

  /** msg_to_dns.go a/aaaa: the addresses of `qtype` (each once), a CNAME for every host name. */
  const addresses = (owner: string, eps: readonly ExternalEndpoint[], qtype: number): ResourceRecord[] => {
    const recs: ResourceRecord[] = [];
    let seen: Set<string> | undefined;
    for (const e of eps) {
      const t = addressType(e.address);
      if (t === RRType.CNAME) {
        recs.push({ name: owner, type: RRType.CNAME, class: RRClass.IN, ttl: e.ttl, data: { target: fqdn(e.address) } });
      } else if (t === qtype) {
        seen ??= new Set();
        if (seen.has(e.address)) continue;
        seen.add(e.address);
        recs.push({ name: owner, type: t, class: RRClass.IN, ttl, data: { address: goAddress(e.address) } });
      }
    }
    return recs;
  };
  /** msg_to_dns.go srv: one SRV per target and port; `strip` for a `_<port>._<protocol>` entry of a service. */
  const srv = (owner: string, eps: readonly ExternalEndpoint[], strip: boolean): ResourceRecord[] => {
    const recs: ResourceRecord[] = [];
    const weight = srvWeight(eps.length);
    const seen = new Set<string>();
    for (const e of eps) {
      if (e.port === -1) continue;
      const target = addressType(e.address) === RRType.CNAME ? (strip ? stripLabels(fqdn(e.address), 2) : fqdn(e.address)) : e.target;
      const port = e.port & 0xffff;
      const key = `${target} ${port}`;
      if (seen.has(key)) continue;
      seen.add(key);
      recs.push({ name: owner, type: RRType.SRV, class: RRClass.IN, ttl: e.ttl, data: { priority: 0, weight, port, target } });
    }
    return recs;
  };

  const zone_ = x.externalServices(zone, o.headless);
  const srvSeen = new Set<string>();
  for (const s of zone_.services) {
    if (!s.srvOnly) {
      out.push(addresses(s.name, s.endpoints, RRType.A), addresses(s.name, s.endpoints, RRType.AAAA));
    }
    // Only the first SRV record of each owner name (the first address × port of the service).
    for (const r of srv(s.name, s.endpoints, s.srvOnly)) {
      if (srvSeen.has(r.name)) continue;
      srvSeen.add(r.name);
      out.push([r]);
    }
  }
  for (const g of zone_.headless) {
    if (g.srvOnly) {
      out.push(srv(g.name, g.endpoints, false));
      continue;
    }
    const group = (owner: string, eps: readonly ExternalEndpoint[]): void => {
      out.push(addresses(owner, eps, RRType.A), addresses(owner, eps, RRType.AAAA));
      const recs = srv(owner, eps, false);
      out.push(recs); // sent as a batch and then one by one, as CoreDNS does
      for (const r of recs) out.push([r]);
    };
    group(g.name, g.endpoints);
    for (const e of g.endpoints) group(e.target, [e]);
  }
  out.push([soa]);
  return out;
}
