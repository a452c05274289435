// The template plugin in a running server: CNAME targets resolved through the
// server itself (CoreDNS's upstream.Lookup), over UDP.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../../index.ts';
import { exchange } from '../../../test/helpers/client.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { newQuery } from '../../wire/message.ts';
import { formatRecord } from '../../wire/text.ts';
import { RRType } from '../../wire/constants.ts';

const COREFILE = `.:0 {
  template IN ANY foogle.com {
    match "^foogle\\.com\\.$"
    answer "foogle.com 60 IN CNAME google.example"
  }
  template IN ANY loop.example {
    answer "{{ .Name }} 60 IN CNAME {{ .Name }}"
  }
  template IN A google.example {
    answer "google.example. 30 IN A 192.0.2.7"
    answer "google.example. 30 IN A 192.0.2.8"
  }
}
`;

async function ask(port: number, name: string, type: number) {
  return decodeMessage(await exchange(port, encodeMessage(newQuery(name, type))));
}

test('CNAME answers are followed through the server for A queries only', async () => {
  const server = await startServer({ corefile: COREFILE });
  try {
    const a = await ask(server.port, 'foogle.com.', RRType.A);
    assert.deepEqual(a.answer.map(formatRecord), [
      'foogle.com.\t60\tIN\tCNAME\tgoogle.example.',
      'google.example.\t30\tIN\tA\t192.0.2.7',
      'google.example.\t30\tIN\tA\t192.0.2.8',
    ]);
    // AAAA is followed too; google.example has no AAAA template, so the lookup's SERVFAIL adds nothing.
    const aaaa = await ask(server.port, 'foogle.com.', RRType.AAAA);
    assert.deepEqual(aaaa.answer.map(formatRecord), ['foogle.com.\t60\tIN\tCNAME\tgoogle.example.']);
    const mx = await ask(server.port, 'foogle.com.', RRType.MX);
    assert.equal(mx.answer.length, 1);
    // A CNAME to itself: nodens stops after MAX_LOOKUP_DEPTH nested lookups (CoreDNS recurses without bound).
    const loop = await ask(server.port, 'loop.example.', RRType.A);
    assert.equal(loop.answer.length, 9);
  } finally {
    await server.stop();
  }
});
