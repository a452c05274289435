import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, plugin, type ForwardSetupOptions } from './setup.ts';
import type { Forward } from './forward.ts';
import { captureLog, parseTable, runSetup } from '../pkg/testing.ts';

/** A flat view of the first stanza (and the FROM TO... of every stanza), for rows that name only what they set. */
function view(o: ForwardSetupOptions) {
  const st = o.stanzas[0]!;
  const { proxy, policy, ...rest } = st.opts;
  const { health, ...transport } = proxy;
  return {
    lines: o.stanzas.map((x) => [x.from, ...x.to.map((t) => t.text)].join(' ')),
    toLines: st.to.map((t) => `${t.file}:${t.line}`),
    ...rest,
    policy: policy.name,
    ...transport,
    health,
    tlsArgs: st.tlsArgs,
    tlsServerName: st.tlsServerName,
    resolvers: st.resolvers,
  };
}
type View = ReturnType<typeof view>;

/** Every default, as `forward . 1.2.3.4` gives them. */
const DEF: View = {
  lines: ['. 1.2.3.4'], toLines: ['Corefile:2'],
  from: '.', ignored: [], maxFails: 2, maxConnectAttempts: undefined, policy: 'random', forceTcp: false, preferUdp: false,
  maxConcurrent: 0, nextRcodes: [], nextOnNodata: false, failfast: false, failoverRcodes: [], coalesce: true,
  resolvConfReloadMs: 2000,
  expireMs: 10000, maxAgeMs: 0, maxIdleConns: 0, source: undefined, tls: undefined, reuseUdp: false, readTimeoutMs: 2000,
  dohMethod: 'POST', caseRandomization: true,
  health: { intervalMs: 500, recursionDesired: true, domain: '.', forceTcp: false, periodicMs: 0 },
  tlsArgs: undefined, tlsServerName: undefined, resolvers: [],
};

const fwd = (lines: string): string => `. {\n forward . 1.2.3.4 {\n${lines.split('\n').map((l) => `  ${l}\n`).join('')} }\n}`;
const P = 'plugin/forward: ';
const E3 = 'plugin/forward: Corefile:3 - Error during parsing: ';
const argErr = (after: string): string => E3 + `Wrong argument count or unexpected line ending after '${after}'`;

