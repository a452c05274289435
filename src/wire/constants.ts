// Wire constants and their textual forms, spelled exactly as miekg/dns spells them
// (CoreDNS prints these in logs and metrics).

/** Resource record types (IANA "Resource Record (RR) TYPEs"). */
export const RRType = {
  None: 0,
  A: 1,
  NS: 2,
  MD: 3,
  MF: 4,
  CNAME: 5,
  SOA: 6,
  MB: 7,
  MG: 8,
  MR: 9,
  NULL: 10,
  WKS: 11,
  PTR: 12,
  HINFO: 13,
  MINFO: 14,
  MX: 15,
  TXT: 16,
  RP: 17,
  AFSDB: 18,
  X25: 19,
  ISDN: 20,
  RT: 21,
  NSAPPTR: 23,
  SIG: 24,
  KEY: 25,
  PX: 26,
  GPOS: 27,
  AAAA: 28,
  LOC: 29,
  NXT: 30,
  EID: 31,
  NIMLOC: 32,
  SRV: 33,
  ATMA: 34,
  NAPTR: 35,
  KX: 36,
  CERT: 37,
  DNAME: 39,
  OPT: 41,
  APL: 42,
  DS: 43,
  SSHFP: 44,
  IPSECKEY: 45,
  RRSIG: 46,
  NSEC: 47,
  DNSKEY: 48,
  DHCID: 49,
  NSEC3: 50,
  NSEC3PARAM: 51,
  TLSA: 52,
  SMIMEA: 53,
  HIP: 55,
  NINFO: 56,
  RKEY: 57,
  TALINK: 58,
  CDS: 59,
  CDNSKEY: 60,
  OPENPGPKEY: 61,
  CSYNC: 62,
  ZONEMD: 63,
  SVCB: 64,
  HTTPS: 65,
  SPF: 99,
  UINFO: 100,
  UID: 101,
  GID: 102,
  UNSPEC: 103,
  NID: 104,
  L32: 105,
  L64: 106,
  LP: 107,
  EUI48: 108,
  EUI64: 109,
  NXNAME: 128,
  TKEY: 249,
  TSIG: 250,
  IXFR: 251,
  AXFR: 252,
  MAILB: 253,
  MAILA: 254,
  ANY: 255,
  URI: 256,
  CAA: 257,
  AVC: 258,
  AMTRELAY: 260,
  RESINFO: 261,
  TA: 32768,
  DLV: 32769,
  Reserved: 65535,
} as const;

export const RRClass = {
  IN: 1,
  CS: 2,
  CH: 3,
  HS: 4,
  NONE: 254,
  ANY: 255,
} as const;

export const Rcode = {
  NOERROR: 0,
  FORMERR: 1,
  SERVFAIL: 2,
  NXDOMAIN: 3,
  NOTIMP: 4,
  REFUSED: 5,
  YXDOMAIN: 6,
  YXRRSET: 7,
  NXRRSET: 8,
  NOTAUTH: 9,
  NOTZONE: 10,
  DSOTYPENI: 11,
  BADVERS: 16,
  BADSIG: 16,
  BADKEY: 17,
  BADTIME: 18,
  BADMODE: 19,
  BADNAME: 20,
  BADALG: 21,
  BADTRUNC: 22,
  BADCOOKIE: 23,
} as const;

export const Opcode = {
  QUERY: 0,
  IQUERY: 1,
  STATUS: 2,
  NOTIFY: 4,
  UPDATE: 5,
} as const;

/** EDNS0 option codes (RFC 6891 registry). */
export const EdnsOption = {
  LLQ: 1,
  UL: 2,
  NSID: 3,
  ESU: 4,
  DAU: 5,
  DHU: 6,
  N3U: 7,
  CLIENT_SUBNET: 8,
  EXPIRE: 9,
  COOKIE: 10,
  TCP_KEEPALIVE: 11,
  PADDING: 12,
  CHAIN: 13,
  KEY_TAG: 14,
  EDE: 15,
  CLIENT_TAG: 16,
  SERVER_TAG: 17,
  REPORT_CHANNEL: 18,
  ZONEVERSION: 19,
  LOCAL_START: 0xfde9,
  LOCAL_END: 0xfffe,
} as const;

