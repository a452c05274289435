// HPACK (RFC 7541) for the DoH listener's own HTTP/2 layer (h2.ts): a decoder for request header blocks (static
// and dynamic table, Huffman strings) and the few encodings a DoH reply needs (indexed and literal fields, never
// added to a table, never Huffman-coded). No I/O.

/** A header block that breaks RFC 7541: the connection ends with COMPRESSION_ERROR. */
export class HpackError extends Error {}

/** RFC 7541 Appendix A: the static table, index 1 to 61. */
const STATIC: ReadonlyArray<readonly [string, string]> = [
  [':authority', ''], [':method', 'GET'], [':method', 'POST'], [':path', '/'], [':path', '/index.html'],
  [':scheme', 'http'], [':scheme', 'https'], [':status', '200'], [':status', '204'], [':status', '206'],
  [':status', '304'], [':status', '400'], [':status', '404'], [':status', '500'], ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'], ['accept-language', ''], ['accept-ranges', ''], ['accept', ''],
  ['access-control-allow-origin', ''], ['age', ''], ['allow', ''], ['authorization', ''], ['cache-control', ''],
  ['content-disposition', ''], ['content-encoding', ''], ['content-language', ''], ['content-length', ''],
  ['content-location', ''], ['content-range', ''], ['content-type', ''], ['cookie', ''], ['date', ''], ['etag', ''],
  ['expect', ''], ['expires', ''], ['from', ''], ['host', ''], ['if-match', ''], ['if-modified-since', ''],
  ['if-none-match', ''], ['if-range', ''], ['if-unmodified-since', ''], ['last-modified', ''], ['link', ''],
  ['location', ''], ['max-forwards', ''], ['proxy-authenticate', ''], ['proxy-authorization', ''], ['range', ''],
  ['referer', ''], ['refresh', ''], ['retry-after', ''], ['server', ''], ['set-cookie', ''],
  ['strict-transport-security', ''], ['transfer-encoding', ''], ['user-agent', ''], ['vary', ''], ['via', ''],
  ['www-authenticate', ''],
];

/** Static-table indexes the encoder uses. */
export const HPACK_INDEX = {
  status200: 8, status: 8, status400: 12, status404: 13, status500: 14,
  cacheControl: 24, contentLength: 28, contentType: 31, date: 33,
} as const;

/** RFC 7541 Appendix B: the Huffman code of each byte value (most significant bit first) and its length in bits. */
export const HUFFMAN_CODES = [
  0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7, 0xfffffe8, 0xffffea, 0x3ffffffc,
  0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec, 0xfffffed, 0xfffffee, 0xfffffef, 0xffffff0, 0xffffff1,
  0xffffff2, 0x3ffffffe, 0xffffff3, 0xffffff4, 0xffffff5, 0xffffff6, 0xffffff7, 0xffffff8, 0xffffff9, 0xffffffa,
  0xffffffb, 0x14, 0x3f8, 0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa, 0x3fa, 0x3fb, 0xf9, 0x7fb, 0xfa, 0x16, 0x17, 0x18,
  0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x5c, 0xfb, 0x7ffc, 0x20, 0xffb, 0x3fc, 0x1ffa, 0x21, 0x5d,
  0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70,
  0x71, 0x72, 0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0, 0x1ffc, 0x3ffc, 0x22, 0x7ffd, 0x3, 0x23, 0x4, 0x24, 0x5, 0x25, 0x26,
  0x27, 0x6, 0x74, 0x75, 0x28, 0x29, 0x2a, 0x7, 0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78, 0x79, 0x7a, 0x7b,
  0x7ffe, 0x7fc, 0x3ffd, 0x1ffd, 0xffffffc, 0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3, 0x3fffd4, 0x3fffd5,
  0x7fffd9, 0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb, 0x7fffdf, 0xffffec, 0xffffed,
  0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3, 0x7fffe4, 0x1fffdc, 0x3fffd8, 0x7fffe5, 0x3fffd9,
  0x7fffe6, 0x7fffe7, 0xffffef, 0x3fffda, 0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8, 0x7fffe9, 0x1fffde,
  0x7fffea, 0x3fffdd, 0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec, 0x1fffe0, 0x1fffe1, 0x3fffe0,
  0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef, 0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4, 0x7ffff0, 0x3fffe5,
  0x3fffe6, 0x7ffff1, 0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1, 0x3fffe7, 0x7ffff2, 0x3fffe8, 0x1ffffec, 0x3ffffe2,
  0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf, 0x3ffffe5, 0xfffff1, 0x1ffffed, 0x7fff2, 0x1fffe3, 0x3ffffe6, 0x7ffffe0,
  0x7ffffe1, 0x3ffffe7, 0x7ffffe2, 0xfffff2, 0x1fffe4, 0x1fffe5, 0x3ffffe8, 0x3ffffe9, 0xffffffd, 0x7ffffe3,
  0x7ffffe4, 0x7ffffe5, 0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7, 0x1fffe8, 0x7ffff3, 0x3fffea,
  0x3fffeb, 0x1ffffee, 0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4, 0x3ffffeb, 0x7ffffe6, 0x3ffffec, 0x3ffffed,
  0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea, 0x7ffffeb, 0xffffffe, 0x7ffffec, 0x7ffffed, 0x7ffffee, 0x7ffffef,
  0x7fffff0, 0x3ffffee,
];
export const HUFFMAN_LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28,
  28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5,
  6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
  23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22, 23,
  23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, 26, 26, 20,
  19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27,
  27, 27, 26,
];
// EOS (256) is 30 ones: as a symbol in a string it is an error; its prefix is the only allowed padding.

