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

export interface LoggerOptions {
  /** Where lines go; default: the process-wide default sink (stdout unless `setLogSink` changed it). */
  sink?: LogSink;
  /** Runs after a [FATAL] line; default: nothing more (the embedder's server decides, see Runtime). */
  onFatal?: FatalHandler;
}

export class Logger implements ServerLogger {
  private readonly ownSink: LogSink | undefined;
  /** Set per server by the instance in force: true while some block has `debug`. */
  debugEnabled = false;
  onFatal: FatalHandler | undefined;

  constructor(opts: LoggerOptions = {}) {
    this.ownSink = opts.sink;
    this.onFatal = opts.onFatal;
  }

  /** Write one line as is. */
  write(line: string): void { (this.ownSink ?? defaultSink)(line); }

  debug(msg: string): void { if (this.debugEnabled) this.write('[DEBUG] ' + msg); }
  info(msg: string): void { this.write('[INFO] ' + msg); }
  warning(msg: string): void { this.write('[WARNING] ' + msg); }
  error(msg: string): void { this.write('[ERROR] ' + msg); }
  fatal(msg: string): void {
    const line = '[FATAL] ' + msg;
    this.write(line);
    this.onFatal?.(line);
  }

  /** A logger whose lines carry `plugin/<name>: `. */
  plugin(name: string): PluginLogger {
    const p = 'plugin/' + name + ': ';
    const base = this;
    return {
      debug(msg) { base.debug(p + msg); },
      info(msg) { base.info(p + msg); },
      warning(msg) { base.warning(p + msg); },
      error(msg) { base.error(p + msg); },
      fatal(msg) { base.fatal(p + msg); },
      get debugEnabled() { return base.debugEnabled; },
    };
  }
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
