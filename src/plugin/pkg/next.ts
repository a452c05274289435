// Calling the rest of the chain (CoreDNS's plugin.NextOrFailure).
//
// The request remembers which plugin is handling it (`req.plugin`) so the
// final writer can tell who wrote the reply; it is restored when the call
// returns, as CoreDNS's per-call writer wrapping does.
//
// Tracing: while the trace plugin has set a span on the request (`req.span`), each call opens a child span
// named after the plugin called, as CoreDNS's NextOrFailure does with the span in the context. An untraced
// query pays one field check for it (`req.span !== undefined`); the traced path is `tracedNext`.

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Message } from '../../wire/types.ts';
import { NonWriter } from './recorder.ts';
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
  // The one check an untraced query pays: the trace plugin set a span for this query.
  if (req.span !== undefined) return tracedNext(name, next, req, w);
  return callNext(name, next, req, w);
}

function callNext(name: string, next: Handler, req: Request, w: ResponseWriter): HandlerResult {
  req.plugin = next.name;
  const r = next.serveDNS(req, w);
  // A synchronous answer: the outer plugin is in charge again.
  if (typeof r === 'number') req.plugin = name;
  return r;
}

/**
 * nextOrFailure for a traced query (CoreDNS's NextOrFailure with a span in the context): `next` runs inside a
 * child span named after it, which is the query's active span while `next` and the plugins it calls run, and
 * ends when `next` returns, throws or settles; the caller's span is active again after that.
 */
function tracedNext(name: string, next: Handler, req: Request, w: ResponseWriter): HandlerResult {
  const parent = req.span!;
  const child = parent.startChild(next.name);
  req.span = child;
  let r: HandlerResult;
  try {
    r = callNext(name, next, req, w);
  } catch (e) {
    child.finish();
    req.span = parent;
    throw e;
  }
  if (typeof r === 'number') {
    child.finish();
    req.span = parent;
    return r;
  }
  return r.then((rc) => {
    child.finish();
    req.span = parent;
    return rc;
  }, (e: unknown) => {
    child.finish();
    req.span = parent;
    throw e;
  });
}

/**
 * Run the rest of the chain into a NonWriter (CoreDNS's nonwriter pattern, as dns64 and siit use
 * it): when it wrote a reply that `wanted` accepts, `replace` answers instead; otherwise the reply
 * goes out as written, with the chain's rcode or PluginError. An exception that is no PluginError
 * (CoreDNS's panic) passes through.
 */
export function replaceReply(
  name: string, next: Handler, req: Request, w: ResponseWriter,
  wanted: (m: Message) => boolean, replace: (m: Message) => Promise<number>,
): HandlerResult {
  const nw = new NonWriter();
  const settle = (rc: number, err: unknown): HandlerResult => {
    if (err !== undefined && !(err instanceof PluginError)) throw err;
    const m = nw.msg;
    if (m === undefined || !wanted(m)) {
      if (m !== undefined) w.writeMsg(m);
      if (err !== undefined) throw err;
      return rc;
    }
    return replace(m);
  };
  let r: HandlerResult;
  try {
    // CoreDNS's dns64 and siit call their next handler directly, not through NextOrFailure: no span of its own.
    r = callNext(name, next, req, nw);
  } catch (e) {
    return settle(0, e);
  }
  if (typeof r === 'number') return settle(r, undefined);
  return r.then((rc) => settle(rc, undefined), (e: unknown) => settle(0, e));
}
