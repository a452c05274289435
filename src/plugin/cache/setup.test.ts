import { test } from 'node:test';
import { parse } from './setup.ts';
import { defaultCacheOptions } from './cache.ts';
import { parseTable } from '../pkg/testing.ts';

const D = defaultCacheOptions();
const P = 'plugin/cache: ';
const E3 = 'plugin/cache: Corefile:3 - Error during parsing: ';
const cache = (lines: string): string => `. {\n cache {\n${lines.split('\n').map((l) => `  ${l}\n`).join('')} }\n}`;

test('cache parse', async () => {
  await parseTable('cache', parse, [
    ['. {\n cache\n}', D],
    ['example.org:1053 example.net {\n cache\n}', { ...D, zones: ['example.org.', 'example.net.'] }],
    ['. {\n cache 10\n}', { ...D, pttl: 10, nttl: 10 }],
    ['. {\n cache 10 Example.ORG 10.0.0.0/24\n}', { ...D, pttl: 10, nttl: 10, zones: ['example.org.', '0.0.10.in-addr.arpa.'] }],
    ['. {\n cache example.org\n}', { ...D, zones: ['example.org.'] }],
    [cache('success 100'), { ...D, pcap: 100 }],
    [cache('success 100 60 10\ndenial 50 30 2'), { ...D, pcap: 100, pttl: 60, minpttl: 10, ncap: 50, nttl: 30, minnttl: 2 }],
    [cache('denial 0 30'), { ...D, ncap: 0, nttl: 30 }],
    [cache('prefetch 2'), { ...D, prefetch: 2 }],
    [cache('prefetch 2 10m 20%'), { ...D, prefetch: 2, prefetchDurationMs: 600_000, percentage: 20 }],
    [cache('serve_stale'), { ...D, staleUpTo: 3600 }],
    [cache('serve_stale 1h immediate'), { ...D, staleUpTo: 3600 }],
    [cache('serve_stale 10m VERIFY'), { ...D, staleUpTo: 600, verifyStale: true }],
    [cache('serve_stale 10m verify 500ms 30s 1m'), { ...D, staleUpTo: 600, verifyStale: true, verifyTimeoutMs: 500, staleResponseTtl: 30, failureRecheckMs: 60_000 }],
    [cache('serve_stale 10m immediate 30s 5m'), { ...D, staleUpTo: 600, staleResponseTtl: 30, failureRecheckMs: 300_000 }],
    [cache('serve_stale 0s'), { ...D, staleUpTo: 0 }],
    [cache('serve_stale 1h\nserve_stale_policy prefer_positive'), { ...D, staleUpTo: 3600, preferPositive: true }],
    [cache('servfail 0'), { ...D, failttl: 0 }],
    [cache('servfail 5m'), { ...D, failttl: 300 }],
    [cache('disable success\ndisable denial Example.org b.org.'), { ...D, pexcept: ['.'], nexcept: ['example.org.', 'b.org.'] }],
    [cache('keepttl'), { ...D, keepttl: true }],

    ['. {\n cache\n cache\n}', P + 'this plugin can only be used once per Server Block'],
    ['. {\n cache 0\n}', P + 'cache TTL can not be zero or negative: 0'],
    ['. {\n cache -5\n}', P + 'cache TTL can not be zero or negative: -5'],
    [cache('success'), E3 + "Wrong argument count or unexpected line ending after 'success'"],
    [cache('success x'), P + 'strconv.Atoi: parsing "x": invalid syntax'],
    [cache('success 10 0'), P + 'cache TTL can not be zero or negative: 0'],
    [cache('denial 10 60 -1'), P + 'cache min TTL can not be negative: -1'],
    [cache('prefetch'), E3 + "Wrong argument count or unexpected line ending after 'prefetch'"],
    [cache('prefetch 1 1m 10% x'), E3 + "Wrong argument count or unexpected line ending after 'x'"],
    [cache('prefetch -1'), P + 'prefetch amount should be positive: -1'],
    [cache('prefetch 1 1x'), P + 'time: unknown unit "x" in duration "1x"'],
    [cache('prefetch 1 1m 10'), P + "last character of percentage should be `%`, but is: '0'"],
    [cache('prefetch 1 1m 95%'), P + 'percentage should fall in range [10, 90]: 95'],
    [cache('serve_stale 1h verify 1s 1s 1s 1s'), E3 + "Wrong argument count or unexpected line ending after '1s'"],
    [cache('serve_stale 1h immediate 1s 1s 1s'), E3 + "Wrong argument count or unexpected line ending after '1s'"],
    [cache('serve_stale -1h'), P + 'invalid negative duration for serve_stale'],
    [cache('serve_stale 1h sometimes'), P + 'invalid value for serve_stale refresh mode: sometimes'],
    [cache('serve_stale 1h verify -1s'), P + 'invalid negative verify timeout for serve_stale'],
    [cache('serve_stale 1h immediate -1s'), P + 'invalid negative response TTL for serve_stale'],
    [cache('serve_stale 1h immediate 1500ms'), P + 'serve_stale response TTL must be whole seconds: 1500ms'],
    [cache('serve_stale 1h immediate 1s -1s'), P + 'invalid negative failure recheck for serve_stale'],
    [cache('serve_stale 1h immediate 1s 6m'), P + 'serve_stale failure recheck over 5 minutes is not permitted'],
    [cache('serve_stale_policy'), E3 + "Wrong argument count or unexpected line ending after 'serve_stale_policy'"],
    [cache('serve_stale_policy prefer_fresh'), P + 'invalid value for serve_stale_policy: prefer_fresh'],
    [cache('serve_stale_policy prefer_positive'), P + 'serve_stale_policy requires serve_stale'],
    [cache('servfail'), E3 + "Wrong argument count or unexpected line ending after 'servfail'"],
    [cache('servfail -1s'), P + 'invalid negative ttl for servfail'],
    [cache('servfail 6m'), P + 'caching SERVFAIL responses over 5 minutes is not permitted'],
    [cache('disable'), E3 + "Wrong argument count or unexpected line ending after 'disable'"],
    [cache('disable both'), P + 'cache type for disable must be "success" or "denial"'],
    [cache('disable success a..b'), P + 'invalid disabled zone: a..b'],
    [cache('keepttl yes'), E3 + "Wrong argument count or unexpected line ending after 'yes'"],
    [cache('size 10'), E3 + "Wrong argument count or unexpected line ending after 'size'"],
  ]);
});
