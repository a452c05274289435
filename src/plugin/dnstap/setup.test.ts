import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import net from 'node:net';
import { startServer } from '../../index.ts';
import { Sink } from './testutil.ts';
import { parse, plugin, urlHost, type DnstapTap } from './setup.ts';
import { parseTable, runSetup } from '../pkg/testing.ts';
import { DEFAULT_TAP_VERSION } from '../pkg/dnstap.ts';

const H = hostname();
const tap = (o: Partial<DnstapTap>): DnstapTap => ({
  listen: false, proto: 'unix', endpoint: 'dnstap.sock', full: false, writeBuffer: 1, queue: 1,
  identity: H, version: DEFAULT_TAP_VERSION, extra: '', skipVerify: false, certFile: '', keyFile: '', caFile: '', ...o,
});
const E = 'plugin/dnstap: Corefile:';

test('dnstap parse (CoreDNS setup_test cases and error texts)', async () => {
  await parseTable('dnstap', parse, [
    ['. {\n dnstap dnstap.sock full\n}', { taps: [tap({ full: true })] }],
    ['. {\n dnstap unix://dnstap.sock\n}', { taps: [tap({})] }],
    ['. {\n dnstap unix:///tmp/dnstap.sock\n}', { taps: [tap({ endpoint: '/tmp/dnstap.sock' })] }],
    ['. {\n dnstap tcp://127.0.0.1:6000\n}', { taps: [tap({ proto: 'tcp', endpoint: '127.0.0.1:6000' })] }],
    ['. {\n dnstap tcp://[::1]:6000\n}', { taps: [tap({ proto: 'tcp', endpoint: '[::1]:6000' })] }],
    ['. {\n dnstap tcp://example.com:6000\n}', { taps: [tap({ proto: 'tcp', endpoint: 'example.com:6000' })] }],
    ['. {\n dnstap tcp://user@example.com:6000/path?x=1\n}', { taps: [tap({ proto: 'tcp', endpoint: 'example.com:6000' })] }],
    ['. {\n dnstap tls://127.0.0.1:6000\n}', { taps: [tap({ proto: 'tls', endpoint: '127.0.0.1:6000' })] }],
    ['. {\n dnstap tls://127.0.0.1:6000 full {\n  skipverify\n }\n}', { taps: [tap({ proto: 'tls', endpoint: '127.0.0.1:6000', full: true, skipVerify: true })] }],
    ['. {\n dnstap dnstap.sock full {\n  identity NAME\n  version VER\n }\n}', { taps: [tap({ full: true, identity: 'NAME', version: 'VER' })] }],
    ['. {\n dnstap dnstap.sock {\n  identity NAME\n  version VER\n  extra EXTRA\n }\n}', { taps: [tap({ identity: 'NAME', version: 'VER', extra: 'EXTRA' })] }],
    ['. {\n dnstap dnstap.sock full {\n  identity NAME\n  version VER\n  extra EXTRA\n }\n dnstap tcp://127.0.0.1:6000 {\n  identity NAME2\n  version VER2\n  extra EXTRA2\n }\n}', {
      taps: [
        tap({ full: true, identity: 'NAME', version: 'VER', extra: 'EXTRA' }),
        tap({ proto: 'tcp', endpoint: '127.0.0.1:6000', identity: 'NAME2', version: 'VER2', extra: 'EXTRA2' }),
      ],
    }],
    // writebuffer (MiB) and queue (x 10000) multiples
    ['. {\n dnstap dnstap.sock full 1024 2048\n}', { taps: [tap({ full: true, writeBuffer: 1024, queue: 2048 })] }],
    ['. {\n dnstap dnstap.sock full 1 4096\n}', { taps: [tap({ full: true, queue: 4096 })] }],
    // As in CoreDNS: only the second argument is checked for `full`, and arguments after the fourth are ignored.
    ['. {\n dnstap dnstap.sock other 2 3 x\n}', { taps: [tap({ writeBuffer: 2, queue: 3 })] }],
    ['. {\n dnstap dnstap.sock full +5\n}', { taps: [tap({ full: true, writeBuffer: 5 })] }],
    ['. {\n dnstap tcp://127.0.0.1\n}', { taps: [tap({ proto: 'tcp', endpoint: '127.0.0.1' })] }],
    // errors
    ['. {\n dnstap\n}', `${E}2 - Error during parsing: Wrong argument count or unexpected line ending after 'dnstap'`],
    ['. {\n dnstap {\n  identity NAME\n }\n}', `${E}2 - Error during parsing: Wrong argument count or unexpected line ending after 'dnstap'`],
    ['. {\n dnstap dnstap.sock full 1025 1\n}', `${E}2 - Error during parsing: dnstap: MultipleTcpWriteBuf must be between 1 and 1024 (MiB units): 1025`],
    ['. {\n dnstap dnstap.sock full 1 4097\n}', `${E}2 - Error during parsing: dnstap: MultipleQueue must be between 1 and 4096 (x10k messages): 4097`],
    ['. {\n dnstap dnstap.sock full 0 10\n}', `${E}2 - Error during parsing: dnstap: MultipleTcpWriteBuf must be between 1 and 1024 (MiB units): 0`],
    ['. {\n dnstap dnstap.sock full 10 0\n}', `${E}2 - Error during parsing: dnstap: MultipleQueue must be between 1 and 4096 (x10k messages): 0`],
    ['. {\n dnstap dnstap.sock full -3 0\n}', `${E}2 - Error during parsing: dnstap: MultipleTcpWriteBuf must be between 1 and 1024 (MiB units): -3`],
    ['. {\n dnstap dnstap.sock full x 10\n}', `${E}2 - Error during parsing: dnstap: invalid MultipleTcpWriteBuf "x": strconv.Atoi: parsing "x": invalid syntax`],
    ['. {\n dnstap dnstap.sock full 10 y\n}', `${E}2 - Error during parsing: dnstap: invalid MultipleQueue "y": strconv.Atoi: parsing "y": invalid syntax`],
    ['. {\n dnstap dnstap.sock full 99999999999999999999\n}', `${E}2 - Error during parsing: dnstap: invalid MultipleTcpWriteBuf "99999999999999999999": strconv.Atoi: parsing "99999999999999999999": value out of range`],
    ['. {\n dnstap dnstap.sock {\n  identity\n }\n}', `${E}3 - Error during parsing: Wrong argument count or unexpected line ending after 'identity'`],
    ['. {\n dnstap dnstap.sock {\n  version\n }\n}', `${E}3 - Error during parsing: Wrong argument count or unexpected line ending after 'version'`],
    ['. {\n dnstap dnstap.sock {\n  extra\n }\n}', `${E}3 - Error during parsing: Wrong argument count or unexpected line ending after 'extra'`],
    ['. {\n dnstap dnstap.sock {\n  identitiy NAME\n }\n}', `${E}3 - Error during parsing: unknown property 'identitiy'`],
    ['. {\n dnstap dnstap.sock {\n  identity a b\n }\n}', `${E}3 - Error during parsing: unknown property 'b'`],
    ['. {\n dnstap dnstap.sock {\n  tls a b\n }\n}', `${E}3 - Error during parsing: tls directive only valid for listeners`],
    ['. {\n dnstap tcp://h:abc\n}', `${E}2 - Error during parsing: Wrong argument count or unexpected line ending after 'tcp://h:abc'`],
    ['. {\n dnstap tls://[::1\n}', `${E}2 - Error during parsing: Wrong argument count or unexpected line ending after 'tls://[::1'`],
    // listen (CoreDNS setup_test's listener cases)
    ['. {\n dnstap listen tcp://127.0.0.1:6000\n}', { taps: [tap({ listen: true, proto: 'tcp', endpoint: '127.0.0.1:6000' })] }],
    ['. {\n dnstap listen tcp://127.0.0.1:6000 full\n}', { taps: [tap({ listen: true, proto: 'tcp', endpoint: '127.0.0.1:6000', full: true })] }],
    ['. {\n dnstap listen unix:///tmp/dnstap.sock\n}', { taps: [tap({ listen: true, endpoint: '/tmp/dnstap.sock' })] }],
    ['. {\n dnstap listen /tmp/dnstap.sock full 2 3\n}', { taps: [tap({ listen: true, endpoint: '/tmp/dnstap.sock', full: true, writeBuffer: 2, queue: 3 })] }],
    ['. {\n dnstap listen tls://127.0.0.1:6000 full {\n  tls /path/to/cert.pem /path/to/key.pem\n }\n}', {
      taps: [tap({ listen: true, proto: 'tls', endpoint: '127.0.0.1:6000', full: true, certFile: '/path/to/cert.pem', keyFile: '/path/to/key.pem' })],
    }],
    ['. {\n dnstap listen tls://127.0.0.1:6000 {\n  tls /path/to/cert.pem /path/to/key.pem /path/to/ca.pem\n }\n}', {
      taps: [tap({ listen: true, proto: 'tls', endpoint: '127.0.0.1:6000', certFile: '/path/to/cert.pem', keyFile: '/path/to/key.pem', caFile: '/path/to/ca.pem' })],
    }],
    ['. {\n dnstap listen tls://127.0.0.1:6000 {\n  tls /path/to/cert.pem /path/to/key.pem\n  skipverify\n }\n}', {
      taps: [tap({ listen: true, proto: 'tls', endpoint: '127.0.0.1:6000', certFile: '/path/to/cert.pem', keyFile: '/path/to/key.pem', skipVerify: true })],
    }],
    ['. {\n dnstap tcp://remote.example.com:6000 full\n dnstap listen tcp://127.0.0.1:6001\n}', {
      taps: [tap({ proto: 'tcp', endpoint: 'remote.example.com:6000', full: true }), tap({ listen: true, proto: 'tcp', endpoint: '127.0.0.1:6001' })],
    }],
    ['. {\n dnstap listen\n}', `${E}2 - Error during parsing: dnstap listen requires an endpoint argument`],
    ['. {\n dnstap listen tcp://127.0.0.1:6000 {\n  tls /path/to/cert.pem\n }\n}', `${E}3 - Error during parsing: tls requires cert and key file paths`],
    ['. {\n dnstap listen /tmp/x.sock full 0\n}', `${E}2 - Error during parsing: dnstap: MultipleTcpWriteBuf must be between 1 and 1024 (MiB units): 0`],
    ['. {\n dnstap listen tcp://h:x\n}', `${E}2 - Error during parsing: Wrong argument count or unexpected line ending after 'tcp://h:x'`],
  ]);
});

