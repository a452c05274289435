import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CaptureWriter, StubHandler, captureLog, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { ClientWriter } from '../../core/serve.ts';
import { Request } from '../../core/request.ts';
import { PluginError, type Handler } from '../plugin.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newQuery, replyTo } from '../../wire/message.ts';
import { findTsigRecord } from '../../wire/scan.ts';
import { Opcode, Rcode, RRType } from '../../wire/constants.ts';
import type { Message, OpaqueData } from '../../wire/types.ts';
import { createHmac } from 'node:crypto';
import { TsigSigner, macInput, nameWire, parseTsigRdata, tsigKey, tsigRecord, type TsigFields } from '../pkg/tsig.ts';
import { parse, parseKeyFile, plugin, type TsigOptions } from './setup.ts';
import { VALIDATED_KEY_NAME, type Tsig } from './tsig.ts';

const S = 'c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0';
const OTHER = 'b3RoZXJvdGhlcm90aGVyb3RoZXI=';
const E = (line: number) => `plugin/tsig: Corefile:${line} - Error during parsing: `;
const ARG = (line: number, tok: string) => `${E(line)}Wrong argument count or unexpected line ending after '${tok}'`;

const dir = mkdtempSync(join(tmpdir(), 'nodens-tsig-'));
const file = (name: string, text: string): string => { const p = join(dir, name); writeFileSync(p, text); return p; };
const keys1 = file('keys1.conf', `key "file.key." {\n  algorithm hmac-sha256;\n  secret "${OTHER}";\n};\n\nkey Second {\n secret ${S};\n}\n`);
const dup = file('dup.conf', `key "k." {\n secret "${S}";\n};\nkey "K" {\n secret "${S}";\n};\n`);
const nosecret = file('nosecret.conf', 'key "k." {\n algorithm hmac-sha1;\n};\n');
const junk = file('junk.conf', 'options {\n};\n');

test('parse: options and every setup error (CoreDNS reports each one as an argument error)', async () => {
  const opts = (o: Partial<TsigOptions>): Partial<TsigOptions> => o;
  await parseTable('tsig', parse, [
    ['example.org {\n tsig\n}', opts({ zones: ['example.org.'], secrets: new Map(), types: new Set(), allTypes: false, opcodes: new Set(), allOpcodes: false })],
    ['example.org example.net {\n tsig\n}', opts({ zones: ['example.org.', 'example.net.'] })],
    ['. {\n tsig Example.COM sub.example.org\n}', opts({ zones: ['example.com.', 'sub.example.org.'] })],
    [`. {\n tsig {\n  secret Key.Example ${S}\n  secret b. ${OTHER}\n }\n}`, opts({ secrets: new Map([['key.example.', S], ['b.', OTHER]]) })],
    [`. {\n tsig {\n  secrets ${keys1}\n }\n}`, opts({ secrets: new Map([['file.key.', OTHER], ['second.', S]]) })],
    ['. {\n tsig {\n  require A AAAA MX\n }\n}', opts({ types: new Set([RRType.A, RRType.AAAA, RRType.MX]), allTypes: false })],
    ['. {\n tsig {\n  require all\n }\n}', opts({ types: new Set(), allTypes: true })],
    // `all` and `none` are looked at in the first place only; `all` sticks, a later require resets the types
    ['. {\n tsig {\n  require all FOO\n  require none\n }\n}', opts({ types: new Set(), allTypes: true })],
    ['. {\n tsig {\n  require A\n  require MX\n }\n}', opts({ types: new Set([RRType.MX]) })],
    ['. {\n tsig {\n  require AXFR IXFR\n  require_opcode UPDATE NOTIFY\n }\n}',
      opts({ types: new Set([RRType.AXFR, RRType.IXFR]), opcodes: new Set([Opcode.UPDATE, Opcode.NOTIFY]) })],
    ['. {\n tsig {\n  require_opcode all\n }\n}', opts({ allOpcodes: true, opcodes: new Set() })],
    ['. {\n tsig {\n  require_opcode none\n }\n}', opts({ allOpcodes: false, opcodes: new Set() })],
    // errors
    ['. {\n tsig\n tsig\n}', ARG(3, 'tsig')],
    ['. {\n tsig {\n  secret a\n }\n}', ARG(3, 'a')],
    ['. {\n tsig {\n  secret a b c\n }\n}', ARG(3, 'c')],
    [`. {\n tsig {\n  secret a. ${S}\n  secret A ${S}\n }\n}`, ARG(4, S)],
    ['. {\n tsig {\n  secrets\n }\n}', ARG(3, 'secrets')],
    [`. {\n tsig {\n  secrets ${keys1} x\n }\n}`, ARG(3, 'x')],
    ['. {\n tsig {\n  secrets /nonexistent/keys.conf\n }\n}', ARG(3, '/nonexistent/keys.conf')],
    [`. {\n tsig {\n  secrets ${dup}\n }\n}`, ARG(3, dup)],
    [`. {\n tsig {\n  secrets ${nosecret}\n }\n}`, ARG(3, nosecret)],
    [`. {\n tsig {\n  secrets ${junk}\n }\n}`, ARG(3, junk)],
    [`. {\n tsig {\n  secret second ${S}\n  secrets ${keys1}\n }\n}`, ARG(4, keys1)],
    ['. {\n tsig {\n  require\n }\n}', ARG(3, 'require')],
    ['. {\n tsig {\n  require FOO\n }\n}', ARG(3, 'FOO')],
    ['. {\n tsig {\n  require a\n }\n}', ARG(3, 'a')],
    ['. {\n tsig {\n  require TYPE65\n }\n}', ARG(3, 'TYPE65')],
    ['. {\n tsig {\n  require A all\n }\n}', ARG(3, 'all')],
    ['. {\n tsig {\n  require_opcode\n }\n}', ARG(3, 'require_opcode')],
    ['. {\n tsig {\n  require_opcode query\n }\n}', ARG(3, 'query')],
    ['. {\n tsig {\n  require_opcode OPCODE3\n }\n}', ARG(3, 'OPCODE3')],
    ['. {\n tsig {\n  foo bar\n }\n}', ARG(3, 'foo')],
  ], { partial: true });
});

