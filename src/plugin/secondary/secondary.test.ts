import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Message, ResourceRecord } from '../../wire/types.ts';
import { Opcode, Rcode, RRType } from '../../wire/constants.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { replyTo } from '../../wire/message.ts';
import type { ServerLogger } from '../plugin.ts';
import { Fall } from '../pkg/fall.ts';
import { isTransferer, NotAuthoritativeError } from '../pkg/transfer.ts';
import { zoneFromText } from '../pkg/zone/load.ts';
import { CaptureWriter, StubHandler, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { parse, plugin, type SecondaryOptions } from './setup.ts';
import { Secondary, SecondaryZone, serialLess, type SecondaryEnv } from './secondary.ts';

const E = 'plugin/secondary: Corefile:3 - Error during parsing: ';
type View = { zones: Record<string, string[]>; fall: Fall };
const view = (o: SecondaryOptions): View => ({ zones: Object.fromEntries(o.zones), fall: o.fall });
const fall = (...zones: string[]): Fall => {
  const f = new Fall();
  if (zones.length > 0) f.setZonesFromArgs(zones[0] === '.' ? [] : zones);
  return f;
};

test('secondary parse', async () => {
  await parseTable<SecondaryOptions, View>('secondary', parse, [
    ['example.org {\n secondary {\n  transfer from 10.0.0.1\n }\n}', { zones: { 'example.org.': ['10.0.0.1:53'] }, fall: fall() }],
    ['. {\n secondary Example.ORG example.net {\n  transfer from 10.0.0.1:5300 ::1 [::2]:54 1.2.3.4:x\n  transfer from 10.0.0.2\n  fallthrough\n }\n}', {
      zones: {
        'example.org.': ['10.0.0.1:5300', '[::1]:53', '[::2]:54', '1.2.3.4:x', '10.0.0.2:53'],
        'example.net.': ['10.0.0.1:5300', '[::1]:53', '[::2]:54', '1.2.3.4:x', '10.0.0.2:53'],
      },
      fall: fall('.'),
    }],
    ['. {\n secondary a.org {\n  transfer from 10.0.0.1\n }\n secondary b.org {\n  transfer from 10.0.0.2\n  fallthrough b.org\n }\n}',
      { zones: { 'a.org.': ['10.0.0.1:53'], 'b.org.': ['10.0.0.2:53'] }, fall: fall('b.org') }],
    ['example.org {\n secondary\n}', 'plugin/secondary: Corefile:2 - Error during parsing: secondary zones require a transfer from property'],
    ['example.org {\n secondary {\n  fallthrough\n }\n}', 'plugin/secondary: Corefile:4 - Error during parsing: secondary zones require a transfer from property'],
    ['example.org {\n secondary {\n  transfer to 1.2.3.4\n }\n}', E + 'unknown property to'],
    ['example.org {\n secondary {\n  transfer from *\n }\n}', "plugin/secondary: can't use '*' in transfer from"],
    ['example.org {\n secondary {\n  transfer from foo\n }\n}', 'plugin/secondary: must specify an IP address: `foo\''],
    ['example.org {\n secondary {\n  transfer from foo:53\n }\n}', 'plugin/secondary: must specify an IP address: `foo\''],
    ['example.org {\n secondary {\n  transfer\n }\n}', E + "Wrong argument count or unexpected line ending after 'transfer'"],
    ['example.org {\n secondary {\n  transfer from\n }\n}', E + "Wrong argument count or unexpected line ending after 'from'"],
    ['example.org {\n secondary {\n  foo\n }\n}', E + "unknown property 'foo'"],
  ], { view });
});

test('serial arithmetic (RFC 1982)', () => {
  assert.equal(serialLess(1, 2), true);
  assert.equal(serialLess(2, 1), false);
  assert.equal(serialLess(2, 2), false);
  assert.equal(serialLess(4294967295, 1), true);
  assert.equal(serialLess(1, 4294967295), false);
});

function testLog(lines: string[], prefix: string): ServerLogger {
  return {
    debugEnabled: false,
    debug: (m) => { lines.push(`[DEBUG] ${prefix}${m}`); }, info: (m) => { lines.push(`[INFO] ${prefix}${m}`); },
    warning: (m) => { lines.push(`[WARNING] ${prefix}${m}`); }, error: (m) => { lines.push(`[ERROR] ${prefix}${m}`); },
    fatal: (m) => { lines.push(`[FATAL] ${prefix}${m}`); },
  };
}

function env(lines: string[]): SecondaryEnv {
  return { log: testLog(lines, 'plugin/secondary: '), fileLog: testLog(lines, 'plugin/file: '), random: () => 0 };
}

const zoneOf = (serial: number, refresh = 3600, retry = 600, expire = 86400, extra = ''): string =>
  `$TTL 300\n@ SOA ns1 hostmaster ${serial} ${refresh} ${retry} ${expire} 300\n@ NS ns1\nns1 A 192.0.2.53\nwww A 192.0.2.1\n${extra}`;

/** A primary on a loopback TCP port serving `text` (SOA queries and AXFR, 2 records a message). */
class Primary {
  text: string;
  axfrs = 0;
  /** Answer AXFR with this rcode instead. */
  axfrRcode = 0;
  private readonly server: Server;
  constructor(text: string) {
    this.text = text;
    this.server = createServer((s) => { this.serve(s); });
  }
  async listen(): Promise<string> {
    await new Promise<void>((r) => { this.server.listen(0, '127.0.0.1', r); });
    return `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  close(): Promise<void> {
    return new Promise((r) => { this.server.close(() => { r(); }); });
  }
  private send(s: Socket, m: Message): void {
    const w = encodeMessage(m);
    const b = Buffer.alloc(w.length + 2);
    b.writeUInt16BE(w.length, 0);
    w.copy(b, 2);
    s.write(b);
  }
  private serve(s: Socket): void {
    let buf = Buffer.alloc(0);
    s.on('error', () => { /* the client hung up */ });
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length < 2 || buf.length < buf.readUInt16BE(0) + 2) return;
      const q = decodeMessage(buf.subarray(2, buf.readUInt16BE(0) + 2));
      const z = zoneFromText(this.text, 'example.org.', 'db');
      const all: ResourceRecord[] = [z.soa!, ...z.ns];
      for (const e of z.elems()) all.push(...e.all());
      all.push(z.soa!);
      const r = replyTo(q);
      if (q.question[0]!.type === RRType.SOA) {
        r.answer = [z.soa!];
        this.send(s, r);
        return;
      }
      this.axfrs++;
      if (this.axfrRcode !== 0) {
        r.rcode = this.axfrRcode;
        this.send(s, r);
        return;
      }
      for (let i = 0; i < all.length; i += 2) {
        const m = replyTo(q);
        m.answer = all.slice(i, i + 2);
        this.send(s, m);
      }
    });
  }
}

async function until(fn: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('transfer in over several messages; serial check; failures logged as CoreDNS does', async () => {
  const p = new Primary(zoneOf(5, 3600, 600, 86400, 'a A 192.0.2.2\nb A 192.0.2.3\n'));
  const addr = await p.listen();
  const lines: string[] = [];
  const z = new SecondaryZone('example.org.', ['127.0.0.1:1', addr], env(lines));
  assert.equal(await z.shouldTransfer(), true);
  await z.transferIn();
  assert.equal(z.zone.serial, 5);
  assert.deepEqual([...z.zone.elems()].map((e) => e.name), ['a.example.org.', 'b.example.org.', 'ns1.example.org.', 'www.example.org.']);
  assert.deepEqual(lines, [
    "[ERROR] plugin/file: Failed to setup transfer `example.org.' with `\"127.0.0.1:1\"': dial tcp 127.0.0.1:1: connect: connection refused",
    `[INFO] plugin/file: Transferred: example.org. from ${addr}`,
  ]);
  assert.equal(await z.shouldTransfer(), false);
  p.text = zoneOf(6);
  assert.equal(await z.shouldTransfer(), true);
  lines.length = 0;
  p.axfrRcode = Rcode.REFUSED;
  const only = new SecondaryZone('example.org.', [addr], env(lines));
  await assert.rejects(only.transferIn(), { message: 'dns: bad xfr rcode: 5' });
  assert.deepEqual(lines, [`[ERROR] plugin/file: Failed to transfer \`example.org.' from "${addr}": dns: bad xfr rcode: 5`]);
  await assert.rejects(new SecondaryZone('example.org.', ['127.0.0.1:1'], env([])).shouldTransfer(), { message: 'dial tcp 127.0.0.1:1: connect: connection refused' });
  await p.close();
});

