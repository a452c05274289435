// grpc_server setup: every error text compared with what CoreDNS 1.15.0 prints for the same Corefile (the
// reference binary is run on each), and the limits it stores.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { parseOptions, setupError } from '../pkg/testing.ts';
import { corednsSetupError } from '../../../test/helpers/reference.ts';

const SERVER_ERRORS = [
  'grpc://.:0 {\n grpc_server x\n whoami\n}\n',
  'grpc://.:0 {\n grpc_server {\n  max_streams x\n }\n whoami\n}\n',
  'grpc://.:0 {\n grpc_server {\n  max_streams -1\n }\n whoami\n}\n',
  'grpc://.:0 {\n grpc_server {\n  max_connections -5\n }\n whoami\n}\n',
  'grpc://.:0 {\n grpc_server {\n  max_connections 99999999999999999999\n }\n whoami\n}\n',
  'grpc://.:0 {\n grpc_server {\n  max_streams 1\n  max_streams 2\n }\n whoami\n}\n',
  'grpc://.:0 {\n grpc_server {\n  max_connections 1\n  max_connections 2\n }\n whoami\n}\n',
  'grpc://.:0 {\n grpc_server {\n  max_streams\n }\n whoami\n}\n',
  'grpc://.:0 {\n grpc_server {\n  foo 1\n }\n whoami\n}\n',
];

test('grpc_server setup errors are CoreDNS 1.15.0\'s', async () => {
  for (const corefile of SERVER_ERRORS) {
    const want = corednsSetupError(corefile);
    assert.notEqual(want, '', `CoreDNS accepts ${JSON.stringify(corefile)}`);
    assert.equal(await setupError(plugin, corefile), want, corefile);
  }
});

test('grpc_server parse', async () => {
  const p = (body: string) => parseOptions('grpc_server', parse, `grpc://.:0 {\n grpc_server${body}\n whoami\n}\n`);
  assert.deepEqual(await p(''), { maxStreams: undefined, maxConnections: undefined });
  assert.deepEqual(await p(' {\n  max_streams 0\n  max_connections 0\n }'), { maxStreams: 0, maxConnections: 0 });
  assert.deepEqual(await p(' {\n  max_streams 50\n  max_connections 100\n }'), { maxStreams: 50, maxConnections: 100 });
  // uint32(max_streams) as CoreDNS hands it to grpc-go: 2^32 wraps to 0 (unbounded).
  assert.deepEqual(await p(' {\n  max_streams 4294967296\n }'), { maxStreams: 0, maxConnections: undefined });
  // Only the first grpc_server line is read.
  assert.deepEqual(await parseOptions('grpc_server', parse, 'grpc://.:0 {\n grpc_server\n grpc_server {\n  foo 1\n }\n whoami\n}\n'),
    { maxStreams: undefined, maxConnections: undefined });
});
