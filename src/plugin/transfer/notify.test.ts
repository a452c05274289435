// file + transfer in one server: NOTIFYs at start-up and after a reload with a new serial, and the
// warning file logs when a secondary refuses them (CoreDNS's file/setup.go and file/reload.go).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { Opcode, Rcode, RRType } from '../../wire/constants.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { replyTo } from '../../wire/message.ts';
import { logLines, startInProcess } from '../../../test/helpers/server.ts';

const zone = (serial: number): string => `$ORIGIN example.org.
@ 3600 IN SOA ns.example.org. admin.example.org. ${serial} 7200 3600 1209600 3600
@ 3600 IN NS ns
ns 3600 IN A 192.0.2.1
`;

async function until(fn: () => boolean, ms: number): Promise<void> {
  const t0 = Date.now();
  while (!fn()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out; log:\n${logLines.join('\n')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('file NOTIFYs the transfer secondaries at start-up and after a reload; a refusal is a warning', { timeout: 20000 }, async () => {
  const got: { id: number; rcode: number }[] = [];
  const peer = createSocket('udp4');
  const refuser = createSocket('udp4');
  const answer = (s: typeof peer, rcode: number) => (msg: Buffer, rinfo: { port: number; address: string }) => {
    const q = decodeMessage(msg);
    assert.equal(q.opcode, Opcode.NOTIFY);
    assert.deepEqual(q.question, [{ name: 'example.org.', type: RRType.SOA, class: 1 }]);
    got.push({ id: q.id, rcode });
    const r = replyTo(q);
    r.rcode = rcode;
    s.send(encodeMessage(r), rinfo.port, rinfo.address);
  };
  peer.on('message', answer(peer, Rcode.NOERROR));
  refuser.on('message', answer(refuser, Rcode.REFUSED));
  await new Promise<void>((r) => { peer.bind(0, '127.0.0.1', r); });
  await new Promise<void>((r) => { refuser.bind(0, '127.0.0.1', r); });
  const ok = (peer.address() as AddressInfo).port;
  const no = (refuser.address() as AddressInfo).port;
  const dir = mkdtempSync(join(tmpdir(), 'nodens-notify-'));
  const db = join(dir, 'db.example.org');
  writeFileSync(db, zone(1));
  const server = await startInProcess(`example.org:0 {
  file ${db} {
    reload 1s
  }
  transfer {
    to * 127.0.0.1:${ok} 127.0.0.1:${no}
  }
}
`);
  try {
    // start-up: one NOTIFY to the accepting peer, three tries to the refusing one, nothing logged
    await until(() => got.length >= 4, 5000);
    assert.deepEqual(got.map((g) => g.rcode), [Rcode.NOERROR, Rcode.REFUSED, Rcode.REFUSED, Rcode.REFUSED]);
    assert.ok(!logLines.some((l) => l.includes('Failed sending notifies')));
    got.length = 0;
    writeFileSync(db, zone(2));
    await until(() => logLines.some((l) => l.includes('Failed sending notifies')), 8000);
    assert.deepEqual(got.map((g) => g.rcode), [Rcode.NOERROR, Rcode.REFUSED, Rcode.REFUSED, Rcode.REFUSED]);
    assert.ok(logLines.includes(`[INFO] plugin/file: Successfully reloaded zone "example.org." in "${db}" with 2 SOA serial`));
    assert.ok(logLines.includes(`[WARNING] plugin/file: Failed sending notifies: notify for zone "example.org." was not accepted by "127.0.0.1:${no}": rcode was "REFUSED"`));
  } finally {
    await server.stop();
    peer.close();
    refuser.close();
  }
});

/** A UDP peer that acknowledges NOTIFYs and records the zones they name. */
async function notifyPeer(): Promise<{ port: number; zones: string[]; close(): void }> {
  const zones: string[] = [];
  const s = createSocket('udp4');
  s.on('message', (msg, rinfo) => {
    const q = decodeMessage(msg);
    if (q.opcode !== Opcode.NOTIFY) return;
    zones.push(q.question[0]!.name);
    s.send(encodeMessage(replyTo(q)), rinfo.port, rinfo.address);
  });
  await new Promise<void>((r) => { s.bind(0, '127.0.0.1', r); });
  return { port: (s.address() as AddressInfo).port, zones, close: () => { s.close(); } };
}

test('auto NOTIFYs every zone it loaded after its walk; secondary NOTIFYs after each transfer in', { timeout: 20000 }, async () => {
  const peer = await notifyPeer();
  const dir = mkdtempSync(join(tmpdir(), 'nodens-notify-'));
  writeFileSync(join(dir, 'db.example.org'), zone(7));
  // auto serves example.org. and is also the primary the secondary below transfers from
  const primary = await startInProcess(`example.org:0 {
  auto {
    directory ${dir}
  }
  transfer {
    to * 127.0.0.1:${peer.port}
  }
}
`);
  let secondary: Awaited<ReturnType<typeof startInProcess>> | undefined;
  try {
    await until(() => peer.zones.length >= 1, 5000);
    assert.deepEqual(peer.zones, ['example.org.']);
    const port = primary.addresses()[0]!.port;
    peer.zones.length = 0;
    secondary = await startInProcess(`example.org:0 {
  secondary {
    transfer from 127.0.0.1:${port}
  }
  transfer {
    to * 127.0.0.1:${peer.port}
  }
}
`);
    await until(() => logLines.some((l) => l.includes(`Transferred: example.org. from 127.0.0.1:${port}`)) && peer.zones.length >= 1, 8000);
    assert.deepEqual(peer.zones, ['example.org.']);
  } finally {
    await secondary?.stop();
    await primary.stop();
    peer.close();
  }
});
