// Renders a raw DNS reply as dig-like text, after the normalisations a case declares.
// Decoding of sections uses dns-packet (an oracle independent of nodens's own codec); the header is read
// from the raw bytes so that every bit (including Z and the opcode) is shown.
import dnsPacket from 'dns-packet';
import type { RawReply } from './client.ts';
import { renderTsig, type TsigContext } from './tsig.ts';

export interface Normalise {
  /** sort the records of each section (declared where a plugin legitimately reorders them) */
  shuffle: boolean;
  /** subject TTLs may be lower than (or equal to) the reference's by up to this many seconds */
  ttlDecay: number;
  /** replace implementation version strings in CH TXT version.bind/version.server answers */
  version: boolean;
  /** do not compare the message size (only ever with a justification) */
  ignoreSize: boolean;
  /** do not compare TTLs at all */
  ignoreTtl: boolean;
  /** mask SOA serials (kubernetes: the time each server processed its last change) */
  soaSerial?: boolean;
  /**
   * RRSIGs signed on the fly (dnssec): unless both sides signed in the same second with a deterministic
   * algorithm, the signature bytes are masked and the subject's inception and
   * expiration may differ from the reference's by up to RRSIG_CLOCK_SKEW seconds (same validity span)
   */
  rrsig?: boolean;
}

/** How far apart (seconds) the two servers' signing clocks may be when `rrsig` is declared. */
export const RRSIG_CLOCK_SKEW = 5;

export const DEFAULT_NORMALISE: Normalise = { shuffle: false, ttlDecay: 0, version: false, ignoreSize: false, ignoreTtl: false };

const RCODES = ['NOERROR', 'FORMERR', 'SERVFAIL', 'NXDOMAIN', 'NOTIMP', 'REFUSED', 'YXDOMAIN', 'YXRRSET', 'NXRRSET',
  'NOTAUTH', 'NOTZONE', 'RCODE11', 'RCODE12', 'RCODE13', 'RCODE14', 'RCODE15', 'BADVERS', 'BADKEY', 'BADTIME',
  'BADMODE', 'BADNAME', 'BADALG', 'BADTRUNC', 'BADCOOKIE'];
const OPCODES = ['QUERY', 'IQUERY', 'STATUS', 'OPCODE3', 'NOTIFY', 'UPDATE', 'DSO'];

function rcodeName(n: number): string {
  return RCODES[n] ?? `RCODE${n}`;
}

interface Rec {
  /** record text without TTL: used for sorting and for matching records across the two replies */
  key: string;
  ttl: number | undefined;
  /** presentation before / after the TTL column */
  owner: string;
  rest: string;
}

interface Section {
  title: string;
  records: Rec[];
}

export interface Parsed {
  head: string[];
  sections: Section[];
  tail: string[];
}

function fqdn(n: string): string {
  return n === '.' ? '.' : `${n}.`;
}

function quote(b: Buffer | string): string {
  const buf = typeof b === 'string' ? Buffer.from(b) : b;
  let s = '"';
  for (const c of buf) {
    if (c === 0x22 || c === 0x5c) s += `\\${String.fromCharCode(c)}`;
    else if (c < 0x20 || c > 0x7e) s += `\\${c.toString().padStart(3, '0')}`;
    else s += String.fromCharCode(c);
  }
  return `${s}"`;
}

function jsonish(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => {
    if (x && typeof x === 'object' && (x as { type?: string }).type === 'Buffer' && Array.isArray((x as { data?: unknown }).data)) {
      return `0x${Buffer.from((x as { data: number[] }).data).toString('hex')}`;
    }
    return x;
  });
}

// dns-packet's typings are narrower than what decode returns; read records loosely.
type AnyRec = Record<string, any>;

