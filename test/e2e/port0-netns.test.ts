// A server asked for port 0 gets a UDP port that no other socket holds (root: a network namespace whose
// ip_local_port_range is three ports, so the kernel's choice is narrowed to known ones). The kernel's own pick for a
// socket with SO_REUSEADDR and SO_REUSEPORT may be a port another such socket of the same user holds, and the new
// listener would then take a share of that server's queries.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ROOT } from '../helpers/server.ts';
import { Netns, available } from '../netns/netns.ts';

test('a port-0 listener never joins the SO_REUSEPORT group of another server\'s port', { timeout: 60_000 }, async () => {
  assert.ok(available(), 'this test needs network namespaces (root and iproute2)');
  const ns = new Netns('port0');
  try {
    const range = ns.exec('sysctl', ['-qw', 'net.ipv4.ip_local_port_range=40000 40002']);
    assert.equal(range.status, 0, range.stdout);
    // 40000: a server's listener (SO_REUSEPORT); 40001: a plain socket; 40002: nobody. Ten port-0 servers in turn
    // must all get 40002: the kernel's pick for a reuse socket alone would be 40000 or 40002 at random.
    const script = ns.file('port0.ts', `
      import dgram from 'node:dgram';
      import { startServer } from ${JSON.stringify(join(ROOT, 'src', 'index.ts'))};
      const held = await startServer({ corefile: '.:40000 {\\n  whoami\\n}\\n' });
      const plain = dgram.createSocket('udp4');
      await new Promise((r) => plain.bind(40001, '127.0.0.1', r));
      const ports = [];
      for (let i = 0; i < 10; i++) {
        const s = await startServer({ corefile: '.:0 {\\n  whoami\\n}\\n' });
        ports.push(s.addresses()[0].port);
        await s.stop();
      }
      console.log(JSON.stringify(ports));
      plain.close();
      await held.stop();
    `);
    const r = ns.exec(process.execPath, [script], 30_000);
    assert.equal(r.status, 0, r.stdout);
    const ports = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as number[];
    assert.deepEqual(ports, Array(10).fill(40002), r.stdout);
  } finally {
    await ns.close();
  }
});
