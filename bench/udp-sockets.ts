// What a UDP socket's life costs per upstream query, without the server: N queries (100 in flight) to an
// echo server pinned on core 1, from this process pinned on core 0, each way forward can send them:
//   per-query-lookup   a socket per query, dgram.connect with the default lookup (forward before the spares)
//   one-use-spare      a socket per query, opened ahead with an IP-literal lookup, connected (forward's default)
//   pooled             sockets reused, one per query in flight (reuse_udp_sockets, CoreDNS)
//   native-oneshot     a socket per query opened, bound to a CSPRNG port, connected and sent in one call of the
//                      oneshot addon (native/oneshot.c; forward's default when built), replies through one epoll
// Prints queries/s and CPU µs per query (user, system) of this process. Run:
//   taskset -c 0 node bench/udp-sockets.ts [N]
import dgram from 'node:dgram';
import type { LookupOneOptions } from 'node:dns';
import { spawn } from 'node:child_process';
import { loadNative } from '../src/native/index.ts';

const N = Number(process.argv[2] ?? 30000);
const IN_FLIGHT = 100;
const HOST = '127.0.0.1';
const QUERY = Buffer.alloc(40, 1);

const ECHO = `const s = require('node:dgram').createSocket('udp4');
s.on('message', (m, r) => s.send(m, r.port, r.address));
s.bind(0, '127.0.0.1', () => console.log(s.address().port));`;
const echo = spawn('taskset', ['-c', '1', process.execPath, '-e', ECHO], { stdio: ['ignore', 'pipe', 'inherit'] });
const port = await new Promise<number>((resolve, reject) => {
  echo.stdout.once('data', (d: Buffer) => { resolve(Number(d.toString().trim())); });
  echo.once('exit', () => { reject(new Error('echo server exited')); });
});

const literal = (address: string, _o: LookupOneOptions, cb: (e: NodeJS.ErrnoException | null, a: string, f: number) => void): void => {
  cb(null, address, 4);
};

function openSpare(): dgram.Socket {
  const s = dgram.createSocket({ type: 'udp4', lookup: literal });
  s.on('error', () => {});
  s.connect(port, HOST);
  return s;
}

interface Oneshot {
  setup(deliver: (n: number) => void): [ArrayBuffer, ArrayBuffer];
  sockaddr(ip: string, port: number): ArrayBuffer | null;
  send(dst: ArrayBuffer, src: ArrayBuffer | null, query: Uint8Array): number;
  close(fd: number): void;
}
const oneshot = loadNative<Oneshot>('oneshot');
const waiting: ((() => void) | undefined)[] = [];
let meta: Int32Array | undefined;
const dst = oneshot?.sockaddr(HOST, port);
if (oneshot !== undefined) {
  meta = new Int32Array(oneshot.setup((n) => {
    for (let i = 0; i < 3 * n; i += 3) {
      const fd = meta![i]!;
      const done = waiting[fd];
      waiting[fd] = undefined;
      oneshot.close(fd);
      done?.();
    }
  })[1]);
}

type Variant = (done: () => void) => void;
const spares: dgram.Socket[] = [];
const pool: dgram.Socket[] = [];
const variants: Record<string, { one: Variant; refill?: () => void }> = {
  'per-query-lookup': {
    one(done) {
      const s = dgram.createSocket('udp4');
      s.on('error', () => {});
      s.on('message', () => { s.close(); done(); });
      s.connect(port, HOST, () => { s.send(QUERY); });
    },
  },
  'one-use-spare': {
    one(done) {
      const s = spares.pop() ?? openSpare();
      s.on('message', () => { s.close(); done(); });
      s.send(QUERY);
    },
    refill() { while (spares.length < IN_FLIGHT) spares.push(openSpare()); },
  },
  pooled: {
    one(done) {
      const s = pool.pop() ?? openSpare();
      s.once('message', () => { pool.push(s); done(); });
      s.send(QUERY);
    },
  },
};
if (oneshot !== undefined) {
  variants['native-oneshot'] = {
    one(done) {
      const r = oneshot.send(dst!, null, QUERY);
      if (r < 0) throw new Error(`send: ${r}`);
      waiting[Math.floor(r / 65536)] = done;
    },
  };
}

for (const [name, v] of Object.entries(variants)) {
  v.refill?.();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await new Promise<void>((resolve) => {
    let started = 0;
    let finished = 0;
    let refillQueued = false;
    const next = (): void => {
      if (++finished === N) { resolve(); return; }
      if (v.refill !== undefined && !refillQueued) {
        refillQueued = true;
        setImmediate(() => { refillQueued = false; v.refill!(); });
      }
      if (started < N) { started++; v.one(next); }
    };
    for (; started < IN_FLIGHT; started++) v.one(next);
  });
  const c = process.cpuUsage(c0);
  const ms = performance.now() - t0;
  console.log(`${name.padEnd(17)} ${(N / ms * 1000).toFixed(0).padStart(6)} q/s  CPU ${((c.user + c.system) / N).toFixed(1).padStart(5)} µs/query (user ${(c.user / N).toFixed(1)}, system ${(c.system / N).toFixed(1)})`);
  for (const s of spares.splice(0)) s.close();
  for (const s of pool.splice(0)) s.close();
}
echo.kill();
