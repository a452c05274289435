import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { CaptureWriter, StubHandler, makeRequest, metricValue, settle } from '../pkg/testing.ts';
import { replyTo } from '../../wire/message.ts';
import { parseRecord, formatRecord } from '../../wire/text.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { Rcode, RRType } from '../../wire/constants.ts';
import { ResponseType } from '../pkg/response.ts';
import type { Message, NSECData, ResourceRecord, RRSIGData } from '../../wire/types.ts';
import type { Request } from '../../core/request.ts';
import type { ResponseWriter } from '../plugin.ts';
import { Dnssec, filterBitmap, incepExpir } from './dnssec.ts';
import { SigCache, shardOf } from './cache.ts';
import { readKeyFiles, keyTag, type SigningKey } from './keys.ts';

const TD = join(import.meta.dirname, 'testdata');
const key = (base: string): SigningKey => readKeyFiles(join(TD, base + '.key'), join(TD, base + '.private'));
const ED = key('Kexample.org.+015+61805');
const ZSK = key('Kexample.org.+013+30502');
const KSK = key('Kexample.org.+013+47773');

const NOW = 1_800_000_000;

function handler(zones: string[], keys: SigningKey[], answer: (req: Request) => Message, capacity = 10000): Dnssec {
  const split = keys.some((k) => k.ksk) && keys.some((k) => k.zsk);
  const d = new Dnssec(zones, keys, split, new SigCache(capacity));
  d.now = () => NOW;
  d.next = new StubHandler('template', (req: Request, w: ResponseWriter) => {
    const m = answer(req);
    w.writeMsg(m);
    return m.rcode;
  });
  return d;
}

function reply(req: Request, o: { answer?: string[]; authority?: string[]; additional?: string[]; rcode?: number }): Message {
  const m = replyTo(req.msg);
  m.aa = true;
  m.rcode = o.rcode ?? Rcode.NOERROR;
  m.answer = (o.answer ?? []).map((s) => parseRecord(s));
  m.authority = (o.authority ?? []).map((s) => parseRecord(s));
  m.additional = (o.additional ?? []).map((s) => parseRecord(s));
  return m;
}

async function ask(d: Dnssec, name: string, type: number, dnssecOk = true): Promise<Message> {
  const w = new CaptureWriter();
  await settle(d.serveDNS(makeRequest(name, { type, edns: { do: dnssecOk } }), w));
  assert.equal(w.msgs.length, 1);
  return w.last!;
}

const lines = (rrs: ResourceRecord[]): string[] => rrs.map((r) => formatRecord(r).replace(/\t/g, ' '));
const sig = (r: ResourceRecord | undefined): RRSIGData => { assert.equal(r?.type, RRType.RRSIG); return r.data as RRSIGData; };
const SOA = 'example.org. 60 IN SOA ns.example.org. hostmaster.example.org. 1 60 60 60 60';
const [INCEP, EXPIR] = incepExpir(NOW);

test('a positive answer is signed when the query has DO: RRSIG after its RRset, TTL of the set, original TTL 3600', async () => {
  const d = handler(['example.org.'], [ED], (req) => reply(req, {
    answer: ['www.example.org. 60 IN A 10.0.0.1', 'www.example.org. 60 IN A 10.0.0.2', 'www.example.org. 30 IN TXT "x"'],
    authority: ['example.org. 120 IN NS ns.example.org.'],
    additional: ['ns.example.org. 90 IN A 10.0.0.53', 'other.example.net. 90 IN A 10.0.0.54'],
  }));
  const m = await ask(d, 'www.example.org.', RRType.A);
  assert.deepEqual(m.answer.map((r) => r.type), [RRType.A, RRType.A, RRType.TXT, RRType.RRSIG, RRType.RRSIG]);
  const a = sig(m.answer[3]);
  assert.equal(m.answer[3]!.name, 'www.example.org.');
  assert.equal(m.answer[3]!.ttl, 60);
  assert.deepEqual({ ...a, signature: undefined }, {
    typeCovered: RRType.A, algorithm: 15, labels: 3, originalTTL: 3600, expiration: NOW + 8 * 86400,
    inception: NOW - 3 * 3600, keyTag: 61805, signerName: 'example.org.', signature: undefined,
  });
  assert.equal(m.answer[4]!.ttl, 30);
  assert.equal(sig(m.answer[4]).typeCovered, RRType.TXT);
  assert.deepEqual(m.authority.map((r) => r.type), [RRType.NS, RRType.RRSIG]);
  // the additional section: the in-zone RRset is signed, the out-of-zone one is not
  assert.deepEqual(m.additional.map((r) => `${r.name} ${r.type}`), ['ns.example.org. 1', 'other.example.net. 1', 'ns.example.org. 46']);
  assert.equal(m.rcode, Rcode.NOERROR);
});

