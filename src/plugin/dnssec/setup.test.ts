import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseTable, runSetup } from '../pkg/testing.ts';
import { parse, plugin, DEFAULT_CAPACITY, AWS_UNSUPPORTED, type DnssecOptions } from './setup.ts';
import type { Dnssec } from './dnssec.ts';

const TD = join(import.meta.dirname, 'testdata');
// dnssec-keygen made these (bind9-utils): an Ed25519 ZSK, an ECDSA P-256 ZSK and KSK, an RSASHA256 ZSK
const ED = join(TD, 'Kexample.org.+015+61805');
const ZSK = join(TD, 'Kexample.org.+013+30502');
const KSK = join(TD, 'Kexample.org.+013+47773');
const RSA = join(TD, 'Kexample.org.+008+41728');

interface View { zones: string[]; tags: number[]; capacity: number; splitkeys: boolean }
const view = (o: DnssecOptions): View => ({ zones: o.zones, tags: o.keys.map((k) => k.tag), capacity: o.capacity, splitkeys: o.splitkeys });
const ok = (zones: string[], tags: number[] = [], capacity = DEFAULT_CAPACITY, splitkeys = false): View => ({ zones, tags, capacity, splitkeys });
const P = 'plugin/dnssec: Corefile:';

// Broken key files, written once.
const bad = mkdtempSync(join(tmpdir(), 'nodens-dnssec-'));
writeFileSync(join(bad, 'Kgarbage.key'), 'garbage\n');
writeFileSync(join(bad, 'Kgarbage.private'), 'x\n');
writeFileSync(join(bad, 'Knotkey.key'), 'example.org. IN A 1.2.3.4\n');
writeFileSync(join(bad, 'Knotkey.private'), 'x\n');
writeFileSync(join(bad, 'Kempty.key'), '; nothing\n');
writeFileSync(join(bad, 'Kempty.private'), '');
copyFileSync(ED + '.key', join(bad, 'Knopriv.key'));
// `K.private.key` names the pair K.private.key / K.private.private (the suffixes are tested on the name as given)
copyFileSync(ED + '.key', join(bad, 'Kx.private.key'));
copyFileSync(ED + '.private', join(bad, 'Kx.private.private'));
copyFileSync(ED + '.key', join(bad, 'Kbadpriv.key'));
writeFileSync(join(bad, 'Kbadpriv.private'), 'x\n');
copyFileSync(ED + '.key', join(bad, 'Kformat.key'));
writeFileSync(join(bad, 'Kformat.private'), 'Private-key-format: v2.0\nAlgorithm: 15 (ED25519)\nPrivateKey: AAAA\n');
copyFileSync(ED + '.key', join(bad, 'Kalg.key'));
writeFileSync(join(bad, 'Kalg.private'), 'Private-key-format: v1.3\nAlgorithm: 3 (DSA)\nPrivateKey: AAAA\n');
copyFileSync(ED + '.key', join(bad, 'Kshort.key'));
writeFileSync(join(bad, 'Kshort.private'), 'Private-key-format: v1.3\nAlgorithm: 15 (ED25519)\nPrivateKey: AAAA\n');

