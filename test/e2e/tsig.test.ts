// tsig end to end with real clients as the oracle: dig and kdig verify the MAC of every signed reply
// and say so when it does not verify (dig: "Couldn't verify signature", kdig: "failed to verify TSIG").
// A missing dig or kdig fails the test (CI installs dnsutils and knot-dnsutils).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startInProcess } from '../helpers/server.ts';
import { dig, kdig, status } from '../helpers/dig.ts';
import { exchange } from '../helpers/client.ts';
import type { NodensServer } from '../../src/index.ts';

const SECRET = 'NoTCJU+DMqFWywaPyxSijrDEA/eC3nK0xi3AMEZuPVk=';
const OTHER = 'b3RoZXJvdGhlcm90aGVyb3RoZXI=';
let server: NodensServer;

before(async () => {
  server = await startInProcess(`example.org:0 {
  tsig {
    secret tsig.key. ${SECRET}
    require MX
  }
  whoami
}
example.net:0 {
  tsig
  template IN TXT {
    answer "{{ .Name }} 60 IN TXT ${'x'.repeat(200)}"
    answer "{{ .Name }} 60 IN TXT ${'y'.repeat(200)}"
    answer "{{ .Name }} 60 IN TXT ${'z'.repeat(200)}"
  }
}
`);
});

after(async () => { await server.stop(); });

const ALGS = ['hmac-sha1', 'hmac-sha224', 'hmac-sha256', 'hmac-sha384', 'hmac-sha512'];

test('dig verifies the signed replies, every algorithm, UDP and TCP', async () => {
  for (const alg of ALGS) {
    for (const tcp of [false, true]) {
      const out = await dig(server.port, '-y', `${alg}:tsig.key.:${SECRET}`, 'example.org', 'A', ...(tcp ? ['+tcp'] : []));
      const what = `${alg}${tcp ? ' tcp' : ''}`;
      assert.equal(status(out), 'NOERROR', what);
      assert.doesNotMatch(out, /Couldn't verify|tsig verify failure|expected a TSIG/, what);
      assert.match(out, new RegExp(`tsig\\.key\\.\\s+0\\s+ANY\\s+TSIG\\s+${alg}\\. \\d+ 300 \\d+ .+ \\d+ NOERROR 0`), what);
    }
  }
});

test('kdig verifies the signed replies', async () => {
  for (const alg of ALGS) {
    for (const tcp of [false, true]) {
      const out = await kdig(server.port, '-y', `${alg}:tsig.key.:${SECRET}`, 'example.org', 'AAAA', ...(tcp ? ['+tcp'] : []));
      assert.match(out, /status: NOERROR/, alg);
      assert.doesNotMatch(out, /failed to verify|WARNING: reply verification/, alg);
      assert.match(out, /TSIG PSEUDOSECTION/, alg);
    }
  }
});

test('a signed reply too big for the UDP buffer is not truncated (miekg leaves TSIG replies whole)', async () => {
  const plain = await dig(server.port, 'example.net', 'TXT', '+bufsize=512', '+ignore');
  assert.match(plain, /flags: qr aa tc rd;/);
  // example.net's tsig has no keys of its own: the server's keys (example.org's) verify it
  const signed = await dig(server.port, '-y', `hmac-sha256:tsig.key.:${SECRET}`, 'example.net', 'TXT', '+bufsize=512', '+ignore');
  assert.equal(status(signed), 'NOERROR');
  assert.match(signed, /flags: qr aa rd;/);
  assert.match(signed, /ANSWER: 3,/);
  assert.doesNotMatch(signed, /Couldn't verify/);
});

test('BADKEY, BADSIG: NOTAUTH with the TSIG error, unsigned (the clients cannot verify it)', async () => {
  const unknown = await dig(server.port, '-y', `hmac-sha256:other.key.:${SECRET}`, 'example.org', 'A');
  assert.equal(status(unknown), 'NOTAUTH');
  assert.match(unknown, /other\.key\.\s+0\s+ANY\s+TSIG\s+hmac-sha256\. 0 300 0 +\d+ BADKEY 0/);
  const wrong = await kdig(server.port, '-y', `hmac-sha256:tsig.key.:${OTHER}`, 'example.org', 'A');
  assert.match(wrong, /status: BADSIG/);
  assert.match(wrong, /hmac-sha256\. 0 300 0 +\d+ BADSIG 0/);
  const md5 = await dig(server.port, '-y', `hmac-md5:tsig.key.:${SECRET}`, 'example.org', 'A');
  assert.match(md5, /BADSIG/);
});

test('require MX: an unsigned MX is refused, a signed one answered and signed', async () => {
  assert.equal(status(await dig(server.port, 'example.org', 'MX')), 'REFUSED');
  assert.equal(status(await dig(server.port, 'example.org', 'A')), 'NOERROR');
  const signed = await dig(server.port, '-y', `hmac-sha256:tsig.key.:${SECRET}`, 'example.org', 'MX', '+tcp');
  assert.equal(status(signed), 'NOERROR');
  assert.doesNotMatch(signed, /Couldn't verify/);
});

test('malformed and partial TSIG records: the bytes CoreDNS 1.15.0 answers with (recorded from it)', async () => {
  const s = await startInProcess(`example.org:0 {\n  tsig {\n    secret key.example. c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0\n  }\n  whoami\n}\n`);
  try {
    const q = '123401000001000000000001076578616d706c65036f72670000010001';
    const tsig = (rdata: string, opt = '') => {
      const rd = Buffer.from(rdata, 'hex');
      const m = Buffer.concat([Buffer.from(q + opt + '036b6579076578616d706c6500' + '00fa00ff00000000', 'hex'), Buffer.from([rd.length >> 8, rd.length & 0xff]), rd]);
      m.writeUInt16BE(opt ? 2 : 1, 10);
      return m;
    };
    const alg = '0b686d61632d73686132353600';
    const now = Math.floor(Date.now() / 1000).toString(16).padStart(12, '0');
    const formerr = '123481010001000000000000076578616d706c65036f72670000010001';
    const badsig = '123481090001000000000001076578616d706c65036f72670000010001'
      + '036b6579076578616d706c650000fa00ff00000000001d0b686d61632d73686132353600000000000000012c0000123400100000';
    const badsigOpt = '123481090001000000000002076578616d706c65036f726700000100010000290200000000000000'
      + '036b6579076578616d706c650000fa00ff00000000001d0b686d61632d73686132353600000000000000012c0000123400100000';
    const cases: [string, Buffer, string][] = [
      ['bytes left over', tsig(`${alg}${now}012c0000123400000000` + '00'), formerr],
      ['MAC past the end', tsig(`${alg}${now}012c0040aabb`), formerr],
      ['cut after the fudge', tsig(`${alg}${now}012c`), badsig],
      ['only the algorithm', tsig(alg), badsig],
      ['empty MAC, after an OPT', tsig(`${alg}${now}012c0000123400000000`, '0000290200000000000000'), badsigOpt],
    ];
    for (const [what, m, want] of cases) assert.equal((await exchange(s.port, m)).toString('hex'), want, what);
  } finally {
    await s.stop();
  }
});
