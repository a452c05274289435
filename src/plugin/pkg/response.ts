// Reply classification as CoreDNS's plugin/pkg/response (Typify, Classify):
// used by log (classes, `log/type`), minimal and cache-like plugins.

import type { Message, ResourceRecord, RRSIGData } from '../../wire/types.ts';
import { Opcode, Rcode, RRType } from '../../wire/constants.ts';

/** Response types (CoreDNS response.Type), as plain numbers. */
export const ResponseType = {
  NoError: 0,
  NameError: 1,
  ServerError: 2,
  NoData: 3,
  Delegation: 4,
  Meta: 5,
  Update: 6,
  OtherError: 7,
} as const;

const TYPE_NAMES = ['NOERROR', 'NXDOMAIN', 'SERVERERROR', 'NODATA', 'DELEGATION', 'META', 'UPDATE', 'OTHERERROR'];

/** `NOERROR`, `NXDOMAIN`, `SERVERERROR`, `NODATA`, `DELEGATION`, `META`, `UPDATE`, `OTHERERROR`. */
export function responseTypeToString(t: number): string {
  return TYPE_NAMES[t] ?? '';
}

/** Response classes (CoreDNS response.Class). */
export const ResponseClass = {
  All: 0,
  Success: 1,
  Denial: 2,
  Error: 3,
} as const;

const CLASS_NAMES = ['all', 'success', 'denial', 'error'];

export function responseClassToString(c: number): string {
  return CLASS_NAMES[c] ?? '';
}

/** `all`, `success`, `denial`, `error`; anything else throws `invalid Class: X`. */
export function responseClassFromString(s: string): number {
  const i = CLASS_NAMES.indexOf(s);
  if (i < 0) throw new Error('invalid Class: ' + s);
  return i;
}

const YEAR68 = 2 ** 31;

/** miekg RRSIG.ValidityPeriod with serial-number arithmetic on the 32-bit times. */
function rrsigValid(d: RRSIGData, utc: number): boolean {
  const modi = Math.trunc((d.inception - utc) / YEAR68);
  const mode = Math.trunc((d.expiration - utc) / YEAR68);
  const ti = d.inception + modi * YEAR68;
  const te = d.expiration + mode * YEAR68;
  return ti <= utc && utc <= te;
}

function hasExpiredSig(rrs: ResourceRecord[], utc: number): boolean {
  for (let i = 0; i < rrs.length; i++) {
    if (rrs[i].type === RRType.RRSIG && !rrsigValid(rrs[i].data as RRSIGData, utc)) return true;
  }
  return false;
}

/** CoreDNS response.Typify. `now` is Unix seconds (defaults to the current time). */
export function typify(m: Message | undefined, now?: number): number {
  if (m === undefined) return ResponseType.OtherError;
  if (m.opcode === Opcode.UPDATE) return ResponseType.Update;
  if (m.opcode === Opcode.NOTIFY) return ResponseType.Meta;
  if (m.question.length > 0) {
    const qt = m.question[0].type;
    if (qt === RRType.AXFR || qt === RRType.IXFR) return ResponseType.Meta;
  }
  if (m.edns !== undefined && m.edns.do) {
    const utc = now ?? Math.floor(Date.now() / 1000);
    if (hasExpiredSig(m.answer, utc) || hasExpiredSig(m.authority, utc) || hasExpiredSig(m.additional, utc)) {
      return ResponseType.OtherError;
    }
  }
  const rcode = m.rcode;
  if (m.answer.length > 0) {
    if (rcode === Rcode.NOERROR) return ResponseType.NoError;
    if (rcode === Rcode.NXDOMAIN) return ResponseType.OtherError;
  }
  let soa = false;
  let ns = 0;
  const auth = m.authority;
  for (let i = 0; i < auth.length; i++) {
    const t = auth[i].type;
    if (t === RRType.SOA) soa = true;
    else if (t === RRType.NS) ns++;
  }
  if (soa && rcode === Rcode.NOERROR) return ResponseType.NoData;
  if (rcode === Rcode.NXDOMAIN) return ResponseType.NameError;
  if (rcode === Rcode.SERVFAIL || rcode === Rcode.NOTIMP) return ResponseType.ServerError;
  if (ns > 0 && rcode === Rcode.NOERROR) return ResponseType.Delegation;
  if (rcode === Rcode.NOERROR) return ResponseType.NoError;
  return ResponseType.OtherError;
}

/** CoreDNS response.Classify. */
export function classify(t: number): number {
  switch (t) {
    case ResponseType.NoError:
    case ResponseType.Delegation:
      return ResponseClass.Success;
    case ResponseType.NameError:
    case ResponseType.NoData:
      return ResponseClass.Denial;
    default:
      return ResponseClass.Error;
  }
}