/** RFC 8914 Extended DNS Error info codes. */
export const ExtendedErrorCode = {
  Other: 0,
  UnsupportedDNSKEYAlgorithm: 1,
  UnsupportedDSDigestType: 2,
  StaleAnswer: 3,
  ForgedAnswer: 4,
  DNSSECIndeterminate: 5,
  DNSSECBogus: 6,
  SignatureExpired: 7,
  SignatureNotYetValid: 8,
  DNSKEYMissing: 9,
  RRSIGsMissing: 10,
  NoZoneKeyBitSet: 11,
  NSECMissing: 12,
  CachedError: 13,
  NotReady: 14,
  Blocked: 15,
  Censored: 16,
  Filtered: 17,
  Prohibited: 18,
  StaleNXDOMAINAnswer: 19,
  NotAuthoritative: 20,
  NotSupported: 21,
  NoReachableAuthority: 22,
  NetworkError: 23,
  InvalidData: 24,
  SignatureExpiredBeforeValid: 25,
  TooEarly: 26,
  UnsupportedNSEC3IterValue: 27,
  UnableToConformToPolicy: 28,
  Synthesized: 29,
  InvalidQueryType: 30,
} as const;

/** miekg/dns ExtendedErrorCodeToString. */
export const extendedErrorCodeText: ReadonlyMap<number, string> = new Map([
  [0, 'Other'],
  [1, 'Unsupported DNSKEY Algorithm'],
  [2, 'Unsupported DS Digest Type'],
  [3, 'Stale Answer'],
  [4, 'Forged Answer'],
  [5, 'DNSSEC Indeterminate'],
  [6, 'DNSSEC Bogus'],
  [7, 'Signature Expired'],
  [8, 'Signature Not Yet Valid'],
  [9, 'DNSKEY Missing'],
  [10, 'RRSIGs Missing'],
  [11, 'No Zone Key Bit Set'],
  [12, 'NSEC Missing'],
  [13, 'Cached Error'],
  [14, 'Not Ready'],
  [15, 'Blocked'],
  [16, 'Censored'],
  [17, 'Filtered'],
  [18, 'Prohibited'],
  [19, 'Stale NXDOMAIN Answer'],
  [20, 'Not Authoritative'],
  [21, 'Not Supported'],
  [22, 'No Reachable Authority'],
  [23, 'Network Error'],
  [24, 'Invalid Data'],
  [25, 'Signature Expired Before Valid'],
  [26, 'Too Early'],
  [27, 'Unsupported NSEC3 Iterations Value'],
  [28, 'Unable To Conform To Policy'],
  [29, 'Synthesized'],
  [30, 'Invalid Query Type'],
]);

export function extendedErrorCodeToString(n: number): string | undefined {
  return extendedErrorCodeText.get(n);
}

// ---- type names (miekg/dns TypeToString; WKS is not in it, so it prints TYPE11) ----

const TYPE_NAMES: string[] = [];
const TYPE_BY_NAME = new Map<string, number>();
for (const [k, v] of Object.entries(RRType)) {
  if (k === 'WKS') continue;
  const name = k === 'NSAPPTR' ? 'NSAP-PTR' : k;
  TYPE_NAMES[v] = name;
  TYPE_BY_NAME.set(name.toUpperCase(), v);
}

/** miekg/dns `Type.String()`: the mnemonic, or `TYPE<n>`. */
export function typeToString(n: number): string {
  const s = TYPE_NAMES[n];
  return s !== undefined ? s : 'TYPE' + n;
}

function parseNumberSuffix(s: string, prefixLen: number, max: number): number | undefined {
  if (s.length <= prefixLen || s.length > prefixLen + 5) return undefined;
  let n = 0;
  for (let i = prefixLen; i < s.length; i++) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return undefined;
    n = n * 10 + c;
  }
  return n <= max ? n : undefined;
}

