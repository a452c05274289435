// CoreDNS's plugin.cfg: the one list that fixes the order in which plugins run
// (first = outermost) and in which their setups are called. The Corefile's
// order never matters. Kept in sync with the release named in <repo>/coredns.version.

import { readFileSync } from 'node:fs';

export const COREDNS_DIRECTIVES: readonly string[] = [
  'root', 'metadata', 'geoip', 'cancel', 'proxyproto', 'quic', 'grpc_server', 'https', 'https3',
  'timeouts', 'multisocket', 'reload', 'nsid', 'bufsize', 'bind', 'debug', 'trace', 'ready', 'health',
  'pprof', 'shed', 'prometheus', 'errors', 'log', 'dnstap', 'local', 'dns64', 'siit', 'any', 'chaos',
  'loadbalance', 'tsig', 'rewrite', 'autopath', 'acl', 'cache', 'header', 'dnssec', 'tls', 'minimal',
  'template', 'transfer', 'dynupdate', 'hosts', 'route53', 'azure', 'clouddns', 'k8s_external', 'kubernetes', 'file',
  'auto', 'secondary', 'etcd', 'loop', 'forward', 'grpc', 'erratic', 'whoami', 'on', 'sign', 'view',
  'nomad',
];

/**
 * The version of CoreDNS whose behaviour nodens reproduces (e.g. `1.15.0`): the one line of
 * <repo>/coredns.version, which scripts/coredns-reference.sh, the tests and the docs' checks read too.
 */
export const COREDNS_VERSION: string = readFileSync(new URL('../../coredns.version', import.meta.url), 'utf8').trim();