test('no DO: the reply passes untouched; out-of-zone queries are not signed', async () => {
  const d = handler(['example.org.'], [ED], (req) => reply(req, { answer: [`${req.msg.question[0]!.name} 60 IN A 10.0.0.1`] }));
  const m = await ask(d, 'www.example.org.', RRType.A, false);
  assert.deepEqual(lines(m.answer), ['www.example.org. 60 IN A 10.0.0.1']);
  const o = await ask(d, 'www.example.net.', RRType.A);
  assert.deepEqual(lines(o.answer), ['www.example.net. 60 IN A 10.0.0.1']);
});

test('NXDOMAIN becomes NOERROR with an NSEC black lie: SOA, RRSIG(SOA), RRSIG(NSEC), NSEC', async () => {
  const d = handler(['example.org.'], [ED], (req) => reply(req, { rcode: Rcode.NXDOMAIN, authority: [SOA] }));
  const m = await ask(d, 'Nx.Example.org.', RRType.AAAA);
  assert.equal(m.rcode, Rcode.NOERROR);
  assert.deepEqual(m.answer, []);
  assert.deepEqual(m.authority.map((r) => r.type), [RRType.SOA, RRType.RRSIG, RRType.RRSIG, RRType.NSEC]);
  assert.equal(sig(m.authority[1]).typeCovered, RRType.SOA);
  assert.equal(m.authority[1]!.ttl, 60);
  assert.equal(sig(m.authority[2]).typeCovered, RRType.NSEC);
  assert.equal(sig(m.authority[2]).signerName, 'example.org.');
  assert.equal(lines([m.authority[3]!])[0],
    'Nx.Example.org. 60 IN NSEC \\000.Nx.Example.org. A HINFO TXT LOC SRV CERT SSHFP RRSIG NSEC TLSA HIP OPENPGPKEY SPF');
});

test('NODATA: the NSEC bitmap leaves out the queried type; at the apex the apex bitmap', async () => {
  const d = handler(['example.org.'], [ED], (req) => reply(req, { authority: [SOA] }));
  const m = await ask(d, '25._tcp.example.org.', RRType.TLSA);
  const nsec = m.authority[3]!.data as NSECData;
  assert.equal(m.authority[3]!.type, RRType.NSEC);
  assert.ok(!nsec.types.includes(RRType.TLSA));
  const apex = await ask(d, 'example.org.', RRType.MX);
  assert.equal(lines([apex.authority[3]!])[0],
    'example.org. 60 IN NSEC \\000.example.org. A NS SOA HINFO TXT AAAA LOC SRV CERT SSHFP RRSIG NSEC DNSKEY TLSA HIP OPENPGPKEY SPF');
  // a type not in the bitmap: the whole bitmap
  const caa = await ask(d, 'x.example.org.', RRType.CAA);
  assert.equal((caa.authority[3]!.data as NSECData).types.length, 14);
});

test('DS denials get the delegation bitmap; an NSEC query gets the NSEC and its RRSIG in the answer', async () => {
  const d = handler(['example.org.'], [ED], (req) => reply(req, { rcode: Rcode.NXDOMAIN, authority: [SOA] }));
  const ds = await ask(d, 'sub.example.org.', RRType.DS);
  assert.equal(lines([ds.authority[3]!])[0],
    'sub.example.org. 60 IN NSEC \\000.sub.example.org. A NS HINFO TXT AAAA LOC SRV CERT SSHFP RRSIG NSEC TLSA HIP OPENPGPKEY SPF');
  const n = await ask(d, 'a.example.org.', RRType.NSEC);
  assert.equal(n.rcode, Rcode.NOERROR);
  assert.deepEqual(n.answer.map((r) => r.type), [RRType.RRSIG, RRType.NSEC]);
  assert.deepEqual(n.authority, []);
  // NSEC queries keep the full bitmap
  assert.equal((n.answer[1]!.data as NSECData).types.length, 14);
});

