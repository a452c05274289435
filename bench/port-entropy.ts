// Source ports of forward's upstream queries, measured: N queries (100 in flight) through Proxy.connect to a loopback
// echo upstream, then the spread over 1024-65535 (χ² over 64 equal bins, distinct ports, a plug-in entropy
// estimate), the share in the kernel's ip_local_port_range (those go out on recycled sockets with the oneshot addon),
// how often a port repeats or lands within ±16 of the previous query's, and the recycled sockets left idle. Run:
//   node bench/port-entropy.ts [N]          (NODENS_NATIVE=0: the dgram path)
import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import { Proxy, healthQuery } from '../src/plugin/pkg/proxy/proxy.ts';
import { newRegistry } from '../src/plugin/pkg/metrics.ts';
import { proxyMetrics } from '../src/plugin/pkg/proxy/metrics.ts';
import { nativeIdleSockets } from '../src/plugin/pkg/proxy/native-udp.ts';
const N = Number(process.argv[2] ?? 50000);
const sock = dgram.createSocket('udp4');
const ports: number[] = [];
sock.on('message', (q, from) => { ports.push(from.port); const r = Buffer.from(q); r[2] = r[2]! | 0x80; sock.send(r, from.port, from.address); });
await new Promise<void>((r) => { sock.bind(0, '127.0.0.1', r); });
const p = new Proxy('127.0.0.1', sock.address().port, 'dns', { file: 'x', line: 1, source: 'corefile' }, {
  expireMs: 10000, maxAgeMs: 0, maxIdleConns: 0, source: undefined, tls: undefined, reuseUdp: false, readTimeoutMs: 2000, dohMethod: 'POST',
  health: { intervalMs: 500, recursionDesired: true, domain: '.', forceTcp: false, periodicMs: 0 }, metrics: proxyMetrics(newRegistry()) });
p.start();
for (let b = 0; b < N / 100; b++) await Promise.all(Array.from({ length: 100 }, () => p.connect(healthQuery('example.org.', true), 'udp', 512)));
const idle = nativeIdleSockets();
const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
const bins = new Array<number>(64).fill(0);
for (const x of ports) bins[Math.floor((x - 1024) / 1008)]!++;
const chi2 = bins.reduce((a, b) => a + (b - ports.length / 64) ** 2 / (ports.length / 64), 0);
let rep = 0, near = 0;
for (let i = 1; i < ports.length; i++) { if (ports[i] === ports[i - 1]) rep++; if (Math.abs(ports[i]! - ports[i - 1]!) <= 16) near++; }
// plug-in entropy estimate of the port over 1024-65535 in 1008-port bins + log2(1008) (within-bin uniform assumed)
let h = 0; for (const b of bins) if (b > 0) { const q = b / ports.length; h -= q * Math.log2(q); }
const inK = ports.filter((x) => x >= lo! && x <= hi!).length;
console.log(JSON.stringify({ n: ports.length, range: `${lo}-${hi}`, min: Math.min(...ports), max: Math.max(...ports), distinct: new Set(ports).size, chi2_64bins: +chi2.toFixed(1), binEntropyBits: +(h + Math.log2(1008)).toFixed(3), inKernelRange: +(inK / ports.length).toFixed(4), consecutiveRepeats: rep, nextWithin16OfLast: near, idleRecycled: idle }));
p.stop(); sock.close(); process.exit(0);