test('parseKeyFile: the named.conf subset CoreDNS reads', () => {
  assert.deepEqual(parseKeyFile(`key "a.b" {\n secret "${S}";\n algorithm hmac-md5;\n};\n`), new Map([['a.b.', S]]));
  assert.deepEqual(parseKeyFile(`key "a." {\r\n secret ${S} ;\r\n}\r\n`), new Map([['a.', S]]));
  // Go's strings.Trim(name, "\"{"): a closing brace stays
  assert.deepEqual(parseKeyFile(`key {a.} {\n secret "${S}";\n};\n`), new Map([['a.}.', S]]));
  assert.deepEqual(parseKeyFile('\n\n'), new Map());
  assert.throws(() => parseKeyFile('key\n'), /expected key name/);
  assert.throws(() => parseKeyFile('key "{"\n'), /expected key name/);
  assert.throws(() => parseKeyFile('key a {\n secret\n};\n'), /expected secret key/);
  assert.throws(() => parseKeyFile('key a {\n secret ";"\n};\n'), /expected secret key/);
  assert.throws(() => parseKeyFile('key a {\n bogus x;\n};\n'), /unexpected token "bogus"/);
  assert.throws(() => parseKeyFile('key a\n{\n'), /unexpected token "{"/);
  assert.throws(() => parseKeyFile('key a {\n};\n'), /expected secret for key "a."/);
});

// ---- the handler, through the server's own writer ----

const NOW = 1700000000;

/** A query for `name`/`type`, signed with `key`/`secret` (hmac-sha256 unless `alg`) at `time`. */
function signedQuery(name: string, type: number, key: string, secret: string, o: { time?: number; alg?: string } = {}): { wire: Buffer; mac: Uint8Array } {
  const q = newQuery(name, type);
  q.id = 0x2b2b;
  q.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [] };
  const fields: TsigFields = {
    algorithm: nameWire(o.alg ?? 'hmac-sha256.'), timeSigned: o.time ?? NOW, fudge: 300, mac: new Uint8Array(0), origId: q.id, error: 0, other: new Uint8Array(0),
  };
  const body = encodeMessage(q);
  if (o.alg === 'hmac-md5.sig-alg.reg.int.') {
    // miekg/dns no longer signs with MD5; a client still may (dig -y hmac-md5:...)
    const mac = createHmac('md5', Buffer.from(secret, 'base64')).update(macInput(body, nameWire(key), 0, fields, new Uint8Array(0), false)).digest();
    const rr = encodeMessage({ ...q, question: [], edns: undefined, additional: [tsigRecord(key, { ...fields, mac })] }).subarray(12);
    const wire = Buffer.concat([body, rr]);
    wire.writeUInt16BE(2, 10);
    return { wire, mac };
  }
  const signer = new TsigSigner(new Map([[key, tsigKey(secret)]]), new Uint8Array(0), () => o.time ?? NOW);
  const wire = signer.sign(body, tsigRecord(key, fields))!;
  return { wire: Buffer.from(wire), mac: signer.priorMac };
}

