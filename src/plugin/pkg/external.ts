// Capability: a handler that knows the externally reachable addresses of the
// services it serves (CoreDNS's external.Externaler): the k8s_external plugin
// answers `<service>.<namespace>.<zone>` from them. Provider: kubernetes
// (service external IPs and load-balancer ingress).

import type { Handler } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { ResourceRecord } from '../../wire/types.ts';

/** One answerable endpoint of a service (CoreDNS's msg.Service, the fields k8s_external reads). */
export interface ExternalService {
  /** An IP address, or a host name (load-balancer ingress hostname: a CNAME target). */
  host: string;
  port: number;
  priority: number;
  weight: number;
  ttl: number;
  /** The owner name the record is for (FQDN). */
  name: string;
  /** For SRV: `_port._proto` labels when the service has named ports; '' otherwise. */
  srvPrefix: string;
}

export interface Externaler extends Handler {
  /** The services matching the request's name below `zone`, and the rcode (NOERROR, NXDOMAIN) that goes with them. */
  external(req: Request, zone: string, headless: boolean): { services: ExternalService[]; rcode: number };
  /** The records for the nameserver of the external zone (apex NS glue). */
  externalAddress(req: Request, headless: boolean): ResourceRecord[];
  /** Every service of the external zone (for transfers), with headless services by name when asked. */
  externalServices(zone: string, headless: boolean): { services: ExternalService[]; headless: Map<string, ExternalService[]> };
  /** The zone's current SOA serial (changes when the services change). */
  externalSerial(zone: string): number;
}

export function isExternaler(h: Handler): h is Externaler {
  const e = h as Partial<Externaler>;
  return typeof e.external === 'function' && typeof e.externalServices === 'function';
}
