import { statSync } from 'node:fs';
import { isAbsolute, join, normalize } from 'node:path';
import { fileLogger } from '../pkg/zone/log.ts';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { originsFromArgsOrServerBlock } from '../../corefile/address.ts';
import { parseDuration, toMillis } from '../pkg/duration.ts';
import { GoRegexp } from '../pkg/regexp.ts';
import { goErrnoText } from '../pkg/zone/errors.ts';
import { Auto } from './auto.ts';
import { isNotifier } from '../pkg/transfer.ts';

/** Longest REGEXP `directory` accepts (CoreDNS's maxRegexpLen). */
const MAX_REGEXP_LEN = 10000;

/** What the block's `auto` lines configure (a later line's ZONES replace an earlier one's, as in CoreDNS). */
export interface AutoOptions {
  /** The zones auto answers for (the block's when none are given). */
  origins: string[];
  /** DIR, with the block's root prepended when relative; '' when `directory` is not given. */
  directory: string;
  /** REGEXP (default `db\.(.*)`), unanchored, matched against each file's base name. */
  regexp: GoRegexp;
  /** ORIGIN_TEMPLATE with each `{` made `${` (Go's Expand syntax); default `${1}`. */
  template: string;
  /** Directory scan and zone reload interval in nanoseconds (default 1m; 0: load once). */
  reload: bigint;
}

/** CoreDNS's rewriteToExpand: `{1}` becomes `${1}`. */
function rewriteToExpand(s: string): string {
  return s.replaceAll('{', '${');
}

/** Go's filepath.Join: joined and cleaned. */
function goJoin(a: string, b: string): string {
  const j = normalize(join(a, b));
  return j.length > 1 && j.endsWith('/') ? j.slice(0, -1) : j;
}

export function parse(c: SetupContext): AutoOptions {
  const d = c.dispenser;
  const o: AutoOptions = {
    origins: [], directory: '', regexp: GoRegexp.compile('db\\.(.*)'), template: '${1}', reload: -1n,
  };
  while (d.next()) {
    o.origins = originsFromArgsOrServerBlock(d.remainingArgs(), c.config.keys);
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'directory': {
          if (!d.nextArg()) throw d.argErr();
          let dir = d.val();
          if (!isAbsolute(dir) && c.config.root !== '') dir = goJoin(c.config.root, dir);
          o.directory = dir;
          try {
            statSync(dir);
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== 'ENOENT') {
              throw d.errf(`Unable to access root path '${dir}': stat ${dir}: ${goErrnoText(e)}`);
            }
            c.log.warning(`Directory does not exist: ${dir}`);
          }
          if (d.nextArg()) {
            if (d.val().length > MAX_REGEXP_LEN) throw d.errf('regexp too large');
            // CoreDNS returns the compile error bare (no file:line).
            o.regexp = GoRegexp.compile(d.val());
            if (o.regexp.groupCount === 0) throw d.errf('Need at least one sub expression');
            if (!d.nextArg()) throw d.argErr();
            o.template = rewriteToExpand(d.val());
          }
          if (d.nextArg()) throw d.argErr();
          break;
        }
        case 'reload': {
          const t = d.remainingArgs();
          if (t.length < 1) throw new Error('reload duration value is expected');
          let v: bigint;
          try {
            v = parseDuration(t[0]!);
          } catch (e) {
            throw new Error('plugin/auto: plugin/file: ' + (e as Error).message);
          }
          if (v < 0n) throw new Error('plugin/auto: plugin/file: invalid duration');
          o.reload = v;
          break;
        }
        case 'upstream':
          // accepted and ignored, as CoreDNS still does
          d.remainingArgs();
          break;
        default:
          throw d.errf(`unknown property '${d.val()}'`);
      }
    }
  }
  if (o.reload === -1n) o.reload = 60_000_000_000n;
  return o;
}

export const plugin: PluginDefinition = {
  name: 'auto',
  setup(c) {
    const o = parse(c);
    const a = new Auto(undefined, o, c.log, fileLogger(c.instance.log));
    let timer: NodeJS.Timeout | undefined;
    c.onStartup(() => {
      const t = c.config.handlers.find((h) => h.name === 'transfer');
      a.notifier = t !== undefined && isNotifier(t) ? t : undefined;
      a.walk();
      void a.notifyAll();
      const ms = toMillis(o.reload);
      if (ms > 0) {
        timer = setInterval(() => { a.walk(); void a.notifyAll(); }, ms);
        timer.unref();
      }
    });
    c.onShutdown(() => {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
      a.shutdown();
    });
    c.addPlugin((next) => a.withNext(next));
  },
};