test('forward parse', async () => {
  await parseTable('forward', parse, [
    ['. {\n forward . 1.2.3.4\n}', DEF],
    // TOs are kept as written: files and host names are read and resolved by setup, not parse.
    ['. {\n forward Example.ORG 1.2.3.4:5353 tls://9.9.9.9 /etc/resolv.conf dns.google\n}',
      { from: 'example.org.', lines: ['example.org. 1.2.3.4:5353 tls://9.9.9.9 /etc/resolv.conf dns.google'] }],
    ['. {\n forward 10.0.0.0/24 1.2.3.4\n}', { from: '0.0.10.in-addr.arpa.', lines: ['0.0.10.in-addr.arpa. 1.2.3.4'] }],
    ['. {\n forward a. 1.1.1.1\n forward b. 2.2.2.2 3.3.3.3\n}', { lines: ['a. 1.1.1.1', 'b. 2.2.2.2 3.3.3.3'] }],
    ['. {\n forward . 1.2.3.4 {\n }\n}', DEF],
    [fwd('except Example.org b.org.'), { ignored: ['example.org.', 'b.org.'], toLines: ['Corefile:2'] }],
    [fwd('max_fails 0\nmax_connect_attempts 5'), { maxFails: 0, maxConnectAttempts: 5 }],
    [fwd('health_check 1s'), { health: { ...DEF.health, intervalMs: 1000 } }],
    [fwd('health_check 250ms no_rec domain Example.com periodic'),
      { health: { ...DEF.health, intervalMs: 250, recursionDesired: false, domain: 'example.com.', periodicMs: 10000 } }],
    [fwd('health_check 0s periodic 2s'), { health: { ...DEF.health, intervalMs: 0, periodicMs: 2000 } }],
    // The health check's force_tcp follows force_tcp, set by setup.
    [fwd('force_tcp'), { forceTcp: true, health: DEF.health }],
    [fwd('prefer_udp'), { preferUdp: true }],
    [fwd('tls'), { tlsArgs: [], tls: undefined }],
    [fwd('tls ca.pem'), { tlsArgs: ['ca.pem'] }],
    [fwd('tls cert.pem key.pem ca.pem\ntls_servername dns.example'), { tlsArgs: ['cert.pem', 'key.pem', 'ca.pem'], tlsServerName: 'dns.example' }],
    [fwd('reuse_udp_sockets'), { reuseUdp: true }],
    [fwd('expire 5s\nmax_age 1m\nmax_idle_conns 10'), { expireMs: 5000, maxAgeMs: 60000, maxIdleConns: 10 }],
    // CoreDNS refuses a max_age below expire; nodens does not check it.
    [fwd('expire 1m\nmax_age 5s'), { expireMs: 60000, maxAgeMs: 5000 }],
    [fwd('read_timeout 100ms'), { readTimeoutMs: 100 }],
    [fwd('read_timeout 1us'), { readTimeoutMs: 1 }],
    [fwd('doh_method GET'), { dohMethod: 'GET' }],
    [fwd('policy round_robin'), { policy: 'round_robin' }],
    [fwd('policy sequential'), { policy: 'sequential' }],
    [fwd('policy sequential\npolicy random'), { policy: 'random' }],
    [fwd('max_concurrent 100'), { maxConcurrent: 100 }],
    [fwd('next NXDOMAIN servfail\nnext REFUSED'), { nextRcodes: [3, 2, 5] }],
    [fwd('next_on_nodata'), { nextOnNodata: true }],
    [fwd('failfast_all_unhealthy_upstreams'), { failfast: true }],
    [fwd('failover SERVFAIL refused'), { failoverRcodes: [2, 5] }],
    [fwd('source_address 10.0.0.1'), { source: '10.0.0.1' }],
    [fwd('source_address ::1'), { source: '::1' }],
    [fwd('resolver 8.8.8.8 1.1.1.1:5353 [::1]:53 ::2'), { resolvers: ['8.8.8.8', '1.1.1.1:5353', '[::1]:53', '::2'] }],
    [fwd('coalesce off'), { coalesce: false }],
    [fwd('coalesce on\nresolvconf_reload 0s'), { coalesce: true, resolvConfReloadMs: 0 }],
    [fwd('resolvconf_reload 10s'), { resolvConfReloadMs: 10000 }],
    [fwd('case_randomization off'), { caseRandomization: false }],
    [fwd('case_randomization on'), { caseRandomization: true }],

    ['. {\n forward\n}', "plugin/forward: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'forward'"],
    ['. {\n forward .\n}', "plugin/forward: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after '.'"],
    ['. {\n forward a..b 1.2.3.4\n}', P + "unable to normalize 'a..b'"],
    [fwd('except'), argErr('except')],
    [fwd('max_fails'), argErr('max_fails')],
    [fwd('max_fails -1'), P + 'strconv.ParseUint: parsing "-1": invalid syntax'],
    [fwd('max_connect_attempts 4294967296'), P + 'strconv.ParseUint: parsing "4294967296": value out of range'],
    [fwd('health_check'), argErr('health_check')],
    [fwd('health_check soon'), P + 'time: invalid duration "soon"'],
    [fwd('health_check -1s'), P + "health_check can't be negative: -1000000000"],
    [fwd('health_check 1s domain'), argErr('domain')],
    [fwd('health_check 1s domain a..b'), P + 'health_check: invalid domain name a..b'],
    [fwd('health_check 1s periodic often'), P + 'health_check: invalid periodic interval often'],
    [fwd('health_check 1s periodic 0s'), P + 'health_check: periodic interval must be positive'],
    [fwd('health_check 1s tcp'), P + 'health_check: unknown option tcp'],
    [fwd('force_tcp yes'), argErr('yes')],
    [fwd('prefer_udp yes'), argErr('yes')],
    [fwd('tls a b c d'), argErr('d')],
    [fwd('tls_servername'), argErr('tls_servername')],
    [fwd('reuse_udp_sockets yes'), argErr('yes')],
    [fwd('expire -1s'), P + "expire can't be negative: -1s"],
    [fwd('max_age -1m'), P + "max_age can't be negative: -1m0s"],
    [fwd('max_idle_conns -1'), P + "max_idle_conns can't be negative: -1"],
    [fwd('max_idle_conns x'), P + 'strconv.Atoi: parsing "x": invalid syntax'],
    [fwd('read_timeout 0s'), P + 'read_timeout must be positive: 0s'],
    [fwd('doh_method PUT'), P + 'doh_method must be either POST or GET'],
    [fwd('policy'), argErr('policy')],
    [fwd('policy least_used'), E3 + "unknown policy 'least_used'"],
    [fwd('max_concurrent -1'), P + "max_concurrent can't be negative: -1"],
    [fwd('next'), argErr('next')],
    [fwd('next NOPE'), P + 'NOPE is not a valid rcode'],
    [fwd('next RCODE12'), P + 'RCODE12 is not a valid rcode'],
    [fwd('next_on_nodata yes'), argErr('yes')],
    [fwd('failfast_all_unhealthy_upstreams yes'), argErr('yes')],
    [fwd('failover'), argErr('failover')],
    [fwd('failover NOERROR'), P + 'NoError cannot be used in failover'],
    [fwd('source_address'), argErr('source_address')],
    [fwd('source_address example.org'), P + 'invalid IP address: example.org'],
    [fwd('resolver'), argErr('resolver')],
    [fwd('resolver dns.google'), P + 'resolver must be an IP address or IP:port: "dns.google"'],
    [fwd('coalesce'), argErr('coalesce')],
    [fwd('coalesce maybe'), argErr('maybe')],
    [fwd('case_randomization'), argErr('case_randomization')],
    [fwd('case_randomization yes'), argErr('yes')],
    [fwd('resolvconf_reload -1s'), P + "resolvconf_reload can't be negative: -1s"],
    [fwd('bogus'), E3 + "unknown property 'bogus'"],
  ], { view, partial: true });
});