function requestOf(wire: Buffer, proto: 'udp' | 'tcp' = 'udp'): Request {
  return new Request(decodeMessage(wire), wire, proto, '127.0.0.1', 5353, '127.0.0.1', 53, 'dns://:53', process.hrtime.bigint());
}

class Sink {
  readonly sent: Buffer[] = [];
  send(w: Uint8Array): void { this.sent.push(Buffer.from(w)); }
}

const silentLog = { debug() {}, info() {}, warning() {}, error() {}, fatal() {}, debugEnabled: false };

/** The reply's TSIG fields, and whether its MAC is the HMAC-SHA256 of the query MAC, the reply and the variables. */
function replyTsig(reply: Buffer, requestMac: Uint8Array, key = 'key.example.', secret = S): { fields: TsigFields; valid: boolean } {
  const at = findTsigRecord(reply);
  assert.ok(at > 0, 'the reply ends with a TSIG record');
  const m = decodeMessage(reply);
  const rr = m.additional[m.additional.length - 1]!;
  assert.equal(rr.name, key);
  const fields = parseTsigRdata((rr.data as OpaqueData).raw)!;
  const body = Buffer.from(reply.subarray(0, at));
  body.writeUInt16BE(body.readUInt16BE(10) - 1, 10);
  const want = createHmac('sha256', Buffer.from(secret, 'base64')).update(macInput(body, nameWire(key), 0, fields, requestMac, false)).digest();
  return { fields, valid: want.equals(fields.mac) };
}

const answerA = (seen: Request[]) => new StubHandler('whoami', (req, w) => {
  seen.push(req);
  const r = replyTo(req.msg);
  r.answer.push({ name: req.qname, type: RRType.A, class: 1, ttl: 0, data: { address: '192.0.2.1' } });
  w.writeMsg(r);
  return Rcode.NOERROR;
});

async function chainOf(corefile: string, last: Handler): Promise<{ chain: Handler; tsig: Tsig }> {
  const res = await runSetup(plugin, corefile);
  const chain = res.chain(last);
  const t = chain as Tsig;
  t.clock = () => NOW;
  return { chain, tsig: t };
}

async function serve(chain: Handler, req: Request): Promise<{ rcode: number; sent: Buffer[] }> {
  const sink = new Sink();
  const w = new ClientWriter(req, sink, silentLog, new Set());
  const rcode = await settle(chain.serveDNS(req, w));
  return { rcode, sent: sink.sent };
}

const COREFILE = `example.org {\n tsig {\n  secret key.example. ${S}\n  require MX\n }\n}\n`;

test('a valid signed query: the chain sees it without the TSIG, the reply is signed over the query MAC', async () => {
  const seen: Request[] = [];
  const { chain } = await chainOf(COREFILE, answerA(seen));
  for (const proto of ['udp', 'tcp'] as const) {
    const q = signedQuery('www.example.org.', RRType.A, 'key.example.', S);
    const { rcode, sent } = await serve(chain, requestOf(q.wire, proto));
    assert.equal(rcode, Rcode.NOERROR);
    assert.equal(sent.length, 1);
    const r = decodeMessage(sent[0]!);
    assert.equal(r.answer.length, 1);
    assert.ok(r.edns, 'the OPT comes before the TSIG');
    const t = replyTsig(sent[0]!, q.mac);
    assert.equal(t.valid, true);
    assert.equal(t.fields.error, 0);
    assert.equal(t.fields.fudge, 300);
    assert.equal(t.fields.timeSigned, NOW);
    assert.equal(t.fields.origId, 0x2b2b);
    const req = seen[seen.length - 1]!;
    assert.equal(req.msg.additional.length, 0);
    assert.equal(req.value(VALIDATED_KEY_NAME), 'key.example.');
  }
});

