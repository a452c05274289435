// `nodens node-cache` on the command line: usage, flag errors and validation failures, as node-cache reports them.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../../bin/nodens', import.meta.url));

const run = (...args: string[]) => spawnSync(BIN, ['node-cache', ...args], { encoding: 'utf8', timeout: 20_000 });

test('-h: node-cache\'s usage header, then every flag of the combined set (Go flag format), exit 0', () => {
  const r = run('-h');
  assert.equal(r.status, 0);
  assert.match(r.stderr, /^Usage of nodens node-cache:\nRuns CoreDNS v1\.15\.0 as a nodelocal cache listening on the specified ip:port\n\n {2}-basecorefile string\n/);
  assert.ok(r.stderr.includes('  -syncinterval duration\n    \tinterval(in seconds) to check for iptables rules (default 60ns)\n'), r.stderr);
  assert.ok(r.stderr.includes('  -setupinterface\n    \tindicates whether network interface should be setup (default true)\n'), r.stderr);
  assert.ok(r.stderr.includes('  -skipteardown\n    \tindicates whether iptables rules should be torn down on exit\n'), r.stderr);
  for (const f of ['localip', 'interfacename', 'metrics-listen-address', 'setupiptables', 'corefile', 'kubednscm', 'upstreamsvc', 'health-port', 'reloadwithsignal', 'conf', 'dns.port', 'pidfile', 'quiet']) {
    assert.ok(r.stderr.includes(`  -${f}`), f);
  }
});

test('a flag error: message and usage, exit 2; a bad -localip: node-cache\'s fatal line, exit 1', () => {
  const a = run('-syncinterval', '30');
  assert.equal(a.status, 2);
  assert.match(a.stderr, /^invalid value "30" for flag -syncinterval: parse error\nUsage of nodens node-cache:/);
  const b = run();
  assert.equal(b.status, 1);
  assert.match(b.stdout, /^\[INFO\] Starting node-cache image: nodens .*\n\[FATAL\] Error parsing flags - invalid localip specified - "", Exiting\n$/);
  const c = run('-localip', '169.254.20.10,fd00::1');
  assert.equal(c.status, 1);
  assert.match(c.stdout, /\[FATAL\] Error parsing flags - unexpected IP Family for localIP - "fd00::1", want IPv6=false, Exiting/);
});

test('-plugins lists the plugins of this mode', () => {
  const r = run('-plugins');
  assert.equal(r.status, 0);
  assert.match(r.stdout, /\nloop\n/);
  assert.match(r.stdout, /\nforward\n/);
});
