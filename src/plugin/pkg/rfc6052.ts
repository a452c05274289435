// RFC 6052, IPv4-embedded IPv6 addresses, as the dns64 and siit plugins use
// them: the embedding and extraction of section 2.2 and the checks their
// setup makes of a prefix.

import type { Dispenser } from '../../corefile/dispenser.ts';
import { goQuote } from '../../corefile/address.ts';
import { formatIPNetGo, parseCidr } from '../../wire/ip.ts';
import type { Cidr } from '../../wire/ip.ts';

/** The prefix lengths section 2.2 defines. */
const LENGTHS = new Set([32, 40, 48, 56, 64, 96]);

/**
 * Section 2.2: the IPv4 address `v4` (unsigned 32-bit) embedded in `prefix`
 * (32, 40, 48, 56, 64 or 96 bits); bits 64-71 (the "u" octet) stay zero.
 */
export function embedIPv4(prefix: Cidr, v4: number): Uint8Array {
  const out = new Uint8Array(16);
  const a = [v4 >>> 24, (v4 >>> 16) & 255, (v4 >>> 8) & 255, v4 & 255];
  const n = prefix.bits >> 3;
  let i = 0;
  let j = 0;
  for (; i < n; i++) out[i] = prefix.bytes[i];
  for (; i < 8; i++, j++) out[i] = a[j];
  if (i === 8) i++;
  for (; j < 4; i++, j++) out[i] = a[j];
  return out;
}

/** The reverse of embedIPv4: the IPv4 address in `v6` (16 bytes) after a prefix of `bits`, skipping the "u" octet. */
export function extractIPv4(v6: Uint8Array, bits: number): Uint8Array {
  const out = new Uint8Array(4);
  let i = bits >> 3;
  let j = 0;
  for (; i < 8; i++, j++) out[j] = v6[i];
  if (i === 8) i++;
  for (; j < 4; i++, j++) out[j] = v6[i];
  return out;
}

/**
 * A prefix argument: an IPv6 CIDR (CoreDNS's messages for anything else) of
 * one of section 2.2's lengths; `lengthError` words the refusal of another
 * length, which dns64 and siit put differently.
 */
export function parsePrefix(d: Dispenser, text: string, lengthError: (net: string) => string): Cidr {
  const c = parseCidr(text);
  // net.ParseCIDR's own error carries no position.
  if (c === undefined) throw new Error(`invalid CIDR address: ${text}`);
  if (c.bytes.length !== 16) throw d.errf(`invalid netmask ${c.bytes.length * 8} IPv6 address: ${goQuote(formatIPNetGo(c))}`);
  if (!LENGTHS.has(c.bits)) throw d.errf(lengthError(goQuote(formatIPNetGo(c))));
  return c;
}
