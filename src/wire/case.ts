// 0x20 (draft-vixie-dnsext-dns0x20): the letters of an upstream query's name are sent in a random case; a resolver
// copies the question as it came, so a reply whose question is not the same bytes did not answer this query. Each
// letter is one more bit an off-path forger must guess, on top of the ID and the source port. Pure byte work here:
// the random bits come from the caller.

import { skipName } from './scan.ts';

const isLetter = (c: number): boolean => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);

/**
 * Sets the case of every ASCII letter of the question name (at 12, uncompressed, ending before `qEnd` - 4) from
 * the bits of `random` from byte `at` on (one per letter, in order; 32 bytes cover any name) and returns how many
 * letters there were: the bits added. 0 when the name is compressed, does not fit, or has no letters or more than
 * the random bits cover; then nothing was changed.
 */
export function randomizeQuestionCase(msg: Uint8Array, qEnd: number, random: Uint8Array, at = 0): number {
  const nameEnd = qEnd - 4;
  let letters = 0;
  let p = 12;
  for (;;) {
    if (p >= nameEnd) return 0;
    const len = msg[p]!;
    if (len === 0) break;
    if ((len & 0xc0) !== 0 || p + 1 + len > nameEnd) return 0;
    for (let i = p + 1; i <= p + len; i++) if (isLetter(msg[i]!)) letters++;
    p += len + 1;
  }
  if (letters === 0 || letters > (random.length - at) * 8) return 0;
  let bit = 0;
  for (let i = 12; i < p; i++) {
    const c = msg[i]!;
    // Length bytes are below 64, so never letters; every letter byte gets the next random bit.
    if (!isLetter(c)) continue;
    msg[i] = ((random[at + (bit >> 3)]! >> (bit & 7)) & 1) === 1 ? c | 0x20 : c & ~0x20;
    bit++;
  }
  return letters;
}

/** The reply's question is, byte for byte, the query's (whose question ends at `qEnd`), letter case included. */
export function questionIdentical(query: Uint8Array, qEnd: number, reply: Uint8Array): boolean {
  if (reply.length < qEnd || reply[4] !== 0 || reply[5] !== 1) return false;
  for (let i = 12; i < qEnd; i++) if (query[i] !== reply[i]) return false;
  return true;
}

/**
 * Gives a reply to a query sent in random case (`sent`) the client's case (`original`, the same name in the case the
 * client asked, both questions ending at `qEnd`), in place: the question, which the names compressed against it
 * follow, and every record owner written out in full that equals the sent name byte for byte (an upstream that
 * does not compress copies the question's spelling there). Other names keep the upstream's spelling, as they would
 * without 0x20. The reply's question must be identical to `sent` (questionIdentical).
 */
export function restoreQuestionCase(reply: Uint8Array, qEnd: number, sent: Uint8Array, original: Uint8Array): void {
  for (let i = 12; i < qEnd; i++) reply[i] = original[i]!; // (no subarray view: this runs for every miss)
  const count = ((reply[6]! << 8) | reply[7]!) + ((reply[8]! << 8) | reply[9]!) + ((reply[10]! << 8) | reply[11]!);
  let off = qEnd;
  for (let i = 0; i < count; i++) {
    if (sameName(reply, off, sent)) copyName(reply, off, original);
    const end = skipName(reply, off);
    if (end < 0 || end + 10 > reply.length) return;
    off = end + 10 + ((reply[end + 8]! << 8) | reply[end + 9]!);
    if (off > reply.length) return;
  }
}

/** The name at `off` in `b` (pointers followed) has the same bytes as the question name of `q`. */
function sameName(b: Uint8Array, off: number, q: Uint8Array): boolean {
  let k = 12;
  for (let hops = 0; hops < 128; hops++) {
    if (off >= b.length) return false;
    const len = b[off]!;
    if ((len & 0xc0) === 0xc0) {
      if (off + 1 >= b.length) return false;
      off = ((len & 0x3f) << 8) | b[off + 1]!;
      continue;
    }
    if ((len & 0xc0) !== 0 || q[k] !== len || off + len >= b.length) return false;
    if (len === 0) return true;
    for (let j = 1; j <= len; j++) if (b[off + j] !== q[k + j]) return false;
    off += len + 1;
    k += len + 1;
  }
  return false;
}

/** Overwrites the name at `off` (checked by sameName) with the question name of `q`, wherever its bytes lie. */
function copyName(b: Uint8Array, off: number, q: Uint8Array): void {
  let k = 12;
  for (let hops = 0; hops < 128; hops++) {
    const len = b[off]!;
    if ((len & 0xc0) === 0xc0) {
      off = ((len & 0x3f) << 8) | b[off + 1]!;
      continue;
    }
    if (len === 0) return;
    for (let j = 1; j <= len; j++) b[off + j] = q[k + j]!;
    off += len + 1;
    k += len + 1;
  }
}
