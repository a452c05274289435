// Capability: a handler that knows the DNS search path of the client that sent
// a query (CoreDNS's autopath.AutoPather), so the autopath plugin can answer a
// search-path expansion in one round trip. The kubernetes plugin provides it
// (a pod's search path, with `pods verified`); the autopath plugin finds the
// provider it names (`autopath @kubernetes`) among the block's handlers.

import type { Handler } from '../plugin.ts';
import type { Request } from '../../core/request.ts';

export interface AutoPather extends Handler {
  /**
   * The client's search path for this query, most specific first, ending with
   * the empty-string sentinel; undefined when no search-pathing should happen
   * (the name is outside the provider's zones, or the client is unknown).
   */
  autoPath(req: Request): string[] | undefined;
}

export function isAutoPather(h: Handler): h is AutoPather {
  return typeof (h as Partial<AutoPather>).autoPath === 'function';
}
