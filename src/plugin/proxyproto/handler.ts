// proxyproto's handler (CoreDNS plugin/proxyproto/metadata.go), in the chain only with `tlv_metadata`: it passes
// every query on, and as a metadata provider publishes the PROXY v2 header's TLVs as `proxyproto/tlv` (hex).

import type { Handler, HandlerResult, Request, ResponseWriter } from '../plugin.ts';
import type { MetadataProvider } from '../pkg/metadata.ts';
import { nextOrFailure } from '../pkg/next.ts';

/** The request value the listener sets from ProxiedPeer.tlv (core/serve.ts PROXY_TLV_VALUE). */
const TLV_VALUE = 'proxyproto/tlv';

export class ProxyProtoMetadata implements MetadataProvider {
  readonly name = 'proxyproto';
  private readonly next: Handler | undefined;

  constructor(next: Handler | undefined) {
    this.next = next;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    return nextOrFailure(this.name, this.next, req, w);
  }

  /** Only a request whose header carried at least one TLV gets the label. */
  metadata(req: Request): void {
    const v = req.value(TLV_VALUE);
    if (v !== undefined) req.setMetadata('proxyproto/tlv', v);
  }
}
