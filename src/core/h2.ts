// The server side of one HTTP/2 connection (RFC 9113) for the DoH listener (doh.ts), on a TLS socket that
// negotiated h2. Hand-written rather than node:http2 for the hot path: node:http2 builds a Duplex stream (and
// nghttp2 its own stream state) per request, and at DoH's rates that was most of the listener's CPU and the
// largest part of its peak memory (docs/performance-notes.md). A DoH request needs a small part of HTTP/2: one
// request header block, at most a 64 KiB body, one reply; everything else a client may send is parsed and
// answered as RFC 9113 requires (SETTINGS, PING, WINDOW_UPDATE, RST_STREAM, GOAWAY, PRIORITY, CONTINUATION,
// padding), and anything malformed ends the connection with the RFC's error code, never the process.
//
// What the server advertises is what Go's HTTP/2 server (CoreDNS's) does: SETTINGS MAX_FRAME_SIZE 1 MiB,
// MAX_CONCURRENT_STREAMS (the `https` block's max_streams), MAX_HEADER_LIST_SIZE 1 MiB + 320, HEADER_TABLE_SIZE
// 4096, INITIAL_WINDOW_SIZE 1 MiB, then a WINDOW_UPDATE that opens the connection window to 1 MiB.

import type tls from 'node:tls';
import { HpackDecoder, HpackError, type HpackBlock } from './hpack.ts';
import { socketEndpoints, type Endpoints } from './endpoints.ts';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

