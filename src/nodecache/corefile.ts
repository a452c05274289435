// Corefile.base → Corefile, as node-cache's updateCorefile does it
// (kubernetes/dns cmd/node-cache/app/configmap.go): the __PILLAR__ placeholders,
// the upstream block's switch from TCP to UDP when custom upstreams exist, and
// one block per stub domain appended. Pure text in, text out.

import type { KubeDNSConfig } from './kubedns.ts';

export const UPSTREAM_SERVER_VAR = '__PILLAR__UPSTREAM__SERVERS__';
export const UPSTREAM_CLUSTER_DNS_VAR = '__PILLAR__CLUSTER__DNS__';
export const LOCAL_LISTEN_IPS_VAR = '__PILLAR__LOCAL__DNS__';
export const LOCAL_DNS_SERVER_VAR = '__PILLAR__DNS__SERVER__';
/** Stub domains are cached at most this long (node-cache's defaultTTL). */
export const STUB_DOMAIN_CACHE_TTL = 30;

// The exact text node-cache looks for (indentation included) to turn a TCP upstream into a UDP one.
const UPSTREAM_TCP_BLOCK = `
    forward . ${UPSTREAM_SERVER_VAR} {
            force_tcp
    }
`;
const UPSTREAM_UDP_BLOCK = `
    forward . ${UPSTREAM_SERVER_VAR}
`;

export interface RenderInput {
  /** The template's text. */
  base: string;
  /** -localip as given (commas). */
  localIPStr: string;
  /** -dns.port. */
  localPort: string;
  /** The upstream Service's ClusterIP as Go prints the parsed IP: `<nil>` when it was missing. */
  clusterDNS: string;
  kubeDNS: KubeDNSConfig;
}

export interface Rendered {
  text: string;
  /** What `__PILLAR__UPSTREAM__SERVERS__` became (logged by the caller). */
  upstreamServers: string;
  /** Set when custom upstreams exist but the TCP block was not found (node-cache's warning). */
  udpBlockNotFound: boolean;
}

function stubDomainBlock(domain: string, port: string, ttl: number, localIPs: string, servers: string): string {
  return `
${domain}:${port} {
    errors
    cache ${ttl}
    bind ${localIPs}
    forward . ${servers}
}
`;
}

export function renderCorefile(i: RenderInput): Rendered {
  const listenIPs = i.localIPStr.replaceAll(',', ' ');
  let base = i.base;
  let udpBlockNotFound = false;
  // Go ranges over a map (random order); nodens keeps the ConfigMap's JSON order, which is one of those orders.
  let stubs = '';
  for (const [domain, servers] of i.kubeDNS.stubDomains) {
    stubs += stubDomainBlock(domain, i.localPort, STUB_DOMAIN_CACHE_TTL, listenIPs, servers.join(' '));
  }
  let upstreamServers = i.kubeDNS.upstreamNameservers.join(' ');
  if (upstreamServers === '') {
    // forward reads the nameservers of the pod's resolv.conf (the node's, with dnsPolicy: Default).
    upstreamServers = '/etc/resolv.conf';
    base = base.replaceAll(UPSTREAM_SERVER_VAR, upstreamServers);
  } else {
    // Custom upstreams are asked over UDP (the client's protocol) rather than with force_tcp.
    base = base.replaceAll(UPSTREAM_TCP_BLOCK, UPSTREAM_UDP_BLOCK.replaceAll(UPSTREAM_SERVER_VAR, upstreamServers));
    if (base.includes(UPSTREAM_SERVER_VAR)) {
      udpBlockNotFound = true;
      base = base.replaceAll(UPSTREAM_SERVER_VAR, upstreamServers);
    }
  }
  base = base.replaceAll(UPSTREAM_CLUSTER_DNS_VAR, i.clusterDNS);
  base = base.replaceAll(LOCAL_LISTEN_IPS_VAR, listenIPs);
  // The kube-dns VIP is already among -localip, so a leftover __PILLAR__DNS__SERVER__ is blanked.
  base = base.replaceAll(LOCAL_DNS_SERVER_VAR, '');
  return { text: base + stubs, upstreamServers, udpBlockNotFound };
}
