// Walking a wire message without decoding it: used on the hot path to find
// the OPT record of a ready-made reply so it can be patched in place.

/** Offset just past the name at `off`, or -1 when it runs off the buffer. */
export function skipName(buf: Uint8Array, off: number): number {
  for (let hops = 0; hops < 128; hops++) {
    if (off >= buf.length) return -1;
    const len = buf[off]!;
    if (len === 0) return off + 1;
    if ((len & 0xc0) === 0xc0) return off + 2 <= buf.length ? off + 2 : -1;
    if (len & 0xc0) return -1;
    off += len + 1;
  }
  return -1;
}

/**
 * Offset of the OPT record (its owner name byte) in the additional section;
 * -1 when there is none, -2 when the message is malformed.
 */
export function findOptRecord(buf: Uint8Array): number {
  if (buf.length < 12) return -2;
  const qd = (buf[4]! << 8) | buf[5]!;
  const an = (buf[6]! << 8) | buf[7]!;
  const ns = (buf[8]! << 8) | buf[9]!;
  const ar = (buf[10]! << 8) | buf[11]!;
  let off = 12;
  for (let i = 0; i < qd; i++) {
    off = skipName(buf, off);
    if (off < 0 || off + 4 > buf.length) return -2;
    off += 4;
  }
  const before = an + ns;
  for (let i = 0; i < before + ar; i++) {
    const start = off;
    off = skipName(buf, off);
    if (off < 0 || off + 10 > buf.length) return -2;
    const type = (buf[off]! << 8) | buf[off + 1]!;
    const rdlen = (buf[off + 8]! << 8) | buf[off + 9]!;
    if (i >= before && type === 41) return start;
    off += 10 + rdlen;
    if (off > buf.length) return -2;
  }
  return -1;
}