const Frame = {
  DATA: 0, HEADERS: 1, PRIORITY: 2, RST_STREAM: 3, SETTINGS: 4, PUSH_PROMISE: 5, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;
const Flag = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;
/** RFC 9113 7: error codes. */
export const H2Error = {
  NO_ERROR: 0, PROTOCOL_ERROR: 1, INTERNAL_ERROR: 2, FLOW_CONTROL_ERROR: 3, SETTINGS_TIMEOUT: 4, STREAM_CLOSED: 5,
  FRAME_SIZE_ERROR: 6, REFUSED_STREAM: 7, CANCEL: 8, COMPRESSION_ERROR: 9, ENHANCE_YOUR_CALM: 11,
} as const;
type H2Code = (typeof H2Error)[keyof typeof H2Error];

/** Go's server: 1 MiB frames and windows, header lists of 1 MiB plus 320 bytes of slack. */
const MAX_FRAME = 1 << 20;
const WINDOW = 1 << 20;
const MAX_HEADER_LIST = (1 << 20) + 320;
const TABLE_SIZE = 4096;
const DEFAULT_WINDOW = 65535;
const MAX_WINDOW = 2 ** 31 - 1;
/** Bytes waiting in the socket beyond which the connection stops reading until they drain (a client that does not read). */
const WRITE_HIGH_WATER = 1 << 20;

/** One request stream, from its header block to its reply. */
export class H2Stream {
  readonly id: number;
  readonly method: string;
  readonly path: string;
  /** The Expect header ('' when absent). */
  readonly expect: string;
  /** The client sent END_STREAM (no more body). */
  remoteEnded: boolean;
  /** A reply was given (or the stream was reset): later ones are ignored. */
  done = false;
  /** The body so far (only after `readBody`). */
  onData: ((chunk: Buffer) => void) | undefined;
  onEnd: (() => void) | undefined;
  sendWindow: number;
  recvUnacked = 0;
  /** Body bytes not yet sent for lack of flow-control window. */
  pending: Uint8Array | undefined;

  constructor(id: number, method: string, path: string, expect: string, ended: boolean, sendWindow: number) {
    this.id = id;
    this.method = method;
    this.path = path;
    this.expect = expect;
    this.remoteEnded = ended;
    this.sendWindow = sendWindow;
  }
}

/**
 * A connection's open streams by id. Most connections have one open at a time (a DoH client waiting for each
 * answer): it has a slot of its own, and the Map holds the others; a Map alone, filled and emptied once per
 * request, reallocated its table every few requests.
 */
class OpenStreams {
  private one: H2Stream | undefined;
  private readonly more = new Map<number, H2Stream>();

  get size(): number {
    return (this.one === undefined ? 0 : 1) + this.more.size;
  }

  get(id: number): H2Stream | undefined {
    const one = this.one;
    if (one !== undefined && one.id === id) return one;
    return this.more.size === 0 ? undefined : this.more.get(id);
  }

  has(id: number): boolean {
    return this.get(id) !== undefined;
  }

  add(s: H2Stream): void {
    if (this.one === undefined) this.one = s;
    else this.more.set(s.id, s);
  }

  delete(id: number): void {
    if (this.one !== undefined && this.one.id === id) this.one = undefined;
    else if (this.more.size !== 0) this.more.delete(id);
  }

  /** The open streams, oldest first (a copy: the caller may close some as it goes). */
  list(): H2Stream[] {
    const all = [...this.more.values()];
    if (this.one !== undefined) all.push(this.one);
    return all.sort((a, b) => a.id - b.id);
  }

  clear(): void {
    this.one = undefined;
    this.more.clear();
  }
}

export interface H2Options {
  /** SETTINGS_MAX_CONCURRENT_STREAMS; 0: not advertised (no limit). */
  maxStreams: number;
  /** A connection with no open stream for this long is closed with GOAWAY (Go's IdleTimeout); 0: never. */
  idleMs: number;
  /** A new request: its header block is complete. */
  onStream(conn: H2Connection, stream: H2Stream): void;
}

class ConnectionError extends Error {
  readonly code: H2Code;
  constructor(code: H2Code, message: string) {
    super(message);
    this.code = code;
  }
}

export class H2Connection {
  private readonly socket: tls.TLSSocket;
  /** The connection's addresses, read once (every request of it reports them). */
  readonly endpoints: Endpoints;
  private readonly opts: H2Options;
  private readonly decoder = new HpackDecoder(TABLE_SIZE);
  private readonly streams = new OpenStreams();
  /** Bytes of an incomplete frame (or preface): the chunks so far, their length, and how many the frame needs. */
  private parts: Buffer[] = [];
  private have = 0;
  private need = 0;
  private preface = false;
  private lastStreamId = 0;
  /** A header block in CONTINUATION frames: its stream, END_STREAM, and the fragments so far. */
  private block: { id: number; ended: boolean; parts: Buffer[]; size: number } | undefined;
  private sendWindow = DEFAULT_WINDOW;
  private recvWindow = WINDOW;
  private recvUnacked = 0;
  private peerInitialWindow = DEFAULT_WINDOW;
  private peerMaxFrame = 16384;
  private goingAway = false;
  private closed = false;
  /** The client acknowledged our SETTINGS (their stream limit included). */
  private settingsAcked = false;
  /** Requests handed on and not answered yet, reset streams included (bounded: see `admit`). */
  private working = 0;
  private paused = false;
  /** A reply went out in this event-loop turn; the next ones wait (see `reply`). */
  private busy = false;
  private readonly waiting: Array<[H2Stream, HpackBlock, Uint8Array | undefined]> = [];
  /** The request header block being decoded (see `onField`): what the stream needs of it, and whether it is valid. */
  private method = '';
  private path = '';
  private expect = '';
  private headerSize = 0;
  private pseudoDone = false;
  private badHeaders = false;
  private readonly closedListeners: Array<() => void> = [];

  constructor(socket: tls.TLSSocket, opts: H2Options) {
    this.socket = socket;
    this.opts = opts;
    this.endpoints = socketEndpoints(socket);
    const s: Array<[number, number]> = [[0x5, MAX_FRAME]];
    if (opts.maxStreams > 0) s.push([0x3, opts.maxStreams]);
    s.push([0x6, MAX_HEADER_LIST], [0x1, TABLE_SIZE], [0x4, WINDOW]);
    const settings = Buffer.alloc(6 * s.length);
    s.forEach(([id, v], i) => { settings.writeUInt16BE(id, 6 * i); settings.writeUInt32BE(v, 6 * i + 2); });
    const inc = Buffer.alloc(4);
    inc.writeUInt32BE(WINDOW - DEFAULT_WINDOW);
    socket.write(Buffer.concat([frame(Frame.SETTINGS, 0, 0, settings), frame(Frame.WINDOW_UPDATE, 0, 0, inc)]));
    socket.on('data', (chunk: Buffer) => { this.onData(chunk); });
    socket.on('end', () => { this.destroy(); });
    socket.on('error', () => { this.destroy(); });
    socket.on('close', () => { this.onClose(); });
    socket.on('drain', () => { this.admit(); });
    if (opts.idleMs > 0) {
      socket.setTimeout(opts.idleMs);
      socket.on('timeout', () => { if (this.streams.size === 0 && this.working === 0) this.goaway(H2Error.NO_ERROR, true); });
    }
  }

  /** Called once the connection is closed. */
  onClosed(f: () => void): void {
    if (this.closed) f();
    else this.closedListeners.push(f);
  }

  /** Graceful stop: GOAWAY, no new streams; the connection closes once the open ones are answered. */
  close(): void {
    this.goaway(H2Error.NO_ERROR, false);
    this.endIfDone();
  }

  destroy(): void {
    if (!this.socket.destroyed) this.socket.destroy();
  }

  // --- reading -------------------------------------------------------------------------------------

  private onData(chunk: Buffer): void {
    if (this.have + chunk.length < this.need) {
      // A large frame arriving in pieces: gathered, and copied together once it is complete.
      this.parts.push(chunk);
      this.have += chunk.length;
      return;
    }
    let b = this.have === 0 ? chunk : Buffer.concat([...this.parts, chunk]);
    this.parts = [];
    this.have = 0;
    this.need = 0;
    try {
      if (!this.preface) {
        if (b.length < PREFACE.length) {
          if (!PREFACE.subarray(0, b.length).equals(b)) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'bad preface');
          this.keep(b, PREFACE.length);
          return;
        }
        if (!PREFACE.equals(b.subarray(0, PREFACE.length))) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'bad preface');
        this.preface = true;
        b = b.subarray(PREFACE.length);
      }
      let p = 0;
      let need = 9;
      while (b.length - p >= 9 && !this.closed) {
        const len = (b[p]! << 16) | (b[p + 1]! << 8) | b[p + 2]!;
        if (len > MAX_FRAME) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'frame too large');
        need = 9 + len;
        if (b.length - p < need) break;
        need = 9;
        const type = b[p + 3]!;
        const flags = b[p + 4]!;
        const id = b.readUInt32BE(p + 5) & 0x7fffffff;
        this.onFrame(type, flags, id, b, p + 9, p + 9 + len);
        p += 9 + len;
      }
      if (p < b.length && !this.closed) this.keep(b.subarray(p), need);
    } catch (e) {
      // A protocol or HPACK error ends the connection with its code; anything else (a bug) with INTERNAL_ERROR:
      // one connection, never the server.
      this.goaway(e instanceof ConnectionError ? e.code : e instanceof HpackError ? H2Error.COMPRESSION_ERROR : H2Error.INTERNAL_ERROR, true);
    }
  }

  /** The start of an incomplete frame, copied (it may be a small view of a large read), and the bytes it needs. */
  private keep(rest: Buffer, need: number): void {
    this.parts = [Buffer.from(rest)];
    this.have = rest.length;
    this.need = need;
  }

  /** One frame, its payload `b` from `start` to `end` (a view is made only for the frame types that keep one). */
  private onFrame(type: number, flags: number, id: number, b: Buffer, start: number, end: number): void {
    if (this.block !== undefined && type !== Frame.CONTINUATION) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'expected CONTINUATION');
    if (type === Frame.HEADERS) {
      this.onHeaders(flags, id, b, start, end);
      return;
    }
    const payload = b.subarray(start, end);
    switch (type) {
      case Frame.DATA: this.onDataFrame(flags, id, payload); break;
      case Frame.PRIORITY:
        if (id === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'PRIORITY on stream 0');
        if (payload.length !== 5) this.resetStream(id, H2Error.FRAME_SIZE_ERROR);
        break;
      case Frame.RST_STREAM: {
        if (id === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
        if (payload.length !== 4) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'RST_STREAM size');
        if (id > this.lastStreamId) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'RST_STREAM on an idle stream');
        const s = this.streams.get(id);
        if (s !== undefined) {
          s.done = true;
          this.streams.delete(id);
          this.endIfDone();
        }
        break;
      }
      case Frame.SETTINGS: this.onSettings(flags, id, payload); break;
      case Frame.PUSH_PROMISE: throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'PUSH_PROMISE from a client');
      case Frame.PING:
        if (id !== 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'PING on a stream');
        if (payload.length !== 8) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'PING size');
        if ((flags & Flag.ACK) === 0) this.write(frame(Frame.PING, Flag.ACK, 0, payload));
        break;
      case Frame.GOAWAY:
        if (id !== 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'GOAWAY on a stream');
        this.goingAway = true;
        this.endIfDone();
        break;
      case Frame.WINDOW_UPDATE: this.onWindowUpdate(id, payload); break;
      case Frame.CONTINUATION: {
        const blk = this.block;
        if (blk === undefined || blk.id !== id) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'unexpected CONTINUATION');
        blk.parts.push(Buffer.from(payload));
        blk.size += payload.length;
        if (blk.size > MAX_HEADER_LIST) throw new ConnectionError(H2Error.ENHANCE_YOUR_CALM, 'header block too large');
        if (flags & Flag.END_HEADERS) {
          this.block = undefined;
          const whole = Buffer.concat(blk.parts);
          this.onHeaderBlock(id, blk.ended, whole, 0, whole.length);
        }
        break;
      }
      default: break; // unknown frame types are ignored (RFC 9113 4.1)
    }
  }

  /**
   * Where a frame's content starts, after its Pad Length octet (PADDED flag) and `extra` octets (HEADERS' priority
   * fields); `contentEnd` is where its padding starts. Both check the lengths.
   */
  private static contentStart(flags: number, b: Buffer, start: number, end: number, extra: number): number {
    const min = (flags & Flag.PADDED) === 0 ? extra : 1 + extra;
    if (end - start < min) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'frame too short');
    if ((flags & Flag.PADDED) !== 0 && min + b[start]! > end - start) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'padding too long');
    return start + min;
  }

  private static contentEnd(flags: number, b: Buffer, start: number, end: number): number {
    return (flags & Flag.PADDED) === 0 ? end : end - b[start]!;
  }

  private onHeaders(flags: number, id: number, b: Buffer, start: number, end: number): void {
    if (id === 0 || (id & 1) === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'bad stream id');
    const from = H2Connection.contentStart(flags, b, start, end, flags & Flag.PRIORITY ? 5 : 0);
    const to = H2Connection.contentEnd(flags, b, start, end);
    const ended = (flags & Flag.END_STREAM) !== 0;
    if ((flags & Flag.END_HEADERS) === 0) {
      this.block = { id, ended, parts: [Buffer.from(b.subarray(from, to))], size: to - from };
      return;
    }
    this.onHeaderBlock(id, ended, b, from, to);
  }

  /** One field of the request header block being decoded: one function per connection, its state in fields. */
  private readonly onField = (name: string, value: string): void => {
    this.headerSize += name.length + value.length + 32;
    if (name.charCodeAt(0) === 58 /* : */) {
      if (this.pseudoDone) this.badHeaders = true;
      if (name === ':method') this.method = value;
      else if (name === ':path') this.path = value;
      else if (name !== ':scheme' && name !== ':authority') this.badHeaders = true;
    } else {
      this.pseudoDone = true;
      if (name === 'expect') this.expect = this.expect === '' ? value : `${this.expect}, ${value}`;
      else if (name !== name.toLowerCase()) this.badHeaders = true;
    }
  };

  private onHeaderBlock(id: number, ended: boolean, b: Buffer, start: number, end: number): void {
    this.method = '';
    this.path = '';
    this.expect = '';
    this.headerSize = 0;
    this.pseudoDone = false;
    this.badHeaders = false;
    // Decoded whatever happens to the stream: the dynamic table is the connection's.
    this.decoder.decode(b, this.onField, start, end);
    const { method, path, expect, headerSize: size, badHeaders: bad } = this;
    const existing = this.streams.get(id);
    if (existing !== undefined) {
      // Trailers: they must end the stream.
      if (!ended) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'HEADERS without END_STREAM on an open stream');
      this.remoteEnd(existing);
      return;
    }
    if (id <= this.lastStreamId) return; // a stream closed already (answered, or reset): ignored
    this.lastStreamId = id;
    if (this.goingAway) return; // after our GOAWAY: ignored (its id is above the last one we announced)
    if (bad || method === '' || (path === '' && method !== 'CONNECT') || size > MAX_HEADER_LIST) {
      this.write(rst(id, H2Error.PROTOCOL_ERROR));
      return;
    }
    if (this.opts.maxStreams > 0 && this.streams.size >= this.opts.maxStreams) {
      // As Go's server: a client that acknowledged the limit broke it (PROTOCOL_ERROR); before that, a race.
      this.write(rst(id, this.settingsAcked ? H2Error.PROTOCOL_ERROR : H2Error.REFUSED_STREAM));
      return;
    }
    const s = new H2Stream(id, method, path, expect, ended, this.peerInitialWindow);
    this.streams.add(s);
    this.working++;
    this.admit();
    this.opts.onStream(this, s);
  }

  private onDataFrame(flags: number, id: number, payload: Buffer): void {
    if (id === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'DATA on stream 0');
    if (id > this.lastStreamId) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'DATA on an idle stream');
    // Flow control counts the whole payload, padding included.
    this.recvWindow -= payload.length;
    if (this.recvWindow < 0) throw new ConnectionError(H2Error.FLOW_CONTROL_ERROR, 'connection window exceeded');
    this.recvUnacked += payload.length;
    if (this.recvUnacked >= WINDOW / 2) {
      this.write(windowUpdate(0, this.recvUnacked));
      this.recvWindow += this.recvUnacked;
      this.recvUnacked = 0;
    }
    const n = payload.length;
    const data = payload.subarray(H2Connection.contentStart(flags, payload, 0, n, 0), H2Connection.contentEnd(flags, payload, 0, n));
    const s = this.streams.get(id);
    if (s === undefined || s.remoteEnded) {
      if (s !== undefined) this.resetStream(id, H2Error.STREAM_CLOSED);
      return;
    }
    s.recvUnacked += payload.length;
    if (s.recvUnacked > WINDOW) {
      this.resetStream(id, H2Error.FLOW_CONTROL_ERROR);
      return;
    }
    if (s.recvUnacked >= WINDOW / 2 && (flags & Flag.END_STREAM) === 0) {
      this.write(windowUpdate(id, s.recvUnacked));
      s.recvUnacked = 0;
    }
    if (data.length > 0) s.onData?.(data);
    if (flags & Flag.END_STREAM) this.remoteEnd(s);
  }

  private remoteEnd(s: H2Stream): void {
    s.remoteEnded = true;
    s.onEnd?.();
  }

  private onSettings(flags: number, id: number, payload: Buffer): void {
    if (id !== 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if (flags & Flag.ACK) {
      if (payload.length !== 0) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'SETTINGS ACK with a payload');
      this.settingsAcked = true;
      return;
    }
    if (payload.length % 6 !== 0) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'SETTINGS size');
    for (let p = 0; p < payload.length; p += 6) {
      const key = payload.readUInt16BE(p);
      const v = payload.readUInt32BE(p + 2);
      if (key === 0x2 && v > 1) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'ENABLE_PUSH');
      if (key === 0x4) {
        if (v > MAX_WINDOW) throw new ConnectionError(H2Error.FLOW_CONTROL_ERROR, 'INITIAL_WINDOW_SIZE');
        const delta = v - this.peerInitialWindow;
        this.peerInitialWindow = v;
        for (const s of this.streams.list()) s.sendWindow += delta;
      }
      if (key === 0x5) {
        if (v < 16384 || v > 16777215) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'MAX_FRAME_SIZE');
        this.peerMaxFrame = v;
      }
    }
    this.write(frame(Frame.SETTINGS, Flag.ACK, 0, Buffer.alloc(0)));
    this.flushPending();
  }

  private onWindowUpdate(id: number, payload: Buffer): void {
    if (payload.length !== 4) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'WINDOW_UPDATE size');
    const inc = payload.readUInt32BE(0) & 0x7fffffff;
    if (id === 0) {
      if (inc === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'WINDOW_UPDATE of 0');
      this.sendWindow += inc;
      if (this.sendWindow > MAX_WINDOW) throw new ConnectionError(H2Error.FLOW_CONTROL_ERROR, 'connection window overflow');
    } else {
      const s = this.streams.get(id);
      if (s === undefined) return;
      if (inc === 0) {
        this.resetStream(id, H2Error.PROTOCOL_ERROR);
        return;
      }
      s.sendWindow += inc;
      if (s.sendWindow > MAX_WINDOW) {
        this.resetStream(id, H2Error.FLOW_CONTROL_ERROR);
        return;
      }
    }
    this.flushPending();
  }

  // --- writing -------------------------------------------------------------------------------------

  /** Reads the request body: `onData` per chunk, `onEnd` once it is complete. */
  readBody(s: H2Stream, onData: (chunk: Buffer) => void, onEnd: () => void): void {
    s.onData = onData;
    s.onEnd = onEnd;
    if (s.remoteEnded) onEnd();
  }

  /** An interim 100 (Continue) on a stream still open. */
  interim(s: H2Stream, block: HpackBlock): void {
    if (s.done || this.closed) return;
    this.write(headersFrame(s.id, Flag.END_HEADERS, block));
  }

  /**
   * The stream's reply: `block` (an encoded header block, copied: the caller may reuse it), then `body` in DATA
   * frames with END_STREAM. A connection sends at most one reply per event-loop turn, each in its own socket write
   * (so its own TLS record): clients that read one TLS record per DNS message, as dnsperf's DoH client does, stall
   * when two replies share a record.
   */
  reply(s: H2Stream, block: HpackBlock, body: Uint8Array | undefined): void {
    this.working--;
    this.admit();
    if (s.done || this.closed) {
      this.endIfDone();
      return;
    }
    s.done = true;
    if (this.busy) {
      this.waiting.push([s, block.clone(), body]);
      return;
    }
    this.send(s, block, body);
    this.busy = true;
    nextTurnOf(this);
  }

  /** @internal the next waiting reply, one per turn */
  nextTurn(): void {
    for (;;) {
      const next = this.waiting.shift();
      if (next === undefined) {
        this.busy = false;
        return;
      }
      if (this.closed || !this.streams.has(next[0].id)) continue; // reset meanwhile
      this.send(next[0], next[1], next[2]);
      nextTurnOf(this);
      return;
    }
  }

  private send(s: H2Stream, block: HpackBlock, body: Uint8Array | undefined): void {
    if (!this.streams.has(s.id)) return; // reset meanwhile
    const n = body === undefined ? 0 : body.length;
    const blockLength = block.length;
    if (n === 0) {
      this.write(headersFrame(s.id, Flag.END_HEADERS | Flag.END_STREAM, block));
      this.finished(s);
      return;
    }
    if (n <= this.peerMaxFrame && n <= this.sendWindow && n <= s.sendWindow) {
      // The usual reply: HEADERS and one DATA frame, written straight into one buffer.
      const out = Buffer.allocUnsafe(18 + blockLength + n);
      frameHeader(out, 0, blockLength, Frame.HEADERS, Flag.END_HEADERS, s.id);
      const at = block.copyTo(out, 9);
      frameHeader(out, at, n, Frame.DATA, Flag.END_STREAM, s.id);
      out.set(body!, at + 9);
      this.sendWindow -= n;
      s.sendWindow -= n;
      this.write(out);
      this.finished(s);
      return;
    }
    const parts: Buffer[] = [headersFrame(s.id, Flag.END_HEADERS, block)];
    s.pending = body;
    this.dataFrames(s, parts);
    this.write(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
    if (s.pending === undefined) this.finished(s);
  }

  /** Appends as much of the stream's pending body as the windows and frame size allow. */
  private dataFrames(s: H2Stream, parts: Buffer[]): void {
    let body = s.pending!;
    while (body.length > 0) {
      const n = Math.min(body.length, this.peerMaxFrame, this.sendWindow, s.sendWindow);
      if (n <= 0) break;
      const last = n === body.length;
      parts.push(frame(Frame.DATA, last ? Flag.END_STREAM : 0, s.id, body.subarray(0, n)));
      this.sendWindow -= n;
      s.sendWindow -= n;
      body = body.subarray(n);
    }
    s.pending = body.length === 0 ? undefined : body;
  }

  /** Bodies that waited for window: as much as now fits. */
  private flushPending(): void {
    for (const s of this.streams.list()) {
      if (s.pending === undefined) continue;
      const parts: Buffer[] = [];
      this.dataFrames(s, parts);
      if (parts.length > 0) this.write(Buffer.concat(parts));
      if (s.pending === undefined) this.finished(s);
      if (this.sendWindow <= 0) break;
    }
  }

  /** The reply is out: a client still sending its body is told to stop (Go sends RST_STREAM NO_ERROR too). */
  private finished(s: H2Stream): void {
    if (!s.remoteEnded) this.write(rst(s.id, H2Error.NO_ERROR));
    this.streams.delete(s.id);
    this.endIfDone();
  }

  private resetStream(id: number, code: H2Code): void {
    const s = this.streams.get(id);
    if (s !== undefined) {
      s.done = true;
      this.streams.delete(id);
    }
    this.write(rst(id, code));
    this.endIfDone();
  }

  private write(b: Buffer): void {
    if (this.closed || this.socket.destroyed) return;
    this.socket.write(b);
    if (this.socket.writableLength > WRITE_HIGH_WATER) this.admit();
  }

  /**
   * Reading stops while the client does not read its replies, or while more requests are being answered than the
   * stream limit allows (streams reset before their answer still count: a client cannot start unbounded work).
   */
  private admit(): void {
    const limit = 2 * (this.opts.maxStreams > 0 ? this.opts.maxStreams : 250);
    const stop = this.working >= limit || this.socket.writableLength > WRITE_HIGH_WATER;
    if (stop && !this.paused) {
      this.paused = true;
      this.socket.pause();
    } else if (!stop && this.paused) {
      this.paused = false;
      this.socket.resume();
    }
  }

  /** GOAWAY with the last stream id seen; `now`: the connection ends at once (an error, or idle). */
  private goaway(code: H2Code, now: boolean): void {
    if (this.closed) return;
    if (!this.goingAway || now) {
      const b = Buffer.alloc(8);
      b.writeUInt32BE(this.lastStreamId, 0);
      b.writeUInt32BE(code, 4);
      this.write(frame(Frame.GOAWAY, 0, 0, b));
    }
    this.goingAway = true;
    if (now) {
      this.closed = true;
      this.socket.end();
      // a client that does not close its side is not waited for
      setTimeout(() => { this.destroy(); }, 1000).unref();
    }
  }

  /** After a GOAWAY (ours or the client's): the connection ends once nothing is open or being answered. */
  private endIfDone(): void {
    if (!this.goingAway || this.closed || this.streams.size > 0 || this.working > 0 || this.waiting.length > 0) return;
    this.closed = true;
    this.socket.end();
    setTimeout(() => { this.destroy(); }, 1000).unref();
  }

  private onClose(): void {
    this.closed = true;
    this.streams.clear();
    this.waiting.length = 0;
    for (const f of this.closedListeners.splice(0)) f();
  }
}

