import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HUFFMAN_CODES, HUFFMAN_LENGTHS, HpackBlock, HpackDecoder, HpackError, huffmanDecode } from './hpack.ts';

function decodeAll(d: HpackDecoder, hex: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  d.decode(Buffer.from(hex.replace(/\s/g, ''), 'hex'), (n, v) => { out.push([n, v]); });
  return out;
}

/** RFC 7541 C.3 and C.4: three requests on one decoder (the dynamic table carried across blocks). */
const RFC_REQUESTS: Array<Array<[string, string]>> = [
  [[':method', 'GET'], [':scheme', 'http'], [':path', '/'], [':authority', 'www.example.com']],
  [[':method', 'GET'], [':scheme', 'http'], [':path', '/'], [':authority', 'www.example.com'], ['cache-control', 'no-cache']],
  [[':method', 'GET'], [':scheme', 'https'], [':path', '/index.html'], [':authority', 'www.example.com'], ['custom-key', 'custom-value']],
];

const RFC_BLOCKS: Array<[string, string[]]> = [
  ['C.3, without Huffman coding', [
    '8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d',
    '8286 84be 5808 6e6f 2d63 6163 6865',
    '8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65',
  ]],
  ['C.4, with Huffman-coded strings', [
    '8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff',
    '8286 84be 5886 a8eb 1064 9cbf',
    '8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf',
  ]],
];

test('RFC 7541 C.3 and C.4: the example requests decode, the dynamic table carried across blocks', () => {
  for (const [name, blocks] of RFC_BLOCKS) {
    const d = new HpackDecoder();
    blocks.forEach((hex, i) => { assert.deepEqual(decodeAll(d, hex), RFC_REQUESTS[i], `${name}, request ${i + 1}`); });
  }
});

/** A Huffman encoder from the same table, for round trips: every byte value must come back. */
function huffmanEncode(bytes: number[]): Buffer {
  let bits = '';
  for (const b of bytes) bits += HUFFMAN_CODES[b]!.toString(2).padStart(HUFFMAN_LENGTHS[b]!, '0');
  while (bits.length % 8 !== 0) bits += '1';
  const out = Buffer.alloc(bits.length / 8);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(bits.slice(8 * i, 8 * i + 8), 2);
  return out;
}

test('Huffman: all 256 byte values round-trip; EOS, padding over 7 bits or not all ones are errors', () => {
  const all = Array.from({ length: 256 }, (_, i) => i);
  for (const seq of [all, [...all].reverse(), all.map((i) => (i * 37) & 0xff)]) {
    const enc = huffmanEncode(seq);
    assert.equal(huffmanDecode(enc, 0, enc.length), String.fromCharCode(...seq));
  }
  // longer than the shared buffer (4096 octets): a buffer of its own, and the shared one still right after
  const long = Array.from({ length: 9000 }, (_, i) => 97 + (i % 26));
  const encLong = huffmanEncode(long);
  assert.equal(huffmanDecode(encLong, 0, encLong.length), String.fromCharCode(...long));
  assert.equal(huffmanDecode(Buffer.from([0x1f]), 0, 1), 'a'); // 00011 + 111
  assert.throws(() => huffmanDecode(Buffer.from([0x18]), 0, 1), HpackError); // 00011 + 000: padding not ones
  assert.throws(() => huffmanDecode(Buffer.from([0xff]), 0, 1), HpackError); // 8 bits of padding
  assert.throws(() => huffmanDecode(Buffer.from([0xff, 0xff, 0xff, 0xfc]), 0, 4), HpackError); // EOS (30 ones)
});

