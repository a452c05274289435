import type { PluginDefinition, SetupContext } from '../plugin.ts';
import type { Dispenser } from '../../corefile/dispenser.ts';
import { parseDuration, DurationError } from '../pkg/duration.ts';
import { ErrorsHandler, Pattern, type LogLevel } from './errors.ts';
import { GoRegexp } from '../pkg/regexp.ts';

const MAX_REGEXP_LEN = 10000;
const LEVELS = new Set<string>(['warning', 'error', 'info', 'debug']);

function parseConsolidate(d: Dispenser): Pattern {
  const args = d.remainingArgs();
  if (args.length < 2 || args.length > 4) throw d.argErr();
  let period: bigint;
  try {
    period = parseDuration(args[0]);
  } catch (e) {
    if (e instanceof DurationError) throw d.err(e.message);
    throw e;
  }
  const src = args[1];
  const srcLen = Buffer.byteLength(src);
  if (srcLen > MAX_REGEXP_LEN) throw d.errf(`regex pattern too long: ${srcLen} > ${MAX_REGEXP_LEN}`);
  let re: GoRegexp;
  try {
    re = GoRegexp.compile(src);
  } catch (e) {
    throw d.err(e instanceof Error ? e.message : String(e));
  }
  let level: LogLevel | undefined;
  let showFirst = false;
  for (const a of args.slice(2)) {
    if (LEVELS.has(a)) {
      if (level !== undefined) throw d.errf('multiple log levels specified in consolidate');
      if (showFirst) throw d.errf('log level must come before show_first in consolidate');
      level = a as LogLevel;
    } else if (a === 'show_first') {
      showFirst = true;
    } else {
      throw d.errf(`unknown option in consolidate: ${a}`);
    }
  }
  return new Pattern(period, src, re, level ?? 'error', showFirst);
}

/** What `errors [stdout] { stacktrace; consolidate ... }` configures. */
export interface ErrorsOptions {
  /** `stacktrace`: log a stack trace with recovered panics (a setting of the block). */
  stacktrace: boolean;
  /** The `consolidate DURATION REGEXP [LEVEL] [show_first]` patterns, in order. */
  patterns: Pattern[];
}

/** Reads the block's `errors` directive (once per block). */
export function parse(c: SetupContext): ErrorsOptions {
  const d = c.dispenser;
  const o: ErrorsOptions = { stacktrace: false, patterns: [] };
  let i = 0;
  while (d.next()) {
    if (i > 0) throw new Error('plugin/errors: this plugin can only be used once per Server Block');
    i++;
    const args = d.remainingArgs();
    if (args.length === 1) {
      if (args[0] !== 'stdout') throw d.errf(`invalid log file: ${args[0]}`);
    } else if (args.length > 1) {
      throw d.argErr();
    }
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'stacktrace':
          o.stacktrace = true;
          break;
        case 'consolidate':
          o.patterns.push(parseConsolidate(d));
          break;
        default:
          throw d.syntaxErr('Unknown field ' + d.val());
      }
    }
  }
  return o;
}

export const plugin: PluginDefinition = {
  name: 'errors',
  setup(c) {
    const o = parse(c);
    if (o.stacktrace) c.config.stacktrace = true;
    const handler = new ErrorsHandler(o.patterns, c.log);
    c.onShutdown(() => { handler.stop(); });
    c.addPlugin((next) => {
      handler.next = next;
      return handler;
    });
  },
};
