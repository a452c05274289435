// The DNS message model shared by the codec, the server and every plugin.
// Plain data: no methods, no I/O. Names are presentation-form strings, fully
// qualified (trailing dot), letter case preserved as received; `\.`, `\\` and
// `\DDD` escapes stand for bytes that cannot appear literally in a label.

export interface Question {
  name: string;
  type: number;
  class: number;
}

/** Character-strings (TXT, HINFO, NAPTR, CAA value ...) are raw bytes: DNS text is not UTF-8. */
export type CharString = Uint8Array;

export interface AData { address: string }            // A, AAAA (textual address)
export interface NameData { target: string }          // NS, CNAME, PTR, DNAME, MD, MF, MB, MG, MR
export interface SOAData {
  mname: string; rname: string;
  serial: number; refresh: number; retry: number; expire: number; minimum: number;
}
export interface MXData { preference: number; exchange: string }
export interface TXTData { strings: CharString[] }     // TXT, SPF
export interface HINFOData { cpu: CharString; os: CharString }
export interface SRVData { priority: number; weight: number; port: number; target: string }
export interface CAAData { flags: number; tag: string; value: CharString }
export interface NAPTRData {
  order: number; preference: number;
  flags: CharString; services: CharString; regexp: CharString; replacement: string;
}
export interface DSData { keyTag: number; algorithm: number; digestType: number; digest: Uint8Array } // DS, CDS, TA, DLV
export interface DNSKEYData { flags: number; protocol: number; algorithm: number; publicKey: Uint8Array } // DNSKEY, CDNSKEY, KEY
export interface RRSIGData {
  typeCovered: number; algorithm: number; labels: number; originalTTL: number;
  expiration: number; inception: number; keyTag: number; signerName: string; signature: Uint8Array;
}
export interface NSECData { nextName: string; types: number[] }
export interface NSEC3Data {
  hashAlgorithm: number; flags: number; iterations: number;
  salt: Uint8Array; nextHashed: Uint8Array; types: number[];
}
export interface NSEC3PARAMData { hashAlgorithm: number; flags: number; iterations: number; salt: Uint8Array }
export interface TLSAData { usage: number; selector: number; matchingType: number; certificate: Uint8Array } // TLSA, SMIMEA
/** One SvcParam, value kept as wire bytes (key order as received). */
export interface SvcParam { key: number; value: Uint8Array }
export interface SVCBData { priority: number; target: string; params: SvcParam[] } // SVCB, HTTPS
/** RFC 3597: any type without a structured form. */
export interface OpaqueData { raw: Uint8Array }

export type RData =
  | AData | NameData | SOAData | MXData | TXTData | HINFOData | SRVData | CAAData | NAPTRData
  | DSData | DNSKEYData | RRSIGData | NSECData | NSEC3Data | NSEC3PARAMData | TLSAData
  | SVCBData | OpaqueData;

export interface ResourceRecord<D extends RData = RData> {
  name: string;
  type: number;
  class: number;
  ttl: number;
  data: D;
}

/** An EDNS0 option, value byte-exact as received. */
export interface EdnsOption { code: number; data: Uint8Array }

/** The OPT pseudo-record, lifted out of the additional section. */
export interface Edns {
  udpSize: number;       // the OPT's CLASS field
  version: number;
  /** DO bit. */
  do: boolean;
  /** The 15 remaining flag bits (Z), normally 0. */
  z: number;
  options: EdnsOption[];
  /** Owner name of the OPT record; always "." in valid messages, kept for byte-exactness. */
  name?: string;
}

export interface Message {
  id: number;
  qr: boolean;
  opcode: number;
  aa: boolean;
  tc: boolean;
  rd: boolean;
  ra: boolean;
  z: boolean;
  ad: boolean;
  cd: boolean;
  /** Full 12-bit rcode: low 4 bits in the header, high 8 bits in the OPT record. */
  rcode: number;
  question: Question[];
  answer: ResourceRecord[];
  authority: ResourceRecord[];
  /** Additional records except the OPT record (see `edns`). */
  additional: ResourceRecord[];
  /** Present when the message carries an OPT record. */
  edns?: Edns;
}
