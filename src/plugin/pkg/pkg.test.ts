import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseDuration, formatDuration } from './duration.ts';
import { typify, classify, ResponseType, ResponseClass, responseClassFromString } from './response.ts';
import { compileFormat, plainFloat, formatSeconds } from './replacer.ts';
import { Fall } from './fall.ts';
import { zonesMatches, nameMatches } from './zones.ts';
import { nextOrFailure } from './next.ts';
import { Recorder } from './recorder.ts';
import { PluginError } from '../plugin.ts';
import { replyTo } from '../../wire/message.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { CaptureWriter, StubHandler, makeRequest } from './testing.ts';
import type { Message } from '../../wire/types.ts';

test('parseDuration accepts Go syntax', () => {
  assert.equal(parseDuration('300ms'), 300000000n);
  assert.equal(parseDuration('1.5h'), 5400000000000n);
  assert.equal(parseDuration('2h45m'), 9900000000000n);
  assert.equal(parseDuration('0'), 0n);
  assert.equal(parseDuration('-1s'), -1000000000n);
  assert.equal(parseDuration('1µs'), 1000n);
  assert.equal(parseDuration('.5s'), 500000000n);
});

test('parseDuration errors use Go wording', () => {
  assert.throws(() => parseDuration('x'), { message: 'time: invalid duration "x"' });
  assert.throws(() => parseDuration('1'), { message: 'time: missing unit in duration "1"' });
  assert.throws(() => parseDuration('1x'), { message: 'time: unknown unit "x" in duration "1x"' });
  assert.throws(() => parseDuration(''), { message: 'time: invalid duration ""' });
});

test('formatDuration prints like Go', () => {
  const cases: [string, string][] = [
    ['5m', '5m0s'], ['30s', '30s'], ['1h', '1h0m0s'], ['500ms', '500ms'], ['0s', '0s'], ['1.5s', '1.5s'],
    ['90s', '1m30s'], ['1500us', '1.5ms'], ['12ns', '12ns'], ['2h45m30.5s', '2h45m30.5s'], ['-3s', '-3s'],
  ];
  for (const [i, o] of cases) assert.equal(formatDuration(parseDuration(i)), o, i);
  assert.equal(formatDuration(1500n), '1.5\u00b5s');
});

function msg(p: Partial<Message>): Message {
  return { ...replyTo(makeRequest('example.org.').msg), ...p };
}
const A = { name: 'example.org.', type: 1, class: 1, ttl: 5, data: { address: '1.2.3.4' } };
const SOA = {
  name: 'example.org.', type: 6, class: 1, ttl: 5,
  data: { mname: 'ns.example.org.', rname: 'h.example.org.', serial: 1, refresh: 2, retry: 3, expire: 4, minimum: 5 },
};
const NS = { name: 'example.org.', type: 2, class: 1, ttl: 5, data: { target: 'ns.example.org.' } };

test('typify and classify', () => {
  assert.equal(typify(undefined), ResponseType.OtherError);
  assert.equal(typify(msg({ answer: [A] })), ResponseType.NoError);
  assert.equal(typify(msg({})), ResponseType.NoError);
  assert.equal(typify(msg({ authority: [SOA] })), ResponseType.NoData);
  assert.equal(typify(msg({ rcode: 3, authority: [SOA] })), ResponseType.NameError);
  assert.equal(typify(msg({ rcode: 3 })), ResponseType.NameError);
  assert.equal(typify(msg({ rcode: 3, answer: [A] })), ResponseType.OtherError);
  assert.equal(typify(msg({ rcode: 2 })), ResponseType.ServerError);
  assert.equal(typify(msg({ rcode: 4 })), ResponseType.ServerError);
  assert.equal(typify(msg({ rcode: 5 })), ResponseType.OtherError);
  assert.equal(typify(msg({ authority: [NS] })), ResponseType.Delegation);
  assert.equal(typify(msg({ opcode: 5 })), ResponseType.Update);
  assert.equal(typify(msg({ opcode: 4 })), ResponseType.Meta);
  assert.equal(typify(msg({ question: [{ name: 'x.', type: 252, class: 1 }] })), ResponseType.Meta);
  assert.equal(classify(ResponseType.NoError), ResponseClass.Success);
  assert.equal(classify(ResponseType.Delegation), ResponseClass.Success);
  assert.equal(classify(ResponseType.NoData), ResponseClass.Denial);
  assert.equal(classify(ResponseType.NameError), ResponseClass.Denial);
  assert.equal(classify(ResponseType.ServerError), ResponseClass.Error);
  assert.equal(classify(ResponseType.Meta), ResponseClass.Error);
  assert.equal(responseClassFromString('denial'), ResponseClass.Denial);
  assert.throws(() => responseClassFromString('nope'), { message: 'invalid Class: nope' });
});

