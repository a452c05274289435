// A minimal DNS client over UDP, TCP, TLS and HTTPS (one connection per query), returning raw reply bytes.
import dgram from 'node:dgram';
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';

export interface RawReply {
  /** undefined when no reply came; `error` then says why. */
  bytes?: Buffer;
  error?: string;
  /** the client's local port, so that a whoami-style echo of it can be recognised */
  localPort: number;
  /** what else the transport saw, compared too (DoH: the HTTP headers) */
  note?: string;
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

export function queryTcp(host: string, port: number, msg: Buffer, timeoutMs = 3000, ca?: Buffer): Promise<RawReply> {
  return new Promise((resolve) => {
    let localPort = 0;
    let done = false;
    let buf = Buffer.alloc(0);
    // DNS over TLS: the certificate must verify against `ca` for localhost.
    const sock = ca === undefined ? net.connect({ host, port }) : tls.connect({ host, port, ca, servername: 'localhost' });
    const finish = (r: Omit<RawReply, 'localPort'>) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ ...r, localPort });
    };
    const timer = setTimeout(() => finish({ error: `no reply over TCP within ${timeoutMs} ms` }), timeoutMs);
    sock.on(ca === undefined ? 'connect' : 'secureConnect', () => {
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

/**
 * DNS over HTTPS (HTTP/2 over TLS, the certificate verified against `ca` for localhost): POST, or GET with
 * `?dns=`. A reply other than 200 is rendered as its status and body.
 */
export function queryHttps(host: string, port: number, msg: Buffer, ca: Buffer, get: boolean, timeoutMs = 3000): Promise<RawReply> {
  return new Promise((resolve) => {
    let localPort = 0;
    let done = false;
    const session = http2.connect(`https://localhost:${port}`, { ca, host, servername: 'localhost' });
    const finish = (r: Omit<RawReply, 'localPort'>) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      session.destroy();
      resolve({ ...r, localPort });
    };
    const timer = setTimeout(() => finish({ error: `no reply over HTTPS within ${timeoutMs} ms` }), timeoutMs);
    session.on('error', (e) => finish({ error: `HTTPS error: ${e.message}` }));
    session.on('connect', () => { localPort = session.socket.localPort ?? 0; });
    const req = session.request(get
      ? { ':path': `/dns-query?dns=${msg.toString('base64url')}` }
      : { ':method': 'POST', ':path': '/dns-query', 'content-type': 'application/dns-message' });
    let status = 0;
    let headers = '';
    const chunks: Buffer[] = [];
    req.on('response', (h) => {
      status = Number(h[':status']);
      headers = `content-type: ${String(h['content-type'])}; cache-control: ${String(h['cache-control'])}`;
    });
    req.on('data', (d: Buffer) => { chunks.push(d); });
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (status === 200) finish({ bytes: body, note: `HTTP 200 (${headers})` });
      else finish({ error: `HTTP ${status} (${headers}): ${JSON.stringify(body.toString())}` });
    });
    req.on('error', (e) => finish({ error: `HTTPS error: ${e.message}` }));
    req.end(get ? undefined : msg);
  });
}
