// CoreDNS's metadata plugin: it makes labels exist. At routing time, before
// the block's view filters and chain run, the server calls `collect`, which
// begins the query's metadata (so req.setMetadata works from then on) and,
// for a name inside the plugin's zones, asks every metadata provider of the
// block for its labels. In the chain it only passes the query on.

import type { Handler, HandlerResult, Request, ResponseWriter } from '../plugin.ts';
import type { MetadataProvider } from '../pkg/metadata.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { zonesMatches } from '../pkg/zones.ts';

export class Metadata implements Handler {
  readonly name = 'metadata';
  readonly zones: readonly string[];
  /** The providers of the block, in plugin.cfg order (filled at startup). */
  providers: MetadataProvider[] = [];
  private readonly next: Handler | undefined;

  constructor(zones: readonly string[], next: Handler | undefined) {
    this.zones = zones;
    this.next = next;
  }

  /** CoreDNS's Metadata.Collect. */
  collect(req: Request): void {
    req.beginMetadata();
    if (zonesMatches(this.zones, req.name) === '') return;
    const p = this.providers;
    for (let i = 0; i < p.length; i++) p[i]!.metadata(req);
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    return nextOrFailure(this.name, this.next, req, w);
  }
}