/**
 * The Huffman code as a binary tree in one array: node n has children at TREE[2n] (bit 0) and TREE[2n + 1] (bit
 * 1); a child >= 0 is another node, -1 - sym a leaf for byte `sym`, and 0 (the root's index, never a child) none.
 */
const TREE = buildTree();

function buildTree(): Int32Array {
  const tree = new Int32Array(2 * 512);
  let nodes = 1;
  for (let sym = 0; sym < 256; sym++) {
    const code = HUFFMAN_CODES[sym]!;
    const len = HUFFMAN_LENGTHS[sym]!;
    let n = 0;
    for (let i = len - 1; i > 0; i--) {
      const slot = 2 * n + ((code >>> i) & 1);
      if (tree[slot] === 0) tree[slot] = nodes++;
      n = tree[slot]!;
    }
    tree[2 * n + (code & 1)] = -1 - sym;
  }
  return tree;
}

/**
 * Decoded string octets, reused: a string literal becomes one latin1 string made from here, not one string per
 * character. A longer one (a header value may be as long as a header list, 1 MiB + 320) gets a buffer of its own,
 * not kept.
 */
const SCRATCH = Buffer.allocUnsafe(4096);

function room(n: number): Buffer {
  return n <= SCRATCH.length ? SCRATCH : Buffer.allocUnsafe(n);
}

/** A Huffman-coded string (RFC 7541 5.2) as latin1 text; throws on EOS, on padding longer than 7 bits or not all ones. */
export function huffmanDecode(b: Uint8Array, start: number, end: number): string {
  // The shortest code is 5 bits: at most 8/5 symbols per octet.
  const out = room(Math.ceil(((end - start) * 8) / 5));
  let len = 0;
  let n = 0; // the node reached by the bits since the last symbol
  let depth = 0; // how many bits that is
  let ones = true; // all of them were 1
  for (let i = start; i < end; i++) {
    const byte = b[i]!;
    for (let bit = 7; bit >= 0; bit--) {
      const v = (byte >> bit) & 1;
      const next = TREE[2 * n + v]!;
      depth++;
      ones &&= v === 1;
      if (next < 0) {
        out[len++] = -1 - next;
        n = 0;
        depth = 0;
        ones = true;
      } else if (next === 0) {
        throw new HpackError('hpack: invalid Huffman-encoded data'); // EOS, whose 30 bits no byte reaches
      } else {
        n = next;
      }
    }
  }
  if (depth > 7 || !ones) throw new HpackError('hpack: invalid Huffman-encoded data');
  return out.toString('latin1', 0, len);
}

interface Entry { name: string; value: string; size: number }

/**
 * One connection's request decoder. `maxTableSize` is what this side advertised (SETTINGS_HEADER_TABLE_SIZE,
 * Go's and the RFC's default 4096): a size update above it is an error.
 */
export class HpackDecoder {
  /** Newest first (index 62 is entries[0]). */
  private readonly entries: Entry[] = [];
  private tableSize = 0;
  private maxSize: number;
  private readonly limit: number;
  /** The read position in the block being decoded (readInt and readString move it: no [value, position] pairs). */
  private p = 0;
  private end = 0;

  constructor(maxTableSize = 4096) {
    this.maxSize = maxTableSize;
    this.limit = maxTableSize;
  }

  /**
   * Decodes a complete header block (`b` from `start` to `end`), calling `field` for each header in order. Throws
   * HpackError when the block is malformed; the dynamic table is then unusable, and the caller must end the
   * connection.
   */
  decode(b: Buffer, field: (name: string, value: string) => void, start = 0, end = b.length): void {
    this.p = start;
    this.end = end;
    let fields = 0;
    while (this.p < end) {
      const c = b[this.p]!;
      if (c & 0x80) { // indexed field
        const index = this.readInt(b, 7);
        if (index === 0) throw new HpackError('hpack: index 0');
        if (index <= STATIC.length) {
          const e = STATIC[index - 1]!;
          field(e[0], e[1]);
        } else {
          const e = this.dynamic(index);
          field(e.name, e.value);
        }
        fields++;
      } else if ((c & 0xe0) === 0x20) { // dynamic table size update: only before the first field
        const size = this.readInt(b, 5);
        if (fields > 0 || size > this.limit) throw new HpackError('hpack: invalid dynamic table size update');
        this.maxSize = size;
        this.evict(0);
      } else {
        const indexing = (c & 0xc0) === 0x40;
        const index = this.readInt(b, indexing ? 6 : 4);
        const name = index === 0 ? this.readString(b)
          : index <= STATIC.length ? STATIC[index - 1]![0] : this.dynamic(index).name;
        const value = this.readString(b);
        if (indexing) this.add(name, value);
        field(name, value);
        fields++;
      }
    }
  }

