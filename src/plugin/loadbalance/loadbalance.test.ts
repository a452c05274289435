import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ResourceRecord } from '../../wire/types.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newQuery, replyTo } from '../../wire/message.ts';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { captureLog, parseTable, runSetup, makeRequest } from '../pkg/testing.ts';
import { parse, plugin } from './setup.ts';
import { roundRobin, roundRobinWire, reorderPreferred } from './shuffle.ts';
import { parseCidr, type Cidr } from '../../wire/ip.ts';
import { WeightedRR, parseWeights } from './weighted.ts';
import { pluginLogger } from '../../core/log.ts';

const a = (name: string, ip: string): ResourceRecord => ({ name, type: 1, class: 1, ttl: 60, data: { address: ip } });
const aaaa = (name: string, ip: string): ResourceRecord => ({ name, type: 28, class: 1, ttl: 60, data: { address: ip } });
const cname = (name: string, t: string): ResourceRecord => ({ name, type: 5, class: 1, ttl: 60, data: { target: t } });
const mx = (name: string, p: number, t: string): ResourceRecord => ({ name, type: 15, class: 1, ttl: 60, data: { preference: p, exchange: t } });
const txt = (name: string): ResourceRecord => ({ name, type: 16, class: 1, ttl: 60, data: { strings: [new Uint8Array([120])] } });
const types = (rrs: ResourceRecord[]): number[] => rrs.map((r) => r.type);

test('round_robin regroups: CNAME, others, addresses, MX', () => {
  const out = roundRobin([mx('x.', 1, 'm.'), a('x.', '1.1.1.1'), txt('x.'), cname('x.', 'y.'), aaaa('x.', '::1'), mx('x.', 2, 'n.')]);
  assert.deepEqual(types(out).slice(0, 2), [5, 16]);
  assert.deepEqual(new Set(types(out).slice(2, 4)), new Set([1, 28]));
  assert.deepEqual(types(out).slice(4), [15, 15]);
});

test('round_robin shuffles (all orders of three records appear)', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 300; i++) seen.add(roundRobin([a('x.', '1.0.0.1'), a('x.', '1.0.0.2'), a('x.', '1.0.0.3')]).map((r) => (r.data as { address: string }).address).join());
  assert.equal(seen.size, 6);
});

test('wire round_robin keeps the record set and moves only safe records', () => {
  const q = newQuery('www.example.', 1);
  const r = replyTo(q);
  r.answer = [cname('www.example.', 'web.example.'), a('web.example.', '10.0.0.1'), a('web.example.', '10.0.0.2'), a('web.example.', '10.0.0.3')];
  const wire = encodeMessage(r, { compress: true });
  const seen = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const out = roundRobinWire(wire);
    if (out === undefined) {
      // The A records' owner points into the CNAME rdata: the first A owner may be a pointer target.
      continue;
    }
    const m = decodeMessage(out);
    assert.equal(m.answer[0]!.type, 5);
    assert.deepEqual(m.answer.slice(1).map((x) => (x.data as { address: string }).address).sort(), ['10.0.0.1', '10.0.0.2', '10.0.0.3']);
    seen.add(m.answer.slice(1).map((x) => (x.data as { address: string }).address).join());
  }
  assert.ok(seen.size > 1);
});

test('wire round_robin with at most one record per section: the bytes themselves, or undefined when the framing is broken', () => {
  const r = replyTo(newQuery('www.example.', 1));
  r.answer = [a('www.example.', '10.0.0.1')];
  r.authority = [{ name: 'example.', type: 2, class: 1, ttl: 60, data: { target: 'ns.example.' } }];
  r.additional = [a('ns.example.', '10.0.0.53')];
  const wire = encodeMessage(r, { compress: true });
  assert.equal(roundRobinWire(wire), wire);
  // Cut short at a few places (the last record, an earlier one, the question): undefined, as the full walk gives.
  for (const cut of [wire.length - 1, wire.length - 20, 14]) assert.equal(roundRobinWire(wire.subarray(0, cut)), undefined, String(cut));
  // A section of two records still goes through the reordering walk.
  r.answer.push(a('www.example.', '10.0.0.2'));
  const two = encodeMessage(r, { compress: true });
  assert.deepEqual(decodeMessage(roundRobinWire(two)!).additional, decodeMessage(two).additional);
});

