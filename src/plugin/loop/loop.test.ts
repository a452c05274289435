import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { parse, plugin } from './setup.ts';
import { DEFAULT_GUARD_OPTIONS } from './guard.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { replyTo } from '../../wire/message.ts';
import type { Message } from '../../wire/types.ts';
import { Loop, fatalMessage, probeQname } from './loop.ts';
import { parseTable, runSetup, makeRequest, CaptureWriter, StubHandler } from '../pkg/testing.ts';
import { BlockIdentity, decodeTrace, encodeTrace, classifyAddress, canonicalIp, serverSecret, splitAddr } from '../pkg/loopguard.ts';

const next = new StubHandler('forward', () => 0);

const G = DEFAULT_GUARD_OPTIONS;
const E3 = 'plugin/loop: Corefile:3 - Error during parsing: ';

test('loop parse', async () => {
  await parseTable('loop', parse, [
    ['. {\n loop\n}', { guard: undefined }],
    ['. {\n loop {\n }\n}', { guard: G }],
    ['. {\n loop {\n  action exit\n  max_hops 4\n  probe_interval 0\n  recheck 2s\n  trace off\n  readiness off\n }\n}', {
      guard: { ...G, action: 'exit', maxHops: 4, probeIntervalMs: 0, recheckMs: 2000, trace: false, readiness: false },
    }],
    ['. {\n loop {\n  action contain\n  max_hops 255\n  probe_interval 1m\n  trace on\n  readiness on\n }\n}', {
      guard: { ...G, maxHops: 255, probeIntervalMs: 60_000 },
    }],
    // `{}` is one token (caddy's lexer), an argument.
    ['. {\n loop {}\n}', "plugin/loop: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after '{}'"],
    ['. {\n loop argument\n}', "plugin/loop: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'argument'"],
    ['. {\n loop\n loop\n}', 'plugin/loop: this plugin can only be used once per Server Block'],
    ['. {\n loop {\n  action\n }\n}', E3 + "Wrong argument count or unexpected line ending after 'action'"],
    ['. {\n loop {\n  action maybe\n }\n}', E3 + "action must be contain or exit, got 'maybe'"],
    ['. {\n loop {\n  max_hops 1\n }\n}', E3 + "max_hops must be an integer from 2 to 255, got '1'"],
    ['. {\n loop {\n  max_hops 2.5\n }\n}', E3 + "max_hops must be an integer from 2 to 255, got '2.5'"],
    // A negative probe_interval counts as 0 (toMillis clamps it before the check).
    ['. {\n loop {\n  probe_interval -1s\n }\n}', { guard: { ...G, probeIntervalMs: 0 } }],
    ['. {\n loop {\n  recheck -1s\n }\n}', E3 + "invalid duration '-1s'"],
    ['. {\n loop {\n  recheck 0\n }\n}', E3 + "invalid duration '0'"],
    ['. {\n loop {\n  recheck soon\n }\n}', E3 + 'time: invalid duration "soon"'],
    ['. {\n loop {\n  trace maybe\n }\n}', E3 + "expected on or off, got 'maybe'"],
    ['. {\n loop {\n  readiness on off\n }\n}', E3 + "Wrong argument count or unexpected line ending after 'off'"],
    ['. {\n loop {\n  bogus\n }\n}', E3 + "unknown property 'bogus'"],
  ]);
});

test('loop start-up sends its probe to the block\'s own address; the answered probe disables counting', async () => {
  const sock = createSocket('udp4');
  await new Promise<void>((res) => { sock.bind(0, '127.0.0.1', res); });
  const port = sock.address().port;
  const probe = new Promise<Message>((res) => {
    sock.once('message', (b, rinfo) => {
      const q = decodeMessage(b);
      sock.send(encodeMessage(replyTo(q)), rinfo.port, rinfo.address);
      res(q);
    });
  });
  // No bind: the probe goes to the wildcard address, which dials the local machine (as Go's net.Dial does).
  const r = await runSetup(plugin, `.:${port} {\n loop\n}`);
  try {
    await r.start();
    const q = await probe;
    assert.equal(q.question[0]!.type, 13);
    assert.match(q.question[0]!.name, /^\d{1,19}\.\d{1,19}\.$/);
  } finally {
    assert.deepEqual(await r.stop(), []);
    sock.close();
  }
});

test('Loop (CoreDNS mode): counting, non-HINFO, disabled, zone mismatch, probe name shape', async () => {
  const l = new Loop('.');
  l.next = next;
  assert.match(l.qname, /^\d{1,19}\.\d{1,19}\.$/);
  assert.match(probeQname('example.org.'), /^\d+\.\d+\.example\.org\.$/);
  const w = new CaptureWriter();
  assert.equal(l.serveDNS(makeRequest('example.org.', { type: 1 }), w), 0);
  l.qname = '1.2.example.org.';
  await l.serveDNS(makeRequest('1.2.EXAMPLE.org.', { type: 13 }), w);
  assert.equal(l.seen(), 1);
  const z = new Loop('example.org.');
  z.next = next;
  await z.serveDNS(makeRequest('a.example.com.', { type: 13 }), w);
  assert.equal(z.seen(), 0);
  l.setDisabled();
  await l.serveDNS(makeRequest('1.2.example.org.', { type: 13 }), w);
  assert.equal(l.seen(), 1);
});

test('fatal message matches CoreDNS', () => {
  assert.equal(fatalMessage('127.0.0.1:55953', ':1053', '.', '4547991504243258144.3688648895315093531.'),
    'Loop (127.0.0.1:55953 -> :1053) detected for zone ".", see https://coredns.io/plugins/loop#troubleshooting. Query: "HINFO 4547991504243258144.3688648895315093531."');
});

test('loopguard: probe names are claimed only by the block that made them; traces round-trip', () => {
  const secret = serverSecret();
  const a = new BlockIdentity('dns://.:53|', secret);
  const b = new BlockIdentity('dns://.:5300|', secret);
  const n = a.probeName('cluster.local.');
  assert.match(n, /^\d+\.\d+\.cluster\.local\.$/);
  assert.ok(a.isProbe(n));
  assert.ok(!b.isProbe(n));
  assert.ok(!a.isProbe('1.2.cluster.local.'));
  assert.ok(a.isProbe(a.probeName('.')));
  const t = { hops: 3, path: [{ nonce: a.nonce, addr: '127.0.0.11', port: 53 }, { nonce: b.nonce, addr: 'fd00::1', port: 5300 }, { nonce: a.nonce, addr: '', port: 53 }] };
  const d = decodeTrace(encodeTrace(t))!;
  assert.equal(d.hops, 3);
  assert.deepEqual(d.path.map((h) => [h.addr, h.port]), [['127.0.0.11', 53], ['fd00::1', 5300], ['', 53]]);
  assert.ok(a.hasNonce(d.path[0]!.nonce) && !a.hasNonce(d.path[1]!.nonce));
  assert.equal(decodeTrace(Uint8Array.of(9, 1)), undefined);
  assert.equal(classifyAddress('127.0.0.53'), 'loopback');
  assert.equal(classifyAddress('::1'), 'loopback');
  assert.equal(classifyAddress('169.254.25.10'), 'link-local');
  assert.equal(classifyAddress('10.0.0.1'), 'other');
  assert.equal(canonicalIp('0:0::0001'), '::1');
  assert.deepEqual(splitAddr('[::1]:53'), { host: '::1', port: 53 });
});
