// grpc setup: every error text compared with what CoreDNS 1.15.0 prints for the same
// Corefile (the reference binary is run on each), the options parsed, and the DnsPacket codec.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, plugin } from './setup.ts';
import { parseOptions, runSetup, setupError } from '../pkg/testing.ts';
import { corednsSetupError } from '../../../test/helpers/reference.ts';
import { testCerts } from '../../../test/helpers/certs.ts';
import { decodeDnsPacket, decodeGrpcMessage, encodeGrpcMessage, grpcFrame } from '../../wire/grpc.ts';
import type { PluginDefinition } from '../plugin.ts';

const C = testCerts();
const dir = mkdtempSync(join(tmpdir(), 'nodens-grpc-setup-'));

const GRPC_ERRORS = [
  '. {\n grpc\n}\n',
  '. {\n grpc .\n}\n',
  '. {\n grpc . 127.0.0.1 {\n  policy foo\n }\n}\n',
  '. {\n grpc . 127.0.0.1 {\n  policy\n }\n}\n',
  '. {\n grpc . 127.0.0.1 {\n  foo\n }\n}\n',
  '. {\n grpc . 127.0.0.1 {\n  except\n }\n}\n',
  '. {\n grpc . 127.0.0.1 {\n  tls_servername\n }\n}\n',
  '. {\n grpc . 127.0.0.1 {\n  tls a b c d\n }\n}\n',
  '. {\n grpc . /nonexistent/resolv.conf\n}\n',
  '. {\n grpc . not-an-ip\n}\n',
  '. {\n grpc . 127.0.0.1\n grpc . 127.0.0.2\n}\n',
  `. {\n grpc . ${Array.from({ length: 16 }, (_, i) => `127.0.0.${i + 1}`).join(' ')}\n}\n`,
];

async function compare(def: PluginDefinition, corefiles: string[]): Promise<void> {
  for (const corefile of corefiles) {
    const want = corednsSetupError(corefile);
    assert.notEqual(want, '', `CoreDNS accepts ${JSON.stringify(corefile)}`);
    assert.equal(await setupError(def, corefile), want, corefile);
  }
}

test('grpc setup errors are CoreDNS 1.15.0\'s', async () => {
  await compare(plugin, GRPC_ERRORS);
});

test('grpc parse: upstreams, except, policies, fallthrough, tls', async () => {
  const o = await parseOptions('grpc', parse, '. {\n grpc example.org 127.0.0.1 [::1]:9005 unix:///tmp/x.sock {\n  except a.example.org B.example.org\n  policy round_robin\n  fallthrough c.example.org\n }\n}\n');
  assert.equal(o.opts.from, 'example.org.');
  assert.deepEqual(o.to, ['127.0.0.1:53', '[::1]:9005', 'unix:///tmp/x.sock']);
  assert.deepEqual(o.opts.ignored, ['a.example.org.', 'b.example.org.']);
  assert.equal(o.opts.policy.name, 'round_robin');
  assert.deepEqual(o.opts.fall.zones, ['c.example.org.']);
  assert.equal(o.tls, undefined);
  const t = await parseOptions('grpc', parse, `. {\n grpc . 127.0.0.1:443 {\n  tls ${C.clientCert} ${C.clientKey} ${C.ca}\n  tls_servername dns.example\n  policy sequential\n }\n}\n`);
  assert.ok(t.tls?.cert !== undefined && t.tls.key !== undefined && t.tls.ca !== undefined);
  assert.equal(t.tls.servername, 'dns.example');
  assert.equal(t.opts.policy.name, 'sequential');
  const r = await parseOptions('grpc', parse, `. {\n grpc . 127.0.0.1 {\n  tls_servername only.example\n }\n}\n`);
  assert.deepEqual(r.tls, { servername: 'only.example' });
  assert.equal((await parseOptions('grpc', parse, '. {\n grpc . 127.0.0.1\n}\n')).opts.policy.name, 'random');
  // resolv.conf: its nameservers at port 53.
  const rc = join(dir, 'resolv.conf');
  writeFileSync(rc, 'nameserver 192.0.2.1\nnameserver 2001:db8::1\n');
  assert.deepEqual((await parseOptions('grpc', parse, `. {\n grpc . ${rc}\n}\n`)).to, ['192.0.2.1:53', '[2001:db8::1]:53']);
  // A valid setup registers the handler.
  const s = await runSetup(plugin, '. {\n grpc . 127.0.0.1:9005\n}\n');
  assert.equal(s.chain(undefined).name, 'grpc');
});

test('DnsPacket codec and grpc-message encoding', () => {
  for (const n of [0, 1, 127, 128, 16383, 16384, 65535]) {
    const msg = Buffer.alloc(n, 7);
    const f = grpcFrame(msg);
    assert.equal(f[0], 0);
    assert.equal(f.readUInt32BE(1), f.length - 5);
    assert.deepEqual(decodeDnsPacket(f, 5, f.length), msg);
  }
  // Fixed64 and fixed32 fields are skipped; a truncated length is invalid; field 0 is invalid.
  const body = Buffer.concat([Buffer.from([0x09, 1, 2, 3, 4, 5, 6, 7, 8, 0x15, 1, 2, 3, 4]), grpcFrame(Buffer.from('ab')).subarray(5)]);
  assert.deepEqual(decodeDnsPacket(body, 0, body.length), Buffer.from('ab'));
  assert.equal(decodeDnsPacket(Buffer.from([0x0a, 5, 1]), 0, 3), undefined);
  assert.equal(decodeDnsPacket(Buffer.from([0x02, 0]), 0, 2), undefined);
  assert.equal(decodeDnsPacket(Buffer.from([0x0b]), 0, 1), undefined);
  assert.equal(encodeGrpcMessage('proto:\u00a0cannot 100%'), 'proto:%C2%A0cannot 100%25');
  assert.equal(decodeGrpcMessage('proto:%C2%A0cannot 100%25'), 'proto:\u00a0cannot 100%');
});