test('delegations: DS signed when present, else an NSEC with the next name after the cut', async () => {
  const d = handler(['example.org.'], [ED], (req) => reply(req, {
    authority: req.name.startsWith('signed') ? ['signed.example.org. 300 IN NS ns.signed.example.org.', 'signed.example.org. 300 IN DS 1 13 2 ' + 'ab'.repeat(32)]
      : ['a.b.example.org. 300 IN NS ns.example.net.'],
  }));
  const m = await ask(d, 'www.a.b.example.org.', RRType.A);
  assert.deepEqual(m.authority.map((r) => r.type), [RRType.NS, RRType.RRSIG, RRType.NSEC]);
  assert.equal(lines([m.authority[2]!])[0],
    'www.a.b.example.org. 300 IN NSEC www\\000.a.b.example.org. A NS HINFO TXT AAAA LOC SRV CERT SSHFP RRSIG NSEC TLSA HIP OPENPGPKEY SPF');
  const s = await ask(d, 'signed.example.org.', RRType.A);
  assert.deepEqual(s.authority.map((r) => r.type), [RRType.NS, RRType.DS, RRType.RRSIG]);
  assert.equal(sig(s.authority[2]).typeCovered, RRType.DS);
  assert.equal(s.authority[2]!.ttl, 300);
});

test('DNSKEY at the apex: answered here (aa), owner the zone, signed with DO; KSKs sign it in split mode', async () => {
  const d = handler(['example.org.'], [ZSK, KSK], () => { throw new Error('not reached'); });
  assert.equal(d.splitkeys, true);
  const m = await ask(d, 'Example.ORG.', RRType.DNSKEY);
  assert.equal(m.aa, true);
  assert.equal(m.question[0]!.name, 'Example.ORG.');
  assert.deepEqual(m.answer.map((r) => `${r.name} ${r.type} ${r.ttl}`), ['example.org. 48 3600', 'example.org. 48 3600', 'example.org. 46 3600']);
  assert.equal(sig(m.answer[2]).keyTag, KSK.tag);
  const plain = await ask(d, 'example.org.', RRType.DNSKEY, false);
  assert.equal(plain.answer.length, 2);
  // below the apex the query goes on
  const below = handler(['example.org.'], [ZSK, KSK], (req) => reply(req, { authority: [SOA] }));
  const b = await ask(below, 'www.example.org.', RRType.DNSKEY);
  assert.equal(b.aa, true);
  assert.deepEqual(b.authority.map((r) => r.type), [RRType.SOA, RRType.RRSIG, RRType.RRSIG, RRType.NSEC]);
  // ZSK signs everything else
  assert.equal(sig(b.authority[1]).keyTag, ZSK.tag);
});

test('without a KSK/ZSK split every key signs every RRset', async () => {
  const d = handler(['example.org.'], [ED, ZSK], (req) => reply(req, { answer: ['www.example.org. 60 IN A 10.0.0.1'] }));
  assert.equal(d.splitkeys, false);
  const m = await ask(d, 'www.example.org.', RRType.A);
  assert.deepEqual(m.answer.slice(1).map((r) => sig(r).keyTag), [ED.tag, ZSK.tag]);
  const k = await ask(d, 'example.org.', RRType.DNSKEY);
  assert.deepEqual(k.answer.slice(2).map((r) => sig(r).keyTag), [ED.tag, ZSK.tag]);
  // KSKs only: no split either
  const ksks = handler(['example.org.'], [KSK], (req) => reply(req, { answer: ['www.example.org. 60 IN A 10.0.0.1'] }));
  assert.equal(ksks.splitkeys, false);
  assert.equal(sig((await ask(ksks, 'www.example.org.', RRType.A)).answer[1]).keyTag, KSK.tag);
});

test('CNAME: only RRsets in one of the zones are signed, each with the zone holding its owner as signer', async () => {
  const d = handler(['example.org.', 'example.net.'], [ED], (req) => reply(req, {
    answer: ['www.example.org. 60 IN CNAME db.example.net.', 'db.example.net. 60 IN CNAME target.example.com.', 'target.example.com. 60 IN A 10.0.0.1'],
  }));
  const m = await ask(d, 'www.example.org.', RRType.A);
  assert.deepEqual(m.answer.slice(3).map((r) => `${r.name} ${sig(r).signerName}`), ['www.example.org. example.org.', 'db.example.net. example.net.']);
});

test('a wildcard owner is signed with one label less', async () => {
  const d = handler(['example.org.'], [ED], (req) => reply(req, { answer: ['*.example.org. 60 IN A 10.0.0.1'] }));
  const m = await ask(d, '*.example.org.', RRType.A);
  assert.equal(sig(m.answer[1]).labels, 2);
});

