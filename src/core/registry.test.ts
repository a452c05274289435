// The plugin registry: execution order is CoreDNS's plugin.cfg order whatever
// the registration order; external plugins sit next to a named directive.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PluginRegistry } from './registry.ts';
import { COREDNS_DIRECTIVES, COREDNS_VERSION } from './directives.ts';
import type { PluginDefinition } from '../plugin/plugin.ts';

function def(name: string): PluginDefinition {
  return { name, setup() { /* nothing */ } };
}

// plugin.cfg of CoreDNS v1.15.0, in file order (core/dnsserver/zdirectives.go is generated from it). When
// coredns.version moves to another release, this list moves with it (the first test fails until it does).
const PLUGIN_CFG = `root metadata geoip cancel proxyproto quic grpc_server https https3 timeouts multisocket reload
nsid bufsize bind debug trace ready health pprof shed prometheus errors log dnstap local dns64 siit any chaos loadbalance
tsig rewrite autopath acl cache header dnssec tls minimal template transfer dynupdate hosts route53 azure clouddns k8s_external
kubernetes file auto secondary etcd loop forward grpc erratic whoami on sign view nomad`.split(/\s+/);

test('the directive list is plugin.cfg of CoreDNS 1.15.0', () => {
  assert.equal(COREDNS_VERSION, '1.15.0');
  assert.deepEqual([...COREDNS_DIRECTIVES], PLUGIN_CFG);
});

test('directives() follows plugin.cfg, not the order of registration, and lists only registered ones', () => {
  const r = new PluginRegistry();
  for (const n of ['whoami', 'forward', 'cache', 'log', 'errors', 'prometheus', 'reload', 'hosts', 'kubernetes']) r.register(def(n));
  assert.deepEqual(r.directives(), ['reload', 'prometheus', 'errors', 'log', 'cache', 'hosts', 'kubernetes', 'forward', 'whoami']);
  const all = new PluginRegistry();
  for (const n of [...PLUGIN_CFG].reverse()) all.register(def(n));
  assert.deepEqual(all.directives(), PLUGIN_CFG);
});

test('has() and get() know registered plugins only', () => {
  const r = new PluginRegistry();
  const hosts = def('hosts');
  r.register(hosts);
  assert.equal(r.has('hosts'), true);
  assert.equal(r.get('hosts'), hosts);
  // A plugin.cfg directive nodens did not register stays unknown (a Corefile using it gets "Unknown directive").
  assert.equal(r.has('route53'), false);
  assert.equal(r.get('route53'), undefined);
  assert.equal(r.has('nope'), false);
});

test('an external plugin runs just before or just after the directive it names', () => {
  const r = new PluginRegistry();
  for (const n of ['log', 'cache', 'hosts', 'forward']) r.register(def(n));
  r.register(def('early'), { before: 'cache' });
  r.register(def('late'), { after: 'forward' });
  r.register(def('first'), { before: 'root' });
  assert.deepEqual(r.directives(), ['first', 'log', 'early', 'cache', 'hosts', 'forward', 'late']);
});

test('placement may name a plugin.cfg directive that is not registered, or another external plugin', () => {
  const r = new PluginRegistry();
  for (const n of ['hosts', 'kubernetes']) r.register(def(n));
  // route53 sits between hosts and kubernetes in plugin.cfg.
  r.register(def('ext'), { after: 'route53' });
  r.register(def('ext2'), { after: 'ext' });
  r.register(def('ext0'), { before: 'ext' });
  assert.deepEqual(r.directives(), ['hosts', 'ext0', 'ext', 'ext2', 'kubernetes']);
});

test('two externals placed against the same directive: each new one goes right next to it', () => {
  const r = new PluginRegistry();
  r.register(def('cache'));
  r.register(def('b1'), { before: 'cache' });
  r.register(def('b2'), { before: 'cache' });
  r.register(def('a1'), { after: 'cache' });
  r.register(def('a2'), { after: 'cache' });
  assert.deepEqual(r.directives(), ['b1', 'b2', 'cache', 'a2', 'a1']);
});

test('a built-in keeps its plugin.cfg place even when a placement is given', () => {
  const r = new PluginRegistry();
  r.register(def('forward'));
  r.register(def('log'), { after: 'forward' });
  assert.deepEqual(r.directives(), ['log', 'forward']);
});

test('registration errors', () => {
  const r = new PluginRegistry();
  r.register(def('hosts'));
  assert.throws(() => { r.register(def('hosts')); }, { message: 'plugin "hosts" is already registered' });
  assert.throws(() => { r.register(def('mine')); },
    { message: 'plugin "mine" is not a CoreDNS directive: give { before } or { after } to place it in the chain' });
  assert.throws(() => { r.register(def('mine'), {}); },
    { message: 'plugin "mine" is not a CoreDNS directive: give { before } or { after } to place it in the chain' });
  assert.throws(() => { r.register(def('mine'), { before: 'nosuch' }); },
    { message: 'plugin "mine": unknown directive "nosuch" to place it next to' });
  assert.throws(() => { r.register(def('mine'), { after: 'nosuch' }); },
    { message: 'plugin "mine": unknown directive "nosuch" to place it next to' });
  // A failed registration leaves nothing behind.
  assert.equal(r.has('mine'), false);
  assert.deepEqual(r.directives(), ['hosts']);
  r.register(def('mine'), { after: 'hosts' });
  assert.throws(() => { r.register(def('mine'), { after: 'hosts' }); }, { message: 'plugin "mine" is already registered' });
});

test('-plugins lists names sorted, with `on` (a caddy plugin, not a DNS one) last, as CoreDNS prints them', () => {
  const r = new PluginRegistry();
  for (const n of ['whoami', 'on', 'cache', 'any', 'k8s_external', 'kubernetes', 'dns64']) r.register(def(n));
  r.register(def('zzz_ext'), { after: 'whoami' });
  r.register(def('aaa_ext'), { after: 'whoami' });
  assert.deepEqual(r.listForFlag(), ['aaa_ext', 'any', 'cache', 'dns64', 'k8s_external', 'kubernetes', 'whoami', 'zzz_ext', 'on']);
  const noOn = new PluginRegistry();
  noOn.register(def('whoami'));
  assert.deepEqual(noOn.listForFlag(), ['whoami']);
});
