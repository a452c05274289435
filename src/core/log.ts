// CoreDNS logging conventions: everything to stdout, no timestamp, a level
// prefix, and `plugin/<name>: ` for plugin loggers. [DEBUG] lines appear only
// while the debug plugin is active.
//
// Each running server owns a Logger (sink, debug flag, fatal handler), so two
// servers embedded in one process do not share them. `defaultLogger` is the
// one a server gets when its embedder supplies none; `setLogSink` redirects it.

import type { PluginLogger, ServerLogger } from '../plugin/plugin.ts';

export type LogSink = (line: string) => void;

/** What happens after a [FATAL] line has been written (the CLI exits 1; see src/cli). */
export type FatalHandler = (line: string) => void;

const stdoutSink: LogSink = (line) => { process.stdout.write(line + '\n'); };

/** CoreDNS's -log-format: `text` lines with a level prefix, or one JSON object per line (slog's JSON handler). */
export type LogFormat = 'text' | 'json';

/** Typed fields of a JSON record (CoreDNS's log plugin adds these in JSON mode). */
export type LogAttrs = Record<string, string | number | boolean | null>;

export interface LoggerOptions {
  /** `json`: records as CoreDNS 1.15 writes them with -log-format json. Default `text`. */
  format?: LogFormat;
  /** Where lines go; default: the process-wide default sink (stdout unless `setLogSink` changed it). */
  sink?: LogSink;
  /** Runs after a [FATAL] line; default: nothing more (the embedder's server decides, see Runtime). */
  onFatal?: FatalHandler;
}

type Level = 'DEBUG' | 'INFO' | 'WARN' | 'ERROR' | 'FATAL';
const TEXT_PREFIX: Record<Level, string> = { DEBUG: '[DEBUG] ', INFO: '[INFO] ', WARN: '[WARNING] ', ERROR: '[ERROR] ', FATAL: '[FATAL] ' };

export class Logger implements ServerLogger {
  private readonly ownSink: LogSink | undefined;
  /** -log-format json: every line is a JSON record. */
  json: boolean;
  /** Set per server by the instance in force: true while some block has `debug`. */
  debugEnabled = false;
  onFatal: FatalHandler | undefined;

  constructor(opts: LoggerOptions = {}) {
    this.ownSink = opts.sink;
    this.onFatal = opts.onFatal;
    this.json = opts.format === 'json';
  }

  /** Write one line as is. */
  write(line: string): void { (this.ownSink ?? defaultSink)(line); }

  /** One message at a level: `[LEVEL] plugin/<name>: msg`, or a JSON record with a `plugin` field. */
  private emit(level: Level, plugin: string, msg: string, attrs?: LogAttrs): string {
    const line = this.json
      ? jsonRecord(level, msg, plugin === '' ? attrs : { plugin, ...attrs })
      : TEXT_PREFIX[level] + (plugin === '' ? '' : 'plugin/' + plugin + ': ') + msg;
    this.write(line);
    return line;
  }

  debug(msg: string): void { if (this.debugEnabled) this.emit('DEBUG', '', msg); }
  info(msg: string): void { this.emit('INFO', '', msg); }
  warning(msg: string): void { this.emit('WARN', '', msg); }
  error(msg: string): void { this.emit('ERROR', '', msg); }
  // The line is written first: `onFatal?.(emit(...))` would skip the write when no handler is set.
  fatal(msg: string): void {
    const line = this.emit('FATAL', '', msg);
    this.onFatal?.(line);
  }
  /** An [INFO] line that in JSON mode carries typed fields (CoreDNS's log plugin). */
  infoAttrs(msg: string, attrs: LogAttrs): void {
    if (this.json) this.write(jsonRecord('INFO', msg, attrs));
    else this.emit('INFO', '', msg);
  }

  /**
   * A line of caddy's standard logger in CoreDNS (signals, reloads, pidfile), whose text carries its
   * own level prefix: as is in text mode, and in JSON mode an INFO record with the whole line as msg.
   */
  std(line: string): void { this.write(this.json ? jsonRecord('INFO', line) : line); }

