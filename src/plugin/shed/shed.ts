// CoreDNS's shed plugin, for Node. In CoreDNS one goroutine per query writes its reply to the shared UDP
// socket, and a storm piles goroutines up on the socket's fdMutex until the runtime panics; shed makes one
// writer per socket with a bounded stack in front of it. In Node the same storm has no lock to pile up on,
// but every reply handed to `dgram.Socket.send` is kept (with its bytes) until libuv reports it sent: an
// unbounded queue per socket. The writer here bounds it: at most IN_FLIGHT_MAX replies handed to the socket
// and not yet reported sent; the others wait in a stack of STACK_DEPTH, newest sent first, the oldest evicted
// when it is full. While a socket's stack is full, the Shed handler drops queries that arrive on it before
// the rest of the chain runs. Every drop is counted in coredns_shed_dropped_total.

import type { Handler, HandlerResult, PluginLogger, Request, ResponseWriter, UdpSocket, UdpWriter } from '../plugin.ts';
import { nextOrFailure } from '../pkg/next.ts';
import type { CounterChild } from '../pkg/vec.ts';
import { Rcode } from '../../wire/constants.ts';
import { shedMetrics } from './metrics.ts';
import type { CounterVec } from '../pkg/vec.ts';

/** Replies that may wait for a socket (CoreDNS's fixed burst budget; not a knob). */
export const STACK_DEPTH = 1024;
/** Replies handed to the socket and not yet reported sent before further ones wait in the stack. */
export const IN_FLIGHT_MAX = 256;

/** One UDP socket's writer: the stack, the replies in flight, its two counters. */
export class ShedWriter implements UdpWriter {
  readonly localAddress: string;
  readonly localPort: number;
  readonly droppedQuery: CounterChild;
  readonly droppedResponse: CounterChild;
  private readonly sock: UdpSocket;
  private readonly log: PluginLogger;
  private readonly depth: number;
  private readonly maxInFlight: number;
  // The stack: a ring with one insertion cursor; the `size` slots before `top` are occupied, so when it is
  // full the slot at `top` holds the oldest entry and pushing over it is the eviction.
  private readonly msgs: (Uint8Array | undefined)[];
  private readonly ports: Uint16Array;
  private readonly addrs: string[];
  private top = 0;
  private size = 0;
  private inFlight = 0;

  constructor(sock: UdpSocket, server: string, localAddress: string, localPort: number, log: PluginLogger,
    depth = STACK_DEPTH, maxInFlight = IN_FLIGHT_MAX, droppedTotal: CounterVec = shedMetrics()) {
    this.sock = sock;
    this.localAddress = localAddress;
    this.localPort = localPort;
    this.log = log;
    this.depth = depth;
    this.maxInFlight = maxInFlight;
    this.msgs = new Array<Uint8Array | undefined>(depth).fill(undefined);
    this.ports = new Uint16Array(depth);
    this.addrs = new Array<string>(depth).fill('');
    this.droppedQuery = droppedTotal.child(server, 'query');
    this.droppedResponse = droppedTotal.child(server, 'response');
  }

  /** The stack is full: the socket cannot keep up, queries arriving on it are shed. */
  full(): boolean { return this.size >= this.depth; }

  /** Replies waiting in the stack and replies handed to the socket not yet reported sent. */
  pending(): number { return this.size + this.inFlight; }

  send(msg: Uint8Array, port: number, address: string): void {
    if (this.size === 0 && this.inFlight < this.maxInFlight) {
      this.write(msg, port, address);
      return;
    }
    const i = this.top;
    if (this.size === this.depth) this.droppedResponse.inc(); // the slot at top holds the oldest: evicted
    else this.size++;
    this.msgs[i] = msg;
    this.ports[i] = port;
    this.addrs[i] = address;
    this.top = i + 1 === this.depth ? 0 : i + 1;
  }

  private write(msg: Uint8Array, port: number, address: string): void {
    this.inFlight++;
    try {
      this.sock.send(msg, port, address, this.sent);
    } catch (e) {
      // The socket is closed (the listener stopped after its grace): the reply has nowhere to go.
      this.inFlight--;
      this.droppedResponse.inc();
      if (this.log.debugEnabled) this.log.debug(`Deferred response write failed: ${(e as Error).message}`);
    }
  }

  /** A reply left (or failed): hand the newest waiting ones to the socket. */
  private readonly sent = (err: Error | null): void => {
    this.inFlight--;
    if (err !== null) {
      this.droppedResponse.inc();
      if (this.log.debugEnabled) this.log.debug(`Deferred response write failed: ${err.message}`);
    }
    while (this.size > 0 && this.inFlight < this.maxInFlight) {
      const i = this.top === 0 ? this.depth - 1 : this.top - 1;
      const msg = this.msgs[i]!;
      this.msgs[i] = undefined; // release the reply's bytes
      this.top = i;
      this.size--;
      this.write(msg, this.ports[i]!, this.addrs[i]!);
    }
  };
}

/** The writers of one configuration's UDP sockets, found by a query's local address and port. */
export class ShedSockets {
  private readonly writers: ShedWriter[] = [];

  add(w: ShedWriter): ShedWriter {
    const ws = this.writers;
    for (let i = 0; i < ws.length; i++) {
      if (ws[i]!.localPort === w.localPort && ws[i]!.localAddress === w.localAddress) {
        ws[i] = w;
        return w;
      }
    }
    ws.push(w);
    return w;
  }

  find(localAddress: string, localPort: number): ShedWriter | undefined {
    const ws = this.writers;
    for (let i = 0; i < ws.length; i++) {
      const w = ws[i]!;
      if (w.localPort === localPort && w.localAddress === localAddress) return w;
    }
    return undefined;
  }
}

/** The handler: over UDP, while the query's socket has a full stack, the query is dropped silently. */
export class Shed implements Handler {
  readonly name = 'shed';
  private readonly sockets: ShedSockets;
  private readonly next: Handler | undefined;

  constructor(sockets: ShedSockets, next: Handler | undefined) {
    this.sockets = sockets;
    this.next = next;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    // Only UDP: TCP is never starved by UDP-storm shedding.
    if (req.proto !== 'udp') return nextOrFailure(this.name, this.next, req, w);
    const st = this.sockets.find(req.localAddress, req.localPort);
    // No writer for this socket (a query from another configuration's socket): fail open.
    if (st === undefined || !st.full()) return nextOrFailure(this.name, this.next, req, w);
    st.droppedQuery.inc();
    // Nothing is written; NOERROR tells the server not to answer either (CoreDNS's rcode contract).
    return Rcode.NOERROR;
  }
}
