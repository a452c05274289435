// CoreDNS's geoip plugin: a metadata provider. For every query the metadata plugin collects, it looks up the
// client's address (or, with `edns-subnet`, the address of the query's EDNS0 client-subnet option) in the
// database and sets the `geoip/...` labels; in the chain it only passes the query on.

import type { Handler, HandlerResult, PluginLogger, Request, ResponseWriter } from '../plugin.ts';
import type { MetadataProvider } from '../pkg/metadata.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { EdnsOption } from '../../wire/constants.ts';
import { formatIPv4, formatIPv6 } from '../../wire/ip.ts';
import { ASN, ASN_LABELS, CITY, CITY_LABELS, type GeoipDatabase } from './db.ts';

/**
 * The lookup key of an EDNS0 client-subnet option as CoreDNS reads it (miekg's EDNS0_SUBNET): an IPv4
 * address (family 1, and family 0 with a zero netmask) becomes its IPv4-mapped IPv6 form, an IPv6 one
 * (family 2) stays. undefined where miekg would reject the option.
 */
export function subnetAddress(data: Uint8Array): string | undefined {
  if (data.length < 4) return undefined;
  const family = (data[0]! << 8) | data[1]!;
  const source = data[2]!, scope = data[3]!;
  if (family === 0) return source === 0 ? '::ffff:0.0.0.0' : undefined;
  if (family === 1) {
    if (source > 32 || scope > 32) return undefined;
    const a = new Uint8Array(4);
    a.set(data.subarray(4, 8));
    return '::ffff:' + formatIPv4(a, 0);
  }
  if (family === 2) {
    if (source > 128 || scope > 128) return undefined;
    const a = new Uint8Array(16);
    a.set(data.subarray(4, 20));
    return formatIPv6(a, 0);
  }
  return undefined;
}

export class GeoIP implements Handler, MetadataProvider {
  readonly name = 'geoip';
  readonly db: GeoipDatabase;
  readonly ednsSubnet: boolean;
  private readonly next: Handler | undefined;
  private readonly log: PluginLogger;

  constructor(db: GeoipDatabase, ednsSubnet: boolean, log: PluginLogger, next: Handler | undefined) {
    this.db = db;
    this.ednsSubnet = ednsSubnet;
    this.log = log;
    this.next = next;
  }

  /** CoreDNS's GeoIP.Metadata. */
  metadata(req: Request): void {
    let ip = req.remoteAddress;
    if (ip === '') {
      this.log.debug(`Failed to parse source IP "": ParseAddr(""): unable to parse IP`);
      return;
    }
    if (this.ednsSubnet) {
      const opts = req.msg.edns?.options;
      if (opts !== undefined) {
        for (let i = 0; i < opts.length; i++) {
          const o = opts[i]!;
          if (o.code !== EdnsOption.CLIENT_SUBNET) continue;
          const a = subnetAddress(o.data);
          if (a !== undefined) ip = a;
          break;
        }
      }
    }
    const db = this.db;
    if ((db.provides & CITY) !== 0) {
      let v: string[] | undefined;
      try {
        v = db.city(ip);
      } catch (e) {
        if (this.log.debugEnabled) this.log.debug(`Setting up city metadata failed due to database lookup error: ${(e as Error).message}`);
      }
      if (v !== undefined) for (let i = 0; i < CITY_LABELS.length; i++) req.setMetadata(CITY_LABELS[i], v[i]!);
    }
    if ((db.provides & ASN) !== 0) {
      let v: string[] | undefined;
      try {
        v = db.asn(ip);
      } catch (e) {
        if (this.log.debugEnabled) this.log.debug(`Setting up asn metadata failed due to database lookup error: ${(e as Error).message}`);
      }
      if (v !== undefined) for (let i = 0; i < ASN_LABELS.length; i++) req.setMetadata(ASN_LABELS[i], v[i]!);
    }
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    return nextOrFailure(this.name, this.next, req, w);
  }
}
