// Capability: a handler that can hand out a whole zone (CoreDNS's
// transfer.Transferer), for the transfer plugin's AXFR/IXFR answers and NOTIFY.
// Providers: file, auto, secondary, kubernetes, k8s_external. The transfer plugin asks each
// provider of its block in chain order and uses the first that is authoritative.

import type { Handler } from '../plugin.ts';
import type { ResourceRecord } from '../../wire/types.ts';

/** Thrown (or rejected) by a provider asked for a zone it is not authoritative for. */
export class NotAuthoritativeError extends Error {
  constructor(zone: string) {
    super(`not authoritative for ${zone}`);
    this.name = 'NotAuthoritativeError';
  }
}

export interface Transferer extends Handler {
  /**
   * The records of `zone` (lower-case FQDN) in batches: the SOA first, then
   * every other record including NS and glue, then the SOA again. With
   * `serial` > 0 (IXFR), when `serial` is the zone's current serial (or newer,
   * for a provider whose serials only grow) the provider yields just the SOA;
   * otherwise, keeping no history, it answers with a full transfer.
   * Throws NotAuthoritativeError at once when `zone` is not one of its zones
   * (the transfer plugin then asks the next provider); any other error, thrown
   * or from the iteration, fails the transfer (SERVFAIL when nothing was sent yet).
   */
  transfer(zone: string, serial: number): AsyncIterable<ResourceRecord[]>;
}

export function isTransferer(h: Handler): h is Transferer {
  return typeof (h as Partial<Transferer>).transfer === 'function';
}

/**
 * Capability: the transfer plugin's NOTIFY sender (CoreDNS's `(*transfer.Transfer).Notify`). A provider
 * whose zone changed (file after a reload with a new serial) finds it among its block's handlers in a
 * start-up hook and calls `notify(zone)`; the promise rejects with the joined errors of the secondaries
 * that did not accept the NOTIFY after three tries (one line each).
 */
export interface Notifier extends Handler {
  /** NOTIFY the `to` addresses (not `*`) of the transfer entry with the longest match for `zone` (lower case). */
  notify(zone: string): Promise<void>;
}

export function isNotifier(h: Handler): h is Notifier {
  return typeof (h as Partial<Notifier>).notify === 'function';
}
