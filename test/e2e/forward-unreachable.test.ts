// An upstream with no route to it (connect(2) fails with ENETUNREACH): forward's error line is Go's dial
// error, as CoreDNS 1.15.0 prints it, side by side with the reference in a namespace that has no routes.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Netns, available } from '../netns/netns.ts';
import { ROOT } from '../helpers/server.ts';

function reference(): string {
  const r = spawnSync(join(ROOT, 'scripts', 'coredns-reference.sh'), { encoding: 'utf8', timeout: 900_000 });
  assert.equal(r.status, 0, `scripts/coredns-reference.sh failed: ${r.stderr}`);
  return r.stdout.trim();
}

test('forward to an unreachable upstream: SERVFAIL and CoreDNS\'s `dial udp ...: connect: network is unreachable`', { timeout: 60_000 }, async () => {
  assert.ok(available(), 'network namespaces need root and iproute2');
  const coredns = reference();
  // Only loopback is up: 203.0.113.9 has no route.
  const ns = new Netns('unreach');
  try {
    const corefile = '.:1570 {\n    forward . 203.0.113.9\n    errors\n}\n';
    const lines: Record<string, string> = {};
    for (const [name, proc] of [
      ['coredns', ns.run(coredns, ['-conf', ns.file('Corefile.ref', corefile)])],
      ['nodens', ns.nodens(corefile)],
    ] as const) {
      await proc.waitFor(/^CoreDNS-/);
      const r = ns.exec('dig', ['+tries=1', '+time=5', '@127.0.0.1', '-p', '1570', 'x.example', 'A']);
      assert.match(r.stdout, /status: SERVFAIL/, `${name}: ${r.stdout}`);
      lines[name] = await proc.waitFor(/plugin\/errors/, 5000);
      await proc.stop();
    }
    assert.equal(lines.nodens, '[ERROR] plugin/errors: 2 x.example. A: dial udp 203.0.113.9:53: connect: network is unreachable');
    assert.equal(lines.nodens, lines.coredns);
  } finally {
    await ns.close();
  }
});
