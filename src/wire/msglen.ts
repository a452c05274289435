// The length of a message packed without name compression (miekg's Msg.Len()
// with Compress=false): what CoreDNS logs as `{rsize}`. Walks the model; builds nothing.
// (encode.ts's messageLength gives the same number by encoding into its scratch buffer;
// this one only adds up sizes, for the per-query log and metrics paths.)

import type {
  CAAData, DNSKEYData, DSData, HINFOData, Message, MXData, NAPTRData, NameData, NSEC3Data,
  NSEC3PARAMData, NSECData, RData, ResourceRecord, RRSIGData, SOAData, SRVData, SVCBData, TLSAData, TXTData,
} from './types.ts';

/** Wire length of a presentation-form name (escapes `\.`, `\\`, `\DDD` count as one octet). */
export function nameWireLength(name: string): number {
  let octets = 0;
  let labels = 0;
  let inLabel = false;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c === 46) {
      inLabel = false;
      continue;
    }
    if (!inLabel) {
      labels++;
      inLabel = true;
    }
    if (c === 92) {
      const d1 = name.charCodeAt(i + 1);
      if (d1 >= 48 && d1 <= 57 && i + 3 < name.length) i += 3;
      else i++;
      octets++;
    } else if (c < 0x80) {
      octets++;
    } else if (c < 0x800) {
      octets += 2;
    } else if (c >= 0xd800 && c <= 0xdbff) {
      octets += 4;
      i++;
    } else {
      octets += 3;
    }
  }
  return octets + labels + 1;
}

/** Go's base64.StdEncoding.DecodedLen of the padded base64 text of `n` bytes. */
function base64DecodedLen(n: number): number {
  return Math.ceil(n / 3) * 3;
}

function typeBitmapLength(types: number[]): number {
  if (types.length === 0) return 0;
  let len = 0;
  let lastWindow = -1;
  let lastLen = 0;
  for (let i = 0; i < types.length; i++) {
    const t = types[i];
    const window = t >> 8;
    const octets = ((t & 0xff) >> 3) + 1;
    if (window !== lastWindow) {
      if (lastWindow >= 0) len += 2 + lastLen;
      lastWindow = window;
      lastLen = octets;
    } else if (octets > lastLen) lastLen = octets;
  }
  return len + 2 + lastLen;
}

function charStrings(strings: Uint8Array[]): number {
  let n = 0;
  for (let i = 0; i < strings.length; i++) n += 1 + strings[i].length;
  return n;
}

/**
 * Length of the RDATA of one record. The cases are RRType numbers written as literals, as in the
 * codec's own per-record switches (encode.ts, decode.ts): this runs for every record of every
 * logged reply.
 */
export function rdataLength(type: number, data: RData): number {
  if ('raw' in data) return data.raw.length;
  switch (type) {
    case 1: return 4; // A
    case 28: return 16; // AAAA
    case 2: case 3: case 4: case 5: case 7: case 8: case 9: case 12: case 39: // NS MD MF CNAME MB MG MR PTR DNAME
      return nameWireLength((data as NameData).target);
    case 6: { // SOA
      const d = data as SOAData;
      return nameWireLength(d.mname) + nameWireLength(d.rname) + 20;
    }
    case 15: return 2 + nameWireLength((data as MXData).exchange); // MX
    case 16: case 99: return charStrings((data as TXTData).strings); // TXT SPF
    case 13: { // HINFO
      const d = data as HINFOData;
      return 2 + d.cpu.length + d.os.length;
    }
    case 33: return 6 + nameWireLength((data as SRVData).target); // SRV
    case 257: { // CAA
      const d = data as CAAData;
      return 2 + d.tag.length + d.value.length;
    }
    case 35: { // NAPTR
      const d = data as NAPTRData;
      return 4 + 3 + d.flags.length + d.services.length + d.regexp.length + nameWireLength(d.replacement);
    }
    case 43: case 59: case 32768: case 32769: return 4 + (data as DSData).digest.length; // DS CDS TA DLV
    // miekg keeps the key and signature as (padded) base64 and counts base64.DecodedLen of it:
    // the byte length rounded up to a multiple of 3
    case 48: case 60: case 25: return 4 + base64DecodedLen((data as DNSKEYData).publicKey.length); // DNSKEY CDNSKEY KEY
    case 46: case 24: { // RRSIG SIG
      const d = data as RRSIGData;
      return 18 + nameWireLength(d.signerName) + base64DecodedLen(d.signature.length);
    }
    case 47: { // NSEC
      const d = data as NSECData;
      return nameWireLength(d.nextName) + typeBitmapLength(d.types);
    }
    case 50: { // NSEC3
      const d = data as NSEC3Data;
      return 6 + d.salt.length + d.nextHashed.length + typeBitmapLength(d.types);
    }
    case 51: return 5 + (data as NSEC3PARAMData).salt.length; // NSEC3PARAM
    case 52: case 53: return 3 + (data as TLSAData).certificate.length; // TLSA SMIMEA
    case 64: case 65: { // SVCB HTTPS
      const d = data as SVCBData;
      let n = 2 + nameWireLength(d.target);
      for (let i = 0; i < d.params.length; i++) n += 4 + d.params[i].value.length;
      return n;
    }
    default: return 0;
  }
}

function sectionLength(rrs: ResourceRecord[]): number {
  let n = 0;
  for (let i = 0; i < rrs.length; i++) {
    const rr = rrs[i];
    n += nameWireLength(rr.name) + 10 + rdataLength(rr.type, rr.data);
  }
  return n;
}

/** Uncompressed wire length of `m` (header, question, records and OPT). */
export function messageLength(m: Message): number {
  let n = 12;
  const q = m.question;
  for (let i = 0; i < q.length; i++) n += nameWireLength(q[i].name) + 4;
  n += sectionLength(m.answer) + sectionLength(m.authority) + sectionLength(m.additional);
  const e = m.edns;
  if (e !== undefined) {
    n += nameWireLength(e.name ?? '.') + 10;
    for (let i = 0; i < e.options.length; i++) n += 4 + e.options[i].data.length;
  }
  return n;
}
