// Codec micro-benchmarks: node_modules/.bin/node bench/codec.ts
import * as dnsPacket from 'dns-packet';
import { decodeMessage, decodeQuestionFast, encodeMessage, encodeWithin, newQuery } from '../src/wire/index.ts';
import type { Message } from '../src/wire/types.ts';

function bench(name: string, fn: () => unknown, ms = 1500): number {
  // warm up
  const warmEnd = performance.now() + 300;
  while (performance.now() < warmEnd) for (let i = 0; i < 100; i++) fn();
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    for (let i = 0; i < 1000; i++) fn();
    n += 1000;
    now = performance.now();
  }
  const ops = (n / (now - start)) * 1000;
  console.log(`${name.padEnd(52)} ${Math.round(ops).toLocaleString('en-US').padStart(12)} ops/s`);
  return ops;
}

const query = newQuery('example.org.', 1);
query.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [] };
const queryWire = encodeMessage(query);

const response: Message = {
  ...query, qr: true, ra: true,
  question: [{ name: 'example.org.', type: 1, class: 1 }],
  answer: [
    { name: 'example.org.', type: 1, class: 1, ttl: 300, data: { address: '93.184.215.14' } },
    { name: 'example.org.', type: 1, class: 1, ttl: 300, data: { address: '93.184.215.15' } },
  ],
  authority: [], additional: [],
  edns: { udpSize: 1232, version: 0, do: false, z: 0, options: [] },
};
const responseWire = encodeMessage(response, { compress: true });

const dpQuery = dnsPacket.decode(Buffer.from(queryWire));
const dpResponse = dnsPacket.decode(Buffer.from(responseWire));
const queryBuf = Buffer.from(queryWire);
const responseBuf = Buffer.from(responseWire);

console.log(`query ${queryWire.length} bytes, response ${responseWire.length} bytes (compressed)`);
console.log('-- nodens wire');
bench('decodeQuestionFast(query)', () => decodeQuestionFast(queryBuf));
bench('decodeMessage(query)', () => decodeMessage(queryBuf));
bench('encodeMessage(response, compress)', () => encodeMessage(response, { compress: true }));
bench('encodeMessage(response)', () => encodeMessage(response));
bench('encodeWithin(response, 1232, v4)', () => encodeWithin(response, 1232, { compressAbove: 1480 }));
bench('decodeMessage + encodeMessage(response, compress)', () => encodeMessage(decodeMessage(responseBuf), { compress: true }));
console.log('-- dns-packet');
bench('dnsPacket.decode(query)', () => dnsPacket.decode(queryBuf));
bench('dnsPacket.encode(response)', () => dnsPacket.encode(dpResponse));
bench('dnsPacket.decode + encode(response)', () => dnsPacket.encode(dnsPacket.decode(responseBuf)));
void dpQuery;