/** Mnemonic (case-insensitive) or `TYPE<n>` to the type number; undefined when unknown. */
export function stringToType(s: string): number | undefined {
  const u = s.toUpperCase();
  const t = TYPE_BY_NAME.get(u);
  if (t !== undefined) return t;
  if (u.startsWith('TYPE')) return parseNumberSuffix(u, 4, 0xffff);
  return undefined;
}

const CLASS_NAMES = new Map<number, string>([[1, 'IN'], [2, 'CS'], [3, 'CH'], [4, 'HS'], [254, 'NONE'], [255, 'ANY']]);
const CLASS_BY_NAME = new Map<string, number>([...CLASS_NAMES].map(([n, s]) => [s, n]));

/** miekg/dns `Class.String()`: mnemonic or `CLASS<n>`. */
export function classToString(n: number): string {
  const s = CLASS_NAMES.get(n);
  return s !== undefined ? s : 'CLASS' + n;
}

/** Mnemonic (case-insensitive) or `CLASS<n>`; undefined when unknown. */
export function stringToClass(s: string): number | undefined {
  const u = s.toUpperCase();
  const c = CLASS_BY_NAME.get(u);
  if (c !== undefined) return c;
  if (u.startsWith('CLASS')) return parseNumberSuffix(u, 5, 0xffff);
  return undefined;
}

// miekg/dns RcodeToString (16 prints BADSIG, as in miekg).
const RCODE_NAMES = new Map<number, string>([
  [0, 'NOERROR'], [1, 'FORMERR'], [2, 'SERVFAIL'], [3, 'NXDOMAIN'], [4, 'NOTIMP'], [5, 'REFUSED'],
  [6, 'YXDOMAIN'], [7, 'YXRRSET'], [8, 'NXRRSET'], [9, 'NOTAUTH'], [10, 'NOTZONE'], [11, 'DSOTYPENI'],
  [16, 'BADSIG'], [17, 'BADKEY'], [18, 'BADTIME'], [19, 'BADMODE'], [20, 'BADNAME'], [21, 'BADALG'],
  [22, 'BADTRUNC'], [23, 'BADCOOKIE'],
]);
const RCODE_BY_NAME = new Map<string, number>([...RCODE_NAMES].map(([n, s]) => [s, n]));
RCODE_BY_NAME.set('BADVERS', 16);
RCODE_BY_NAME.set('NOTIMPL', 4);

/**
 * miekg/dns RcodeToString; unknown values print `RCODE<n>` (CoreDNS's `rcode.ToString`,
 * used in logs and metrics labels).
 */
export function rcodeToString(n: number): string {
  const s = RCODE_NAMES.get(n);
  return s !== undefined ? s : 'RCODE' + n;
}

/** Rcode mnemonic (case-insensitive; BADVERS and NOTIMPL accepted) or `RCODE<n>`; undefined when unknown. */
export function stringToRcode(s: string): number | undefined {
  const u = s.toUpperCase();
  const r = RCODE_BY_NAME.get(u);
  if (r !== undefined) return r;
  if (u.startsWith('RCODE')) return parseNumberSuffix(u, 5, 0xfff);
  return undefined;
}

const OPCODE_NAMES = new Map<number, string>([[0, 'QUERY'], [1, 'IQUERY'], [2, 'STATUS'], [4, 'NOTIFY'], [5, 'UPDATE']]);
const OPCODE_BY_NAME = new Map<string, number>([...OPCODE_NAMES].map(([n, s]) => [s, n]));

/** miekg/dns OpcodeToString; unknown values print `OPCODE<n>`. */
export function opcodeToString(n: number): string {
  const s = OPCODE_NAMES.get(n);
  return s !== undefined ? s : 'OPCODE' + n;
}

export function stringToOpcode(s: string): number | undefined {
  const u = s.toUpperCase();
  const r = OPCODE_BY_NAME.get(u);
  if (r !== undefined) return r;
  if (u.startsWith('OPCODE')) return parseNumberSuffix(u, 6, 15);
  return undefined;
}