test('a reply written as wire by a later plugin is signed too; a TSIG set downstream is kept', async () => {
  const wireWriter = new StubHandler('cache', (req, w) => {
    const r = replyTo(req.msg);
    r.rcode = Rcode.NXDOMAIN;
    w.writeWire(encodeMessage(r));
    return Rcode.NXDOMAIN;
  });
  const { chain } = await chainOf(COREFILE, wireWriter);
  const q = signedQuery('nx.example.org.', RRType.A, 'key.example.', S);
  const { sent } = await serve(chain, requestOf(q.wire));
  assert.equal(decodeMessage(sent[0]!).rcode, Rcode.NXDOMAIN);
  assert.equal(replyTsig(sent[0]!, q.mac).valid, true);
  // a reply that already ends with a TSIG record gets no second one (restoreTsigWriter respects it)
  const own = new StubHandler('x', (req, w) => {
    const r = replyTo(req.msg);
    r.additional.push(tsigRecord('key.example.', {
      algorithm: nameWire('hmac-sha256.'), timeSigned: NOW, fudge: 300, mac: new Uint8Array(0), origId: r.id, error: 0, other: new Uint8Array(0),
    }));
    w.writeMsg(r);
    return Rcode.NOERROR;
  });
  const o = await chainOf(COREFILE, own);
  const q2 = signedQuery('example.org.', RRType.A, 'key.example.', S);
  const out = (await serve(o.chain, requestOf(q2.wire))).sent[0]!;
  assert.equal(decodeMessage(out).additional.filter((r) => r.type === RRType.TSIG).length, 1);
  assert.equal(replyTsig(out, q2.mac).valid, true);
});

test('verification failures answer NOTAUTH with the TSIG error: BADKEY and BADSIG unsigned, BADTIME signed', async () => {
  const seen: Request[] = [];
  const { chain } = await chainOf(COREFILE, answerA(seen));
  const cases: [string, ReturnType<typeof signedQuery>, number][] = [
    ['unknown key', signedQuery('example.org.', RRType.A, 'other.key.', S), Rcode.BADKEY],
    ['key name case', signedQuery('example.org.', RRType.A, 'KEY.example.', S), Rcode.BADKEY],
    ['wrong secret', signedQuery('example.org.', RRType.A, 'key.example.', OTHER), Rcode.BADSIG],
    ['hmac-md5', signedQuery('example.org.', RRType.A, 'key.example.', S, { alg: 'hmac-md5.sig-alg.reg.int.' }), Rcode.BADSIG],
    ['clock ahead', signedQuery('example.org.', RRType.A, 'key.example.', S, { time: NOW + 301 }), Rcode.BADTIME],
  ];
  for (const [what, q, error] of cases) {
    const lines = await captureLog(async () => {
      const { rcode, sent } = await serve(chain, requestOf(q.wire));
      assert.equal(rcode, Rcode.NOERROR, what);
      const r = decodeMessage(sent[0]!);
      assert.equal(r.rcode, Rcode.NOTAUTH, what);
      assert.equal(r.answer.length, 0, what);
      const t = replyTsig(sent[0]!, q.mac, decodeMessage(q.wire).additional.at(-1)!.name);
      assert.equal(t.fields.error, error, what);
      if (error === Rcode.BADTIME) {
        assert.equal(t.fields.timeSigned, NOW + 301, 'the client time');
        assert.deepEqual([...t.fields.other], [0, 0, 0x65, 0x53, 0xf1, 0x00], 'the server time');
        assert.equal(t.valid, true, 'BADTIME is signed');
      } else {
        assert.equal(t.fields.timeSigned, 0);
        assert.equal(t.fields.mac.length, 0);
      }
    });
    assert.deepEqual(lines, [], 'debug lines only with debug on');
  }
  assert.equal(seen.length, 0, 'the chain never ran');
});

test('debug: the reason of a failed verification and of a refused query is logged, unprefixed', async () => {
  const res = await runSetup(plugin, COREFILE);
  const chain = res.chain(answerA([]));
  (chain as Tsig).clock = () => NOW;
  res.setDebug(true);
  const lines = await captureLog(async () => {
    await serve(chain, requestOf(signedQuery('example.org.', RRType.MX, 'key.example.', OTHER).wire));
    await serve(chain, requestOf(signedQuery('example.org.', RRType.A, 'nokey.', OTHER).wire));
    await serve(chain, requestOf(signedQuery('example.org.', RRType.A, 'key.example.', S, { time: 1 }).wire));
    await serve(chain, makeRequest('example.org.', { type: RRType.MX }));
  });
  res.setDebug(false);
  assert.deepEqual(lines, [
    '[DEBUG] TSIG validation failed: MX dns: bad signature',
    '[DEBUG] TSIG validation failed: A dns: no secrets defined',
    '[DEBUG] TSIG validation failed: A dns: bad time',
    "[DEBUG] rejecting 'MX' request without TSIG",
  ]);
});

