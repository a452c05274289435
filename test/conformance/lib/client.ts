// A minimal DNS client over UDP and TCP (one connection per query), returning raw reply bytes.
import dgram from 'node:dgram';
import net from 'node:net';

export interface RawReply {
  /** undefined when no reply came; `error` then says why. */
  bytes?: Buffer;
  error?: string;
  /** the client's local port, so that a whoami-style echo of it can be recognised */
  localPort: number;
}

export function queryUdp(host: string, port: number, msg: Buffer, timeoutMs = 2000): Promise<RawReply> {
  return new Promise((resolve) => {
    const sock = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
    let localPort = 0;
    let done = false;
    const finish = (r: Omit<RawReply, 'localPort'>) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.close();
      resolve({ ...r, localPort });
    };
    const timer = setTimeout(() => finish({ error: `no reply over UDP within ${timeoutMs} ms` }), timeoutMs);
    sock.on('error', (e) => finish({ error: `UDP error: ${e.message}` }));
    sock.on('message', (b) => {
      // ignore stray datagrams whose ID does not match (none expected)
      if (b.length >= 2 && msg.length >= 2 && b.readUInt16BE(0) !== msg.readUInt16BE(0)) return;
      finish({ bytes: b });
    });
    // A connected socket, so that an ICMP port-unreachable (nothing listening yet) ends the wait at once.
    sock.bind(0, host.includes(':') ? '::1' : '127.0.0.1', () => {
      localPort = sock.address().port;
      sock.connect(port, host, () => sock.send(msg));
    });
  });
}

export function queryTcp(host: string, port: number, msg: Buffer, timeoutMs = 3000): Promise<RawReply> {
  return new Promise((resolve) => {
    let localPort = 0;
    let done = false;
    let buf = Buffer.alloc(0);
    const sock = net.connect({ host, port });
    const finish = (r: Omit<RawReply, 'localPort'>) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ ...r, localPort });
    };
    const timer = setTimeout(() => finish({ error: `no reply over TCP within ${timeoutMs} ms` }), timeoutMs);
    sock.on('connect', () => {
      localPort = sock.localPort ?? 0;
      const len = Buffer.alloc(2);
      len.writeUInt16BE(msg.length, 0);
      sock.write(Buffer.concat([len, msg]));
    });
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= 2) {
        const n = buf.readUInt16BE(0);
        if (buf.length >= 2 + n) finish({ bytes: buf.subarray(2, 2 + n) });
      }
    });
    sock.on('error', (e) => finish({ error: `TCP error: ${e.message}` }));
    sock.on('close', () => finish({ error: 'TCP connection closed without a (complete) reply' }));
  });
}