function rdata(r: AnyRec, localPort: number): string {
  const d = r.data;
  if (Buffer.isBuffer(d)) return `\\# ${d.length} ${d.toString('hex')}`;
  switch (r.type) {
    case 'A': case 'AAAA': return String(d);
    case 'NS': case 'CNAME': case 'PTR': case 'DNAME': return fqdn(String(d));
    case 'MX': return `${d.preference} ${fqdn(d.exchange)}`;
    case 'SOA': return `${fqdn(d.mname)} ${fqdn(d.rname)} ${d.serial} ${d.refresh} ${d.retry} ${d.expire} ${d.minimum}`;
    case 'SRV': {
      const port = d.port === localPort ? '<client-port>' : String(d.port);
      return `${d.priority} ${d.weight} ${port} ${fqdn(d.target)}`;
    }
    case 'TXT': case 'SPF': return (Array.isArray(d) ? d : [d]).map(quote).join(' ');
    case 'HINFO': return `${quote(d.cpu)} ${quote(d.os)}`;
    case 'CAA': return `${d.flags} ${d.tag} ${quote(d.value)}`;
    case 'RRSIG':
      return `${d.typeCovered} ${d.algorithm} ${d.labels} ${d.originalTTL} ${d.expiration} ${d.inception} ${d.keyTag} `
        + `${fqdn(d.signersName)} ${(d.signature as Buffer).toString('base64')}`;
    default: return jsonish(d);
  }
}

function optLines(r: AnyRec): string[] {
  const flags = r.flags as number;
  const names = [];
  if (flags & 0x8000) names.push('do');
  if (flags & 0x7fff) names.push(`0x${(flags & 0x7fff).toString(16).padStart(4, '0')}`);
  const out = [`; EDNS: version: ${r.ednsVersion}, flags: ${names.join(' ')}; udp: ${r.udpPayloadSize}; ext-rcode: ${r.extendedRcode}; owner: ${fqdn(r.name)}`];
  for (const o of (r.options ?? []) as AnyRec[]) {
    const data = Buffer.isBuffer(o.data) ? o.data : Buffer.alloc(0);
    out.push(`; OPTION ${o.code}${o.type && !String(o.type).startsWith('OPTION_') ? ` (${o.type})` : ''}: ${data.length ? data.toString('hex') : '<empty>'}`);
  }
  return out;
}

export function parseReply(reply: RawReply, sentId: number, tsig?: TsigContext): Parsed {
  if (!reply.bytes) return { head: [`;; ${reply.error ?? 'no reply'}`], sections: [], tail: [] };
  const b = reply.bytes;
  if (b.length < 12) return { head: [`;; SHORT reply (${b.length} bytes): ${b.toString('hex')}`], sections: [], tail: [] };
  const id = b.readUInt16BE(0);
  const f = b.readUInt16BE(2);
  const counts = [4, 6, 8, 10].map((o) => b.readUInt16BE(o));
  let decoded: AnyRec;
  try {
    decoded = dnsPacket.decode(b) as AnyRec;
  } catch (e) {
    return {
      head: [`;; MALFORMED reply (${(e as Error).message}), flags 0x${f.toString(16)}, counts ${counts.join('/')}`, `;; ${b.toString('hex')}`],
      sections: [], tail: [],
    };
  }
  const additionals = (decoded.additionals ?? []) as AnyRec[];
  const opts = additionals.filter((r) => r.type === 'OPT');
  const rcode = (f & 0xf) | (opts.length ? (opts[0].extendedRcode << 4) : 0);
  const fl: string[] = [];
  for (const [n, bit] of [['qr', 0x8000], ['aa', 0x0400], ['tc', 0x0200], ['rd', 0x0100], ['ra', 0x0080], ['z', 0x0040], ['ad', 0x0020], ['cd', 0x0010]] as const) {
    if (f & bit) fl.push(n);
  }
  const opcode = (f >> 11) & 0xf;
  const head = [
    `;; ->>HEADER<<- opcode: ${OPCODES[opcode] ?? opcode}, status: ${rcodeName(rcode)}, id: ${id === sentId ? 'ok' : `MISMATCH (sent ${sentId}, got ${id})`}`,
    `;; flags: ${fl.join(' ')}; QUERY: ${counts[0]}, ANSWER: ${counts[1]}, AUTHORITY: ${counts[2]}, ADDITIONAL: ${counts[3]}`,
  ];
  for (const o of opts) {
    head.push(';; OPT PSEUDOSECTION:', ...optLines(o));
    const pos = additionals.indexOf(o);
    if (pos !== additionals.length - 1) head.push(`; (OPT is additional record ${pos + 1} of ${additionals.length}, not the last)`);
  }
  const sections: Section[] = [];
  const qs = ((decoded.questions ?? []) as AnyRec[]).map((q): Rec => {
    const t = `;${fqdn(q.name)}\t${q.class}\t${q.type}`;
    return { key: t, ttl: undefined, owner: t, rest: '' };
  });
  sections.push({ title: ';; QUESTION SECTION:', records: qs });
  const rrs = (title: string, list: AnyRec[]) => {
    const records = list.filter((r) => r.type !== 'OPT').map((r): Rec => {
      const owner = fqdn(r.name);
      // The TSIG record (the last one): time and MAC differ on every run; shown as what they mean.
      const data = r.type === 'TSIG' && r === list[list.length - 1] && Buffer.isBuffer(r.data)
        ? renderTsig(b, owner, r.ttl as number, r.data, sentId, tsig)
        : rdata(r, reply.localPort);
      const rest = `${r.class}${r.flush ? '(flush)' : ''}\t${r.type}\t${data}`;
      return { key: `${owner}\t${rest}`, ttl: r.ttl as number, owner, rest };
    });
    if (records.length) sections.push({ title, records });
  };
  rrs(';; ANSWER SECTION:', (decoded.answers ?? []) as AnyRec[]);
  rrs(';; AUTHORITY SECTION:', (decoded.authorities ?? []) as AnyRec[]);
  rrs(';; ADDITIONAL SECTION:', additionals);
  return { head, sections, tail: [`;; MSG SIZE: ${b.length}`] };
}