test('forward parse warns when a CIDR FROM expands to several zones, and uses the first', async () => {
  const lines = await captureLog(() => parseTable('forward', parse, [
    ['. {\n forward 10.0.0.0/23 1.2.3.4\n}', { from: '0.0.10.in-addr.arpa.' }],
  ], { view, partial: true }));
  assert.deepEqual(lines, [
    "[WARNING] plugin/forward: Unsupported CIDR notation: '10.0.0.0/23' expands to multiple zones. Using only '0.0.10.in-addr.arpa.'.",
  ]);
});

test('forward start-up watches its resolv.conf TO file (resolvconf_reload); shutdown stops watching', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'nodens-forward-')), 'resolv.conf');
  writeFileSync(file, 'nameserver 127.0.0.1\n');
  const r = await runSetup(plugin, `. {\n forward . ${file} {\n  resolvconf_reload 20ms\n }\n}`);
  const fwd = r.chain() as unknown as Forward;
  const upstreams = (): string[] => fwd.proxies.map((p) => p.addr);
  // Setup read the file.
  assert.deepEqual(upstreams(), ['127.0.0.1:53']);
  const rewrite = async (text: string, ahead: number): Promise<void> => {
    writeFileSync(file, text);
    utimesSync(file, new Date(), new Date(Date.now() + ahead));
    await new Promise((res) => setTimeout(res, 120));
  };
  await captureLog(async () => {
    await r.start();
    await rewrite('nameserver 127.0.0.2\nnameserver 127.0.0.3\n', 5000);
  });
  assert.deepEqual(upstreams(), ['127.0.0.2:53', '127.0.0.3:53']);
  assert.deepEqual(await r.stop(), []);
  await captureLog(() => rewrite('nameserver 127.0.0.4\n', 10000));
  assert.deepEqual(upstreams(), ['127.0.0.2:53', '127.0.0.3:53']);
});
