// The server core end to end, through real sockets: routing, the library-level
// rejections, EDNS handling, truncation, TCP framing, and the rcode contract —
// using small plugins defined here so the core is tested on its own.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import dnsPacket from 'dns-packet';
import type { PluginDefinition, Handler, Request, ResponseWriter } from '../../src/index.ts';
import { PluginError, wire } from '../../src/index.ts';
import { startInProcess, logLines } from '../helpers/server.ts';
import { exchange, expectSilence } from '../helpers/client.ts';
import { hello } from '../../examples/external-plugin/hello.ts';

/** `answer N` — replies with N A records for any name (to exercise truncation); `answer rcode X` returns X unwritten. */
const answer: PluginDefinition = {
  name: 'answer',
  setup(c) {
    const d = c.dispenser;
    d.next();
    const args = d.remainingArgs();
    if (args[0] === 'rcode') {
      const rc = Number(args[1]);
      c.addPlugin(() => ({ name: 'answer', serveDNS: () => rc }));
      return;
    }
    if (args[0] === 'wire') {
      // Writes a pre-encoded reply through writeWire; `wire opt` includes an OPT of its own.
      const withOpt = args[1] === 'opt';
      const n = Number(args[2] ?? 3);
      c.addPlugin(() => ({
        name: 'answer',
        serveDNS(req: Request, w: ResponseWriter) {
          const reply = wire.replyTo(req.msg);
          for (let i = 0; i < n; i++) {
            reply.answer.push({ name: req.qname, type: wire.RRType.A, class: wire.RRClass.IN, ttl: 30, data: { address: `10.1.${i >> 8}.${i & 255}` } });
          }
          if (withOpt) reply.edns = { udpSize: 4096, version: 0, do: false, z: 0, options: [] };
          w.writeWire(wire.encodeMessage(reply, { compress: true }));
          return 0;
        },
      }));
      return;
    }
    if (args[0] === 'throw') {
      c.addPlugin(() => ({ name: 'answer', serveDNS: () => { throw new Error('boom'); } }));
      return;
    }
    if (args[0] === 'async-error') {
      c.addPlugin(() => ({ name: 'answer', serveDNS: async () => { throw new PluginError(wire.Rcode.REFUSED, 'nope'); } }));
      return;
    }
    const n = Number(args[0] ?? 1);
    const zone = c.config.zones[0]!;
    c.addPlugin((): Handler => ({
      name: 'answer',
      serveDNS(req: Request, w: ResponseWriter) {
        const reply = wire.replyTo(req.msg);
        reply.aa = true;
        for (let i = 0; i < n; i++) {
          reply.answer.push({ name: req.qname, type: wire.RRType.A, class: wire.RRClass.IN, ttl: 60, data: { address: `10.0.${i >> 8}.${i & 255}` } });
        }
        reply.answer.push({ name: req.qname, type: wire.RRType.TXT, class: wire.RRClass.IN, ttl: 60, data: { strings: [new TextEncoder().encode(zone)] } });
        w.writeMsg(reply);
        return 0;
      },
    }));
  },
};

const plugins = [{ plugin: answer, before: 'whoami' }, { plugin: hello, before: 'whoami' }];

function q(name: string, type: string, extra: Partial<dnsPacket.Packet> = {}, edns?: { udp?: number; do?: boolean; version?: number }): Buffer {
  const additionals: dnsPacket.Answer[] = [];
  if (edns) {
    additionals.push({ type: 'OPT', name: '.', udpPayloadSize: edns.udp ?? 1232, flags: edns.do ? dnsPacket.DNSSEC_OK : 0, options: [] } as unknown as dnsPacket.Answer);
  }
  const buf = dnsPacket.encode({ type: 'query', id: 4242, flags: dnsPacket.RECURSION_DESIRED, questions: [{ name, type: type as dnsPacket.RecordType, class: 'IN' }], additionals, ...extra });
  if (edns?.version) {
    // Patch the OPT TTL's version byte (dns-packet cannot set it).
    buf[buf.length - 11 + 6] = edns.version;
  }
  return buf;
}

function rcode(p: dnsPacket.Packet): string {
  return (p as unknown as { rcode: string }).rcode;
}

function txtOf(p: dnsPacket.Packet): string | undefined {
  const t = p.answers?.find((a) => a.type === 'TXT') as { data: Buffer[] } | undefined;
  return t ? Buffer.concat(t.data).toString() : undefined;
}