const VERSION_RE = /^"[A-Za-z][\w.]*-v?\d+\.\d+(\.\d+)?[^"]*"$/;

const byKey = (a: Rec, b: Rec): number => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);

/**
 * A zone transfer from CoreDNS lists the types of one owner name in Go map order (the file plugin's tree
 * element keeps its RRsets in a map), which changes from run to run. Between the opening and closing SOA,
 * each run of records with the same owner is sorted; the owner order and the SOA bookends stay compared.
 */
function sortTransferRuns(p: Parsed): void {
  const question = p.sections.find((s) => s.title === ';; QUESTION SECTION:')?.records[0]?.key ?? '';
  if (!/\t(AXFR|IXFR)$/.test(question)) return;
  const answer = p.sections.find((s) => s.title === ';; ANSWER SECTION:');
  if (!answer || answer.records.length < 3) return;
  const recs = answer.records;
  const end = recs.length - 1;
  for (let i = 1; i < end;) {
    let j = i + 1;
    while (j < end && recs[j].owner === recs[i].owner) j++;
    if (j - i > 1) recs.splice(i, j - i, ...recs.slice(i, j).sort(byKey));
    i = j;
  }
}

function normaliseOne(p: Parsed, n: Normalise): void {
  sortTransferRuns(p);
  if (n.soaSerial) {
    for (const s of p.sections) {
      for (const r of s.records) {
        if (/^(\S+\tSOA\t\S+ \S+ )\d+/.test(r.rest)) {
          r.rest = r.rest.replace(/^(\S+\tSOA\t\S+ \S+ )\d+/, '$1<serial>');
          r.key = `${r.owner}\t${r.rest}`;
        }
      }
    }
  }
  for (const s of p.sections) {
    if (n.version) {
      for (const r of s.records) {
        if (/^version\.(bind|server)\.$/i.test(r.owner) && /^CH\tTXT\t/.test(r.rest)) {
          const txt = r.rest.slice('CH\tTXT\t'.length);
          if (VERSION_RE.test(txt)) {
            r.rest = 'CH\tTXT\t"<implementation-version>"';
            r.key = `${r.owner}\t${r.rest}`;
          }
        }
      }
    }
    if (n.shuffle && s.title !== ';; QUESTION SECTION:') s.records.sort(byKey);
  }
  if (n.ignoreSize) p.tail = p.tail.filter((l) => !l.startsWith(';; MSG SIZE'));
}

