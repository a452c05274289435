// The transfer handler (CoreDNS plugin/transfer/transfer.go): answers AXFR and IXFR over TCP with the
// records of the first provider (file, kubernetes, ...) of the block that is authoritative for the zone,
// in envelopes of up to 63000 octets of records, and sends NOTIFYs when a provider's zone changed
// (notify.ts).

import type { Handler, HandlerResult, ResponseWriter, ServerLogger } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { ResourceRecord, SOAData } from '../../wire/types.ts';
import { Rcode, RRType } from '../../wire/constants.ts';
import { replyTo } from '../../wire/message.ts';
import { goQuote } from '../../corefile/address.ts';
import { nameWireLength, rdataLength } from '../../wire/msglen.ts';
import { zonesMatches } from '../pkg/zones.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { NotAuthoritativeError, type Notifier, type Transferer } from '../pkg/transfer.ts';
import { TsigSigner } from '../pkg/tsig.ts';
import { sendNotifies } from './notify.ts';

/** One `transfer` line. */
export interface XfrEntry {
  /** The zones it answers transfers for (the block's when none are given). */
  zones: string[];
  /** `to`: `*` or `host:port` (port 53 when none was given), in Corefile order. */
  to: string[];
  /** `source`: the local IP NOTIFYs are sent from. */
  source: string | undefined;
}

/** Records of one envelope are flushed before their uncompressed length would pass this (CoreDNS's bound). */
const BATCH_OCTETS = 63000;

/** miekg's dns.Len of a record: uncompressed owner, type, class, TTL, rdlength and rdata. */
function rrLength(rr: ResourceRecord): number {
  return nameWireLength(rr.name) + 10 + rdataLength(rr.type, rr.data);
}

/** The entry whose zones match `name` the longest (on a tie, the greater zone; the first entry of equals). */
export function longestMatch(entries: readonly XfrEntry[], name: string): XfrEntry | undefined {
  let found: XfrEntry | undefined;
  let zone = '';
  for (const x of entries) {
    const z = zonesMatches(x.zones, name);
    if (z === '') continue;
    if (z.length > zone.length || (z.length === zone.length && z > zone)) {
      zone = z;
      found = x;
    }
  }
  return found;
}

/** Whether the client at `ip` may transfer: `*`, or a `to` host equal (as text) to the client's address. */
function allowed(x: XfrEntry, ip: string): boolean {
  for (const h of x.to) {
    if (h === '*') return true;
    const i = h.lastIndexOf(':');
    const host = h.startsWith('[') ? h.slice(1, i - 1) : h.slice(0, i);
    if (host === ip) return true;
  }
  return false;
}

export class Transfer implements Handler, Notifier {
  readonly name = 'transfer';
  next: Handler | undefined;
  /** The block's providers in chain order (set at start-up). */
  transferers: Transferer[] = [];
  readonly entries: readonly XfrEntry[];
  private readonly log: ServerLogger;

  constructor(entries: readonly XfrEntry[], log: ServerLogger) {
    this.entries = entries;
    this.log = log;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const qtype = req.qtype;
    if (qtype !== RRType.AXFR && qtype !== RRType.IXFR) return nextOrFailure(this.name, this.next, req, w);
    if (req.proto !== 'tcp') return Rcode.REFUSED;
    const x = longestMatch(this.entries, req.name);
    if (x === undefined) return nextOrFailure(this.name, this.next, req, w);
    if (!allowed(x, req.remoteAddress)) {
      // Written here (not left to the server), so that the log plugin sees it.
      const m = replyTo(req.msg);
      m.rcode = Rcode.REFUSED;
      w.writeMsg(m);
      return Rcode.NOERROR;
    }
    let serial = 0;
    if (qtype === RRType.IXFR) {
      const ns = req.msg.authority;
      if (ns.length !== 1 || ns[0]!.type !== RRType.SOA) return Rcode.SERVFAIL;
      serial = (ns[0]!.data as SOAData).serial;
    }
    let records: AsyncIterable<ResourceRecord[]> | undefined;
    for (const p of this.transferers) {
      try {
        records = p.transfer(req.name, serial);
      } catch (e) {
        if (e instanceof NotAuthoritativeError) continue;
        throw new PluginError(Rcode.SERVFAIL, e instanceof Error ? e.message : String(e), { cause: e });
      }
      break;
    }
    if (records === undefined) return nextOrFailure(this.name, this.next, req, w);
    return this.stream(req, w, records);
  }

  /** Sends the provider's records; the envelopes go out as they fill, the last one at the end. */
  private async stream(req: Request, w: ResponseWriter, records: AsyncIterable<ResourceRecord[]>): Promise<number> {
    let rrs: ResourceRecord[] = [];
    let sent = 0;
    let size = 0;
    let soa: ResourceRecord<SOAData> | undefined;
    try {
      for await (const batch of records) {
        if (batch.length === 0) continue;
        if (soa === undefined && batch[0]!.type === RRType.SOA) soa = batch[0] as ResourceRecord<SOAData>;
        for (const rr of batch) {
          const len = rrLength(rr);
          if (rrs.length > 0 && size + len > BATCH_OCTETS) {
            this.envelope(req, w, rrs);
            sent += rrs.length;
            rrs = [];
            size = 0;
          }
          rrs.push(rr);
          size += len;
        }
      }
    } catch (e) {
      throw new PluginError(Rcode.SERVFAIL, e instanceof Error ? e.message : String(e), { cause: e });
    }
    // One SOA left over: the client's IXFR serial is current. (As CoreDNS, this also fires when a full
    // transfer's last envelope would hold only the closing SOA: that SOA then goes out in a message
    // without AA, and the log line says noop.)
    if (rrs.length === 1 && soa !== undefined) {
      const m = replyTo(req.msg);
      m.answer = [soa];
      w.writeMsg(m);
      this.log.info(`Outgoing noop, incremental transfer for up to date zone ${goQuote(req.msg.question[0]!.name)} to ${req.remoteAddress} for ${soa.data.serial} SOA serial`);
      return Rcode.NOERROR;
    }
    if (rrs.length > 0) {
      this.envelope(req, w, rrs);
      sent += rrs.length;
    }
    const serial = soa === undefined ? 0 : soa.data.serial;
    this.log.info(`Outgoing transfer of ${sent} records of zone ${goQuote(req.msg.question[0]!.name)} to ${req.remoteAddress} for ${serial} SOA serial`);
    return Rcode.NOERROR;
  }

  /**
   * One message of the stream (miekg's Transfer.Out): a reply with AA and the records; when the query was
   * TSIG-signed, whatever is written after it is signed over the timers only (RFC 8945 5.3.1), as Out
   * sets TsigTimersOnly after each message.
   */
  private envelope(req: Request, w: ResponseWriter, rrs: ResourceRecord[]): void {
    const m = replyTo(req.msg);
    m.aa = true;
    m.answer = rrs;
    w.writeMsg(m);
    const signer = req.replySigner;
    if (signer instanceof TsigSigner) signer.timersOnly = true;
  }

  notify(zone: string): Promise<void> {
    const x = longestMatch(this.entries, zone);
    if (x === undefined) return Promise.resolve();
    return sendNotifies(zone, x.to, x.source).finally(() => {
      this.log.debug(`Sent notifies for zone ${goQuote(zone)} to [${x.to.join(' ')}]`);
    });
  }
}