/**
 * Connections that sent a reply in this event-loop turn, whose next waiting reply goes out in the next turn: one
 * setImmediate for all of them (two lists, swapped, so that a turn's replies can queue the next turn's).
 */
let turnQueue: H2Connection[] = [];
let turnRunning: H2Connection[] = [];
let turnScheduled = false;

function nextTurnOf(c: H2Connection): void {
  turnQueue.push(c);
  if (!turnScheduled) {
    turnScheduled = true;
    setImmediate(runTurn);
  }
}

function runTurn(): void {
  turnScheduled = false;
  const due = turnQueue;
  turnQueue = turnRunning;
  turnRunning = due;
  for (let i = 0; i < due.length; i++) {
    const c = due[i]!;
    try {
      c.nextTurn();
    } catch {
      c.destroy(); // a bug ends this connection, as an error in its frames does, not the others' turns
    }
  }
  due.length = 0;
}

/** Writes a frame header (RFC 9113 4.1) at `at`. */
function frameHeader(b: Buffer, at: number, length: number, type: number, flags: number, id: number): void {
  b[at] = length >>> 16;
  b[at + 1] = (length >>> 8) & 0xff;
  b[at + 2] = length & 0xff;
  b[at + 3] = type;
  b[at + 4] = flags;
  b.writeUInt32BE(id, at + 5);
}

/** A HEADERS frame carrying all of `block`. */
function headersFrame(id: number, flags: number, block: HpackBlock): Buffer {
  const b = Buffer.allocUnsafe(9 + block.length);
  frameHeader(b, 0, block.length, Frame.HEADERS, flags, id);
  block.copyTo(b, 9);
  return b;
}

function frame(type: number, flags: number, id: number, payload: Uint8Array): Buffer {
  const b = Buffer.allocUnsafe(9 + payload.length);
  frameHeader(b, 0, payload.length, type, flags, id);
  b.set(payload, 9);
  return b;
}

function rst(id: number, code: H2Code): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(code);
  return frame(Frame.RST_STREAM, 0, id, b);
}

function windowUpdate(id: number, inc: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(inc);
  return frame(Frame.WINDOW_UPDATE, 0, id, b);
}
