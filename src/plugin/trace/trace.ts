// The trace handler (CoreDNS 1.15.0 plugin/trace, zipkin): one query of every `every` gets a `servedns` span of
// kind SERVER; the plugins after trace run inside it, each in a child span named after it (pkg/next.ts opens
// them while the request carries a span), and once the chain is done the span gets CoreDNS's tags
// (coredns.io/name, type, proto, remote, rcode; error and its annotations when the chain failed).

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { Recorder } from '../pkg/recorder.ts';
import { Rcode, rcodeToString, typeToString } from '../../wire/constants.ts';
import type { ZipkinSpan, ZipkinTracer } from './span.ts';

/** The name CoreDNS gives a query's top-level span. */
export const TOP_LEVEL_SPAN_NAME = 'servedns';
/** The metadata label of the trace id. */
export const META_TRACE_ID = 'trace/traceid';

/** What the handlers of one block share: the sampling counter and the tracer (set at start-up). */
export class TraceState {
  /** `every`: one query of this many is traced (0: none; Infinity: beyond 2^53, never reached). */
  readonly every: number;
  /** Queries seen (CoreDNS counts every query, traced or not). */
  count = 0;
  /** Undefined until start-up and after shutdown: queries pass untraced. */
  tracer: ZipkinTracer | undefined = undefined;

  constructor(every: number) {
    this.every = every;
  }
}

/** The rcodes a handler returns for the server to write (CoreDNS's plugin.ClientWrite is false for them). */
function serverWrites(rc: number): boolean {
  return rc === Rcode.SERVFAIL || rc === Rcode.REFUSED || rc === Rcode.FORMERR || rc === Rcode.NOTIMP;
}

export class Trace implements Handler {
  readonly name = 'trace';
  readonly state: TraceState;
  readonly next: Handler | undefined;

  constructor(state: TraceState, next: Handler | undefined) {
    this.state = state;
    this.next = next;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const st = this.state;
    let should = false;
    if (st.every > 0) {
      st.count++;
      if (st.count % st.every === 0) should = true;
    }
    const tracer = st.tracer;
    // A query that already has a span (an internal lookup of a traced query) is traced as part of that span.
    if (!should || req.span !== undefined || tracer === undefined) return nextOrFailure(this.name, this.next, req, w);
    return this.traced(tracer, req, w);
  }

  private traced(tracer: ZipkinTracer, req: Request, w: ResponseWriter): HandlerResult {
    const span = tracer.startRoot(TOP_LEVEL_SPAN_NAME, 'SERVER');
    req.setMetadata(META_TRACE_ID, span.traceId);
    const rw = new Recorder(w);
    req.span = span;
    let r: HandlerResult;
    try {
      r = nextOrFailure(this.name, this.next, req, rw);
    } catch (e) {
      this.done(span, req, rw, 0, e);
      throw e;
    }
    if (typeof r === 'number') {
      this.done(span, req, rw, r, undefined);
      return r;
    }
    return r.then((rc) => {
      this.done(span, req, rw, rc, undefined);
      return rc;
    }, (e: unknown) => {
      this.done(span, req, rw, 0, e);
      throw e;
    });
  }

  /**
   * Tags the span as CoreDNS's setZipkinSpanTags does and finishes it. The rcode is the reply's, or the one
   * returned for the server to write; a PluginError (CoreDNS's returned error) adds `error` and the annotations
   * `event:error` and `error.object:<text>`. Any other exception (a Go panic) ends the span untagged.
   */
  private done(span: ZipkinSpan, req: Request, rw: Recorder, status: number, err: unknown): void {
    req.span = undefined;
    if (err !== undefined && !(err instanceof PluginError)) {
      span.finish();
      return;
    }
    if (err instanceof PluginError) status = err.rcode;
    span.tag('coredns.io/name', req.name);
    span.tag('coredns.io/type', typeToString(req.qtype));
    span.tag('coredns.io/proto', req.proto);
    span.tag('coredns.io/remote', req.remoteAddress);
    span.tag('coredns.io/rcode', rcodeToString(serverWrites(status) ? status : rw.rcode));
    if (err instanceof PluginError) {
      span.tag('error', 'true');
      span.annotate('event:error', 'error.object:' + err.message);
    }
    span.finish();
  }
}
