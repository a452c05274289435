import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { fqdn } from '../../wire/name.ts';
import { compileFormat, type CompiledFormat } from '../pkg/replacer.ts';
import { ResponseClass, responseClassFromString } from '../pkg/response.ts';
import { Logger, type Rule } from './log.ts';

export const COMMON_LOG_FORMAT =
  '{remote}:{port} - {>id} "{type} {class} {name} {proto} {size} {>do} {>bufsize}" {rcode} {>rflags} {rsize} {duration}';
export const COMBINED_LOG_FORMAT = COMMON_LOG_FORMAT + ' "{>opcode}"';
export const DEFAULT_LOG_FORMAT = COMMON_LOG_FORMAT;

const compiled = new Map<string, CompiledFormat>();
function compile(format: string): CompiledFormat {
  let f = compiled.get(format);
  if (f === undefined) {
    f = compileFormat(format);
    compiled.set(format, f);
  }
  return f;
}

/** One name scope to log, as configured. */
export interface LogRule {
  /** The name scope, made fully qualified (not lower-cased). */
  nameScope: string;
  /** The format, `{common}` and `{combined}` expanded. */
  format: string;
  /** The response classes to log (ResponseClass values; All when no `class` is given). */
  classes: ReadonlySet<number>;
}

/** What the `log [NAMES...] [FORMAT] { class CLASSES... }` lines of a block configure. */
export interface LogOptions {
  /** The rules of every line, in order (a line with several names gives one rule per name). */
  rules: LogRule[];
}

/** Reads every `log` line of the block. */
export function parse(c: SetupContext): LogOptions {
  const d = c.dispenser;
  const rules: LogRule[] = [];
  while (d.next()) {
    let args = d.remainingArgs();
    const added: { nameScope: string; format: string }[] = [];
    if (args.length === 0) {
      added.push({ nameScope: '.', format: DEFAULT_LOG_FORMAT });
    } else if (args.length === 1) {
      added.push({ nameScope: fqdn(args[0]), format: DEFAULT_LOG_FORMAT });
    } else {
      let format = DEFAULT_LOG_FORMAT;
      const last = args[args.length - 1];
      if (last.includes('{')) {
        format = last.replaceAll('{common}', COMMON_LOG_FORMAT).replaceAll('{combined}', COMBINED_LOG_FORMAT);
        args = args.slice(0, args.length - 1);
      }
      for (const a of args) added.push({ nameScope: fqdn(a), format });
    }
    const classes = new Set<number>();
    while (d.nextBlock()) {
      if (d.val() !== 'class') throw d.errf(`unknown property '${d.val()}'`);
      const cls = d.remainingArgs();
      if (cls.length === 0) throw d.argErr();
      for (const s of cls) classes.add(responseClassFromString(s));
    }
    if (classes.size === 0) classes.add(ResponseClass.All);
    for (const r of added) rules.push({ nameScope: r.nameScope, format: r.format, classes });
  }
  return { rules };
}

export const plugin: PluginDefinition = {
  name: 'log',
  setup(c) {
    const o = parse(c);
    const rules: Rule[] = o.rules.map((r) => ({ nameScope: r.nameScope, format: compile(r.format), classes: r.classes }));
    const config = c.config;
    const out = c.instance.log;
    c.addPlugin((next) => new Logger(next, rules, out, config));
  },
};
