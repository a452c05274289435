// `nodens node-cache` in network namespaces (root): a node namespace running the cache on 169.254.20.10 and the
// kube-dns VIP 10.96.0.10, a peer namespace (veth) with the cluster DNS behind the kube-dns-upstream ClusterIP
// (a kube-proxy-style DNAT) and the node's resolver. Checks the interface and the rules node-cache installs,
// answers on both IPs, TCP to the cluster DNS, repair, teardown on SIGTERM and on a fatal error, what kill -9
// leaves and how the next start adopts it, the setup-error metrics, and seed 004's self-loop contained.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { BIN } from '../helpers/server.ts';
import { Netns, available, digIn, type Proc } from '../netns/netns.ts';
import { NetifManager, runIp, type IpRunner } from '../../src/nodecache/netif.ts';

function requireTools(): void {
  assert.ok(available(), 'network namespaces unavailable: run as root with iproute2 installed');
  for (const [cmd, pkg] of [['iptables', 'iptables'], ['nft', 'nftables'], ['dig', 'dnsutils'], ['curl', 'curl']]) {
    assert.equal(spawnSync('sh', ['-c', `command -v ${cmd}`]).status, 0, `${cmd} is not installed (apt-get install -y ${pkg})`);
  }
}

const LINK_LOCAL = '169.254.20.10';
const KUBE_DNS_VIP = '10.96.0.10';
const UPSTREAM_SVC_IP = '10.96.1.1';

// The reference manifest's Corefile.base after the operator's sed (iptables mode): LOCAL__DNS and DNS__SERVER
// already substituted by hand in the health line; node-cache fills the rest.
const BASE = `cluster.local:53 {
    errors
    cache {
        success 9984 30
        denial 9984 5
    }
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
        force_tcp
    }
    health ${LINK_LOCAL}:18080
}
in-addr.arpa:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
        force_tcp
    }
}
.:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__UPSTREAM__SERVERS__
}
`;

/** The node's rules with node-cache's comments, as `iptables-save` prints them. */
function ourRules(ns: Netns): string[] {
  return ns.exec('iptables-save', []).stdout.split('\n').filter((l) => l.includes('NodeLocal DNS Cache'));
}

