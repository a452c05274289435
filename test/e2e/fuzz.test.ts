// Hostile input against a real bin/nodens process: random bytes and mutated
// valid queries over UDP and TCP, bounded in count and time. Afterwards the
// server must still be alive and answer correctly.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import net from 'node:net';
import { randomBytes, randomInt } from 'node:crypto';
import { startProcess } from '../helpers/server.ts';
import { dig, status } from '../helpers/dig.ts';
import { wire } from '../../src/index.ts';

const COREFILE = `.:{PORT} {
  any
  chaos
  hosts {
    192.0.2.1 www.example.org
    fallthrough
  }
  minimal
  whoami
}
example.net:{PORT} {
  errors
}
`;

function seeds(): Buffer[] {
  const out: Buffer[] = [];
  for (const [name, type] of [['www.example.org.', 'A'], ['x.example.net.', 'AAAA'], ['version.bind.', 'TXT'], ['example.org.', 'ANY']] as const) {
    const q = wire.newQuery(name, wire.RRType[type]);
    if (name === 'version.bind.') q.question[0]!.class = wire.RRClass.CH;
    q.edns = { udpSize: 1232, version: 0, do: true, z: 0, options: [{ code: 10, data: randomBytes(8) }] };
    out.push(Buffer.from(wire.encodeMessage(q)));
  }
  return out;
}

function mutate(b: Buffer): Buffer {
  const m = Buffer.from(b);
  switch (randomInt(5)) {
    case 0: for (let i = randomInt(1, 6); i > 0; i--) m[randomInt(m.length)] = randomInt(256); return m;
    case 1: return m.subarray(0, randomInt(m.length));
    case 2: return Buffer.concat([m, randomBytes(randomInt(1, 40))]);
    case 3: { const at = randomInt(12, m.length); m[at] = 0xc0; m[(at + 1) % m.length] = randomInt(256); return m; } // compression pointers
    default: m.writeUInt16BE(randomInt(65536), 4 + 2 * randomInt(4)); return m; // section counts
  }
}

test('random and mutated packets never crash or stall the server', async () => {
  const p = await startProcess(COREFILE);
  try {
    const base = seeds();
    const sock = dgram.createSocket('udp4');
    const deadline = Date.now() + 8000;
    let sent = 0;
    for (; sent < 30000 && Date.now() < deadline; sent++) {
      const pkt = sent % 3 === 0 ? randomBytes(randomInt(0, 600)) : mutate(base[sent % base.length]!);
      sock.send(pkt, p.port, '127.0.0.1');
      if (sent % 200 === 0) await new Promise((r) => setImmediate(r));
    }
    sock.close();
    // TCP: garbage frames, a truncated frame and an oversized length on a few connections.
    for (let c = 0; c < 20; c++) {
      await new Promise<void>((resolve) => {
        const s = net.connect({ port: p.port, host: '127.0.0.1' }, () => {
          const frames: Buffer[] = [];
          for (let i = 0; i < 10; i++) {
            const body = i % 2 ? randomBytes(randomInt(0, 300)) : mutate(base[i % base.length]!);
            const len = Buffer.alloc(2);
            len.writeUInt16BE(c === 19 && i === 9 ? 65535 : body.length);
            frames.push(len, body);
          }
          s.end(Buffer.concat(frames));
        });
        s.on('error', () => resolve());
        s.on('close', () => resolve());
        s.setTimeout(1000, () => s.destroy());
      });
    }
    assert.ok(sent > 1000, `sent ${sent}`);
    assert.equal(p.proc.exitCode, null, 'server exited');
    const out = await dig(p.port, 'www.example.org', 'A');
    assert.equal(status(out), 'NOERROR');
    assert.match(out, /www\.example\.org\.\s+3600\s+IN\s+A\s+192\.0\.2\.1/);
    assert.equal(status(await dig(p.port, '+tcp', 'www.example.org', 'A')), 'NOERROR');
    assert.equal(p.stderr.join('\n'), '');
  } finally {
    await p.stop();
  }
});
