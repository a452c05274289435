// Calling the rest of the chain (CoreDNS's plugin.NextOrFailure).
//
// The request remembers which plugin is handling it (`req.plugin`) so the
// final writer can tell who wrote the reply; it is restored when the call
// returns, as CoreDNS's per-call writer wrapping does.

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import { Rcode } from '../../wire/constants.ts';

/** Error text CoreDNS uses when a plugin needs a next handler and there is none. */
export function noNextPluginError(name: string): PluginError {
  return new PluginError(Rcode.SERVFAIL, 'plugin/' + name + ': no next plugin found');
}

/**
 * Run `next` for `req`. With no next handler, throws a PluginError with rcode
 * SERVFAIL and the text `plugin/<name>: no next plugin found`.
 */
export function nextOrFailure(name: string, next: Handler | undefined, req: Request, w: ResponseWriter): HandlerResult {
  if (next === undefined) throw noNextPluginError(name);
  req.plugin = next.name;
  const r = next.serveDNS(req, w);
  // A synchronous answer: the outer plugin is in charge again.
  if (typeof r === 'number') req.plugin = name;
  return r;
}
