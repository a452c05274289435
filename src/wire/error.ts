import type { Message } from './types.ts';

/**
 * Every failure of the codec (malformed wire data, a value that cannot be encoded, unparsable
 * text) is a WireError. `code` is a short machine-readable reason:
 *   SHORT          data ends inside a field or record (also: a section count that runs into half a record)
 *   BAD_POINTER    compression pointer that does not point strictly backwards, or too many of them
 *   BAD_LABEL      reserved label type (0x40/0x80), empty label, or a label over 63 octets
 *   NAME_TOO_LONG  name over 255 wire octets
 *   BAD_RDATA      rdata inconsistent with its type or rdlength
 *   TOO_LONG       message over 65535 octets (encoding)
 *   BAD_VALUE      a field that cannot be encoded (bad address, rcode > 15 without EDNS, ...)
 *   PARSE          presentation-format text that cannot be parsed
 *   INTERNAL       an unexpected exception while decoding (a bug: please report)
 * `partial` (decoding only) holds the header and the questions parsed before the failure.
 */
export class WireError extends Error {
  readonly code: string;
  readonly partial?: Message;
  constructor(code: string, message: string, partial?: Message) {
    super(message);
    this.name = 'WireError';
    this.code = code;
    if (partial !== undefined) this.partial = partial;
  }
}
