// Response writers that watch what the rest of the chain writes:
//
//  * Recorder (CoreDNS dnstest.Recorder): records rcode, size and the last
//    message, and passes every reply on to the wrapped writer (log).
//  * NonWriter (CoreDNS nonwriter): records the last message and sends
//    nothing; the owner decides what to write (minimal).
//
// A reply may arrive as a Message (writeMsg) or as finished wire bytes
// (writeWire, e.g. a cache hit). Wire replies are decoded once here and
// handed on as a Message, so the writer further out does not decode again.

import type { ResponseWriter } from '../plugin.ts';
import type { Message } from '../../wire/types.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { messageLength } from '../../wire/msglen.ts';

export class Recorder implements ResponseWriter {
  /** The writer replies are passed on to. */
  readonly inner: ResponseWriter;
  /** Rcode of the last reply written (0 until one is). */
  rcode = 0;
  /** Sum of the uncompressed lengths of all replies written. */
  len = 0;
  /** The last reply written, undefined when nothing was written. */
  msg: Message | undefined = undefined;
  /** Number of replies written. */
  writes = 0;

  constructor(inner: ResponseWriter) {
    this.inner = inner;
  }

  writeMsg(reply: Message): void {
    // Length first: the writer further out may add an OPT record to the same object.
    this.len += messageLength(reply);
    this.rcode = reply.rcode;
    this.msg = reply;
    this.writes++;
    this.inner.writeMsg(reply);
  }

  writeWire(reply: Uint8Array): void {
    let m: Message;
    try {
      m = decodeMessage(reply);
    } catch {
      // Not decodable: let the outer writer deal with it (it logs and drops it).
      this.len += reply.length;
      this.writes++;
      this.inner.writeWire(reply);
      return;
    }
    this.writeMsg(m);
  }
}

export class NonWriter implements ResponseWriter {
  /** The last reply written, undefined when nothing was written. */
  msg: Message | undefined = undefined;

  writeMsg(reply: Message): void {
    this.msg = reply;
  }

  writeWire(reply: Uint8Array): void {
    this.msg = decodeMessage(reply);
  }
}