/** Applies normalisations to both replies (TTL decay adjusts the subject towards the reference) and renders. */
export function renderPair(ref: Parsed, sub: Parsed, n: Normalise): [string[], string[]] {
  normaliseOne(ref, n);
  normaliseOne(sub, n);
  if (n.rrsig) normaliseRrsigs(ref, sub);
  for (let i = 0; i < Math.min(ref.sections.length, sub.sections.length); i++) {
    const a = ref.sections[i].records;
    const b = sub.sections[i].records;
    for (let j = 0; j < Math.min(a.length, b.length); j++) {
      const ta = a[j].ttl;
      const tb = b[j].ttl;
      if (ta === undefined || tb === undefined || a[j].key !== b[j].key) continue;
      if (n.ignoreTtl || (tb <= ta && ta - tb <= n.ttlDecay)) b[j].ttl = ta;
    }
  }
  return [render(ref, n), render(sub, n)];
}

const RRSIG_RE = /^(\S+\tRRSIG\t\S+ \d+ \d+ \d+) (\d+) (\d+) (\d+ \S+) \S+$/;

/** DNSSEC algorithms whose signatures are a function of key and data (RSA PKCS#1 v1.5, Ed25519/Ed448). */
const DETERMINISTIC_ALGS = new Set(['1', '5', '7', '8', '10', '15', '16']);

/**
 * RRSIGs at the same place on both sides: signed in the same second with a deterministic algorithm, they must be
 * equal byte for byte; otherwise the subject's inception/expiration are aligned to the reference's when within
 * the clock skew (same validity span) and both signatures masked. Any other RRSIG has its signature masked.
 */
function normaliseRrsigs(ref: Parsed, sub: Parsed): void {
  const setRest = (r: Rec, rest: string): void => {
    r.rest = rest;
    r.key = `${r.owner}\t${rest}`;
  };
  const keep = new Set<Rec>();
  for (let i = 0; i < Math.min(ref.sections.length, sub.sections.length); i++) {
    const a = ref.sections[i].records;
    const b = sub.sections[i].records;
    for (let j = 0; j < Math.min(a.length, b.length); j++) {
      const ma = RRSIG_RE.exec(a[j].rest);
      const mb = RRSIG_RE.exec(b[j].rest);
      if (ma === null || mb === null || ma[1] !== mb[1] || ma[4] !== mb[4]) continue;
      const alg = ma[1].split(' ')[1];
      if (ma[2] === mb[2] && ma[3] === mb[3] && DETERMINISTIC_ALGS.has(alg)) {
        keep.add(a[j]);
        keep.add(b[j]);
        continue;
      }
      const [ea, ia, eb, ib] = [Number(ma[2]), Number(ma[3]), Number(mb[2]), Number(mb[3])];
      if (ea - ia === eb - ib && Math.abs(ia - ib) <= RRSIG_CLOCK_SKEW) {
        setRest(b[j], `${ma[1]} ${ma[2]} ${ma[3]} ${mb[4]} <signature>`);
        setRest(a[j], `${ma[1]} ${ma[2]} ${ma[3]} ${ma[4]} <signature>`);
        keep.add(a[j]);
        keep.add(b[j]);
      }
    }
  }
  for (const p of [ref, sub]) {
    for (const s of p.sections) {
      for (const r of s.records) {
        if (keep.has(r)) continue;
        const m = RRSIG_RE.exec(r.rest);
        if (m !== null) setRest(r, `${m[1]} ${m[2]} ${m[3]} ${m[4]} <signature>`);
      }
    }
  }
}

export function render(p: Parsed, n: Normalise = DEFAULT_NORMALISE): string[] {
  const out = [...p.head];
  for (const s of p.sections) {
    out.push(s.title);
    for (const r of s.records) {
      if (r.ttl === undefined) out.push(r.owner);
      else out.push(`${r.owner}\t${n.ignoreTtl ? '<ttl>' : r.ttl}\t${r.rest}`);
    }
  }
  out.push(...p.tail);
  return out;
}
