// The ceiling: the fastest a Node UDP server on this machine answers, for the bench's "ceiling" rows.
// It parses nothing: each datagram comes back with QR and one answer set in the header and one fixed
// A record appended (a name pointer to the question, 10.9.9.9), so dnsperf, which matches replies by
// ID, counts it as a NOERROR answer. Node socket and event-loop cost only; no DNS server work.
//
//   node bench/ceiling.ts -dns.port PORT [-workers N]   (the flag names of nodens, so the bench starts all alike)
// -workers N: N processes, each with its own SO_REUSEPORT socket on the port (as nodens -workers does).
import dgram from 'node:dgram';
import { spawn, type ChildProcess } from 'node:child_process';
import type { LookupOneOptions } from 'node:dns';

const ANSWER = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 10, 9, 9, 9]);

let port = 53;
let workers = 1;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '-dns.port') port = Number(argv[++i]);
  else if (argv[i] === '-workers') workers = Number(argv[++i]);
}

if (workers > 1) {
  // The parent only supervises: each child serves on its own socket.
  const children: ChildProcess[] = [];
  for (let i = 0; i < workers; i++) {
    children.push(spawn(process.execPath, [process.argv[1]!, '-dns.port', String(port)], { stdio: 'inherit' }));
  }
  process.on('SIGTERM', () => {
    for (const c of children) c.kill('SIGTERM');
    process.exit(0);
  });
} else {
  serve();
}

function serve(): void {
  // The reply's address is the sender's IP literal: answered without dns.lookup's check and tick.
  const literal = (address: string, _o: LookupOneOptions, cb: (e: NodeJS.ErrnoException | null, a: string, f: number) => void): void => {
    cb(null, address, 4);
  };
  const sock = dgram.createSocket({ type: 'udp4', lookup: literal, reusePort: true });
  sock.on('message', (m, r) => {
    if (m.length < 12) return;
    const out = Buffer.allocUnsafe(m.length + ANSWER.length);
    m.copy(out);
    ANSWER.copy(out, m.length);
    out[2] = out[2]! | 0x80;
    out[3] = 0x80;
    out[6] = 0;
    out[7] = 1;
    sock.send(out, r.port, r.address);
  });
  sock.bind(port, '127.0.0.1');
  process.on('SIGTERM', () => { sock.close(); process.exit(0); });
}
