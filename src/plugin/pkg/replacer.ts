// The log plugin's placeholder replacer (CoreDNS plugin/pkg/replacer).
//
// A format string is compiled once, at setup, into a list of parts exactly as
// CoreDNS splits it (find a `}`, back up to the nearest `{`; known labels and
// `{/metadata}` become placeholders, anything else stays literal). Formatting a
// line then only concatenates strings.

import type { Request } from '../../core/request.ts';
import type { Message } from '../../wire/types.ts';
import { classToString, rcodeToString, typeToString } from '../../wire/constants.ts';

/** What the replacer needs to know about the reply (a Recorder fits). */
export interface RecordedReply {
  readonly rcode: number;
  readonly len: number;
  readonly msg: Message | undefined;
}

export const EMPTY_VALUE = '-';

const L_TYPE = 1, L_NAME = 2, L_CLASS = 3, L_PROTO = 4, L_SIZE = 5, L_REMOTE = 6, L_PORT = 7, L_LOCAL = 8,
  L_ID = 9, L_OPCODE = 10, L_DO = 11, L_BUFSIZE = 12, L_RCODE = 13, L_RSIZE = 14, L_DURATION = 15, L_RFLAGS = 16;
/** Kind 0 = literal, -1 = metadata, otherwise one of the label numbers above. */
const LITERAL = 0;
const METADATA = -1;

const LABELS = new Map<string, number>([
  ['{type}', L_TYPE], ['{name}', L_NAME], ['{class}', L_CLASS], ['{proto}', L_PROTO], ['{size}', L_SIZE],
  ['{remote}', L_REMOTE], ['{port}', L_PORT], ['{local}', L_LOCAL],
  ['{>id}', L_ID], ['{>opcode}', L_OPCODE], ['{>do}', L_DO], ['{>bufsize}', L_BUFSIZE],
  ['{rcode}', L_RCODE], ['{rsize}', L_RSIZE], ['{duration}', L_DURATION], ['{>rflags}', L_RFLAGS],
]);

/** A compiled format: parallel arrays of part kinds and values (literal text or metadata label). */
export class CompiledFormat {
  readonly kinds: number[];
  readonly values: string[];
  /** The format uses `{/label}` metadata placeholders. */
  readonly usesMetadata: boolean;

  constructor(kinds: number[], values: string[]) {
    this.kinds = kinds;
    this.values = values;
    this.usesMetadata = kinds.includes(METADATA);
  }

  /** Renders the format for one query. `rec` undefined: recorded placeholders print `-`. */
  format(req: Request, rec: RecordedReply | undefined): string {
    const kinds = this.kinds;
    const values = this.values;
    let out = '';
    for (let i = 0; i < kinds.length; i++) {
      const k = kinds[i];
      if (k === LITERAL) out += values[i];
      else if (k === METADATA) out += req.metadata(values[i]) ?? EMPTY_VALUE;
      else out += labelValue(k, req, rec);
    }
    return out;
  }
}

/** Compiles a format string (CoreDNS parseFormat). */
export function compileFormat(s: string): CompiledFormat {
  const kinds: number[] = [];
  const values: string[] = [];
  const push = (k: number, v: string): void => {
    // Adjacent literals are merged: same output, fewer parts.
    const n = kinds.length;
    if (k === LITERAL && n > 0 && kinds[n - 1] === LITERAL) values[n - 1] += v;
    else {
      kinds.push(k);
      values.push(v);
    }
  };
  for (;;) {
    const j = s.indexOf('}');
    if (j < 0) break;
    const i = s.lastIndexOf('{', j);
    if (i < 0) {
      push(LITERAL, s.slice(0, j + 1));
      s = s.slice(j + 1);
      continue;
    }
    const val = s.slice(i, j + 1);
    const label = LABELS.get(val);
    if (label !== undefined) {
      if (i !== 0) push(LITERAL, s.slice(0, i));
      push(label, val);
    } else if (val.startsWith('{/')) {
      if (i !== 0) push(LITERAL, s.slice(0, i));
      push(METADATA, val.slice(2, val.length - 1));
    } else {
      push(LITERAL, s.slice(0, j + 1));
    }
    s = s.slice(j + 1);
  }
  if (s.length !== 0) push(LITERAL, s);
  return new CompiledFormat(kinds, values);
}

function bracketed(addr: string): string {
  return addr.includes(':') ? '[' + addr + ']' : addr;
}

function labelValue(k: number, req: Request, rec: RecordedReply | undefined): string {
  switch (k) {
    case L_RCODE: {
      if (rec === undefined || rec.msg === undefined) return EMPTY_VALUE;
      const s = rcodeToString(rec.rcode);
      return s.startsWith('RCODE') ? String(rec.rcode) : s;
    }
    case L_RSIZE: return rec === undefined ? EMPTY_VALUE : String(rec.len);
    case L_DURATION: return rec === undefined ? EMPTY_VALUE : formatSeconds(process.hrtime.bigint() - req.start) + 's';
    case L_RFLAGS: return rec !== undefined && rec.msg !== undefined ? flagsToString(rec.msg) : EMPTY_VALUE;
    case L_TYPE: return typeToString(req.qtype);
    case L_NAME: return req.name;
    case L_CLASS: return classToString(req.qclass);
    case L_PROTO: return req.proto;
    case L_SIZE: return String(req.length);
    case L_REMOTE: return bracketed(req.remoteAddress);
    case L_PORT: return String(req.remotePort);
    case L_LOCAL: return bracketed(req.localAddress);
    case L_ID: return String(req.msg.id);
    case L_OPCODE: return String(req.msg.opcode);
    case L_DO: return req.do ? 'true' : 'false';
    case L_BUFSIZE: return String(req.size);
    default: return EMPTY_VALUE;
  }
}

/** Set header flags in the order qr,aa,tc,rd,ra,z,ad,cd, comma-joined ('' when none). */
export function flagsToString(m: Message): string {
  let s = '';
  if (m.qr) s += ',qr';
  if (m.aa) s += ',aa';
  if (m.tc) s += ',tc';
  if (m.rd) s += ',rd';
  if (m.ra) s += ',ra';
  if (m.z) s += ',z';
  if (m.ad) s += ',ad';
  if (m.cd) s += ',cd';
  return s.length > 0 ? s.slice(1) : s;
}

/**
 * Nanoseconds as seconds the way Go prints Duration.Seconds() with
 * strconv.FormatFloat(f, 'f', -1, 64): shortest round-trip digits, never an exponent.
 */
export function formatSeconds(ns: bigint): string {
  const sec = ns / 1000000000n;
  const nsec = ns - sec * 1000000000n;
  return plainFloat(Number(sec) + Number(nsec) / 1e9);
}

/** Shortest round-trip decimal form of `x` without exponent notation. */
export function plainFloat(x: number): string {
  const s = String(x);
  const e = s.indexOf('e');
  if (e < 0) return s;
  const neg = s.startsWith('-');
  const mant = s.slice(neg ? 1 : 0, e);
  const exp = Number(s.slice(e + 1));
  const dot = mant.indexOf('.');
  const digits = dot < 0 ? mant : mant.slice(0, dot) + mant.slice(dot + 1);
  const intLen = (dot < 0 ? mant.length : dot) + exp;
  let out: string;
  if (intLen <= 0) out = '0.' + '0'.repeat(-intLen) + digits;
  else if (intLen >= digits.length) out = digits + '0'.repeat(intLen - digits.length);
  else out = digits.slice(0, intLen) + '.' + digits.slice(intLen);
  return neg ? '-' + out : out;
}
