// Capability: a handler that labels requests with metadata (CoreDNS's
// metadata.Provider). The metadata plugin asks every provider of its block
// once per query, before the chain runs, so that any plugin (log's `{/label}`,
// rewrite, view expressions) can read the labels with req.metadata(label).
// Labels are `<plugin>/<name>`; a value may be a function, evaluated on read.

import type { Handler } from '../plugin.ts';
import type { Request } from '../../core/request.ts';

export interface MetadataProvider extends Handler {
  /** Set this plugin's labels on `req` (req.setMetadata). Called for every query: keep it cheap, prefer lazy values. */
  metadata(req: Request): void;
}

export function isMetadataProvider(h: Handler): h is MetadataProvider {
  return typeof (h as Partial<MetadataProvider>).metadata === 'function';
}
