// The file handler (CoreDNS plugin/file/file.go): answers from its zones, refuses AXFR/IXFR (the
// transfer plugin serves those through the Transferer capability), drops NOTIFYs (a file zone has no
// primary); each zone reloads from disk on its interval (pkg/zone/source.ts).

import type { Handler, HandlerResult, ResponseWriter, ServerLogger } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { ResourceRecord } from '../../wire/types.ts';
import { Opcode, Rcode, RRType } from '../../wire/constants.ts';
import { zonesMatches } from '../pkg/zones.ts';
import { nextOrFailure } from '../pkg/next.ts';
import type { Fall } from '../pkg/fall.ts';
import { NotAuthoritativeError, type Transferer } from '../pkg/transfer.ts';
import { serveFromZone, transferZone } from '../pkg/zone/answer.ts';
import type { ZoneSource } from '../pkg/zone/source.ts';

export class File implements Handler, Transferer {
  readonly name = 'file';
  private readonly next: Handler | undefined;
  /** The zones in Corefile order. */
  readonly names: string[];
  readonly zones: ReadonlyMap<string, ZoneSource>;
  private readonly fall: Fall;
  private readonly log: ServerLogger;

  constructor(next: Handler | undefined, zones: ReadonlyMap<string, ZoneSource>, fall: Fall, log: ServerLogger) {
    this.next = next;
    this.zones = zones;
    this.names = [...zones.keys()];
    this.fall = fall;
    this.log = log;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const qname = req.name;
    const zone = zonesMatches(this.names, qname);
    if (zone === '') {
      if (this.next === undefined) return Rcode.REFUSED;
      return nextOrFailure(this.name, this.next, req, w);
    }
    const src = this.zones.get(zone);
    if (src === undefined) return Rcode.SERVFAIL;
    const qtype = req.qtype;
    if (qtype === RRType.AXFR || qtype === RRType.IXFR) return Rcode.REFUSED;
    if (req.msg.opcode === Opcode.NOTIFY) {
      this.log.info(`Dropping notify from ${req.remoteAddress} for ${zone}`);
      return Rcode.NOERROR;
    }
    return serveFromZone(src.zone, zone, req, w, this.log, this.fall, this.name, this.next);
  }

  transfer(zone: string, serial: number): AsyncIterable<ResourceRecord[]> {
    const matched = zonesMatches(this.names, zone);
    const src = matched === zone ? this.zones.get(zone) : undefined;
    if (src === undefined) throw new NotAuthoritativeError(zone);
    return transferZone(src.zone, serial);
  }
}