  private dynamic(index: number): Entry {
    const e = this.entries[index - STATIC.length - 1];
    if (e === undefined) throw new HpackError(`hpack: invalid indexed representation index ${index}`);
    return e;
  }

  private add(name: string, value: string): void {
    const size = name.length + value.length + 32;
    if (size > this.maxSize) { // larger than the table: it empties the table and is not added (RFC 7541 4.4)
      this.entries.length = 0;
      this.tableSize = 0;
      return;
    }
    this.evict(size);
    this.entries.unshift({ name, value, size });
    this.tableSize += size;
  }

  /** Evicts the oldest entries until `room` more octets fit. */
  private evict(room: number): void {
    while (this.tableSize + room > this.maxSize && this.entries.length > 0) {
      this.tableSize -= this.entries.pop()!.size;
    }
  }

  /** An integer with an N-bit prefix (RFC 7541 5.1); at most 2^28 (no client needs more). */
  private readInt(b: Uint8Array, bits: number): number {
    const max = (1 << bits) - 1;
    let p = this.p;
    let v = b[p]! & max;
    p++;
    if (v === max) {
      let shift = 0;
      for (;;) {
        if (p >= this.end) throw new HpackError('hpack: truncated integer');
        const c = b[p++]!;
        v += (c & 0x7f) * 2 ** shift;
        shift += 7;
        if ((c & 0x80) === 0) break;
        if (shift > 21) throw new HpackError('hpack: integer too large');
      }
    }
    this.p = p;
    return v;
  }

  /** A string literal (RFC 7541 5.2), as latin1 text. */
  private readString(b: Buffer): string {
    if (this.p >= this.end) throw new HpackError('hpack: truncated string');
    const huffman = (b[this.p]! & 0x80) !== 0;
    const len = this.readInt(b, 7);
    const start = this.p;
    const end = start + len;
    if (end > this.end) throw new HpackError('hpack: truncated string');
    this.p = end;
    if (huffman) return huffmanDecode(b, start, end);
    return b.toString('latin1', start, end);
  }
}

/**
 * Builds a reply's header block: fields indexed or literal, never added to a table and never Huffman-coded. The
 * octets are written in place (no array of numbers); one block can be reset and built again for each reply.
 */
export class HpackBlock {
  private buf = Buffer.allocUnsafe(128);
  private len = 0;

  /** Octets written so far. */
  get length(): number {
    return this.len;
  }

  /** Empties the block for the next reply. */
  reset(): this {
    this.len = 0;
    return this;
  }

  /** A field that is in the static table with its value (`:status: 200`...). */
  indexed(index: number): this {
    this.int(0x80, 7, index);
    return this;
  }

  /** A field whose name is the static table's entry `index`, with its own value (latin1). */
  withName(index: number, value: string): this {
    this.int(0x00, 4, index);
    this.string(value);
    return this;
  }

  /** A field whose name is not in the static table (lowercase). */
  literal(name: string, value: string): this {
    this.room(1);
    this.buf[this.len++] = 0x00;
    this.string(name);
    this.string(value);
    return this;
  }

  /** A copy of the block. */
  bytes(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.len));
  }

  /** A block of its own with the same octets (this one may then be reset). */
  clone(): HpackBlock {
    const c = new HpackBlock();
    c.room(this.len);
    c.len = this.copyTo(c.buf, 0);
    return c;
  }

  /** Copies the block into `target` at `offset`; returns the offset after it. */
  copyTo(target: Uint8Array, offset: number): number {
    return offset + this.buf.copy(target, offset, 0, this.len);
  }

  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(2 * this.buf.length, this.len + n));
    this.buf.copy(grown, 0, 0, this.len);
    this.buf = grown;
  }

  /** An integer with an N-bit prefix whose other bits are `flags` (RFC 7541 5.1). */
  private int(flags: number, bits: number, v: number): void {
    this.room(6);
    const max = (1 << bits) - 1;
    if (v < max) {
      this.buf[this.len++] = flags | v;
      return;
    }
    this.buf[this.len++] = flags | max;
    v -= max;
    while (v >= 128) {
      this.buf[this.len++] = (v & 0x7f) | 0x80;
      v = Math.floor(v / 128);
    }
    this.buf[this.len++] = v;
  }

  /** A string literal, not Huffman-coded: its length and its latin1 octets. */
  private string(s: string): void {
    this.int(0, 7, s.length);
    this.room(s.length);
    this.len += this.buf.write(s, this.len, 'latin1');
  }
}