test('dnssec parse', async () => {
  await parseTable('dnssec', parse, [
    ['example.org {\n dnssec\n}', ok(['example.org.'])],
    ['. {\n dnssec example.org\n}', ok(['example.org.'])],
    ['. {\n dnssec 10.0.0.0/8\n}', ok(['10.in-addr.arpa.'])],
    ['. {\n dnssec Example.ORG example.net\n}', ok(['example.org.', 'example.net.'])],
    ['. {\n dnssec example.org {\n  cache_capacity 100\n }\n}', ok(['example.org.'], [], 100)],
    ['. {\n dnssec example.org {\n  cache_capacity -5\n }\n}', ok(['example.org.'], [], -5)],
    [`. {\n dnssec example.org {\n  key file ${ED}\n }\n}`, ok(['example.org.'], [61805])],
    [`. {\n dnssec example.org {\n  key file ${ED}.key\n }\n}`, ok(['example.org.'], [61805])],
    [`. {\n dnssec example.org {\n  key file ${ED}.private\n }\n}`, ok(['example.org.'], [61805])],
    [`. {\n dnssec sub.example.org example.net {\n  key file ${ED} ${RSA}\n }\n}`, ok(['sub.example.org.', 'example.net.'], [61805, 41728])],
    [`. {\n dnssec example.org {\n  key file ${ZSK}\n  key file ${KSK}\n }\n}`, ok(['example.org.'], [30502, 47773], DEFAULT_CAPACITY, true)],
    [`. {\n dnssec example.org {\n  key file ${KSK}\n }\n}`, ok(['example.org.'], [47773], DEFAULT_CAPACITY, false)],
    [`. {\n dnssec example.org {\n  key file ${bad}/Kx.private.key\n }\n}`, ok(['example.org.'], [61805])],
    // CoreDNS ignores a key source it does not know; the next token is then read as a property
    ['. {\n dnssec example.org {\n  key foo\n }\n}', ok(['example.org.'])],
    // errors
    ['. {\n dnssec\n dnssec\n}', 'plugin/dnssec: this plugin can only be used once per Server Block'],
    [`. {\n dnssec example.net {\n  key file ${ED}\n }\n}`, 'plugin/dnssec: key example.org. (keyid: 61805) can not sign any of the zones'],
    ['. {\n dnssec example.org {\n  key\n }\n}', `${P}3 - Error during parsing: Wrong argument count or unexpected line ending after 'key'`],
    ['. {\n dnssec example.org {\n  key file\n }\n}', `${P}3 - Error during parsing: Wrong argument count or unexpected line ending after 'file'`],
    ['. {\n dnssec example.org {\n  key aws_secretsmanager\n }\n}', `${P}3 - Error during parsing: Wrong argument count or unexpected line ending after 'aws_secretsmanager'`],
    ['. {\n dnssec example.org {\n  key aws_secretsmanager Kexample.org.+013+45330\n }\n}', `plugin/dnssec: ${AWS_UNSUPPORTED}`],
    ['. {\n dnssec example.org {\n  key foo bar\n }\n}', `${P}3 - Error during parsing: unknown property 'bar'`],
    ['. {\n dnssec example.org {\n  cache_capacity\n }\n}', `${P}3 - Error during parsing: Wrong argument count or unexpected line ending after 'cache_capacity'`],
    ['. {\n dnssec example.org {\n  cache_capacity abc\n }\n}', 'plugin/dnssec: strconv.Atoi: parsing "abc": invalid syntax'],
    ['. {\n dnssec example.org {\n  cache_capacity 99999999999999999999\n }\n}', 'plugin/dnssec: strconv.Atoi: parsing "99999999999999999999": value out of range'],
    ['. {\n dnssec example.org {\n  foo\n }\n}', `${P}3 - Error during parsing: unknown property 'foo'`],
    [`. {\n dnssec example.org {\n  key file ${bad}/Knope\n }\n}`, `plugin/dnssec: open ${bad}/Knope.key: no such file or directory`],
    [`. {\n dnssec example.org {\n  key file ${bad}/Knopriv\n }\n}`, `plugin/dnssec: open ${bad}/Knopriv.private: no such file or directory`],
    [`. {\n dnssec example.org {\n  key file ${bad}/Knotkey\n }\n}`, 'plugin/dnssec: no public key found'],
    [`. {\n dnssec example.org {\n  key file ${bad}/Kempty\n }\n}`, 'plugin/dnssec: no public key found'],
    [`. {\n dnssec example.org {\n  key file ${bad}/Kgarbage\n }\n}`, new RegExp(`^plugin/dnssec: ${bad}/Kgarbage\\.key: dns: `)],
    [`. {\n dnssec example.org {\n  key file ${bad}/Kbadpriv\n }\n}`, `plugin/dnssec: ${bad}/Kbadpriv.private: dns: no private key seen: "x" at line: 1:1`],
    [`. {\n dnssec example.org {\n  key file ${bad}/Kformat\n }\n}`, 'plugin/dnssec: dns: bad private key'],
    [`. {\n dnssec example.org {\n  key file ${bad}/Kalg\n }\n}`, 'plugin/dnssec: dns: bad algorithm'],
    [`. {\n dnssec example.org {\n  key file ${bad}/Kshort\n }\n}`, 'plugin/dnssec: dns: bad private key'],
  ], { view });
});

test('dnssec setup: one handler, a cache-cleaning timer started and stopped by the hooks', async () => {
  const r = await runSetup(plugin, `example.org {\n dnssec {\n  key file ${ED}\n }\n}`);
  assert.equal(r.factories.length, 1);
  assert.equal(r.hooks.startup.length, 1);
  assert.equal(r.hooks.shutdown.length, 1);
  await r.start();
  assert.deepEqual(await r.stop(), []);
});

test('dnssec setup: every 8 hours signatures within two days of expiring leave the cache', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'Date'], now: Date.UTC(2026, 0, 1) });
  const r = await runSetup(plugin, `example.org {\n dnssec {\n  key file ${ED}\n }\n}`);
  const { StubHandler, makeRequest, CaptureWriter, settle } = await import('../pkg/testing.ts');
  const { replyTo } = await import('../../wire/message.ts');
  const { parseRecord } = await import('../../wire/text.ts');
  const h = r.chain(new StubHandler('template', (req, w) => {
    const m = replyTo(req.msg);
    m.answer.push(parseRecord('www.example.org. 60 IN A 10.0.0.1'));
    w.writeMsg(m);
    return 0;
  })) as Dnssec;
  await r.start();
  await settle(h.serveDNS(makeRequest('www.example.org.', { edns: { do: true } }), new CaptureWriter()));
  assert.equal(h.cache.len, 1);
  t.mock.timers.tick(8 * 3600 * 1000 * 17); // 5 days 16 hours: still valid two days on
  assert.equal(h.cache.len, 1);
  t.mock.timers.tick(8 * 3600 * 1000); // 6 days: expires exactly two days on, still kept
  assert.equal(h.cache.len, 1);
  t.mock.timers.tick(8 * 3600 * 1000); // 6 days 8 hours: expires within two days
  assert.equal(h.cache.len, 0);
  await r.stop();
});
