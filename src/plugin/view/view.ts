// CoreDNS's view plugin: a server block that serves only the queries its
// expressions accept. The filter runs at routing time (the server calls it
// through the block's addFilter registration); in the chain the plugin only
// passes the query on. As a metadata provider it sets `view/name`.

import type { Handler, HandlerResult, Request, ResponseWriter } from '../plugin.ts';
import type { MetadataProvider } from '../pkg/metadata.ts';
import type { Expression } from '../pkg/expression.ts';
import { nextOrFailure } from '../pkg/next.ts';

export class View implements MetadataProvider {
  readonly name = 'view';
  readonly viewName: string;
  readonly exprs: readonly Expression[];
  private readonly next: Handler | undefined;

  constructor(viewName: string, exprs: readonly Expression[], next: Handler | undefined) {
    this.viewName = viewName;
    this.exprs = exprs;
    this.next = next;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    return nextOrFailure(this.name, this.next, req, w);
  }

  metadata(req: Request): void {
    req.setMetadata('view/name', this.viewName);
  }
}

/**
 * CoreDNS's View.Filter: true when every expression evaluates to boolean true; an evaluation error or
 * any other value is false.
 */
export function viewFilter(exprs: readonly Expression[]): (req: Request) => boolean {
  if (exprs.length === 1) {
    const e = exprs[0]!;
    return (req) => e.test(req);
  }
  return (req) => {
    for (let i = 0; i < exprs.length; i++) if (!exprs[i]!.test(req)) return false;
    return true;
  };
}
