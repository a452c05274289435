import { test } from 'node:test';
import assert from 'node:assert/strict';
import { plugin } from './setup.ts';
import { Loop, fatalMessage, probeQname } from './loop.ts';
import { runSetup, setupError, makeRequest, CaptureWriter, StubHandler } from '../pkg/testing.ts';
import { BlockIdentity, decodeTrace, encodeTrace, classifyAddress, canonicalIp, serverSecret, splitAddr } from '../pkg/loopguard.ts';

const next = new StubHandler('forward', () => 0);

test('setup: `loop` ok, `loop argument` ArgErr, twice ErrOnce, block options validated', async () => {
  await runSetup(plugin, '. {\n loop\n}\n');
  assert.match(await setupError(plugin, '. {\n loop argument\n}\n'), /Wrong argument count or unexpected line ending after 'argument'/);
  assert.equal(await setupError(plugin, '. {\n loop\n loop\n}\n'), 'plugin/loop: this plugin can only be used once per Server Block');
  await runSetup(plugin, '. {\n loop {\n }\n}\n');
  await runSetup(plugin, '. {\n loop {\n  action exit\n  max_hops 4\n  probe_interval 0\n  recheck 2s\n  trace off\n  readiness off\n }\n}\n');
  assert.match(await setupError(plugin, '. {\n loop {\n  action maybe\n }\n}\n'), /action must be contain or exit/);
  assert.match(await setupError(plugin, '. {\n loop {\n  bogus\n }\n}\n'), /unknown property 'bogus'/);
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
