// node-cache's flags through nodens's Go-style flag parser, and the checks of parseAndValidateFlags.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseFlags, type FlagSpec } from '../cli/flags.ts';
import { COREDNS_FLAGS } from '../cli/serve.ts';
import { NODECACHE_FLAGS, paramsFromFlags, toSvcEnv, expandEnv } from './params.ts';

const FLAGS: FlagSpec[] = [...NODECACHE_FLAGS, ...COREDNS_FLAGS];
const params = (...argv: string[]) => paramsFromFlags(parseFlags(FLAGS, argv).values);

test('defaults, and the reference manifest\'s arguments', () => {
  const p = params('-localip', '169.254.20.10,10.96.0.10', '-conf', '/etc/Corefile', '-upstreamsvc', 'kube-dns-upstream', '-pidfile', '/tmp/node-cache.pid');
  assert.deepEqual(p.localIPs, ['169.254.20.10', '10.96.0.10']);
  assert.equal(p.localIPStr, '169.254.20.10,10.96.0.10');
  assert.equal(p.ipv6, false);
  assert.equal(p.coreFile, '/etc/Corefile');
  assert.equal(p.upstreamSvcName, 'kube-dns-upstream');
  assert.equal(p.pidfile, '/tmp/node-cache.pid');
  assert.equal(p.interfaceName, 'nodelocaldns');
  assert.equal(p.setupInterface, true);
  assert.equal(p.setupIptables, true);
  assert.equal(p.skipTeardown, false);
  assert.equal(p.reloadWithSignal, false);
  assert.equal(p.metricsListenAddress, '0.0.0.0:9353');
  assert.equal(p.baseCoreFile, '/etc/coredns/Corefile.base');
  assert.equal(p.healthPort, '8080');
  assert.equal(p.localPort, '53');
  assert.equal(p.kubednsCMPath, '');
  assert.equal(p.intervalMs, 60_000); // default 60 (ns) times one second
});

test('-conf always wins over -corefile; without -conf the output path is empty', () => {
  assert.equal(params('-localip', '169.254.20.10', '-corefile', '/x/Corefile', '-conf', '/y/Corefile').coreFile, '/y/Corefile');
  assert.equal(params('-localip', '169.254.20.10', '-corefile', '/x/Corefile').coreFile, '');
});

test('-syncinterval: a Go duration whose nanoseconds count as seconds; a bare number is a flag error', () => {
  assert.equal(params('-localip', '1.2.3.4', '-syncinterval=30ns').intervalMs, 30_000);
  assert.equal(params('-localip', '1.2.3.4', '-syncinterval', '2us').intervalMs, 2_000_000);
  assert.equal(params('-localip', '1.2.3.4', '-syncinterval', '1s').intervalMs, 2 ** 31 - 1); // 1e9 s: capped at Node's longest timer
  assert.throws(() => params('-localip', '1.2.3.4', '-syncinterval', '30'), /^Error: invalid value "30" for flag -syncinterval: parse error$/);
  assert.throws(() => params('-localip', '1.2.3.4', '-syncinterval', '0s'), /invalid syncinterval specified - "0s"/);
});

test('-localip: every entry an IP, one family; the first decides', () => {
  assert.throws(() => params(), /^Error: invalid localip specified - ""$/);
  assert.throws(() => params('-localip', '169.254.20.10,'), /^Error: invalid localip specified - ""$/);
  assert.throws(() => params('-localip', '169.254.20.10,nodelocal'), /^Error: invalid localip specified - "nodelocal"$/);
  assert.throws(() => params('-localip', '169.254.20.10,fd00::5'), /^Error: unexpected IP Family for localIP - "fd00::5", want IPv6=false$/);
  assert.throws(() => params('-localip', 'fd00::5,10.0.0.1'), /^Error: unexpected IP Family for localIP - "10.0.0.1", want IPv6=true$/);
  const v6 = params('-localip', 'fe80:169:254::1,fd00:1:2:3::5');
  assert.equal(v6.ipv6, true);
  assert.deepEqual(v6.localIPs, ['fe80:169:254::1', 'fd00:1:2:3::5']);
  // IPv4-mapped counts as IPv4 (utilnet.IsIPv6), printed as Go prints it.
  assert.deepEqual(params('-localip', '10.0.0.1,::ffff:10.0.0.2').localIPs, ['10.0.0.1', '10.0.0.2']);
});

test('ports must be numbers (strconv.Atoi), -dns.port and -p alike', () => {
  assert.equal(params('-localip', '1.2.3.4', '-p', '1053').localPort, '1053');
  assert.equal(params('-localip', '1.2.3.4', '-dns.port=5353').localPort, '5353');
  assert.throws(() => params('-localip', '1.2.3.4', '-dns.port', 'dns'), /^Error: invalid port specified - "dns"$/);
  assert.throws(() => params('-localip', '1.2.3.4', '-health-port', '80a'), /^Error: invalid healthcheck port specified - "80a"$/);
});

test('booleans take only -name or -name=value (Go flag rules)', () => {
  const p = params('-localip', '1.2.3.4', '-setupinterface=false', '-setupiptables=false', '-skipteardown', '-reloadwithsignal');
  assert.equal(p.setupInterface, false);
  assert.equal(p.setupIptables, false);
  assert.equal(p.skipTeardown, true);
  assert.equal(p.reloadWithSignal, true);
  // `-skipteardown false` stops flag parsing at `false`: the rest are arguments (CoreDNS then refuses them).
  assert.deepEqual(parseFlags(FLAGS, ['-skipteardown', 'false', '-localip', '1.2.3.4']).rest, ['false', '-localip', '1.2.3.4']);
});

test('the upstream Service\'s environment variable', () => {
  assert.equal(toSvcEnv('kube-dns-upstream'), '$KUBE_DNS_UPSTREAM_SERVICE_HOST');
  assert.equal(toSvcEnv('kube-dns'), '$KUBE_DNS_SERVICE_HOST');
  assert.equal(expandEnv('$KUBE_DNS_UPSTREAM_SERVICE_HOST', { KUBE_DNS_UPSTREAM_SERVICE_HOST: '10.96.141.7' }), '10.96.141.7');
  assert.equal(expandEnv('$KUBE_DNS_UPSTREAM_SERVICE_HOST', {}), '');
  // A dot ends the variable name, as in Go's os.ExpandEnv.
  assert.equal(expandEnv(toSvcEnv('my.svc'), { MY: 'x' }), 'x.SVC_SERVICE_HOST');
});

test('-firewall (nodens) accepts only the known backends', () => {
  assert.equal(params('-localip', '1.2.3.4').firewall, 'auto');
  assert.equal(params('-localip', '1.2.3.4', '-firewall', 'nft').firewall, 'nft');
  assert.throws(() => params('-localip', '1.2.3.4', '-firewall', 'pf'), /invalid firewall specified - "pf"/);
});
