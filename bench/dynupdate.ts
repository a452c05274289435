// CPU per UPDATE of the dynupdate plugin, in process (TSIG verification, the transaction, the zone rebuild and,
// with --database, the database write and fsync), for zones of 100, 1000 and 10000 records, and CPU per query
// of the zone afterwards. Sequential signed UPDATEs over loopback UDP, each changing one A record. Run:
//   node bench/dynupdate.ts [--updates N] [--database]

import dgram from 'node:dgram';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startServer } from '../src/index.ts';
import { setLogSink } from '../src/core/log.ts';
import { encodeMessage } from '../src/wire/encode.ts';
import { newMessage, newQuery } from '../src/wire/message.ts';
import { Opcode, RRClass, RRType } from '../src/wire/constants.ts';
import { TsigSigner, nameWire, tsigKey, tsigRecord } from '../src/plugin/pkg/tsig.ts';

const { values } = parseArgs({ options: { updates: { type: 'string', default: '300' }, database: { type: 'boolean', default: false } } });
const UPDATES = Math.min(Number(values.updates), 100000);
const SECRET = 'c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0';
setLogSink(() => {});

function signedUpdate(id: number, i: number): Buffer {
  const m = newMessage();
  m.id = id;
  m.opcode = Opcode.UPDATE;
  m.question.push({ name: 'example.org.', type: RRType.SOA, class: RRClass.IN });
  m.authority.push({ name: 'bench.example.org.', type: RRType.A, class: RRClass.ANY, ttl: 0, data: { raw: new Uint8Array(0) } });
  m.authority.push({ name: 'bench.example.org.', type: RRType.A, class: RRClass.IN, ttl: 60, data: { address: `192.0.2.${i & 255}` } });
  const now = Math.floor(Date.now() / 1000);
  const signer = new TsigSigner(new Map([['k.', tsigKey(SECRET)]]), new Uint8Array(0), () => now);
  return Buffer.from(signer.sign(encodeMessage(m), tsigRecord('k.', {
    algorithm: nameWire('hmac-sha256.'), timeSigned: now, fudge: 300, mac: new Uint8Array(0), origId: id, error: 0, other: new Uint8Array(0),
  }))!);
}

function exchange(sock: dgram.Socket, port: number, wire: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => { reject(new Error('timeout')); }, 5000);
    sock.once('message', () => { clearTimeout(t); resolve(); });
    sock.send(wire, port, '127.0.0.1');
  });
}

const cpu = (): number => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };

for (const size of [100, 1000, 10000]) {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-bench-dynupdate-'));
  const lines = ['$ORIGIN example.org.', '@ 60 IN SOA ns hm 1 3600 600 86400 60', '@ 60 IN NS ns', 'ns 60 IN A 192.0.2.53'];
  for (let i = lines.length - 1; i < size; i++) lines.push(`h${i} 60 IN A 10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
  writeFileSync(join(dir, 'zone'), lines.join('\n') + '\n');
  const db = values.database ? `  database ${join(dir, 'db')}\n` : '';
  const server = await startServer({
    corefile: `example.org:0 {\n tsig {\n  secret k. ${SECRET}\n }\n dynupdate {\n  file ${join(dir, 'zone')}\n${db}  allow k. * A\n  max_records 20000\n }\n}\n`,
  });
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => { sock.bind(0, '127.0.0.1', r); });
  const msgs = Array.from({ length: UPDATES }, (_, i) => signedUpdate((i + 1) & 0xffff, i));
  await exchange(sock, server.port, msgs[0]!); // the database is created on first use
  let c0 = cpu();
  let t0 = process.hrtime.bigint();
  for (let i = 1; i < UPDATES; i++) await exchange(sock, server.port, msgs[i]!);
  const upd = (cpu() - c0) / (UPDATES - 1);
  const wall = Number(process.hrtime.bigint() - t0) / 1e9 / (UPDATES - 1);
  const q = newQuery('h5.example.org.', RRType.A);
  const qw = Buffer.from(encodeMessage(q));
  c0 = cpu();
  t0 = process.hrtime.bigint();
  const QUERIES = 5000;
  for (let i = 0; i < QUERIES; i++) await exchange(sock, server.port, qw);
  const qry = (cpu() - c0) / QUERIES;
  console.log(`${String(size).padStart(6)} records${values.database ? ' +database' : ''}: ${(upd * 1e6).toFixed(0).padStart(7)} CPU µs/update `
    + `(${(wall * 1e6).toFixed(0)} µs wall)   ${(qry * 1e6).toFixed(1).padStart(6)} CPU µs/query (UDP, in process)`);
  sock.close();
  await server.stop();
}
