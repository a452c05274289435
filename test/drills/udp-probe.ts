// Paced UDP queries at a server, each with its own ID: how many were answered
// and how fast (p50/p99), for the drills that check UDP keeps its service.

import dgram from 'node:dgram';

export interface ProbeResult { sent: number; answered: number; p50: number; p99: number }

export function query(name: string, id: number, type = 1): Buffer {
  const labels = name.split('.').filter(Boolean);
  const parts = [Buffer.from([id >> 8, id & 0xff, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0])];
  for (const l of labels) parts.push(Buffer.from([l.length]), Buffer.from(l, 'latin1'));
  parts.push(Buffer.from([0, type >> 8, type & 0xff, 0, 1]));
  return Buffer.concat(parts);
}

/** `rate` queries a second for `ms`, then up to 1 s for late replies. */
export async function probe(port: number, name: string, rate: number, ms: number, host = '127.0.0.1'): Promise<ProbeResult> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => { sock.bind(0, '127.0.0.1', r); });
  const sentAt = new Map<number, number>();
  const lat: number[] = [];
  sock.on('message', (m) => {
    const id = m.readUInt16BE(0);
    const t = sentAt.get(id);
    if (t === undefined) return;
    sentAt.delete(id);
    lat.push(performance.now() - t);
  });
  let sent = 0;
  const total = Math.round((rate * ms) / 1000);
  const t0 = performance.now();
  while (sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * rate) + 1);
    for (; sent < due; sent++) {
      const id = sent % 65536;
      sentAt.set(id, performance.now());
      sock.send(query(name, id), port, host);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  const deadline = performance.now() + 1000;
  while (sentAt.size > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  sock.close();
  lat.sort((a, b) => a - b);
  const pct = (p: number): number => (lat.length === 0 ? NaN : lat[Math.min(lat.length - 1, Math.floor(lat.length * p))]!);
  return { sent, answered: lat.length, p50: pct(0.5), p99: pct(0.99) };
}