test('startup backoff, then refresh on the SOA timer picks up a new serial', async () => {
  const p = new Primary(zoneOf(1, 1, 1, 3));
  p.axfrRcode = Rcode.SERVFAIL;
  const addr = await p.listen();
  const lines: string[] = [];
  const z = new SecondaryZone('example.org.', [addr], env(lines));
  void z.run();
  await until(() => lines.some((l) => l.startsWith('[WARNING] plugin/secondary: All')));
  assert.ok(lines.includes(`[WARNING] plugin/secondary: All 'example.org.' masters failed to transfer, retrying in 250ms: dns: bad xfr rcode: 2`));
  p.axfrRcode = 0;
  await until(() => z.zone.serial === 1);
  p.text = zoneOf(2, 1, 1, 3);
  await until(() => z.zone.serial === 2, 4000);
  // the primary goes away: retry arms, expire marks the zone expired
  await p.close();
  await until(() => z.zone.expired, 8000);
  assert.ok(lines.some((l) => l.startsWith('[WARNING] plugin/file: Failed refresh check dial tcp')));
  z.stop();
});

test('handler: SERVFAIL before the first transfer, NOTIFY from primaries only, expired zones, fallthrough, Transferer', async () => {
  const p = new Primary(zoneOf(7));
  const addr = await p.listen();
  const lines: string[] = [];
  const e = env(lines);
  const z = new SecondaryZone('example.org.', [addr], e);
  const next = new StubHandler('whoami', () => Rcode.NOERROR);
  const s = new Secondary(new Map([['example.org.', z]]), fall(), e.fileLog).withNext(next);
  const run = async (name: string, o: { type?: number; opcode?: number; remote?: string } = {}): Promise<{ rc: number; w: CaptureWriter }> => {
    const w = new CaptureWriter();
    return { rc: await settle(s.serveDNS(makeRequest(name, o), w)), w };
  };
  assert.equal((await run('www.example.org.')).rc, Rcode.SERVFAIL);
  let r = await run('example.org.', { type: RRType.SOA, opcode: Opcode.NOTIFY, remote: '192.0.2.9' });
  assert.equal(r.w.msgs.length, 0);
  assert.deepEqual(lines, ['[INFO] plugin/file: Dropping notify from 192.0.2.9 for example.org.']);
  lines.length = 0;
  r = await run('example.org.', { type: RRType.SOA, opcode: Opcode.NOTIFY });
  assert.equal(r.w.last!.aa, true);
  assert.equal(r.w.last!.opcode, Opcode.NOTIFY);
  assert.deepEqual(lines, [
    '[INFO] plugin/file: Notify from 127.0.0.1 for example.org.: checking transfer',
    `[INFO] plugin/file: Transferred: example.org. from ${addr}`,
  ]);
  r = await run('www.example.org.');
  assert.deepEqual(r.w.last!.answer.map((a) => a.data), [{ address: '192.0.2.1' }]);
  lines.length = 0;
  await run('example.org.', { type: RRType.SOA, opcode: Opcode.NOTIFY });
  assert.deepEqual(lines, [
    '[INFO] plugin/file: Notify from 127.0.0.1 for example.org.: checking transfer',
    '[INFO] plugin/file: Notify from 127.0.0.1 for example.org.: no SOA serial increase seen',
  ]);
  assert.equal((await run('example.org.', { type: RRType.AXFR })).rc, Rcode.REFUSED);
  assert.equal((await run('www.example.com.')).rc, Rcode.NOERROR);
  assert.equal(next.calls, 1);
  // fallthrough: NXDOMAIN goes on
  const f = new Secondary(new Map([['example.org.', z]]), fall('.'), e.fileLog).withNext(next);
  await settle(f.serveDNS(makeRequest('nope.example.org.'), new CaptureWriter()));
  assert.equal(next.calls, 2);
  // Transferer
  assert.ok(isTransferer(s));
  const got: number[] = [];
  for await (const b of s.transfer('example.org.', 0)) got.push(...b.map((x) => x.type));
  assert.deepEqual(got, [RRType.SOA, RRType.NS, RRType.A, RRType.A, RRType.SOA]);
  assert.throws(() => s.transfer('example.com.', 0), NotAuthoritativeError);
  // expired
  lines.length = 0;
  z.zone.expired = true;
  assert.equal((await run('www.example.org.')).rc, Rcode.SERVFAIL);
  assert.deepEqual(lines, ['[ERROR] plugin/file: Zone example.org. is expired']);
  await p.close();
});

test('setup: a primary that cannot be reached does not stop the start; shutdown stops the retries', async () => {
  const s = await runSetup(plugin, 'example.org {\n secondary {\n  transfer from 127.0.0.1:1\n }\n}');
  const h = s.chain() as Secondary;
  await s.start();
  assert.equal(await settle(h.serveDNS(makeRequest('www.example.org.'), new CaptureWriter())), Rcode.SERVFAIL);
  assert.deepEqual(await s.stop(), []);
});