test('require: unsigned queries of the listed types are refused in the zones only; others pass', async () => {
  const seen: Request[] = [];
  const { chain } = await chainOf(COREFILE, answerA(seen));
  const w = new CaptureWriter();
  assert.equal(await settle(chain.serveDNS(makeRequest('example.org.', { type: RRType.MX, edns: {} }), w)), Rcode.NOERROR);
  assert.equal(w.last?.rcode, Rcode.REFUSED);
  assert.equal(w.last?.additional.length, 0);
  assert.equal(seen.length, 0);
  await settle(chain.serveDNS(makeRequest('example.org.', { type: RRType.A }), w));
  await settle(chain.serveDNS(makeRequest('example.net.', { type: RRType.MX }), w));
  assert.equal(seen.length, 2);
  // the opcode rule
  const op = await chainOf(`. {\n tsig {\n  require_opcode NOTIFY\n }\n}\n`, answerA(seen));
  await settle(op.chain.serveDNS(makeRequest('example.org.', { type: RRType.SOA, opcode: Opcode.NOTIFY }), w));
  assert.equal(w.last?.rcode, Rcode.REFUSED);
  assert.equal(w.last?.opcode, Opcode.NOTIFY);
});

test('a TSIG that is not the last additional record: FORMERR, whatever the zone', async () => {
  const { chain } = await chainOf(COREFILE, answerA([]));
  const q = signedQuery('www.other.net.', RRType.A, 'key.example.', S);
  // re-encoded by the codec, the OPT goes last: TSIG, then OPT
  const reordered = encodeMessage(decodeMessage(q.wire));
  assert.equal(findTsigRecord(reordered), -3);
  const { sent } = await serve(chain, requestOf(reordered));
  const r = decodeMessage(sent[0]!);
  assert.equal(r.rcode, Rcode.FORMERR);
  assert.equal(findTsigRecord(sent[0]!), -1, 'unsigned');
});

test('outside the zones a signed query is passed on untouched and its reply is not signed', async () => {
  const seen: Request[] = [];
  const { chain } = await chainOf(COREFILE, answerA(seen));
  const q = signedQuery('example.net.', RRType.A, 'key.example.', S);
  const { sent } = await serve(chain, requestOf(q.wire));
  assert.equal(seen[0]!.msg.additional.length, 1);
  assert.equal(findTsigRecord(sent[0]!), -1);
});

test("the chain's error rcodes and errors are answered by tsig, signed; other exceptions pass", async () => {
  const cases: [string, Handler | undefined, number, string[]][] = [
    ['SERVFAIL returned', new StubHandler('forward', () => Rcode.SERVFAIL), Rcode.SERVFAIL, []],
    ['REFUSED async', new StubHandler('acl', () => Promise.resolve(Rcode.REFUSED)), Rcode.REFUSED, []],
    ['error', new StubHandler('forward', () => { throw new PluginError(Rcode.SERVFAIL, 'plugin/forward: no healthy upstream'); }), Rcode.SERVFAIL,
      ['[ERROR] request handler returned an error: plugin/forward: no healthy upstream']],
    ['async error', new StubHandler('forward', () => Promise.reject(new PluginError(Rcode.NOTIMP, 'x'))), Rcode.NOTIMP,
      ['[ERROR] request handler returned an error: x']],
    ['no next plugin', undefined, Rcode.SERVFAIL, ['[ERROR] request handler returned an error: plugin/tsig: no next plugin found']],
  ];
  for (const [what, last, rc, log] of cases) {
    const res = await runSetup(plugin, COREFILE);
    let chain: Handler;
    if (last === undefined) {
      chain = res.factories[0]!(undefined);
    } else {
      chain = res.chain(last);
    }
    (chain as Tsig).clock = () => NOW;
    const q = signedQuery('example.org.', RRType.A, 'key.example.', S);
    const lines = await captureLog(async () => {
      const { rcode, sent } = await serve(chain, requestOf(q.wire));
      assert.equal(rcode, Rcode.NOERROR, what);
      assert.equal(decodeMessage(sent[0]!).rcode, rc, what);
      assert.equal(replyTsig(sent[0]!, q.mac).valid, true, what);
    });
    assert.deepEqual(lines, log, what);
  }
  const { chain } = await chainOf(COREFILE, new StubHandler('x', () => { throw new Error('boom'); }));
  await assert.rejects(async () => serve(chain, requestOf(signedQuery('example.org.', RRType.A, 'key.example.', S).wire)), /boom/);
});

