// Capability: a handler that knows the externally reachable addresses of the
// services it serves (CoreDNS's external.Externaler): the k8s_external plugin
// answers `<service>.<namespace>.<zone>` (A, AAAA, SRV, PTR), its apex NS glue
// and its zone transfers from them. Provider: kubernetes (service external IPs
// and load-balancer ingress; with `headless`, headless services' endpoints).
//
// The consumer owns the zone: it matches the query against its zones, answers
// the apex and `dns.<zone>` itself, builds the records, and asks the provider
// only for data. Names passed in and handed out are lower-case FQDNs.

import type { Handler } from '../plugin.ts';

/** One address a name of the external zone answers with (one per address × port). */
export interface ExternalEndpoint {
  /**
   * An IP address (an A or AAAA record), or a host name — a load-balancer ingress hostname,
   * answered as a CNAME to it (and, in an SRV answer, used as the target).
   */
  address: string;
  /** The service (or endpoint) port; -1 when the service declares no port (no SRV record). */
  port: number;
  /** The provider's TTL (CoreDNS's k8s_external keeps it on SRV and CNAME records). */
  ttl: number;
  /**
   * The name in the external zone this address belongs to: `<service>.<namespace>.<zone>`, or
   * `<endpoint>.<service>.<namespace>.<zone>` for a headless service's endpoint. SRV records
   * for an IP address point at it, and it owns the address's glue in the additional section.
   */
  target: string;
}

/** The answer data for one query name. */
export interface ExternalLookup {
  endpoints: ExternalEndpoint[];
  /**
   * NOERROR with endpoints; NOERROR without (NODATA: `<namespace>.<zone>` of an exposed
   * namespace); NXDOMAIN (no such namespace, service, endpoint or port, or a name too long);
   * SERVFAIL for the zone apex itself, which the consumer answers.
   */
  rcode: number;
}

/**
 * A name of the external zone and the entries behind its records in a zone transfer (CoreDNS's
 * msg.Service list from ExternalServices): see `ExternalZone`.
 */
export interface ExternalZoneName {
  name: string;
  /**
   * True for `_<port>._<protocol>.<service>.<namespace>.<zone>` (the port name and protocol
   * lower-cased; an unnamed port of a service with external addresses is `_._<protocol>`): only
   * SRV records are made from it.
   */
  srvOnly: boolean;
  endpoints: ExternalEndpoint[];
}

/** The data of a whole external zone, for transfers, listed as CoreDNS's ExternalServices lists it. */
export interface ExternalZone {
  /**
   * The services with external addresses (every namespace, as CoreDNS), by name then namespace:
   * per address × port one entry for the service's name and one for its `_<port>._<protocol>`
   * name (srvOnly), each with that single endpoint (`target`: the service's name).
   */
  services: ExternalZoneName[];
  /**
   * With `headless`, per headless service without external addresses: one group under the
   * service's name with an endpoint per ready address × port (`target`: the endpoint's name),
   * and one srvOnly group per named port whose endpoints' `address` is the endpoint's name.
   */
  headless: ExternalZoneName[];
}

export interface Externaler extends Handler {
  /**
   * The data for `name` (below `zone`, the consumer's matching zone), read as
   * `[_<port>._<protocol>. | <endpoint>.]<service>.<namespace>.<zone>`: the service's external
   * addresses × its ports matching the port and protocol labels; with `headless`, for a headless
   * service without external addresses (or an endpoint label on a service without them), its
   * ready endpoints matching the endpoint, port and protocol labels. Namespaces the provider
   * does not expose are NXDOMAIN. For a PTR query of a name that is not a reverse name, the
   * consumer uses the rcode only.
   */
  external(name: string, zone: string, headless: boolean): ExternalLookup;
  /**
   * PTR data: `<service>.<namespace>.<zone>` for every exposed service with `address` among its
   * external addresses (the consumer passes its first zone); empty means NXDOMAIN.
   */
  externalReverse(address: string, zone: string): string[];
  /**
   * The addresses of the external zone's nameserver (the apex NS's glue, `ns1.dns.<zone>`): the
   * external IP addresses of the services this server is an endpoint of — with `headless`, the
   * endpoint addresses of such a headless service — or, when it is no service's endpoint, the
   * server's own addresses. Possibly empty.
   */
  externalAddress(headless: boolean): string[];
  /** The data of the whole zone `zone`, for transfers (CoreDNS's ExternalServices). */
  externalServices(zone: string, headless: boolean): ExternalZone;
  /** The SOA serial of `zone`: changes whenever any of its data does. */
  externalSerial(zone: string): number;
}

export function isExternaler(h: Handler): h is Externaler {
  const e = h as Partial<Externaler>;
  return typeof e.external === 'function' && typeof e.externalReverse === 'function' && typeof e.externalAddress === 'function'
    && typeof e.externalServices === 'function' && typeof e.externalSerial === 'function';
}
