import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import type { AddressInfo } from 'node:net';
import type { Handler, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { ResourceRecord, SOAData } from '../../wire/types.ts';
import { Opcode, Rcode, RRType } from '../../wire/constants.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { replyTo } from '../../wire/message.ts';
import { pluginLogger } from '../../core/log.ts';
import { CaptureWriter, captureLog, makeRequest, parseTable, settle, StubHandler } from '../pkg/testing.ts';
import { NotAuthoritativeError, type Transferer } from '../pkg/transfer.ts';
import { parse, type TransferOptions } from './setup.ts';
import { longestMatch, Transfer, type XfrEntry } from './transfer.ts';
import { sendNotifies } from './notify.ts';

const E = (zones: string[], to: string[], source?: string): XfrEntry => ({ zones, to, source });

test('transfer parse', async () => {
  const pre = 'plugin/transfer: plugin/transfer: Corefile:';
  await parseTable<TransferOptions>('transfer', parse, [
    ['example.org {\n transfer {\n  to *\n }\n}', { entries: [E(['example.org.'], ['*'])] }],
    ['. {\n transfer example.org Example.NET {\n  to 10.0.0.1 10.0.0.2:5300\n  to ::1 [2001:db8::1]:53 fe80::1%eth0\n  source 192.0.2.1\n }\n}',
      { entries: [E(['example.org.', 'example.net.'], ['10.0.0.1:53', '10.0.0.2:5300', '[::1]:53', '[2001:db8::1]:53', '[fe80::1%eth0]:53'], '192.0.2.1')] }],
    ['a.org b.org {\n transfer {\n  to *\n }\n transfer b.org {\n  to 10.0.0.1:\n }\n}',
      { entries: [E(['a.org.', 'b.org.'], ['*']), E(['b.org.'], ['10.0.0.1:53'])] }],
    ['example.org {\n transfer\n}', `${pre}2 - Error during parsing: 'to' is required`],
    ['example.org {\n transfer {\n  source 10.0.0.1\n }\n}', `${pre}4 - Error during parsing: 'to' is required`],
    ['example.org {\n transfer {\n  to\n }\n}', "plugin/transfer: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'to'"],
    ['example.org {\n transfer {\n  to foo\n }\n}', "plugin/transfer: must specify an IP address: `foo'"],
    ['example.org {\n transfer {\n  to [::1]\n }\n}', "plugin/transfer: must specify an IP address: `[::1]'"],
    ['example.org {\n transfer {\n  to 1.2.3.4:53:1\n }\n}', "plugin/transfer: must specify an IP address: `1.2.3.4:53:1'"],
    ['example.org {\n transfer {\n  to host:53\n }\n}', "plugin/transfer: must specify an IP address: `host'"],
    ['example.org {\n transfer {\n  to *\n  source\n }\n}', "plugin/transfer: Corefile:4 - Error during parsing: Wrong argument count or unexpected line ending after 'source'"],
    ['example.org {\n transfer {\n  to *\n  source 1.2.3.4 5.6.7.8\n }\n}', "plugin/transfer: Corefile:4 - Error during parsing: Wrong argument count or unexpected line ending after '5.6.7.8'"],
    ['example.org {\n transfer {\n  to *\n  source 1.2.3.4\n  source 1.2.3.5\n }\n}', `${pre}5 - Error during parsing: source already specified`],
    ['example.org {\n transfer {\n  to *\n  source x\n }\n}', `${pre}4 - Error during parsing: invalid source address "x"`],
    ['example.org {\n transfer {\n  to *\n  bogus 1\n }\n}', `${pre}4 - Error during parsing: unknown property "bogus"`],
  ]);
});

test('longestMatch: the longest zone; on equal length the greater zone', () => {
  const a = E(['org.'], ['*']);
  const b = E(['example.org.'], ['*']);
  const c = E(['example.net.', 'example.org.'], ['*']);
  assert.equal(longestMatch([a, b], 'www.example.org.'), b);
  assert.equal(longestMatch([b, c], 'www.example.org.'), b);
  assert.equal(longestMatch([a], 'example.net.'), undefined);
  const x = E(['aa.'], ['*']);
  const y = E(['bb.'], ['*']);
  assert.equal(longestMatch([x, y], 'aa.'), x);
});

const soa = (serial: number): ResourceRecord<SOAData> => ({
  name: 'example.org.', type: RRType.SOA, class: 1, ttl: 3600,
  data: { mname: 'ns.example.org.', rname: 'admin.example.org.', serial, refresh: 1, retry: 1, expire: 1, minimum: 1 },
});
const txt = (i: number): ResourceRecord => ({
  // 1027 octets: name (13) + 10 + rdata 1004
  name: 'example.org.', type: RRType.TXT, class: 1, ttl: 60, data: { strings: [new Uint8Array(250).fill(97), new Uint8Array(250).fill(98), new Uint8Array(250).fill(99), new Uint8Array(250).fill(48 + (i % 10))] },
});

class Zone implements Transferer {
  readonly name = 'zone';
  asked: [string, number][] = [];
  private readonly zone: string;
  private readonly records: ResourceRecord[];
  constructor(zone: string, records: ResourceRecord[]) {
    this.zone = zone;
    this.records = records;
  }
  serveDNS(): number { return Rcode.SERVFAIL; }
  transfer(zone: string, serial: number): AsyncIterable<ResourceRecord[]> {
    this.asked.push([zone, serial]);
    if (zone !== this.zone) throw new NotAuthoritativeError(zone);
    const s = this.records[0] as ResourceRecord<SOAData>;
    const recs = this.records;
    return (async function* gen(): AsyncGenerator<ResourceRecord[]> {
      await Promise.resolve();
      if (serial !== 0 && s.data.serial === serial) { yield [s]; return; }
      yield [recs[0]!];
      yield [];
      yield recs.slice(1);
      yield [s];
    })();
  }
}

function xfrRequest(name: string, type: number, o: { proto?: 'udp' | 'tcp'; remote?: string; serial?: number } = {}): Request {
  const req = makeRequest(name, { type, proto: o.proto ?? 'tcp', remote: o.remote });
  if (o.serial !== undefined) req.msg.authority.push(soa(o.serial));
  return req;
}

const next = new StubHandler('next', (req: Request, w: ResponseWriter) => {
  const m = replyTo(req.msg);
  m.rcode = Rcode.NXDOMAIN;
  w.writeMsg(m);
  return Rcode.NXDOMAIN;
});

function handler(entries: XfrEntry[], providers: Transferer[], nx: Handler | undefined = next): Transfer {
  const t = new Transfer(entries, pluginLogger('transfer'));
  t.next = nx;
  t.transferers = providers;
  return t;
}

test('AXFR: envelopes of at most 63000 octets of records, AA set, SOA first and last', async () => {
  const recs = [soa(7), ...Array.from({ length: 130 }, (_, i) => txt(i))];
  const t = handler([E(['example.org.'], ['*'])], [new Zone('example.org.', recs)]);
  const w = new CaptureWriter();
  const lines = await captureLog(async () => {
    assert.equal(await settle(t.serveDNS(xfrRequest('Example.org.', RRType.AXFR), w)), Rcode.NOERROR);
  });
  // 1027 octets per TXT record: 61 fit with the SOA in the first envelope
  assert.deepEqual(w.msgs.map((m) => m.answer.length), [62, 61, 9]);
  for (const m of w.msgs) {
    assert.equal(m.aa, true);
    assert.equal(m.id, 4242);
    assert.equal(m.question[0]!.name, 'Example.org.');
    assert.ok(encodeMessage(m).length < 65535);
  }
  const all = w.msgs.flatMap((m) => m.answer);
  assert.equal(all[0]!.type, RRType.SOA);
  assert.equal(all[all.length - 1]!.type, RRType.SOA);
  assert.equal(all.length, 132);
  assert.deepEqual(lines, ['[INFO] plugin/transfer: Outgoing transfer of 132 records of zone "Example.org." to 127.0.0.1 for 7 SOA serial']);
});

test('IXFR: current serial answers the SOA alone (no AA); an older one a full transfer; no SOA: SERVFAIL', async () => {
  const recs = [soa(7), txt(1), txt(2)];
  const t = handler([E(['example.org.'], ['*'])], [new Zone('example.org.', recs)]);
  let w = new CaptureWriter();
  const lines = await captureLog(async () => {
    assert.equal(await settle(t.serveDNS(xfrRequest('example.org.', RRType.IXFR, { serial: 7 }), w)), Rcode.NOERROR);
  });
  assert.equal(w.msgs.length, 1);
  assert.equal(w.msgs[0]!.aa, false);
  assert.deepEqual(w.msgs[0]!.answer, [soa(7)]);
  assert.deepEqual(lines, ['[INFO] plugin/transfer: Outgoing noop, incremental transfer for up to date zone "example.org." to 127.0.0.1 for 7 SOA serial']);
  w = new CaptureWriter();
  assert.equal(await settle(t.serveDNS(xfrRequest('example.org.', RRType.IXFR, { serial: 6 }), w)), Rcode.NOERROR);
  assert.equal(w.msgs.length, 1);
  assert.equal(w.msgs[0]!.answer.length, 4);
  assert.equal(w.msgs[0]!.aa, true);
  w = new CaptureWriter();
  assert.equal(await settle(t.serveDNS(xfrRequest('example.org.', RRType.IXFR), w)), Rcode.SERVFAIL);
  const req = xfrRequest('example.org.', RRType.IXFR);
  req.msg.authority.push(txt(1));
  assert.equal(await settle(t.serveDNS(req, w)), Rcode.SERVFAIL);
  assert.equal(w.msgs.length, 0);
});

test('UDP is refused (the server answers); clients not in `to` get a written REFUSED', async () => {
  const t = handler([E(['example.org.'], ['10.0.0.1:53', '[::1]:5300'])], [new Zone('example.org.', [soa(1)])]);
  const w = new CaptureWriter();
  assert.equal(await settle(t.serveDNS(xfrRequest('example.org.', RRType.AXFR, { proto: 'udp', remote: '10.0.0.1' }), w)), Rcode.REFUSED);
  assert.equal(w.msgs.length, 0);
  assert.equal(await settle(t.serveDNS(xfrRequest('example.org.', RRType.AXFR, { remote: '10.0.0.2' }), w)), Rcode.NOERROR);
  assert.equal(w.msgs.length, 1);
  assert.equal(w.msgs[0]!.rcode, Rcode.REFUSED);
  assert.equal(await settle(t.serveDNS(xfrRequest('example.org.', RRType.AXFR, { remote: '::1' }), w)), Rcode.NOERROR);
  assert.equal(w.msgs.length, 2);
  assert.equal(w.msgs[1]!.rcode, Rcode.NOERROR);
  assert.equal(await settle(t.serveDNS(xfrRequest('example.org.', RRType.AXFR, { remote: '10.0.0.1' }), w)), Rcode.NOERROR);
  assert.equal(w.msgs[2]!.answer.length, 2);
});

test('other types, other zones and zones no provider has go to the next plugin', async () => {
  const z = new Zone('example.org.', [soa(1)]);
  const t = handler([E(['example.org.'], ['*'])], [new Zone('other.', [soa(1)]), z]);
  const w = new CaptureWriter();
  assert.equal(await settle(t.serveDNS(xfrRequest('example.org.', RRType.A), w)), Rcode.NXDOMAIN);
  assert.equal(await settle(t.serveDNS(xfrRequest('example.net.', RRType.AXFR), w)), Rcode.NXDOMAIN);
  assert.equal(await settle(t.serveDNS(xfrRequest('www.example.org.', RRType.AXFR), w)), Rcode.NXDOMAIN);
  assert.deepEqual(z.asked, [['www.example.org.', 0]]);
  // the first provider is not authoritative: the second answers
  assert.equal(await settle(t.serveDNS(xfrRequest('example.org.', RRType.AXFR), w)), Rcode.NOERROR);
  const last = handler([E(['example.org.'], ['*'])], []);
  last.next = undefined;
  assert.throws(() => last.serveDNS(xfrRequest('example.org.', RRType.AXFR), w), /plugin\/transfer: no next plugin found/);
});

test('a provider failing at once is SERVFAIL with its error', async () => {
  const bad: Transferer = {
    name: 'bad', serveDNS: () => Rcode.SERVFAIL,
    transfer: () => { throw new Error('no SOA'); },
  };
  const t = handler([E(['example.org.'], ['*'])], [bad]);
  assert.throws(() => t.serveDNS(xfrRequest('example.org.', RRType.AXFR), new CaptureWriter()),
    (e: unknown) => (e as { rcode: number }).rcode === Rcode.SERVFAIL && (e as Error).message === 'no SOA');
});

/** A UDP peer answering NOTIFYs with the rcodes given, one per query (then the last again). */
async function peer(rcodes: number[]): Promise<{ port: number; got: number; close: () => void }> {
  const s = createSocket('udp4');
  const st = { port: 0, got: 0, close: () => { s.close(); } };
  s.on('message', (msg, rinfo) => {
    const q = decodeMessage(msg);
    assert.equal(q.opcode, Opcode.NOTIFY);
    assert.equal(q.aa, true);
    assert.deepEqual(q.question, [{ name: 'example.org.', type: RRType.SOA, class: 1 }]);
    const r = replyTo(q);
    r.rcode = rcodes[Math.min(st.got, rcodes.length - 1)]!;
    st.got++;
    s.send(encodeMessage(r), rinfo.port, rinfo.address);
  });
  await new Promise<void>((res) => { s.bind(0, '127.0.0.1', res); });
  st.port = (s.address() as AddressInfo).port;
  return st;
}

test('NOTIFY: sent to each address but *, retried up to three times until NOERROR; errors joined', async () => {
  const ok = await peer([Rcode.SERVFAIL, Rcode.NOERROR]);
  const no = await peer([Rcode.REFUSED]);
  try {
    await sendNotifies('example.org.', ['*', `127.0.0.1:${ok.port}`], undefined);
    assert.equal(ok.got, 2);
    await assert.rejects(sendNotifies('example.org.', [`127.0.0.1:${no.port}`, `127.0.0.1:${ok.port}`], '127.0.0.1'),
      { message: `notify for zone "example.org." was not accepted by "127.0.0.1:${no.port}": rcode was "REFUSED"` });
    assert.equal(no.got, 3);
    assert.equal(ok.got, 3);
  } finally {
    ok.close();
    no.close();
  }
});

test('NOTIFY: a silent peer times out after three tries (Go error text)', { timeout: 10000 }, async () => {
  const s = createSocket('udp4');
  await new Promise<void>((res) => { s.bind(0, '127.0.0.1', res); });
  const port = (s.address() as AddressInfo).port;
  try {
    await assert.rejects(sendNotifies('example.org.', [`127.0.0.1:${port}`], undefined), {
      message: new RegExp(`^notify for zone "example.org." was not accepted by "127.0.0.1:${port}": "read udp 127.0.0.1:\\d+->127.0.0.1:${port}: i/o timeout"$`) });
  } finally {
    s.close();
  }
});

test('Transfer.notify: the longest-matching entry, debug line after sending', async () => {
  const ok = await peer([Rcode.NOERROR]);
  try {
    const t = handler([E(['org.'], ['*']), E(['example.org.'], ['*', `127.0.0.1:${ok.port}`])], []);
    await t.notify('example.org.');
    assert.equal(ok.got, 1);
    await t.notify('example.net.');
    assert.equal(ok.got, 1);
  } finally {
    ok.close();
  }
});

test('NOTIFY: a source address the host does not have fails with Go\'s dial error', async () => {
  await assert.rejects(sendNotifies('example.org.', ['127.0.0.1:9'], '192.0.2.254'), {
    message: 'notify for zone "example.org." was not accepted by "127.0.0.1:9": "dial udp 192.0.2.254:0->127.0.0.1:9: bind: cannot assign requested address"',
  });
});

test('NOTIFY: a closed port fails at once with Go\'s connection refused text', async () => {
  const s = createSocket('udp4');
  await new Promise<void>((res) => { s.bind(0, '127.0.0.1', res); });
  const port = (s.address() as AddressInfo).port;
  s.close();
  await assert.rejects(sendNotifies('example.org.', [`127.0.0.1:${port}`], undefined), {
    message: new RegExp(`^notify for zone "example.org." was not accepted by "127.0.0.1:${port}": "read udp 127.0.0.1:\\d+->127.0.0.1:${port}: read: connection refused"$`),
  });
});

test('a full transfer whose closing SOA alone spills over is ended as CoreDNS does: that SOA without AA, logged as noop', async () => {
  // SOA (78 octets) + 61 TXT (1027 each) + a 224-octet TXT = 62949; the closing SOA would make 63027
  const filler: ResourceRecord = { name: 'example.org.', type: RRType.TXT, class: 1, ttl: 60, data: { strings: [new Uint8Array(200).fill(120)] } };
  const recs = [soa(9), ...Array.from({ length: 61 }, (_, i) => txt(i)), filler];
  const t = handler([E(['example.org.'], ['*'])], [new Zone('example.org.', recs)]);
  const w = new CaptureWriter();
  const lines = await captureLog(async () => {
    assert.equal(await settle(t.serveDNS(xfrRequest('example.org.', RRType.AXFR), w)), Rcode.NOERROR);
  });
  assert.deepEqual(w.msgs.map((m) => [m.answer.length, m.aa]), [[63, true], [1, false]]);
  assert.deepEqual(lines, ['[INFO] plugin/transfer: Outgoing noop, incremental transfer for up to date zone "example.org." to 127.0.0.1 for 9 SOA serial']);
});
