// The signature cache: CoreDNS's plugin/pkg/cache shape (256 shards, each holding at most
// max(capacity/256, 4) entries; a full shard drops one entry to make room), keyed by the RRset's text.

import type { ResourceRecord, RRSIGData } from '../../wire/types.ts';

const SHARDS = 256;

/**
 * The shard of a key: the low 8 bits of the FNV-1 64-bit hash of its bytes (CoreDNS's key is that hash;
 * `key & 255` picks the shard). Only the low byte of the product matters, so 8-bit arithmetic suffices.
 */
export function shardOf(key: string): number {
  let h = 0x25; // low byte of the FNV-64 offset basis
  for (let i = 0; i < key.length; i++) {
    h = Math.imul(h, 0xb3) & 0xff; // low byte of the FNV-64 prime
    h ^= key.charCodeAt(i) & 0xff;
  }
  return h;
}

export type Sigs = ResourceRecord<RRSIGData>[];

export class SigCache {
  private readonly shards: Map<string, Sigs>[] = [];
  private readonly shardSize: number;

  constructor(capacity: number) {
    this.shardSize = Math.max(Math.trunc(capacity / SHARDS), 4);
    for (let i = 0; i < SHARDS; i++) this.shards.push(new Map());
  }

  get(key: string): Sigs | undefined {
    return this.shards[shardOf(key)]!.get(key);
  }

  /** Adds (or replaces) an entry; true when another entry was evicted to make room. */
  add(key: string, sigs: Sigs): boolean {
    const s = this.shards[shardOf(key)]!;
    let evicted = false;
    if (s.size >= this.shardSize && !s.has(key)) {
      // Go drops an arbitrary entry (map order); here the oldest goes.
      const first = s.keys().next();
      if (first.done !== true) {
        s.delete(first.value);
        evicted = true;
      }
    }
    s.set(key, sigs);
    return evicted;
  }

  get len(): number {
    let n = 0;
    for (const s of this.shards) n += s.size;
    return n;
  }

  /** Drops every entry for which `stale` is true. */
  sweep(stale: (sigs: Sigs) => boolean): void {
    for (const s of this.shards) {
      for (const [k, v] of s) if (stale(v)) s.delete(k);
    }
  }
}