function linkAddrs(ns: Netns, dev: string): string[] | undefined {
  const r = spawnSync('ip', ['-n', ns.name, '-j', 'addr', 'show', 'dev', dev], { encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  const list = JSON.parse(r.stdout) as Array<{ addr_info: Array<{ family: string; local: string; prefixlen: number }> }>;
  return list[0]!.addr_info.filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`);
}

async function eventually(what: string, pred: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Setup { node: Netns; peer: Netns; upstream: Proc; dir: string; base: string }

/** Node and peer namespaces, the cluster DNS (10.10.0.2, behind the Service IP) and the node's resolver (10.10.0.3). */
async function setup(label: string): Promise<Setup> {
  const node = new Netns(label);
  const peer = node.veth('10.10.0.1/24', '10.10.0.2/24');
  spawnSync('ip', ['-n', peer.name, 'addr', 'add', '10.10.0.3/24', 'dev', spawnSync('ip', ['-n', peer.name, '-o', 'link', 'show', 'type', 'veth'], { encoding: 'utf8' }).stdout.split(':')[1]!.trim().split('@')[0]!]);
  // kube-proxy's part: the upstream Service's ClusterIP is DNATed to the cluster DNS pod (routed towards the peer,
  // as a node's default route would, so the output path reaches the DNAT).
  node.route('10.96.0.0/16', '10.10.0.2');
  const nat = node.exec('iptables', ['-t', 'nat', '-A', 'OUTPUT', '-d', UPSTREAM_SVC_IP, '-j', 'DNAT', '--to-destination', '10.10.0.2']);
  assert.equal(nat.status, 0, nat.stdout);
  const upstream = peer.nodens(`cluster.local:53 {
    bind 10.10.0.2
    log
    hosts {
        10.96.0.10 kube-dns.kube-system.svc.cluster.local
        ttl 1
    }
}
corp.example:53 {
    bind 10.10.0.2
    log
    hosts {
        10.1.2.3 db.corp.example
    }
}
.:53 {
    bind 10.10.0.3
    log
    hosts {
        192.0.2.1 www.example.com
        ttl 1
    }
}
`, 'Corefile.upstream');
  await upstream.waitFor(/^CoreDNS-/);
  node.resolvConf('nameserver 10.10.0.3\n');
  const base = node.file('Corefile.base', BASE);
  return { node, peer, upstream, dir: node.dir, base };
}

async function close(s: Setup): Promise<void> {
  await s.peer.close();
  await s.node.close();
}

function nodeCache(s: Setup, extra: string[] = [], name = 'Corefile'): Proc {
  return s.node.run('env', [`KUBE_DNS_UPSTREAM_SERVICE_HOST=${UPSTREAM_SVC_IP}`, BIN, 'node-cache',
    '-localip', `${LINK_LOCAL},${KUBE_DNS_VIP}`, '-conf', `${s.dir}/${name}`, '-upstreamsvc', 'kube-dns-upstream',
    '-basecorefile', s.base, '-pidfile', `${s.dir}/node-cache.pid`, '-health-port', '18080',
    '-metrics-listen-address', '127.0.0.1:19353', ...extra]);
}

test('node-cache: interface, rules, answers on both IPs, TCP to the cluster DNS, repair, metrics, teardown on SIGTERM', { timeout: 120_000 }, async () => {
  requireTools();
  const s = await setup('nc');
  try {
    const nc = nodeCache(s, ['-syncinterval=1ns']);
    await nc.waitFor(/^CoreDNS-/);
    // The interface exists before the server starts; on this kernel it is the ifb fallback, and the log says so.
    const fallback = nc.out.find((l) => /dummy/.test(l) && /Using a dummy interface|using an ifb interface|on lo instead/.test(l));
    assert.ok(fallback !== undefined, nc.out.join('\n'));
    process.stdout.write(`# interface: ${fallback}\n`);
    assert.deepEqual(linkAddrs(s.node, 'nodelocaldns'), [`${LINK_LOCAL}/32`, `${KUBE_DNS_VIP}/32`]);
    // Rules follow the pidfile: 12 per local IP.
    await eventually('24 rules', () => ourRules(s.node).length === 24, 10_000);
    const raw = s.node.exec('iptables', ['-t', 'raw', '-S']).stdout;
    for (const ip of [LINK_LOCAL, KUBE_DNS_VIP]) {
      for (const p of ['tcp', 'udp']) {
        assert.ok(raw.includes(`-A PREROUTING -d ${ip}/32 -p ${p} -m ${p} --dport 53 -m comment --comment "NodeLocal DNS Cache: skip conntrack" -j NOTRACK`), raw);
        assert.ok(raw.includes(`-A OUTPUT -s ${ip}/32 -p ${p} -m ${p} --sport 53 -m comment --comment "NodeLocal DNS Cache: skip conntrack" -j NOTRACK`), raw);
        assert.ok(raw.includes(`-A OUTPUT -d ${ip}/32 -p ${p} -m ${p} --dport 53 -m comment --comment "NodeLocal DNS Cache: skip conntrack" -j NOTRACK`), raw);
      }
      assert.ok(raw.includes(`-A OUTPUT -d ${ip}/32 -p tcp -m tcp --dport 18080 -m comment --comment "NodeLocal DNS Cache: skip conntrack" -j NOTRACK`), raw);
      assert.ok(raw.includes(`-A OUTPUT -s ${ip}/32 -p tcp -m tcp --sport 18080 -m comment --comment "NodeLocal DNS Cache: skip conntrack" -j NOTRACK`), raw);
    }
    const filter = s.node.exec('iptables', ['-S']).stdout;
    assert.ok(filter.includes(`-A INPUT -d ${LINK_LOCAL}/32 -p udp -m udp --dport 53 -m comment --comment "NodeLocal DNS Cache: allow DNS traffic" -j ACCEPT`), filter);
    assert.ok(filter.includes(`-A OUTPUT -s ${KUBE_DNS_VIP}/32 -p tcp -m tcp --sport 53 -m comment --comment "NodeLocal DNS Cache: allow DNS traffic" -j ACCEPT`), filter);

    // The cluster zone goes to the upstream Service over TCP; other names to the resolv.conf nameserver.
    const k = digIn(s.node, LINK_LOCAL, 'kube-dns.kube-system.svc.cluster.local');
    assert.equal(k.status, 'NOERROR', k.out);
    assert.match(k.out, /kube-dns\.kube-system\.svc\.cluster\.local\.\s+\d+\s+IN\s+A\s+10\.96\.0\.10/);
    const tcpLine = await s.upstream.waitFor(/"A IN kube-dns\.kube-system\.svc\.cluster\.local\. tcp /, 5000);
    assert.match(tcpLine, /^\[INFO\] 10\.10\.0\.1:\d+ - /);
    const w = digIn(s.node, KUBE_DNS_VIP, 'www.example.com');
    assert.equal(w.status, 'NOERROR', w.out);
    assert.match(w.out, /www\.example\.com\.\s+\d+\s+IN\s+A\s+192\.0\.2\.1/);
    await s.upstream.waitFor(/"A IN www\.example\.com\. udp /, 5000);
    // The health plugin on the link-local address (the liveness probe's target).
    const h = s.node.exec('curl', ['-s', '--max-time', '3', `http://${LINK_LOCAL}:18080/health`]);
    assert.equal(h.stdout, 'OK');

    // node-cache's own metrics on -metrics-listen-address.
    const m = s.node.exec('curl', ['-s', '--max-time', '3', 'http://127.0.0.1:19353/metrics']).stdout;
    for (const t of ['iptables', 'iptables_lock', 'interface_add', 'interface_check', 'configmap']) {
      assert.ok(m.includes(`coredns_nodecache_setup_errors_total{errortype="${t}"} 0`), m);
    }

    // Repair: a deleted rule and a deleted interface come back within the sync interval (1 s here).
    const del = s.node.exec('iptables', ['-t', 'raw', '-D', 'PREROUTING', '-p', 'udp', '-d', LINK_LOCAL, '--dport', '53', '-j', 'NOTRACK', '-m', 'comment', '--comment', 'NodeLocal DNS Cache: skip conntrack']);
    assert.equal(del.status, 0, del.stdout);
    spawnSync('ip', ['-n', s.node.name, 'link', 'del', 'nodelocaldns']);
    await eventually('rule and interface repaired', () => ourRules(s.node).length === 24 && linkAddrs(s.node, 'nodelocaldns')?.length === 2, 5000);
    assert.ok(nc.out.some((l) => l.startsWith(`[INFO] Added back nodelocaldns rule - {raw PREROUTING [-p udp -d ${LINK_LOCAL} --dport 53 -j NOTRACK -m comment --comment NodeLocal DNS Cache: skip conntrack]}`)), nc.out.join('\n'));
    assert.ok(nc.out.includes('[INFO] Added interface - nodelocaldns'));
    assert.equal(digIn(s.node, LINK_LOCAL, 'kube-dns.kube-system.svc.cluster.local').status, 'NOERROR');

    // SIGTERM: rules and interface removed, exit 0.
    assert.equal(await nc.stop(), 0);
    assert.ok(nc.out.includes('[INFO] Tearing down'), nc.out.join('\n'));
    assert.deepEqual(ourRules(s.node), []);
    assert.equal(linkAddrs(s.node, 'nodelocaldns'), undefined);
    assert.ok(!existsSync(`${s.dir}/node-cache.pid`));
  } finally {
    await close(s);
  }
});

test('node-cache: a stub domain added to the kube-dns ConfigMap is written and served after the 10 s poll (-reloadwithsignal)', { timeout: 90_000 }, async () => {
  requireTools();
  const s = await setup('ncstub');
  try {
    const cm = `${s.dir}/kube-dns`;
    mkdirSync(cm);
    const nc = nodeCache(s, ['-kubednscm', cm, '-reloadwithsignal']);
    await nc.waitFor(/^CoreDNS-/);
    assert.notEqual(digIn(s.node, LINK_LOCAL, 'db.corp.example').status, 'NOERROR'); // the resolv.conf server does not know it
    writeFileSync(`${cm}/stubDomains`, '{"corp.example": ["10.10.0.2"]}');
    const t0 = Date.now();
    await nc.waitFor(/Updated Corefile with 1 custom stubdomains and upstream servers \/etc\/resolv\.conf/, 15_000);
    await nc.waitFor(/SIGUSR1: Reloading/, 5000);
    let r = digIn(s.node, LINK_LOCAL, 'db.corp.example');
    for (let i = 0; i < 30 && r.status !== 'NOERROR'; i++) {
      await new Promise((res) => setTimeout(res, 100));
      r = digIn(s.node, LINK_LOCAL, 'db.corp.example');
    }
    assert.equal(r.status, 'NOERROR', r.out);
    assert.match(r.out, /db\.corp\.example\.\s+\d+\s+IN\s+A\s+10\.1\.2\.3/);
    process.stdout.write(`# stub domain served ${Date.now() - t0} ms after the ConfigMap changed\n`);
    assert.ok(readFileSync(`${s.dir}/Corefile`, 'utf8').endsWith(`\ncorp.example:53 {\n    errors\n    cache 30\n    bind ${LINK_LOCAL} ${KUBE_DNS_VIP}\n    forward . 10.10.0.2\n}\n`));
    assert.equal(await nc.stop(), 0);
  } finally {
    await close(s);
  }
});

test('node-cache: kill -9 leaves interface and rules (as node-cache does); the next start adopts them without duplicates; -skipteardown keeps them', { timeout: 120_000 }, async () => {
  requireTools();
  const s = await setup('nckill');
  try {
    const a = nodeCache(s);
    await a.waitFor(/^CoreDNS-/);
    await eventually('24 rules', () => ourRules(s.node).length === 24, 10_000);
    a.proc.kill('SIGKILL');
    await a.exited;
    // Not catchable: what the process held stays, and the node's DNS to these IPs has no listener until a restart.
    assert.equal(ourRules(s.node).length, 24);
    assert.deepEqual(linkAddrs(s.node, 'nodelocaldns'), [`${LINK_LOCAL}/32`, `${KUBE_DNS_VIP}/32`]);
    assert.equal(digIn(s.node, LINK_LOCAL, 'kube-dns.kube-system.svc.cluster.local').status, 'TIMEOUT');
    // The next instance finds and keeps them: still 24 rules (each checked before insertion), one interface.
    const b = nodeCache(s);
    await b.waitFor(/^CoreDNS-/);
    // Its first check runs once the pidfile exists (the killed process's stale one already does), then every 60 s.
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(ourRules(s.node).length, 24);
    assert.ok(!b.out.some((l) => l.startsWith('[INFO] Added back nodelocaldns rule')), b.out.join('\n'));
    assert.equal(digIn(s.node, LINK_LOCAL, 'kube-dns.kube-system.svc.cluster.local').status, 'NOERROR');
    assert.equal(await b.stop(), 0);
    assert.deepEqual(ourRules(s.node), []);
    assert.equal(linkAddrs(s.node, 'nodelocaldns'), undefined);
    // -skipteardown: SIGTERM leaves everything (Cilium-style deployments and upgrades rely on it).
    const c = nodeCache(s, ['-skipteardown']);
    await c.waitFor(/^CoreDNS-/);
    await eventually('24 rules', () => ourRules(s.node).length === 24, 10_000);
    assert.equal(await c.stop(), 0);
    assert.equal(ourRules(s.node).length, 24);
    assert.notEqual(linkAddrs(s.node, 'nodelocaldns'), undefined);
  } finally {
    await close(s);
  }
});

test('node-cache: a fatal error (loop { action exit } finding a loop that appears later) still tears down', { timeout: 120_000 }, async () => {
  requireTools();
  const s = await setup('ncfatal');
  try {
    writeFileSync(s.base, BASE.replace(/\.:53 \{\n    errors\n    cache 30\n    reload\n    loop\n/, '.:53 {\n    errors\n    cache 30\n    reload\n    loop {\n        action exit\n    }\n'));
    const nc = nodeCache(s);
    await nc.waitFor(/^CoreDNS-/);
    await eventually('24 rules', () => ourRules(s.node).length === 24, 10_000);
    // The node's resolver file starts naming the cache itself (seed 004's mistake, made at run time).
    writeFileSync(`/etc/netns/${s.node.name}/resolv.conf`, `nameserver ${LINK_LOCAL}\n`);
    assert.equal(await nc.exited, 1);
    assert.ok(nc.out.some((l) => /^\[FATAL\] plugin\/loop: Loop \(.* -> 169\.254\.20\.10:53\) detected for zone "\."/.test(l)), nc.out.join('\n'));
    assert.ok(nc.out.includes('[INFO] Tearing down'));
    assert.deepEqual(ourRules(s.node), []);
    assert.equal(linkAddrs(s.node, 'nodelocaldns'), undefined);
  } finally {
    await close(s);
  }
});

test('node-cache, seed 004: resolv.conf names the cache\'s own 169.254.25.10; the loop is contained and named, cluster.local answers', { timeout: 120_000 }, async () => {
  requireTools();
  const s = await setup('nc004');
  try {
    s.node.resolvConf('options timeout:2 attempts:3 rotate single-request-reopen\n; generated by /usr/sbin/dhclient-script\nnameserver 169.254.25.10\n');
    const base = s.node.file('Corefile.base.004', BASE.replaceAll(LINK_LOCAL, '169.254.25.10'));
    const nc = s.node.run('env', [`KUBE_DNS_UPSTREAM_SERVICE_HOST=${UPSTREAM_SVC_IP}`, BIN, 'node-cache', '-localip', '169.254.25.10',
      '-conf', `${s.dir}/Corefile.004`, '-upstreamsvc', 'kube-dns-upstream', '-basecorefile', base, '-health-port', '18080',
      '-metrics-listen-address', '127.0.0.1:19354']);
    const line = await nc.waitFor(/\[ERROR\] plugin\/loop: Loop detected for zone "\."/, 15_000);
    assert.match(line, /through upstream 169\.254\.25\.10:53 \(resolv\.conf \/etc\/resolv\.conf:3\)/);
    assert.ok(nc.out.some((l) => /^\[WARNING\] plugin\/loop: Upstream 169\.254\.25\.10:53 .* is this server block's own listen address/.test(l)), nc.out.join('\n'));
    process.stdout.write(`# seed 004: ${line.slice(0, 160)}…\n`);
    const k = digIn(s.node, '169.254.25.10', 'kube-dns.kube-system.svc.cluster.local');
    assert.equal(k.status, 'NOERROR', k.out);
    const t0 = Date.now();
    const e = digIn(s.node, '169.254.25.10', 'www.example.com');
    assert.equal(e.status, 'SERVFAIL', e.out);
    // Well inside forward's 5 s deadline: the quarantine answers, no upstream attempt times out.
    assert.ok(Date.now() - t0 < 2500, `${Date.now() - t0} ms`);
    assert.equal(nc.proc.exitCode, null);
    assert.equal(await nc.stop(), 0);
  } finally {
    await close(s);
  }
});

test('node-cache with native nftables (-firewall nft, a host without iptables) and IPv6 local IPs: rules, repair, teardown', { timeout: 60_000 }, async () => {
  requireTools();
  const node = new Netns('ncnft');
  try {
    const base = node.file('Corefile.base', '.:53 {\n    bind __PILLAR__LOCAL__DNS__\n    whoami\n}\n');
    const nc = node.run(BIN, ['node-cache', '-localip', 'fd00:1:2:3::5,fd00:1:2:3::6', '-conf', `${node.dir}/Corefile`, '-basecorefile', base,
      '-pidfile', `${node.dir}/pid`, '-firewall', 'nft', '-syncinterval=1ns', '-metrics-listen-address', '[::1]:19355']);
    await nc.waitFor(/^CoreDNS-/);
    assert.ok(nc.out.includes('[INFO] Using nft (table nodelocaldns) for the nodelocaldns rules (-firewall nft)'), nc.out.join('\n'));
    const rules = (): string[] => node.exec('nft', ['-a', 'list', 'table', 'ip6', 'nodelocaldns']).stdout.split('\n').filter((l) => l.includes('NodeLocal DNS Cache'));
    await eventually('24 nft rules', () => rules().length === 24, 10_000);
    assert.ok(rules().some((l) => l.trim().startsWith('ip6 daddr fd00:1:2:3::5 udp dport 53 notrack comment "NodeLocal DNS Cache: skip conntrack"')), rules().join('\n'));
    assert.ok(rules().some((l) => l.trim().startsWith('ip6 saddr fd00:1:2:3::6 tcp sport 53 accept comment "NodeLocal DNS Cache: allow DNS traffic"')), rules().join('\n'));
    const r = digIn(node, 'fd00:1:2:3::6', 'whoami.example', 'A');
    assert.equal(r.status, 'NOERROR', r.out);
    // Repair: one rule deleted by handle comes back.
    const victim = rules().find((l) => l.includes('ip6 daddr fd00:1:2:3::5 tcp dport 53 notrack'))!;
    const handle = /# handle (\d+)/.exec(victim)![1]!;
    assert.equal(node.exec('nft', ['delete', 'rule', 'ip6', 'nodelocaldns', 'prerouting_raw', 'handle', handle]).status, 0);
    assert.equal(rules().length, 23);
    await eventually('nft rule repaired', () => rules().length === 24, 5000);
    assert.equal(await nc.stop(), 0);
    assert.equal(node.exec('nft', ['list', 'table', 'ip6', 'nodelocaldns']).status, 1);
    assert.equal(linkAddrs(node, 'nodelocaldns'), undefined);
  } finally {
    await node.close();
  }
});

test('interface fallback to lo when neither dummy nor ifb links can be made (the link types refused, everything else real)', { timeout: 30_000 }, async () => {
  requireTools();
  const node = new Netns('nclo');
  try {
    const lines: string[] = [];
    // This kernel has ifb, so its refusal is simulated; every other `ip` call runs for real in the namespace.
    const ip: IpRunner = (args) => (args.includes('type') && (args.includes('dummy') || args.includes('ifb'))
      ? { ok: false, stdout: '', stderr: 'Error: Unknown device type.' }
      : runIp(['-n', node.name, ...args]));
    const m = new NetifManager('nodelocaldns', ['169.254.20.10', '10.96.0.10'], false, (l) => { lines.push(l); }, ip);
    assert.deepEqual(m.ensure(), { existed: false });
    assert.equal(m.kind, 'lo');
    assert.match(lines.join('\n'), /The kernel has neither dummy nor ifb interfaces .*; putting the local IPs on lo instead/);
    assert.deepEqual(linkAddrs(node, 'lo'), ['127.0.0.1/8', '169.254.20.10/32', '10.96.0.10/32']);
    // The check re-adds a removed address and reports the addresses as present.
    spawnSync('ip', ['-n', node.name, 'addr', 'del', '10.96.0.10/32', 'dev', 'lo']);
    assert.deepEqual(m.ensure(), { existed: true });
    assert.deepEqual(linkAddrs(node, 'lo'), ['127.0.0.1/8', '169.254.20.10/32', '10.96.0.10/32']);
    assert.equal(m.remove(), undefined);
    assert.deepEqual(linkAddrs(node, 'lo'), ['127.0.0.1/8']);
  } finally {
    await node.close();
  }
});
