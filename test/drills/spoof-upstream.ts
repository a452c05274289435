// The spoofing drill's upstream, run in its own namespace: authoritative for
// victim.test (the answer comes after DELAY ms: the window the attacker races)
// and for attacker.test, a zone the attacker owns: what this server sees of a
// query for it (the forwarder's source address, port and ID) goes to the attacker's
// collector, as the logs of a name server he runs would.
// usage: node spoof-upstream.ts LISTEN_IP REPORT_FROM_IP COLLECTOR_IP:PORT DELAY_MS
// (reports leave from a second address: the attacker's namespace owns LISTEN_IP, so it would drop
// packets from it as martians)

import dgram from 'node:dgram';
import * as dnsPacket from 'dns-packet';

const [listenIp, reportFrom, collector, delayArg] = process.argv.slice(2);
if (listenIp === undefined || reportFrom === undefined || collector === undefined || delayArg === undefined) throw new Error('usage: spoof-upstream.ts LISTEN_IP REPORT_FROM_IP COLLECTOR_IP:PORT DELAY_MS');
const [collectorIp, collectorPort] = collector.split(':') as [string, string];
const delayMs = Number(delayArg);
const REAL_ANSWER = '192.0.2.1';

const sock = dgram.createSocket('udp4');
const reports = dgram.createSocket('udp4');
reports.bind(0, reportFrom);
sock.on('message', (msg, rinfo) => {
  let q: dnsPacket.Packet;
  try { q = dnsPacket.decode(msg); } catch { return; }
  const question = q.questions?.[0];
  if (question === undefined) return;
  const name = question.name.toLowerCase();
  const reply = (answers: dnsPacket.Answer[], rcode: string, after: number): void => {
    const out = dnsPacket.encode({
      id: q.id, type: 'response', flags: dnsPacket.AUTHORITATIVE_ANSWER | (q.flags ?? 0) & dnsPacket.RECURSION_DESIRED,
      rcode, questions: [question], answers,
    } as dnsPacket.Packet);
    setTimeout(() => { sock.send(out, rinfo.port, rinfo.address); }, after);
  };
  if (question.type === 'A' && name.endsWith('.attacker.test')) {
    reports.send(JSON.stringify({ name, address: rinfo.address, port: rinfo.port, id: q.id }), Number(collectorPort), collectorIp);
    reply([{ name: question.name, type: 'A', class: 'IN', ttl: 60, data: collectorIp }], 'NOERROR', 0);
  } else if (question.type === 'A' && name.endsWith('.victim.test')) {
    process.stdout.write(`query ${name} ${rinfo.port}\n`);
    reply([{ name: question.name, type: 'A', class: 'IN', ttl: 300, data: REAL_ANSWER }], 'NOERROR', delayMs);
  } else {
    reply([], 'REFUSED', 0);
  }
});
sock.bind(53, listenIp, () => { process.stdout.write(`upstream ready on ${listenIp}:53\n`); });