test('signature cache: hits and misses per server, keyed by the RRset text, stale entries re-signed', async () => {
  const d = handler(['cache.example.org.'], [ED], (req) => reply(req, { answer: [`${req.msg.question[0]!.name} 60 IN A 10.0.0.1`] }));
  const h0 = await metricValue('coredns_dnssec_cache_hits_total', { server: 'dns://:53' });
  const m0 = await metricValue('coredns_dnssec_cache_misses_total', { server: 'dns://:53' });
  const first = await ask(d, 'a.cache.example.org.', RRType.A);
  const again = await ask(d, 'a.cache.example.org.', RRType.A);
  assert.deepEqual(again.answer[1], first.answer[1]);
  assert.equal(await metricValue('coredns_dnssec_cache_hits_total', { server: 'dns://:53' }) - h0, 1);
  assert.equal(await metricValue('coredns_dnssec_cache_misses_total', { server: 'dns://:53' }) - m0, 1);
  assert.equal(await metricValue('coredns_dnssec_cache_entries', { server: 'dns://:53', type: 'signature' }), 1);
  // the name's case is part of the key
  await ask(d, 'A.cache.example.org.', RRType.A);
  assert.equal(d.cache.len, 2);
  // six days on, the cached signature would expire within two days: signed again
  d.now = () => NOW + 6 * 86400 + 1;
  const later = await ask(d, 'a.cache.example.org.', RRType.A);
  assert.equal(sig(later.answer[1]).inception, NOW + 6 * 86400 + 1 - 3 * 3600);
  assert.equal(await metricValue('coredns_dnssec_cache_misses_total', { server: 'dns://:53' }) - m0, 3);
});

test('signature cache capacity: 256 shards of max(capacity/256, 4) entries', () => {
  const c = new SigCache(10);
  // keys landing in one shard
  const keys: string[] = [];
  for (let i = 0; keys.length < 6; i++) if (shardOf('k' + i) === shardOf('k0')) keys.push('k' + i);
  for (const k of keys.slice(0, 4)) assert.equal(c.add(k, []), false);
  assert.equal(c.add(keys[4]!, []), true);
  assert.equal(c.len, 4);
  assert.equal(c.add(keys[4]!, []), false, 'replacing an entry evicts nothing');
  const big = new SigCache(256 * 6);
  for (const k of keys) assert.equal(big.add(k, []), false);
  assert.equal(big.len, 6);
});

test('the shard of a cache key is the low byte of Go\'s fnv.New64 over the RRset text (values from Go)', () => {
  assert.equal(shardOf(formatRecord(parseRecord('www.example.org. 60 IN A 10.0.0.1'))), 24);
  assert.equal(shardOf(formatRecord(parseRecord(SOA))), 205);
  assert.equal(shardOf(formatRecord(parseRecord(
    'nx.example.org. 60 IN NSEC \\000.nx.example.org. A HINFO TXT LOC SRV CERT SSHFP RRSIG NSEC TLSA HIP OPENPGPKEY SPF'))), 137);
});

test('filterBitmap and keyTag', () => {
  assert.deepEqual(filterBitmap(RRType.A, [1, 2, 3], ResponseType.NoData), [2, 3]);
  assert.deepEqual(filterBitmap(RRType.A, [1, 2, 3], ResponseType.NoError), [1, 2, 3]);
  assert.deepEqual(filterBitmap(RRType.NSEC, [1, 47], ResponseType.NameError), [1, 47]);
  assert.equal(keyTag(ED.dnskey.data), 61805);
  assert.equal(keyTag(KSK.dnskey.data), 47773);
});

test('a reply written in wire form is decoded and signed', async () => {
  const d = new Dnssec(['example.org.'], [ED], false, new SigCache(100));
  d.now = () => NOW;
  d.next = new StubHandler('cache', (req, w) => {
    w.writeWire(encodeMessage(reply(req, { answer: ['www.example.org. 60 IN A 10.0.0.1'] })));
    return Rcode.NOERROR;
  });
  const m = await ask(d, 'www.example.org.', RRType.A);
  assert.deepEqual(m.answer.map((r) => r.type), [RRType.A, RRType.RRSIG]);
  assert.equal(sig(m.answer[1]).inception, INCEP);
  assert.equal(sig(m.answer[1]).expiration, EXPIR);
});

test('no next plugin: SERVFAIL error as CoreDNS', () => {
  const d = new Dnssec(['example.org.'], [ED], false, new SigCache(100));
  assert.throws(() => d.serveDNS(makeRequest('www.example.org.'), new CaptureWriter()), /plugin\/dnssec: no next plugin found/);
});

test('a key that fails to sign leaves the RRset unsigned and nothing cached', async () => {
  const broken: SigningKey = { ...ED, sign: () => { throw new Error('simulated signing failure'); } };
  const d = handler(['example.org.'], [ED, broken], (req) => reply(req, { answer: ['www.example.org. 60 IN A 10.0.0.1'] }));
  const m = await ask(d, 'www.example.org.', RRType.A);
  assert.deepEqual(m.answer.map((r) => r.type), [RRType.A]);
  assert.equal(d.cache.len, 0);
});