test('decoder: table size updates, eviction, and malformed blocks', () => {
  const d = new HpackDecoder(4096);
  // a literal with incremental indexing, then the table shrunk to 0 (it empties) and the index is gone
  assert.deepEqual(decodeAll(d, '400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65 be'),
    [['custom-key', 'custom-value'], ['custom-key', 'custom-value']]);
  assert.throws(() => decodeAll(d, '20 be'), HpackError);
  // a size update above what was advertised, or after a field
  assert.throws(() => decodeAll(new HpackDecoder(4096), '3fe21f'), HpackError); // 4097
  assert.throws(() => decodeAll(new HpackDecoder(4096), '82 20'), HpackError);
  // index 0, an index past the tables, truncated integers and strings
  for (const hex of ['80', 'c0', 'ff', '7f', '40', '410a', '00', '0085f2b2']) {
    assert.throws(() => decodeAll(new HpackDecoder(), hex), HpackError, hex);
  }
  // entries evicted oldest first: 4096 bytes hold two entries of 1500 + 32 bytes, not three
  const e = new HpackDecoder(4096);
  const lit = (name: string): string => {
    const v = 'v'.repeat(1500 - name.length);
    return '40' + Buffer.from([name.length]).toString('hex') + Buffer.from(name).toString('hex') + '7f' + Buffer.from([v.length - 127 & 0x7f | 0x80, (v.length - 127) >> 7]).toString('hex') + Buffer.from(v).toString('hex');
  };
  decodeAll(e, lit('a') + lit('b') + lit('c'));
  assert.deepEqual(decodeAll(e, 'be bf').map(([n]) => n), ['c', 'b']);
  assert.throws(() => decodeAll(e, 'c0'), HpackError);
});

test('encoder: a reply block decodes to its fields', () => {
  const b = new HpackBlock().indexed(8).withName(24, 'max-age=300').withName(31, 'application/dns-message')
    .literal('x-content-type-options', 'nosniff').withName(28, String(70000)).bytes();
  assert.deepEqual(decodeAll(new HpackDecoder(), b.toString('hex')), [[':status', '200'], ['cache-control', 'max-age=300'],
    ['content-type', 'application/dns-message'], ['x-content-type-options', 'nosniff'], ['content-length', '70000']]);
  // a value longer than the 7-bit prefix
  const long = 'x'.repeat(300);
  assert.deepEqual(decodeAll(new HpackDecoder(), new HpackBlock().literal('k', long).bytes().toString('hex')), [['k', long]]);
});

test('encoder: one block reset and built again; a clone keeps its octets; copyTo writes them at an offset', () => {
  const b = new HpackBlock().indexed(8).withName(28, '1234');
  const first = b.bytes();
  const kept = b.clone();
  b.reset().indexed(13).withName(31, 'text/plain; charset=utf-8').withName(28, '2');
  assert.deepEqual(decodeAll(new HpackDecoder(), b.bytes().toString('hex')), [[':status', '404'], ['content-type', 'text/plain; charset=utf-8'], ['content-length', '2']]);
  assert.deepEqual(kept.bytes(), first);
  const out = Buffer.alloc(kept.length + 3, 0xee);
  assert.equal(kept.copyTo(out, 2), 2 + kept.length);
  assert.deepEqual(out.subarray(2, 2 + kept.length), first);
  assert.equal(out[0], 0xee);
  assert.equal(out[out.length - 1], 0xee);
  // growing past the first buffer
  const big = new HpackBlock().literal('k', 'v'.repeat(1000)).literal('k2', 'w'.repeat(2000));
  assert.deepEqual(decodeAll(new HpackDecoder(), big.bytes().toString('hex')), [['k', 'v'.repeat(1000)], ['k2', 'w'.repeat(2000)]]);
});

test('decoder: a block inside a larger buffer is read from start to end only', () => {
  const block = Buffer.from('8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff'.replace(/\s/g, ''), 'hex');
  const framed = Buffer.concat([Buffer.from([0x82, 0x84]), block, Buffer.from([0xbe, 0x00])]);
  const out: Array<[string, string]> = [];
  new HpackDecoder().decode(framed, (n, v) => { out.push([n, v]); }, 2, 2 + block.length);
  assert.deepEqual(out, RFC_REQUESTS[0]);
  // a string that would run past `end` is truncated there, even though the buffer goes on
  assert.throws(() => new HpackDecoder().decode(framed, () => undefined, 2, 2 + block.length - 1), HpackError);
});
