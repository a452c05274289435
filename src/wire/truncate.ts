// Fitting a reply into the client's buffer, as CoreDNS's `request.Scrub` does (which calls
// miekg/dns `Msg.Truncate`):
//   - maxSize below 512 counts as 512 (RFC 6891, miekg);
//   - if the reply packed WITHOUT compression fits, it is sent uncompressed — unless
//     `compressAbove` is given (UDP: 1480 for IPv4 clients, 1220 for IPv6) and the uncompressed
//     length exceeds it, in which case it is compressed anyway (fragmentation avoidance);
//   - otherwise compression is switched on, the OPT set aside, whole records kept in order
//     Answer → Authority → Additional while the running compressed length stays within
//     maxSize − OPT length, the rest dropped, TC set if any was dropped, the OPT re-appended;
//   - a message whose last additional record is a TSIG is never truncated (miekg); only the
//     compressAbove rule applies to it;
//   - a reply over 65535 octets uncompressed is no error: it is compressed and, when that is
//     still more than maxSize, truncated like any other.

import { copyLastEncoded, encodeMessage, encodeTruncated, plainLengthWithin } from './encode.ts';
import type { Message } from './types.ts';
import { RRType } from './constants.ts';

export function encodeWithin(
  msg: Message,
  maxSize: number,
  opts: { compressAbove?: number } = {},
): { wire: Uint8Array; truncated: boolean } {
  const size = maxSize < 512 ? 512 : maxSize > MAX_MSG ? MAX_MSG : maxSize;
  const ar = msg.additional;
  const tsig = ar.length > 0 && ar[ar.length - 1].type === RRType.TSIG;
  // plainLen above 65535 only says "too long" (the rest was not encoded): such a reply is
  // compressed and, when still more than `size`, truncated like any other (CoreDNS: 4500 A records
  // of one name over TCP go out as the first 4093, TC set, in 65521 octets — not as an error).
  const plainLen = plainLengthWithin(msg);
  if (plainLen <= size || tsig) {
    const above = opts.compressAbove;
    if (above !== undefined && plainLen > above) return { wire: encodeMessage(msg, { compress: true }), truncated: false };
    // A TSIG-signed reply is never truncated: over 65535 octets it cannot be sent (TOO_LONG).
    if (plainLen > MAX_MSG) return { wire: encodeMessage(msg), truncated: false };
    return { wire: copyLastEncoded(plainLen), truncated: false };
  }
  return encodeTruncated(msg, size);
}

const MAX_MSG = 65535;