test('keys are shared by the tsig blocks of one server (CoreDNS merges them into the server)', async () => {
  const res = await runSetup(plugin, `a.example {\n tsig {\n  secret ka. ${S}\n }\n}\nb.example {\n tsig {\n  secret kb. ${OTHER}\n }\n}\nc.example:1053 {\n tsig {\n  secret kc. ${S}\n }\n}\n`);
  const seen: Request[] = [];
  const a = res.chain(answerA(seen)) as Tsig;
  a.clock = () => NOW;
  const kb = signedQuery('a.example.', RRType.A, 'kb.', OTHER);
  const { sent } = await serve(a, requestOf(kb.wire));
  assert.equal(replyTsig(sent[0]!, kb.mac, 'kb.', OTHER).fields.error, 0);
  // another port is another server
  const kc = signedQuery('a.example.', RRType.A, 'kc.', S);
  const other = await serve(a, requestOf(kc.wire));
  assert.equal(replyTsig(other.sent[0]!, kc.mac, 'kc.', S).fields.error, Rcode.BADKEY);
});

test('the unsigned path: no signer, the request goes on as it came', async () => {
  const seen: Request[] = [];
  const { chain } = await chainOf(COREFILE, answerA(seen));
  const req = makeRequest('example.org.', { type: RRType.A });
  await serve(chain, req);
  assert.equal(seen[0], req);
  assert.equal(req.replySigner, undefined);
  const msg: Message = decodeMessage(encodeMessage(newQuery('x.', RRType.A)));
  assert.equal(msg.additional.length, 0);
});

test('plugins before tsig measure what CoreDNS measures: the stripped query, the reply with its OPT and TSIG stub', async () => {
  const { chain } = await chainOf(COREFILE, answerA([]));
  const q = signedQuery('example.org.', RRType.A, 'key.example.', S);
  const req = requestOf(q.wire);
  assert.equal(req.length, q.wire.length);
  const sink = new Sink();
  const inner = new ClientWriter(req, sink, silentLog, new Set());
  let seen: Message | undefined;
  const recorder = {
    writeMsg(m: Message) { seen = structuredClone(m); inner.writeMsg(m); },
    writeWire(b: Uint8Array) { inner.writeWire(b); },
  };
  await settle(chain.serveDNS(req, recorder));
  // CoreDNS's tsig removes the TSIG record from the shared query: log's {size} is measured after the chain
  const unsigned = decodeMessage(q.wire);
  unsigned.additional = [];
  assert.equal(req.length, encodeMessage(unsigned).length);
  // the reply as log's recorder sees it: OPT added (SizeAndDo), TSIG stub last with the request's MAC
  assert.ok(seen?.edns);
  assert.equal(seen.edns.udpSize, 1232);
  const stub = parseTsigRdata((seen.additional.at(-1)!.data as OpaqueData).raw)!;
  assert.deepEqual(Buffer.from(stub.mac), Buffer.from(q.mac));
  assert.equal(encodeMessage(seen).length, sink.sent[0]!.length, 'the same size as the signed reply');
});

test("the plugin's reply object is left as written (the TSIG stub goes into a copy)", async () => {
  const shared = replyTo(decodeMessage(signedQuery('example.org.', RRType.A, 'key.example.', S).wire));
  const { chain } = await chainOf(COREFILE, new StubHandler('x', (_req, w) => { w.writeMsg(shared); return Rcode.NOERROR; }));
  for (let i = 0; i < 2; i++) {
    const q = signedQuery('example.org.', RRType.A, 'key.example.', S);
    const { sent } = await serve(chain, requestOf(q.wire));
    assert.equal(replyTsig(sent[0]!, q.mac).valid, true);
    assert.equal(shared.additional.length, 0);
  }
});

test('a request derived before tsig (bufsize: another OPT) is verified over the bytes as received', async () => {
  const { chain } = await chainOf(COREFILE, answerA([]));
  const q = signedQuery('example.org.', RRType.A, 'key.example.', S);
  const req = requestOf(q.wire);
  const derived = req.derive({ msg: { ...req.msg, edns: { ...req.msg.edns!, udpSize: 512 } } });
  assert.equal(derived.receivedWire, req.wire);
  const sink = new Sink();
  await settle(chain.serveDNS(derived, new ClientWriter(req, sink, silentLog, new Set())));
  assert.equal(replyTsig(sink.sent[0]!, q.mac).fields.error, 0);
  assert.equal(decodeMessage(sink.sent[0]!).rcode, Rcode.NOERROR);
});