describe('server core', () => {
  let port = 0;
  let server: Awaited<ReturnType<typeof startInProcess>>;
  before(async () => {
    server = await startInProcess(`
example.org:0 {
  answer 2
}
sub.example.org:0 {
  answer 1
}
big.test:0 {
  answer 60
}
empty.test:0 {
}
servfail.test:0 {
  answer rcode 2
}
nxnowrite.test:0 {
  answer rcode 3
}
panic.test:0 {
  answer throw
}
asyncerr.test:0 {
  answer async-error
}
hello.test:0 {
  hello "hi"
}
wire.test:0 {
  answer wire plain 3
}
wireopt.test:0 {
  answer wire opt 3
}
wirebig.test:0 {
  answer wire plain 80
}
`, { plugins });
    port = server.port;
  });
  after(async () => { await server.stop(); });

  test('one listener serves every block on the port', () => {
    assert.equal(server.addresses().length, 1);
  });

  test('longest matching zone wins, case-insensitively', async () => {
    const a = dnsPacket.decode(await exchange(port, q('www.Sub.EXAMPLE.org', 'A')));
    assert.equal(txtOf(a), 'sub.example.org.');
    assert.equal(a.answers!.filter((x) => x.type === 'A').length, 1);
    const b = dnsPacket.decode(await exchange(port, q('www.example.org', 'A')));
    assert.equal(txtOf(b), 'example.org.');
    // the question keeps the letter case of the query
    assert.equal(a.questions![0]!.name, 'www.Sub.EXAMPLE.org');
  });

  test('a name outside every zone is REFUSED, without AA or RA, with the OPT echoed', async () => {
    const r = dnsPacket.decode(await exchange(port, q('example.net', 'A', {}, { udp: 1400 })));
    assert.equal(rcode(r), 'REFUSED');
    assert.equal(r.flag_aa, false);
    assert.equal(r.flag_ra, false);
    assert.equal(r.flag_rd, true);
    const opt = r.additionals!.find((x) => x.type === 'OPT') as { udpPayloadSize: number } | undefined;
    assert.equal(opt?.udpPayloadSize, 1400);
  });

  test('a block with no plugins answers REFUSED', async () => {
    assert.equal(rcode(dnsPacket.decode(await exchange(port, q('a.empty.test', 'A')))), 'REFUSED');
  });

  test('SERVFAIL returned unwritten is written by the server', async () => {
    assert.equal(rcode(dnsPacket.decode(await exchange(port, q('x.servfail.test', 'A')))), 'SERVFAIL');
  });

  test('NXDOMAIN returned without writing means no reply at all (CoreDNS contract)', async () => {
    assert.equal(await expectSilence(port, q('x.nxnowrite.test', 'A')), true);
  });

  test('an exception is recovered: SERVFAIL and the CoreDNS log line', async () => {
    const r = dnsPacket.decode(await exchange(port, q('x.panic.test', 'A')));
    assert.equal(rcode(r), 'SERVFAIL');
    assert.ok(logLines.some((l) => l.startsWith('[ERROR] Recovered from panic in server: "dns://:0"') || /Recovered from panic in server: "dns:\/\/:\d+" boom/.test(l)), logLines.join('\n'));
  });

  test('a rejected promise with a PluginError gives its rcode', async () => {
    assert.equal(rcode(dnsPacket.decode(await exchange(port, q('x.asyncerr.test', 'A')))), 'REFUSED');
  });

  test('non-IN class is REFUSED when no block loads chaos or forward', async () => {
    const buf = dnsPacket.encode({ type: 'query', id: 7, questions: [{ name: 'version.bind', type: 'TXT', class: 'CH' }] });
    assert.equal(rcode(dnsPacket.decode(await exchange(port, buf))), 'REFUSED');
  });

  test('EDNS version 1 gets BADVERS with an OPT of size 0', async () => {
    const reply = await exchange(port, q('www.example.org', 'A', {}, { version: 1 }));
    const r = wire.decodeMessage(reply);
    assert.equal(r.rcode, wire.Rcode.BADVERS);
    assert.equal(r.edns?.udpSize, 0);
    assert.equal(r.answer.length, 0);
  });

  test('a response (QR=1) is ignored', async () => {
    const buf = q('www.example.org', 'A');
    buf[2]! |= 0x80;
    assert.equal(await expectSilence(port, buf), true);
  });

  test('opcode STATUS gets NOTIMP with the opcode kept and no question', async () => {
    const buf = q('www.example.org', 'A');
    buf[2] = (buf[2]! & 0x87) | (2 << 3);
    const r = await exchange(port, buf);
    assert.equal(r.length, 12);
    assert.equal(r[3]! & 0xf, 4);
    assert.equal((r[2]! >> 3) & 0xf, 2);
    assert.equal(r.readUInt16BE(0), 4242);
  });

  test('two questions get FORMERR from the header alone', async () => {
    const buf = dnsPacket.encode({ type: 'query', id: 9, questions: [{ name: 'a.example.org', type: 'A' }, { name: 'b.example.org', type: 'A' }] });
    const r = await exchange(port, buf);
    assert.equal(r.length, 12);
    assert.equal(r[3]! & 0xf, 1);
  });

  test('an undecodable message gets FORMERR and the server keeps answering', async () => {
    const buf = q('www.example.org', 'A');
    const bad = Buffer.concat([buf.subarray(0, 12), Buffer.from([0xc0, 0x0c])]); // pointer to itself
    const r = await exchange(port, bad);
    assert.equal(r[3]! & 0xf, 1);
    assert.equal(await expectSilence(port, Buffer.from([1, 2, 3])), true); // shorter than a header: dropped
    assert.equal(txtOf(dnsPacket.decode(await exchange(port, q('www.example.org', 'A')))), 'example.org.');
  });

  test('UDP replies are cut to 512 bytes without EDNS, whole records kept, TC set', async () => {
    const raw = await exchange(port, q('x.big.test', 'A'));
    assert.ok(raw.length <= 512, `length ${raw.length}`);
    const r = wire.decodeMessage(raw);
    assert.equal(r.tc, true);
    assert.ok(r.answer.length > 0 && r.answer.length < 61);
  });

  test('the same reply fits in a 4096-byte EDNS buffer and over TCP', async () => {
    const viaEdns = wire.decodeMessage(await exchange(port, q('x.big.test', 'A', {}, { udp: 4096 })));
    assert.equal(viaEdns.tc, false);
    assert.equal(viaEdns.answer.length, 61);
    const viaTcp = wire.decodeMessage(await exchange(port, q('x.big.test', 'A'), { tcp: true }));
    assert.equal(viaTcp.tc, false);
    assert.equal(viaTcp.answer.length, 61);
  });

  test('TCP serves pipelined queries in order on one connection', async () => {
    const net = await import('node:net');
    const names = ['a.example.org', 'b.sub.example.org', 'c.example.org'];
    const replies = await new Promise<Buffer[]>((resolve, reject) => {
      const sock = net.connect({ port, host: '127.0.0.1' });
      let buf = Buffer.alloc(0);
      const out: Buffer[] = [];
      const timer = setTimeout(() => { sock.destroy(); reject(new Error('timeout')); }, 3000);
      sock.on('connect', () => {
        sock.write(Buffer.concat(names.map((n) => { const m = q(n, 'A'); const l = Buffer.alloc(2); l.writeUInt16BE(m.length); return Buffer.concat([l, m]); })));
      });
      sock.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 2 && buf.length >= buf.readUInt16BE(0) + 2) {
          out.push(buf.subarray(2, buf.readUInt16BE(0) + 2));
          buf = buf.subarray(buf.readUInt16BE(0) + 2);
        }
        if (out.length === names.length) { clearTimeout(timer); sock.destroy(); resolve(out); }
      });
      sock.on('error', reject);
    });
    assert.deepEqual(replies.map((r) => dnsPacket.decode(r).questions![0]!.name), names);
  });

  test('writeWire: a ready-made reply goes out as is to a client without EDNS', async () => {
    const r = wire.decodeMessage(await exchange(port, q('x.wire.test', 'A')));
    assert.equal(r.answer.length, 3);
    assert.equal(r.edns, undefined);
    assert.equal(r.id, 4242);
  });

  test('writeWire: an EDNS client gets the OPT appended with its size and DO, and no unhandled option echoed (CoreDNS 1.15.0)', async () => {
    const query = wire.newQuery('x.wire.test.', wire.RRType.A);
    query.edns = { udpSize: 1300, version: 0, do: true, z: 0, options: [{ code: 10, data: Buffer.from('0123456789abcdef') }, { code: 8, data: Buffer.from([0, 1, 24, 0, 10, 0, 0]) }] };
    const r = wire.decodeMessage(await exchange(port, wire.encodeMessage(query)));
    assert.equal(r.answer.length, 3);
    assert.equal(r.edns?.udpSize, 1300);
    assert.equal(r.edns?.do, true);
    assert.deepEqual(r.edns?.options.map((o) => o.code), []);
  });

  test('writeWire: a reply carrying its own OPT gets it normalised, not duplicated', async () => {
    const query = wire.newQuery('x.wireopt.test.', wire.RRType.A);
    query.edns = { udpSize: 1232, version: 0, do: true, z: 0, options: [] };
    const raw = await exchange(port, wire.encodeMessage(query));
    const r = wire.decodeMessage(raw);
    assert.equal(r.edns?.udpSize, 1232);
    assert.equal(r.edns?.do, true);
    assert.equal(raw.readUInt16BE(10), 1);
  });

  test('writeWire: a reply too big for the client is truncated through the codec', async () => {
    const raw = await exchange(port, q('x.wirebig.test', 'A'));
    assert.ok(raw.length <= 512);
    const r = wire.decodeMessage(raw);
    assert.equal(r.tc, true);
    const full = wire.decodeMessage(await exchange(port, q('x.wirebig.test', 'A'), { tcp: true }));
    assert.equal(full.answer.length, 80);
  });

  test('an external TypeScript plugin runs in the chain', async () => {
    const r = dnsPacket.decode(await exchange(port, q('x.hello.test', 'TXT')));
    assert.equal(txtOf(r), 'hi');
  });

  test('a bad reload keeps the old configuration serving', async () => {
    const err = await server.reload('example.org:0 {\n  nosuchplugin\n}\n');
    assert.match(String(err?.message), /Corefile:2 - Error during parsing: Unknown directive 'nosuchplugin'/);
    assert.equal(txtOf(dnsPacket.decode(await exchange(port, q('www.example.org', 'A')))), 'example.org.');
  });
});
