// errors: logs the errors the rest of the chain reports, optionally
// consolidating frequent ones into periodic summaries.

import type { Handler, HandlerResult, PluginLogger, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import { typeToString } from '../../wire/constants.ts';
import { asciiLower } from '../../wire/name.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { formatDuration, toMillis } from '../pkg/duration.ts';
import type { GoRegexp } from '../pkg/regexp.ts';

export type LogLevel = 'error' | 'warning' | 'info' | 'debug';

export class Pattern {
  readonly period: bigint;
  readonly source: string;
  readonly regexp: GoRegexp;
  readonly level: LogLevel;
  readonly showFirst: boolean;
  count = 0;
  timer: NodeJS.Timeout | undefined = undefined;

  constructor(period: bigint, source: string, regexp: GoRegexp, level: LogLevel, showFirst: boolean) {
    this.period = period;
    this.source = source;
    this.regexp = regexp;
    this.level = level;
    this.showFirst = showFirst;
  }
}

export class ErrorsHandler implements Handler {
  readonly name = 'errors';
  next: Handler | undefined = undefined;
  readonly patterns: Pattern[];
  private readonly log: PluginLogger;
  private stopped = false;

  constructor(patterns: Pattern[], log: PluginLogger) {
    this.patterns = patterns;
    this.log = log;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    let r: HandlerResult;
    try {
      r = nextOrFailure(this.name, this.next, req, w);
    } catch (e) {
      this.report(req, e);
      throw e;
    }
    if (typeof r === 'number') return r;
    return r.then(
      (rc) => {
        req.plugin = this.name;
        return rc;
      },
      (e: unknown) => {
        req.plugin = this.name;
        this.report(req, e);
        throw e;
      },
    );
  }

  /** Log a reported error (a PluginError); anything else is a panic the server deals with. */
  private report(req: Request, e: unknown): void {
    if (!(e instanceof PluginError)) return;
    const text = e.message;
    let level: LogLevel = 'error';
    const patterns = this.patterns;
    for (let i = 0; i < patterns.length; i++) {
      if (patterns[i].regexp.test(text)) {
        if (this.consolidate(patterns[i])) return;
        level = patterns[i].level;
        break;
      }
    }
    // CoreDNS reads the name and type after the chain ran: a query rewritten in place shows its new ones.
    const name = req.replyBase.question[0]?.name;
    this.emit(level, `${e.rcode} ${name === undefined ? '.' : asciiLower(name)} ${typeToString(req.qtype)}: ${text}`);
  }

  /** Count one error for `p`; false when it must be printed now (first of a period with show_first, or stopped). */
  private consolidate(p: Pattern): boolean {
    if (this.stopped) return false;
    p.count++;
    if (p.count === 1) {
      p.timer = setTimeout(() => {
        p.timer = undefined;
        this.summary(p);
      }, toMillis(p.period));
      p.timer.unref();
      return !p.showFirst;
    }
    return true;
  }

  private summary(p: Pattern): void {
    const cnt = p.count;
    p.count = 0;
    if (cnt === 0) return;
    if (cnt > 1 || !p.showFirst) {
      this.emit(p.level, `${cnt} errors like '${p.source}' occurred in last ${formatDuration(p.period)}`);
    }
  }

  private emit(level: LogLevel, msg: string): void {
    switch (level) {
      case 'warning': this.log.warning(msg); break;
      case 'info': this.log.info(msg); break;
      case 'debug': this.log.debug(msg); break;
      default: this.log.error(msg);
    }
  }

  /** Shutdown: stop counting and print the pending summaries now. */
  stop(): void {
    this.stopped = true;
    for (const p of this.patterns) {
      if (p.timer !== undefined) {
        clearTimeout(p.timer);
        p.timer = undefined;
        this.summary(p);
      }
    }
  }
}
