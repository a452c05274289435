// What file, auto and secondary share once a zone is chosen: the lookup of a query in it, the reply built
// from the lookup's answer (CoreDNS's file/auto/secondary ServeDNS tails) and the zone's records for AXFR.

import type { Handler, HandlerResult, ResponseWriter, ServerLogger } from '../../plugin.ts';
import type { Fall } from '../fall.ts';
import { nextOrFailure } from '../next.ts';
import type { Request } from '../../../core/request.ts';
import type { ResourceRecord } from '../../../wire/types.ts';
import { Rcode } from '../../../wire/constants.ts';
import { replyTo } from '../../../wire/message.ts';
import { Result, type Zone } from './zone.ts';
import { LOOP_KEY, lookup, type LookupAnswer } from './lookup.ts';

/** Looks the query up in `z` (CoreDNS's z.Lookup(ctx, state, qname)). */
export function lookupRequest(z: Zone, req: Request): LookupAnswer | Promise<LookupAnswer> {
  const loopValue = req.value(LOOP_KEY);
  return lookup(z, {
    qname: req.name, qtype: req.qtype, dnssecOk: req.do, loop: loopValue === undefined ? 0 : Number(loopValue), upstream: req,
  });
}

/**
 * file's ServeDNS once the zone is chosen (secondary's too: CoreDNS's secondary embeds file): an expired zone is
 * SERVFAIL, logged through `log`; else the lookup's reply, except that an NXDOMAIN (or an empty non-terminal's
 * NOERROR) in a `fallthrough` zone goes to the next plugin.
 */
export function serveFromZone(z: Zone, zone: string, req: Request, w: ResponseWriter, log: ServerLogger, fall: Fall,
  plugin: string, next: Handler | undefined): HandlerResult {
  if (z.expired) {
    log.error(`Zone ${zone} is expired`);
    return Rcode.SERVFAIL;
  }
  const a = lookupRequest(z, req);
  if (a instanceof Promise) return a.then((r) => answerOrFall(r, req, w, fall, plugin, next));
  return answerOrFall(a, req, w, fall, plugin, next);
}

function answerOrFall(a: LookupAnswer, req: Request, w: ResponseWriter, fall: Fall, plugin: string, next: Handler | undefined): HandlerResult {
  if (a.answer.length === 0 && (a.result === Result.NameError || a.result === Result.Success) && fall.through(req.name)) {
    return nextOrFailure(plugin, next, req, w);
  }
  return writeAnswer(req, w, a);
}

/** Copies of the records, so that plugins editing the reply (TTLs, names) never edit the zone. */
function copied(rrs: readonly ResourceRecord[]): ResourceRecord[] {
  const out = new Array<ResourceRecord>(rrs.length);
  for (let i = 0; i < rrs.length; i++) {
    const r = rrs[i]!;
    out[i] = { name: r.name, type: r.type, class: r.class, ttl: r.ttl, data: r.data };
  }
  return out;
}

/** Writes the authoritative reply for a lookup's answer; SERVFAIL without answer is left to the server. */
export function writeAnswer(req: Request, w: ResponseWriter, a: LookupAnswer): HandlerResult {
  const m = replyTo(req.msg);
  m.aa = true;
  m.answer = copied(a.answer);
  m.authority = copied(a.ns);
  m.additional = copied(a.extra);
  switch (a.result) {
    case Result.NameError:
      m.rcode = Rcode.NXDOMAIN;
      break;
    case Result.Delegation:
      // A referral is not authoritative; a partial answer with an in-zone alias keeps AA.
      if (m.answer.length === 0) m.aa = false;
      break;
    case Result.ServerFailure:
      if (m.answer.length === 0) return Rcode.SERVFAIL;
      m.rcode = Rcode.SERVFAIL;
      break;
  }
  w.writeMsg(m);
  return Rcode.NOERROR;
}

/**
 * A zone's records for AXFR: the apex (SOA, its RRSIGs, NS, their RRSIGs), then each name in canonical
 * order, then the SOA again; only the SOA when `serial` (non-zero) is the zone's (IXFR fallback).
 * Throws at once for a zone without SOA.
 */
export function transferZone(z: Zone, serial: number): AsyncIterable<ResourceRecord[]> {
  const apex = z.apexRecords();
  if (apex === undefined || z.soa === undefined) throw new Error('no SOA');
  const soa = z.soa;
  const elems = [...z.elems()];
  return (async function* records(): AsyncGenerator<ResourceRecord[]> {
    await Promise.resolve();
    if (serial !== 0 && soa.data.serial === serial) {
      yield [soa];
      return;
    }
    yield apex;
    for (const e of elems) yield e.all();
    yield [soa];
  })();
}