test('prefer CIDR moves matching addresses first, in CIDR order', () => {
  const out = reorderPreferred([a('x.', '10.0.0.1'), a('x.', '192.168.1.1'), mx('x.', 1, 'm.'), a('x.', '172.16.0.1'), cname('x.', 'y.')],
    [parseCidr('172.16.0.0/12')!, parseCidr('192.168.0.0/16')!]);
  assert.deepEqual(out.map((r) => r.type === 1 ? (r.data as { address: string }).address : r.type), [5, '172.16.0.1', '192.168.1.1', '10.0.0.1', 15]);
});

test('weighted: weight file parsing and the weighted first address', () => {
  const w = parseWeights('# c\nw.example\n10.0.0.1 100\n10.0.0.2 1\n', 'wf');
  assert.equal(w.get('w.example.')!.length, 2);
  assert.throws(() => parseWeights('10.0.0.1\n', 'wf'), /wrong domain name:"10.0.0.1" in weight file wf. \(Maybe a missing weight value\?\)/);
  assert.throws(() => parseWeights('x.\n10.0.0.1 0\n', 'wf'), /wrong weight value:"0" in weight file wf/);
  assert.throws(() => parseWeights('10.0.0.1 3\n', 'wf'), /missing domain name in weight file wf/);
  const wr = new WeightedRR('wf', 0, pluginLogger('loadbalance'));
  wr.domains = w;
  let first1 = 0;
  for (let i = 0; i < 1000; i++) {
    const out = wr.order([a('w.example.', '10.0.0.2'), a('w.example.', '10.0.0.1')]);
    if ((out[0]!.data as { address: string }).address === '10.0.0.1') first1++;
  }
  assert.ok(first1 > 950, `weight 100 vs 1 chosen first ${first1}/1000`);
});

test('only NOERROR replies are reordered', async () => {
  const res = await runSetup(plugin, '. {\n loadbalance\n}\n');
  const replies: unknown[] = [];
  const chain = res.chain({
    name: 'answer',
    serveDNS(req, w) {
      const r = replyTo(req.msg);
      r.rcode = 3;
      r.answer = [a('x.', '1.0.0.1'), a('x.', '1.0.0.2'), a('x.', '1.0.0.3')];
      w.writeMsg(r);
      return 0;
    },
  });
  for (let i = 0; i < 20; i++) {
    await chain.serveDNS(makeRequest('x.'), { writeMsg: (m) => { replies.push(m.answer.map((x) => (x.data as { address: string }).address).join()); }, writeWire() {} });
  }
  assert.equal(new Set(replies).size, 1);
});

test('a reply without a question is passed on untouched (CoreDNS 1.15.0)', async () => {
  const res = await runSetup(plugin, '. {\n loadbalance\n}\n');
  const replies: string[] = [];
  const chain = res.chain({
    name: 'answer',
    serveDNS(req, w) {
      const r = replyTo(req.msg);
      r.question = [];
      r.answer = [a('x.', '1.0.0.1'), a('x.', '1.0.0.2'), a('x.', '1.0.0.3')];
      w.writeMsg(r);
      return 0;
    },
  });
  for (let i = 0; i < 20; i++) {
    await chain.serveDNS(makeRequest('x.'), { writeMsg: (m) => { replies.push(m.answer.map((x) => (x.data as { address: string }).address).join()); }, writeWire() {} });
  }
  assert.deepEqual([...new Set(replies)], ['1.0.0.1,1.0.0.2,1.0.0.3']);
});

const cidrs = (...list: string[]): Cidr[] => list.map((c) => parseCidr(c)!);
const E2 = 'plugin/loadbalance: Corefile:2 - Error during parsing: ';
const E3 = 'plugin/loadbalance: Corefile:3 - Error during parsing: ';

