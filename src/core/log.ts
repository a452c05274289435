// CoreDNS logging conventions: everything to stdout, no timestamp, a level
// prefix, and `plugin/<name>: ` for plugin loggers. [DEBUG] lines appear only
// while the debug plugin is active. [FATAL] exits with status 1.

import { writeSync } from 'node:fs';
import type { PluginLogger } from '../plugin/plugin.ts';

export type LogSink = (line: string) => void;

const stdoutSink: LogSink = (line) => { process.stdout.write(line + '\n'); };
let sink: LogSink = stdoutSink;
let debugEnabled = false;
let fatalHandler: (line: string) => never = (line) => {
  // Written synchronously so the line is out before the process ends.
  if (sink === stdoutSink) {
    try { writeSync(1, line + '\n'); } catch { /* stdout gone */ }
  } else {
    sink(line);
  }
  // eslint-disable-next-line no-restricted-properties -- removed by the contracts work
  process.exit(1);
};

/** Redirect log output (tests and embedders). Returns the previous sink. */
export function setLogSink(s: LogSink): LogSink {
  const prev = sink;
  sink = s;
  return prev;
}

/** Replace what [FATAL] does (an embedding application may not want process.exit). */
export function setFatalHandler(h: (line: string) => never): void {
  fatalHandler = h;
}

export function setDebug(on: boolean): void { debugEnabled = on; }
export function isDebug(): boolean { return debugEnabled; }

export function writeLine(line: string): void { sink(line); }

export const log = {
  debug(msg: string): void { if (debugEnabled) sink('[DEBUG] ' + msg); },
  info(msg: string): void { sink('[INFO] ' + msg); },
  warning(msg: string): void { sink('[WARNING] ' + msg); },
  error(msg: string): void { sink('[ERROR] ' + msg); },
  fatal(msg: string): never { return fatalHandler('[FATAL] ' + msg); },
};

export function pluginLogger(name: string): PluginLogger {
  const p = 'plugin/' + name + ': ';
  return {
    debug(msg) { if (debugEnabled) sink('[DEBUG] ' + p + msg); },
    info(msg) { sink('[INFO] ' + p + msg); },
    warning(msg) { sink('[WARNING] ' + p + msg); },
    error(msg) { sink('[ERROR] ' + p + msg); },
    fatal(msg): never { return fatalHandler('[FATAL] ' + p + msg); },
  };
}
