// The resource-bounds drill's TCP flood, in its own process so that its churn does not
// slow the UDP prober: N connections to 127.0.0.1:PORT, half idle, half sending one byte
// every 500 ms, each reopened 50 ms after the server closes it, for SECONDS. Prints
// "holding" once 95% are open (or after 5 s), then one JSON line at the end: the fewest
// held while holding, and how many were opened in all.
// usage: node tcp-flood.ts PORT N SECONDS

import net from 'node:net';

const [port, n, seconds] = process.argv.slice(2).map(Number) as [number, number, number];
let stopped = false;
let opened = 0;
const open = new Set<net.Socket>();

function one(slow: boolean): void {
  if (stopped) return;
  opened++;
  const s = net.connect({ port, host: '127.0.0.1' });
  let timer: NodeJS.Timeout | undefined;
  s.on('connect', () => {
    open.add(s);
    if (slow) timer = setInterval(() => { s.write(Buffer.from([0])); }, 500);
  });
  s.on('error', () => { /* refused or reset: close follows */ });
  s.on('close', () => {
    open.delete(s);
    clearInterval(timer);
    if (!stopped) setTimeout(() => { one(slow); }, 50);
  });
}

// In batches: the accept queue is not what is drilled here.
for (let i = 0; i < n; i++) setTimeout(() => { one(i % 2 === 1); }, Math.floor(i / 200) * 20);
const t0 = Date.now();
while (open.size < n * 0.95 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 50));
process.stdout.write('holding\n');
let held = open.size;
const sampler = setInterval(() => { held = Math.min(held, open.size); }, 100);
await new Promise((r) => setTimeout(r, seconds * 1000));
clearInterval(sampler);
stopped = true;
for (const s of open) s.destroy();
process.stdout.write(JSON.stringify({ held, opened }) + '\n');
