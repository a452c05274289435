// The cache gives way under heap pressure (issue 16's fault drill: with --max-old-space-size=64 and a
// cache configured for millions of entries, unique names used to fill the heap until Node aborted).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HEAP_HIGH, HEAP_LOW, Item, ShardedCache, oldSpaceLimit, type HeapProbe } from './cache.ts';

function item(): Item {
  return new Item(Buffer.alloc(12), [], 12, 30, 0, false, false);
}

/** A heap whose use the test sets, with a clock it moves. */
function fakeHeap(): HeapProbe & { r: number; t: number } {
  const h = { r: 0.1, t: 0, ratio: () => h.r, now: () => h.t };
  return h;
}

test('under heap pressure the cache drops to 3/4 of what it holds; again only after the cooldown; grows back when the pressure is gone', () => {
  const heap = fakeHeap();
  const c = new ShardedCache(256 * 100, heap);
  const shrinks: number[] = [];
  c.onShrink = (cap) => { shrinks.push(cap); };
  for (let i = 0; i < 10_000; i++) c.add(`k${i}`, item());
  assert.equal(c.effectiveCapacity, 25_600);
  const held = c.len;

  heap.r = HEAP_HIGH + 0.1;
  c.adapt();
  assert.equal(shrinks.length, 1);
  assert.ok(c.effectiveCapacity <= Math.ceil(held / 256) * 0.75 * 256, `${c.effectiveCapacity} for ${held} held`);
  assert.ok(c.len <= c.effectiveCapacity);
  const first = c.effectiveCapacity;

  // Still over the mark (the evicted entries not yet collected): no second shrink within the cooldown.
  c.adapt();
  assert.equal(c.effectiveCapacity, first);
  heap.t += 1000;
  c.adapt();
  assert.ok(c.effectiveCapacity < first);
  assert.equal(shrinks.length, 2);

  // Adding more keeps it at its lowered cap (a full shard evicts).
  const capNow = c.effectiveCapacity;
  heap.r = (HEAP_HIGH + HEAP_LOW) / 2;
  for (let i = 0; i < 20_000; i++) c.add(`more${i}`, item());
  assert.ok(c.len <= capNow);

  // Pressure gone: back up by a quarter at each check, never past the configured capacity.
  heap.r = HEAP_LOW - 0.1;
  for (let i = 0; i < 40; i++) c.adapt();
  assert.equal(c.effectiveCapacity, 25_600);
  assert.equal(c.capacity, 25_600);
});

test('adds look at the heap on their own (every 512 adds)', () => {
  const heap = fakeHeap();
  heap.r = 0.99;
  const c = new ShardedCache(1_000_000, heap);
  for (let i = 0; i < 5000; i++) c.add(`k${i}`, item());
  assert.ok(c.effectiveCapacity < 1_000_000);
  assert.ok(c.len < 5000);
});

test('the old-generation limit comes from --max-old-space-size when given', () => {
  assert.equal(oldSpaceLimit(['--max-old-space-size=64']), 64 * 1024 * 1024);
  assert.equal(oldSpaceLimit(['--max_old_space_size=128', '--x']), 128 * 1024 * 1024);
  assert.ok(oldSpaceLimit([]) > 64 * 1024 * 1024);
});