test('urlHost follows Go url.Parse for the authority', () => {
  assert.equal(urlHost('tcp://a.example:1'), 'a.example:1');
  assert.equal(urlHost('tcp://[fe80::1%25eth0]:53'), '[fe80::1%eth0]:53');
  assert.equal(urlHost('tcp://a b:1'), undefined);
  assert.equal(urlHost('tcp://h%zz:1'), undefined);
  assert.equal(urlHost('tcp://h:'), 'h:');
  assert.equal(urlHost('tcp://[::1]x'), undefined);
});

test('dnstap setup: several lines chain in order, the last to the next plugin', async () => {
  const r = await runSetup(plugin, '. {\n dnstap a.sock\n dnstap b.sock full\n dnstap c.sock\n}');
  const first = r.chain() as unknown as { name: string; tapFull: boolean; next: { name: string; tapFull: boolean; next: { name: string; next: unknown } } };
  assert.equal(first.name, 'dnstap');
  assert.equal(first.tapFull, false);
  assert.equal(first.next.name, 'dnstap');
  assert.equal(first.next.tapFull, true);
  assert.equal(first.next.next.name, 'dnstap');
  assert.equal(first.next.next.next, undefined);
});

test('dnstap listen across reloads: closed when a reload starts (the new configuration listens again), reopened when it fails', async () => {
  const port = await new Promise<number>((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const p = (s.address() as net.AddressInfo).port; s.close(() => { resolve(p); }); });
  });
  const corefile = (extra: string): string => `.:0 {\n dnstap listen tcp://127.0.0.1:${port}\n whoami\n${extra}}\n`;
  const lines: string[] = [];
  const server = await startServer({ corefile: corefile(''), log: { sink: (l: string) => { lines.push(l); } } });
  try {
    let sink = await Sink.connect({ port });
    assert.equal(await server.reload(corefile(' # changed\n')), undefined);
    assert.ok(await sink.waitClosed(), 'the old listener ended its sessions');
    sink = await Sink.connect({ port }); // the new configuration listens on the same port
    assert.ok(sink.controls.length >= 2);
    assert.ok((await server.reload(corefile(' nosuchdirective\n'))) instanceof Error);
    assert.ok(await sink.waitClosed());
    sink = await Sink.connect({ port }); // reopened by the configuration still serving
    assert.ok(!lines.some((l) => l.includes('Failed to start dnstap listener')), lines.join('\n'));
  } finally {
    await server.stop();
  }
});
