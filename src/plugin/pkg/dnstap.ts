// Capability: a handler that logs DNS messages to dnstap (the dnstap plugin).
// Other plugins (forward) find the block's tappers among its handlers with
// `isTapper` in a start-up hook and hand them the messages they exchange with
// upstreams (CoreDNS plugin/dnstap/msg and forward's toDnstap), never by
// importing the dnstap folder.

import type { Handler } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import { COREDNS_VERSION } from '../../version.ts';

/** dnstap.proto Message.Type: the kinds CoreDNS emits. */
export const TapType = {
  CLIENT_QUERY: 5,
  CLIENT_RESPONSE: 6,
  FORWARDER_QUERY: 7,
  FORWARDER_RESPONSE: 8,
} as const;
export type TapType = (typeof TapType)[keyof typeof TapType];

/**
 * One dnstap Message, in what the caller knows: addresses as text (`1.2.3.4`, `::1`,
 * `::ffff:1.2.3.4`), times in milliseconds since the epoch with sub-millisecond precision
 * (`tapNow()`), wire messages as bytes. Absent fields are not encoded.
 */
export interface TapMessage {
  type: TapType;
  /** socket_protocol (and with an address, socket_family). */
  proto: 'udp' | 'tcp';
  queryAddress?: string;
  queryPort?: number;
  responseAddress?: string;
  responsePort?: number;
  queryTime: number;
  responseTime?: number;
  queryMessage?: Uint8Array;
  responseMessage?: Uint8Array;
}

export interface Tapper extends Handler {
  /** `full`: the caller includes the wire messages. */
  readonly tapFull: boolean;
  /** Send `m` for the query `req` (the `extra` field's placeholders are filled from it). Never blocks. */
  tapMessage(m: TapMessage, req: Request): void;
}

export function isTapper(h: Handler): h is Tapper {
  const t = h as Partial<Tapper>;
  return typeof t.tapMessage === 'function' && typeof t.tapFull === 'boolean';
}

/** The block's tappers in chain order (CoreDNS: the first dnstap handler, then its dnstap successors). */
export function blockTappers(handlers: readonly Handler[]): Tapper[] {
  return handlers.filter(isTapper);
}

const origin = performance.timeOrigin;

/** Now, in milliseconds since the epoch with sub-millisecond precision (Go's time.Now() for dnstap times). */
export function tapNow(): number {
  return origin + performance.now();
}

/** The version field CoreDNS sends by default: `CoreDNS-<release>`. */
export const DEFAULT_TAP_VERSION = 'CoreDNS-' + COREDNS_VERSION;