test('loadbalance parse', async () => {
  await parseTable('loadbalance', parse, [
    ['. {\n loadbalance\n}', { weighted: undefined, prefer: [] }],
    ['. {\n loadbalance round_robin\n}', { weighted: undefined, prefer: [] }],
    ['. {\n loadbalance round_robin {\n  prefer 10.0.0.0/8 fd00::/8\n  prefer 192.0.2.0/24\n }\n}',
      { weighted: undefined, prefer: cidrs('10.0.0.0/8', 'fd00::/8', '192.0.2.0/24') }],
    ['. {\n loadbalance weighted /w\n}', { weighted: { file: '/w', reloadMs: 30000 }, prefer: [] }],
    ['. {\n loadbalance weighted w {\n  reload 10s\n }\n}', { weighted: { file: 'w', reloadMs: 10000 }, prefer: [] }],
    ['. {\n loadbalance weighted w {\n  reload 0\n }\n}', { weighted: { file: 'w', reloadMs: 0 }, prefer: [] }],
    // Every line is read: the last policy wins, prefer subnets add up.
    ['. {\n loadbalance weighted w\n loadbalance round_robin\n}', { weighted: undefined, prefer: [] }],
    ['. {\n loadbalance {\n  prefer 10.0.0.0/8\n }\n loadbalance weighted w\n loadbalance {\n  prefer ::/0\n }\n}',
      { weighted: { file: 'w', reloadMs: 30000 }, prefer: cidrs('10.0.0.0/8', '::/0') }],
    ['. {\n loadbalance foo\n}', 'plugin/loadbalance: unknown policy: foo'],
    ['. {\n loadbalance round_robin x\n}', E2 + 'unknown property for round_robin'],
    ['. {\n loadbalance weighted\n}', E2 + 'missing weight file argument'],
    ['. {\n loadbalance weighted a b\n}', E2 + 'unexpected argument(s)'],
    ['. {\n loadbalance weighted w {\n  reload\n }\n}', E3 + 'reload duration value is missing'],
    ['. {\n loadbalance weighted w {\n  reload 1s 2s\n }\n}', E3 + 'unexpected argument'],
    ['. {\n loadbalance weighted w {\n  reload soon\n }\n}', E3 + "invalid reload duration 'soon'"],
    ['. {\n loadbalance weighted w {\n  prefer 10.0.0.0/8\n }\n}', E3 + "unknown property 'prefer'"],
    ['. {\n loadbalance {\n  prefer 10.0.0.0/33\n }\n}', E3 + 'invalid CIDR "10.0.0.0/33": invalid CIDR address: 10.0.0.0/33'],
    ['. {\n loadbalance {\n  shuffle\n }\n}', E3 + "unknown property 'shuffle'"],
  ]);
});

test('loadbalance weighted: start-up reads the weight file, shutdown stops the reload timer', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-lb-'));
  const missing = join(dir, 'missing');
  // Without reload, a weight file that cannot be opened fails the start.
  let r = await runSetup(plugin, `. {\n loadbalance weighted ${missing} {\n  reload 0\n }\n}`);
  await assert.rejects(r.start(), { message: 'plugin/loadbalance: weight file open error' });
  // With reload, it is a warning and the timer tries again.
  r = await runSetup(plugin, `. {\n loadbalance weighted ${missing} {\n  reload 1m\n }\n}`);
  const lines = await captureLog(() => r.start());
  assert.deepEqual(lines, ['[WARNING] plugin/loadbalance: Failed to open weight file:weight file open error. Will try again in 1m0s']);
  assert.deepEqual(await r.stop(), []);
  // The weights read at start order the answers.
  const file = join(dir, 'weights');
  writeFileSync(file, 'w.example\n10.0.0.1 100\n10.0.0.2 1\n');
  r = await runSetup(plugin, `. {\n loadbalance weighted ${file}\n}`);
  await r.start();
  const chain = r.chain({
    name: 'answer',
    serveDNS(req, w) {
      const m = replyTo(req.msg);
      m.answer = [a('w.example.', '10.0.0.2'), a('w.example.', '10.0.0.1')];
      w.writeMsg(m);
      return 0;
    },
  });
  let first1 = 0;
  for (let i = 0; i < 200; i++) {
    await chain.serveDNS(makeRequest('w.example.'), {
      writeMsg: (m) => { if ((m.answer[0]!.data as { address: string }).address === '10.0.0.1') first1++; },
      writeWire() {},
    });
  }
  assert.ok(first1 > 170, `weight 100 vs 1 chosen first ${first1}/200`);
  assert.deepEqual(await r.stop(), []);
});
