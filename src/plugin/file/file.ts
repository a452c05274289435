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
import { Result } from '../pkg/zone/zone.ts';
import type { LookupAnswer } from '../pkg/zone/lookup.ts';
import { lookupRequest, transferZone, writeAnswer } from '../pkg/zone/answer.ts';
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
    const z = src.zone;
    if (z.expired) {
      this.log.error(`Zone ${zone} is expired`);
      return Rcode.SERVFAIL;
    }
    const a = lookupRequest(z, req);
    if (a instanceof Promise) return a.then((r) => this.answer(req, w, r));
    return this.answer(req, w, a);
  }

  private answer(req: Request, w: ResponseWriter, a: LookupAnswer): HandlerResult {
    // Only an NXDOMAIN (or the NOERROR of an empty non-terminal) falls through.
    if (a.answer.length === 0 && (a.result === Result.NameError || a.result === Result.Success) && this.fall.through(req.name)) {
      return nextOrFailure(this.name, this.next, req, w);
    }
    return writeAnswer(req, w, a);
  }

  transfer(zone: string, serial: number): AsyncIterable<ResourceRecord[]> {
    const matched = zonesMatches(this.names, zone);
    const src = matched === zone ? this.zones.get(zone) : undefined;
    if (src === undefined) throw new NotAuthoritativeError(zone);
    return transferZone(src.zone, serial);
  }
}