  /** A logger whose lines carry `plugin/<name>: `. */
  plugin(name: string): PluginLogger {
    const base = this;
    return {
      debug(msg) { if (base.debugEnabled) base.emit('DEBUG', name, msg); },
      info(msg) { base.emit('INFO', name, msg); },
      warning(msg) { base.emit('WARN', name, msg); },
      error(msg) { base.emit('ERROR', name, msg); },
      fatal(msg) {
        const line = base.emit('FATAL', name, msg);
        base.onFatal?.(line);
      },
      infoAttrs(msg, attrs) {
        if (base.json) base.write(jsonRecord('INFO', msg, { plugin: name, ...attrs }));
        else base.emit('INFO', name, msg);
      },
      get debugEnabled() { return base.debugEnabled; },
      get json() { return base.json; },
    };
  }
}

// ---- JSON records as Go's log/slog JSON handler writes them ----

/** `{"time":…,"level":…,"msg":…,<attrs>}`: slog's key order and its string escaping. */
export function jsonRecord(level: Level, msg: string, attrs?: LogAttrs): string {
  let s = '{"time":"' + rfc3339Nano(nowMs()) + '","level":"' + level + '","msg":' + goJSONString(msg);
  if (attrs !== undefined) {
    for (const k in attrs) {
      const v = attrs[k];
      s += ',' + goJSONString(k) + ':' + (typeof v === 'string' ? goJSONString(v) : v === null ? 'null' : String(v));
    }
  }
  return s + '}';
}

/** Wall-clock ms minus performance.now(), set on first use and again whenever the wall clock moved away. */
let clockAnchor: number | undefined;

/** The wall clock in ms with µs digits from the monotonic clock (Go's records carry ns). */
function nowMs(): number {
  const mono = performance.now();
  const wall = Date.now();
  let t = clockAnchor === undefined ? NaN : clockAnchor + mono;
  if (!(t > wall - 2 && t < wall + 2)) {
    clockAnchor = wall - mono + (mono % 1);
    t = clockAnchor + mono;
  }
  return t;
}

/** Go's time.RFC3339Nano of a time in milliseconds since the epoch (µs precision here), in local time. */
export function rfc3339Nano(ms: number): string {
  const whole = Math.floor(ms);
  const d = new Date(whole);
  const offsetMin = -d.getTimezoneOffset();
  const local = new Date(whole + offsetMin * 60_000);
  const p = (n: number, w = 2): string => String(n).padStart(w, '0');
  const micros = Math.round((ms - whole) * 1000) + (whole % 1000) * 1000;
  // RFC3339Nano drops trailing zeros of the fraction, and the dot when nothing is left.
  const frac = p(micros, 6).replace(/0+$/, '');
  let zone = 'Z';
  if (offsetMin !== 0) {
    const a = Math.abs(offsetMin);
    zone = (offsetMin < 0 ? '-' : '+') + p(Math.floor(a / 60)) + ':' + p(a % 60);
  }
  return `${p(local.getUTCFullYear(), 4)}-${p(local.getUTCMonth() + 1)}-${p(local.getUTCDate())}T${p(local.getUTCHours())}:${p(local.getUTCMinutes())}:${p(local.getUTCSeconds())}${frac === '' ? '' : '.' + frac}${zone}`;
}

/** A JSON string escaped as slog does: \n \r \t, \u00XX for other controls, U+2028/9 escaped, <>& kept. */
export function goJSONString(s: string): string {
  let out = '"';
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let esc: string | undefined;
    if (c < 0x20 || c === 0x22 || c === 0x5c) {
      esc = c === 0x22 ? '\\"' : c === 0x5c ? '\\\\' : c === 0x0a ? '\\n' : c === 0x0d ? '\\r' : c === 0x09 ? '\\t' : '\\u00' + c.toString(16).padStart(2, '0');
    } else if (c === 0x2028 || c === 0x2029) {
      esc = '\\u' + c.toString(16);
    } else if (c >= 0xd800 && c <= 0xdfff) {
      // A lone surrogate is what invalid UTF-8 becomes here; Go writes U+FFFD for invalid bytes.
      const pair = c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
      if (pair) { i++; continue; }
      esc = '\\ufffd';
    }
    if (esc === undefined) continue;
    out += s.slice(start, i) + esc;
    start = i + 1;
  }
  return out + s.slice(start) + '"';
}

let defaultSink: LogSink = stdoutSink;

/** Redirect the default sink (tests, and embedders that supply no logger). Returns the previous sink. */
export function setLogSink(s: LogSink): LogSink {
  const prev = defaultSink;
  defaultSink = s;
  return prev;
}

/** The logger of code that runs outside any server (the CLI before a server starts, doctor). */
export const log = new Logger();

/** A plugin logger on the default logger (for code outside any server, and tests). */
export function pluginLogger(name: string): PluginLogger { return log.plugin(name); }
