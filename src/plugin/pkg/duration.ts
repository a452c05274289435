// Go's time.ParseDuration and time.Duration.String(), on nanoseconds held in a bigint.

const NS = 1n;
const US = 1000n;
const MS = 1000000n;
const S = 1000000000n;
const M = 60n * S;
const H = 60n * M;
const MAX = (1n << 63n) - 1n;

const UNITS = new Map<string, bigint>([
  ['ns', NS], ['us', US], ['\u00b5s', US], ['\u03bcs', US], ['ms', MS], ['s', S], ['m', M], ['h', H],
]);

/** Thrown by parseDuration; `message` is Go's text, e.g. `time: invalid duration "x"`. */
export class DurationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DurationError';
  }
}

function quote(s: string): string {
  return JSON.stringify(s);
}

/** Parses a Go duration string ("300ms", "-1.5h", "2h45m") into nanoseconds. */
export function parseDuration(s: string): bigint {
  const orig = s;
  let neg = false;
  let i = 0;
  if (s.length > 0 && (s[0] === '-' || s[0] === '+')) {
    neg = s[0] === '-';
    i = 1;
  }
  if (s.slice(i) === '0') return 0n;
  if (i === s.length) throw new DurationError('time: invalid duration ' + quote(orig));
  let d = 0n;
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (!(c === 46 || (c >= 48 && c <= 57))) throw new DurationError('time: invalid duration ' + quote(orig));
    // integer part
    let start = i;
    let v = 0n;
    while (i < s.length && s.charCodeAt(i) >= 48 && s.charCodeAt(i) <= 57) {
      v = v * 10n + BigInt(s.charCodeAt(i) - 48);
      if (v > MAX) throw new DurationError('time: invalid duration ' + quote(orig));
      i++;
    }
    const pre = i !== start;
    // fraction
    let f = 0n;
    let scale = 1n;
    let post = false;
    if (i < s.length && s[i] === '.') {
      i++;
      start = i;
      let overflow = false;
      while (i < s.length && s.charCodeAt(i) >= 48 && s.charCodeAt(i) <= 57) {
        if (!overflow) {
          if (f > MAX / 10n) overflow = true;
          else {
            f = f * 10n + BigInt(s.charCodeAt(i) - 48);
            scale *= 10n;
          }
        }
        i++;
      }
      post = i !== start;
    }
    if (!pre && !post) throw new DurationError('time: invalid duration ' + quote(orig));
    // unit
    start = i;
    while (i < s.length) {
      const u = s.charCodeAt(i);
      if (u === 46 || (u >= 48 && u <= 57)) break;
      i++;
    }
    if (i === start) throw new DurationError('time: missing unit in duration ' + quote(orig));
    const u = s.slice(start, i);
    const unit = UNITS.get(u);
    if (unit === undefined) throw new DurationError('time: unknown unit ' + quote(u) + ' in duration ' + quote(orig));
    if (v > MAX / unit) throw new DurationError('time: invalid duration ' + quote(orig));
    v *= unit;
    if (f > 0n) {
      v += (f * unit) / scale;
      if (v > MAX) throw new DurationError('time: invalid duration ' + quote(orig));
    }
    d += v;
    if (d > MAX) throw new DurationError('time: invalid duration ' + quote(orig));
  }
  return neg ? -d : d;
}

function fracString(v: bigint, prec: number): string {
  // v has `prec` fractional decimal digits; print them without trailing zeros
  let s = v.toString();
  if (prec === 0) return s;
  const p = 10n ** BigInt(prec);
  const whole = v / p;
  let frac = (v % p).toString().padStart(prec, '0');
  let end = frac.length;
  while (end > 0 && frac.charCodeAt(end - 1) === 48) end--;
  frac = frac.slice(0, end);
  s = whole.toString();
  return frac.length > 0 ? s + '.' + frac : s;
}

/** Go's Duration.String(): `0s`, `500ms`, `1.5µs`, `30s`, `5m0s`, `1h0m0s`, `1m30.5s`. */
export function formatDuration(d: bigint): string {
  if (d === 0n) return '0s';
  const neg = d < 0n;
  let u = neg ? -d : d;
  let out: string;
  if (u < S) {
    if (u < US) out = u.toString() + 'ns';
    else if (u < MS) out = fracString(u, 3) + '\u00b5s';
    else out = fracString(u, 6) + 'ms';
  } else {
    const h = u / H;
    u -= h * H;
    const m = u / M;
    u -= m * M;
    out = fracString(u, 9) + 's';
    if (h > 0n) out = h.toString() + 'h' + m.toString() + 'm' + out;
    else if (m > 0n) out = m.toString() + 'm' + out;
  }
  return neg ? '-' + out : out;
}

/** Nanoseconds to milliseconds for timers (at least 1 ms for positive durations). */
export function toMillis(d: bigint): number {
  if (d <= 0n) return 0;
  const ms = Number(d / MS);
  return ms < 1 ? 1 : ms;
}