test('typify: expired signatures with DO are OtherError', () => {
  const sig = {
    name: 'example.org.', type: 46, class: 1, ttl: 5,
    data: {
      typeCovered: 1, algorithm: 8, labels: 2, originalTTL: 5, expiration: 1000, inception: 500, keyTag: 1,
      signerName: 'example.org.', signature: new Uint8Array(4),
    },
  };
  const edns = { udpSize: 4096, version: 0, do: true, z: 0, options: [] };
  assert.equal(typify(msg({ answer: [A, sig], edns }), 2000), ResponseType.OtherError);
  assert.equal(typify(msg({ answer: [A, sig], edns }), 700), ResponseType.NoError);
  assert.equal(typify(msg({ answer: [A, sig] }), 2000), ResponseType.NoError);
});

test('compileFormat splits like CoreDNS and renders', () => {
  const req = makeRequest('Example.ORG.', { type: 28, remote: '::1', port: 4000, id: 77, edns: { udpSize: 1232, do: true } });
  const rec = { rcode: 3, len: 99, msg: msg({ rcode: 3, aa: true, rd: true, cd: true }) };
  const f = compileFormat('{remote}:{port} {>id} {type} {class} {name} {proto} {size} {>do} {>bufsize} {rcode} {>rflags} {rsize} {>opcode} {local}');
  assert.equal(f.format(req, rec), `[::1]:4000 77 AAAA IN example.org. udp ${req.length} true 1232 NXDOMAIN qr,aa,rd,cd 99 0 127.0.0.1`);
  assert.equal(compileFormat('{ {type} }').format(req, rec), '{ AAAA }');
  assert.equal(compileFormat('A } {type}').format(req, rec), 'A } AAAA');
  assert.equal(compileFormat('{when} {X} x').format(req, rec), '{when} {X} x');
  assert.equal(compileFormat('{>ID}').format(req, rec), '{>ID}');
  assert.equal(compileFormat('{/nope}').format(req, rec), '-');
  req.beginMetadata();
  req.setMetadata('a/b', 'v');
  assert.equal(compileFormat('[{/a/b}]').format(req, rec), '[v]');
  assert.equal(compileFormat('{rcode} {>rflags}').format(req, { rcode: 0, len: 0, msg: undefined }), '- -');
  assert.equal(compileFormat('{rcode}').format(req, { rcode: 99, len: 0, msg: msg({}) }), '99');
  assert.match(compileFormat('{duration}').format(req, rec), /^[0-9]+\.?[0-9]*s$/);
});

test('seconds print without exponent', () => {
  assert.equal(plainFloat(5.5e-7), '0.00000055');
  assert.equal(plainFloat(0.037990251), '0.037990251');
  assert.equal(plainFloat(1e21), '1000000000000000000000');
  assert.equal(formatSeconds(123n), '0.000000123');
  assert.equal(formatSeconds(1500000000n), '1.5');
});

test('fall: no zones never, bare fallthrough always, zones by suffix', () => {
  const f = new Fall();
  assert.equal(f.through('a.example.org.'), false);
  f.setZonesFromArgs([]);
  assert.deepEqual(f.zones, ['.']);
  assert.equal(f.through('anything.'), true);
  f.setZonesFromArgs(['Example.ORG', '10.0.0.0/24']);
  assert.deepEqual(f.zones, ['example.org.', '0.0.10.in-addr.arpa.']);
  assert.equal(f.through('a.example.org.'), true);
  assert.equal(f.through('example.net.'), false);
  assert.equal(f.through('5.0.0.10.in-addr.arpa.'), true);
});

test('zone helpers', () => {
  assert.equal(zonesMatches(['org.', 'example.org.', '.'], 'a.example.org.'), 'example.org.');
  assert.equal(zonesMatches(['example.net.'], 'a.example.org.'), '');
  assert.equal(nameMatches('example.org.', 'A.Example.org.'), true);
  assert.equal(nameMatches('.', 'x.'), true);
  assert.equal(nameMatches('example.org.', 'example.net.'), false);
});

test('nextOrFailure without next throws the CoreDNS error', () => {
  const req = makeRequest('example.org.');
  assert.throws(() => nextOrFailure('log', undefined, req, new CaptureWriter()), (e: unknown) => {
    assert.ok(e instanceof PluginError);
    assert.equal(e.rcode, 2);
    assert.equal(e.message, 'plugin/log: no next plugin found');
    return true;
  });
});

test('Recorder records Message and wire replies and passes them on', () => {
  const req = makeRequest('example.org.');
  const inner = new CaptureWriter();
  const rec = new Recorder(inner);
  const m = replyTo(req.msg);
  m.rcode = 3;
  rec.writeMsg(m);
  assert.equal(rec.rcode, 3);
  assert.equal(rec.len, encodeMessage(m).length);
  const m2 = replyTo(req.msg);
  m2.answer = [A];
  rec.writeWire(encodeMessage(m2, { compress: true }));
  assert.equal(rec.rcode, 0);
  assert.equal(rec.len, encodeMessage(m).length + encodeMessage(m2).length);
  assert.equal(rec.msg?.answer.length, 1);
  assert.equal(inner.msgs.length, 2);
  const h = new StubHandler('x', () => 0);
  assert.equal(nextOrFailure('y', h, req, rec), 0);
  assert.equal(req.plugin, 'y');
});
