// cache end to end: nodens with cache in front of forward to in-test upstreams
// (and unbound); the cache's clock is moved by hand where waiting would be slow.

import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { startInProcess } from '../helpers/server.ts';
import { exchange } from '../helpers/client.ts';
import { FakeUpstream, query, decode, startUnbound } from './forward-upstreams.ts';
import type { NodensServer } from '../../src/index.ts';
import { registry } from '../../src/plugin/pkg/metrics.ts';
import type { Cache } from '../../src/plugin/cache/cache.ts';

function cacheOf(s: NodensServer): Cache {
  return s.runtime.instance.blockConfigs()[0]!.handlers.find((h) => h.name === 'cache') as unknown as Cache;
}

/** Moves the cache's clock: returns a function advancing it by `ms`. */
function fakeClock(c: Cache): (ms: number) => void {
  let offset = 0;
  c.now = () => Date.now() + offset;
  return (ms) => { offset += ms; };
}

const ttls = (m: ReturnType<typeof decode>): number[] => [...m.answer, ...m.authority, ...m.additional].map((r) => r.ttl);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function metric(name: string): Promise<string> {
  return (await registry.metrics()).split('\n').filter((l) => l.startsWith(name)).join('\n');
}

describe('cache', () => {
  test('hits count TTLs down, keep the client ID, keep the stored AA (CoreDNS 1.15.0 no longer sets it), and do not reach the upstream', async () => {
    const up = await FakeUpstream.start(() => ({ kind: 'answer', ttl: 300, addresses: ['192.0.2.1', '192.0.2.2'] }));
    const s = await startInProcess(`.:0 {\n cache 30\n forward . ${up.addr}\n}\n`);
    try {
      const adv = fakeClock(cacheOf(s));
      const first = decode(await exchange(s.port, query('ttl.example', 1, { id: 11 })));
      assert.deepEqual(ttls(first), [30, 30], 'capped to the cache TTL already on the miss');
      adv(2500);
      const hit = decode(await exchange(s.port, query('ttl.example', 1, { id: 12 })));
      assert.equal(hit.id, 12);
      assert.equal(hit.aa, first.aa);
      assert.equal(hit.ra, true);
      assert.deepEqual(ttls(hit), [28, 28]);
      assert.equal(up.count('ttl.example.'), 1);
      adv(28000);
      decode(await exchange(s.port, query('ttl.example')));
      assert.equal(up.count('ttl.example.'), 2, 'expired entry refetched');
      assert.match(await metric('coredns_cache_hits_total'), /coredns_cache_hits_total\{server="dns:\/\/:0",type="success",zones="\.",view=""\} 1/);
    } finally { await s.stop(); await up.stop(); }
  });

  test('keepttl shows the stored TTL; a mixed-case query gets its own question back', async () => {
    const up = await FakeUpstream.start(() => ({ kind: 'answer', ttl: 100 }));
    const s = await startInProcess(`.:0 {\n cache {\n  keepttl\n }\n forward . ${up.addr}\n}\n`);
    try {
      const adv = fakeClock(cacheOf(s));
      await exchange(s.port, query('keep.example'));
      adv(10000);
      const hit = decode(await exchange(s.port, query('KEEP.example')));
      assert.deepEqual(ttls(hit), [100]);
      assert.equal(hit.question[0]!.name, 'KEEP.example.');
      assert.equal(up.count('keep.example.'), 1);
    } finally { await s.stop(); await up.stop(); }
  });

  test('DO and CD are part of the key; the upstream sees AD=1', async () => {
    const up = await FakeUpstream.start(() => ({ kind: 'answer' }));
    const s = await startInProcess(`.:0 {\n cache\n forward . ${up.addr}\n}\n`);
    try {
      await exchange(s.port, query('key.example'));
      await exchange(s.port, query('key.example', 1, { do: true }));
      await exchange(s.port, query('key.example', 1, { cd: true }));
      await exchange(s.port, query('key.example', 1, { do: true }));
      assert.equal(up.count('key.example.'), 3);
      assert.ok(up.seen.every((x) => x.ad), 'AD set towards the upstream');
    } finally { await s.stop(); await up.stop(); }
  });

  test('denial: NXDOMAIN with SOA cached with the SOA TTL, without SOA not cached; SERVFAIL cached for `servfail`', async () => {
    let mode: 'nx' | 'nxnosoa' | 'sf' = 'nx';
    const up = await FakeUpstream.start(() => (mode === 'nx' ? { kind: 'answer', rcode: 3, soa: true, ttl: 60 }
      : mode === 'nxnosoa' ? { kind: 'answer', rcode: 3 } : { kind: 'answer', rcode: 2 }));
    const s = await startInProcess(`.:0 {\n cache {\n  servfail 2s\n }\n forward . ${up.addr}\n}\n`);
    try {
      const adv = fakeClock(cacheOf(s));
      const r = decode(await exchange(s.port, query('nx.example')));
      assert.equal(r.rcode, 3);
      assert.deepEqual(ttls(r), [60]);
      await exchange(s.port, query('nx.example'));
      assert.equal(up.count('nx.example.'), 1);
      mode = 'nxnosoa';
      await exchange(s.port, query('nx2.example'));
      await exchange(s.port, query('nx2.example'));
      assert.equal(up.count('nx2.example.'), 2);
      mode = 'sf';
      assert.equal(decode(await exchange(s.port, query('sf.example'))).rcode, 2);
      assert.equal(decode(await exchange(s.port, query('sf.example'))).rcode, 2);
      assert.equal(up.count('sf.example.'), 1, 'SERVFAIL cached');
      adv(2100);
      await exchange(s.port, query('sf.example'));
      assert.equal(up.count('sf.example.'), 2, 'for 2 s only');
    } finally { await s.stop(); await up.stop(); }
  });

  test('truncated replies are not cached', async () => {
    const up = await FakeUpstream.start(() => ({ kind: 'answer', tc: true }));
    const s = await startInProcess(`.:0 {\n cache\n forward . ${up.addr}\n}\n`);
    try {
      assert.equal(decode(await exchange(s.port, query('tc.example'))).tc, true);
      await exchange(s.port, query('tc.example'));
      // Not cached: both client queries went upstream, each twice (the 0x20 query, whose truncated reply is asked
      // for again as spelled).
      assert.equal(up.count('tc.example.'), 4);
      assert.equal(up.seen.filter((x) => x.name === 'tc.example.' && x.spelled === 'tc.example.').length >= 2, true);
    } finally { await s.stop(); await up.stop(); }
  });

  test('prefetch: a popular entry is refreshed in the background before it expires', async () => {
    let n = 0;
    const up = await FakeUpstream.start(() => ({ kind: 'answer', ttl: 100, addresses: [`192.0.2.${++n}`] }));
    const s = await startInProcess(`.:0 {\n cache {\n  prefetch 2 5m 10%\n }\n forward . ${up.addr}\n}\n`);
    try {
      const adv = fakeClock(cacheOf(s));
      await exchange(s.port, query('pf.example'));
      await exchange(s.port, query('pf.example'));
      adv(91000); // 9 s left of 100: within 10 %
      const hit = decode(await exchange(s.port, query('pf.example')));
      assert.deepEqual(ttls(hit), [9], 'answered from cache at once');
      await sleep(100);
      assert.equal(up.count('pf.example.'), 2, 'one prefetch');
      const after = decode(await exchange(s.port, query('pf.example')));
      assert.equal((after.answer[0]!.data as { address: string }).address, '192.0.2.2');
      assert.equal(after.answer[0]!.ttl, 100);
      assert.match(await metric('coredns_cache_prefetch_total'), /\} 1/);
    } finally { await s.stop(); await up.stop(); }
  });

  test('serve_stale immediate: an expired entry is served with TTL 0 while one refresh runs', async () => {
    let down = false;
    const up = await FakeUpstream.start(() => (down ? { kind: 'drop' } : { kind: 'answer', ttl: 10, addresses: ['192.0.2.20'] }));
    const s = await startInProcess(`.:0 {\n cache {\n  serve_stale 1h\n }\n forward . ${up.addr} {\n  read_timeout 200ms\n }\n}\n`);
    try {
      const adv = fakeClock(cacheOf(s));
      await exchange(s.port, query('st.example'));
      down = true;
      adv(20000);
      const t0 = Date.now();
      const r = decode(await exchange(s.port, query('st.example')));
      assert.ok(Date.now() - t0 < 150, 'stale answer served immediately');
      assert.equal(r.rcode, 0);
      assert.deepEqual(ttls(r), [0]);
      assert.equal((r.answer[0]!.data as { address: string }).address, '192.0.2.20');
      await sleep(50);
      assert.equal(up.count('st.example.'), 2, 'one background refresh');
      adv(3700 * 1000);
      down = false;
      const r2 = decode(await exchange(s.port, query('st.example')));
      assert.equal(r2.answer[0]!.ttl, 10, 'beyond serve_stale the entry is not used');
    } finally { await s.stop(); await up.stop(); }
  });

  test('serve_stale verify: upstream asked first; its failure serves the stale entry', async () => {
    let mode: 'ok' | 'sf' | 'new' = 'ok';
    const up = await FakeUpstream.start(() => (mode === 'sf' ? { kind: 'answer', rcode: 2 }
      : { kind: 'answer', ttl: 10, addresses: [mode === 'ok' ? '192.0.2.30' : '192.0.2.31'] }));
    const s = await startInProcess(`.:0 {\n cache {\n  serve_stale 1h verify\n  servfail 0\n }\n forward . ${up.addr}\n}\n`);
    try {
      const adv = fakeClock(cacheOf(s));
      await exchange(s.port, query('vf.example'));
      adv(20000);
      mode = 'sf';
      const r = decode(await exchange(s.port, query('vf.example')));
      assert.equal(r.rcode, 0);
      assert.equal((r.answer[0]!.data as { address: string }).address, '192.0.2.30');
      assert.equal(r.answer[0]!.ttl, 0);
      mode = 'new';
      const r2 = decode(await exchange(s.port, query('vf.example')));
      assert.equal((r2.answer[0]!.data as { address: string }).address, '192.0.2.31');
      assert.equal(r2.answer[0]!.ttl, 10);
      assert.match(await metric('coredns_cache_served_stale_total'), /\} [1-9]/);
    } finally { await s.stop(); await up.stop(); }
  });

  test('disable success for a zone; min TTL raises low TTLs', async () => {
    const up = await FakeUpstream.start(() => ({ kind: 'answer', ttl: 1 }));
    const s = await startInProcess(`.:0 {\n cache {\n  disable success nocache.example\n  success 1000 60 20\n }\n forward . ${up.addr}\n}\n`);
    try {
      await exchange(s.port, query('a.nocache.example'));
      await exchange(s.port, query('a.nocache.example'));
      assert.equal(up.count('a.nocache.example.'), 2);
      const r = decode(await exchange(s.port, query('low.example')));
      assert.deepEqual(ttls(r), [20]);
    } finally { await s.stop(); await up.stop(); }
  });

  test('with unbound: SOA-based negative caching and the seeds\' lines', async () => {
    const ub = await startUnbound('example.test.', [
      'example.test. 300 IN SOA ns.example.test. h.example.test. 1 3600 600 86400 60',
      'a.example.test. 300 IN A 10.1.1.1', 'a.example.test. 300 IN A 10.1.1.2', 'a.example.test. 300 IN A 10.1.1.3',
    ]);
    const s = await startInProcess(`.:0 {\n forward . 127.0.0.1:${ub.port} {\n  max_concurrent 1000\n }\n cache 30\n loadbalance\n}\n`);
    try {
      const nx = decode(await exchange(s.port, query('none.example.test')));
      assert.equal(nx.rcode, 3);
      assert.ok(nx.authority[0]!.ttl <= 30);
      const seen = new Set<string>();
      for (let i = 0; i < 30; i++) {
        const r = decode(await exchange(s.port, query('a.example.test')));
        assert.equal(r.answer.length, 3);
        seen.add(r.answer.map((a) => (a.data as { address: string }).address).join(','));
      }
      assert.ok(seen.size > 1, 'loadbalance shuffles cache hits');
    } finally { await s.stop(); await ub.stop(); }
  });

  test('setup errors use CoreDNS messages', async () => {
    await assert.rejects(startInProcess('.:0 {\n cache 0\n}\n'), /plugin\/cache: cache TTL can not be zero or negative: 0/);
    await assert.rejects(startInProcess('.:0 {\n cache {\n  servfail 6m\n }\n}\n'), /caching SERVFAIL responses over 5 minutes is not permitted/);
    await assert.rejects(startInProcess('.:0 {\n cache {\n  prefetch 1 1m 5%\n }\n}\n'), /percentage should fall in range \[10, 90\]: 5/);
    await assert.rejects(startInProcess('.:0 {\n cache {\n  serve_stale 1h sometimes\n }\n}\n'), /invalid value for serve_stale refresh mode: sometimes/);
    await assert.rejects(startInProcess('.:0 {\n cache {\n  disable both\n }\n}\n'), /cache type for disable must be "success" or "denial"/);
    await assert.rejects(startInProcess('.:0 {\n cache\n cache\n}\n'), /plugin\/cache: this plugin can only be used once per Server Block/);
  });
});
