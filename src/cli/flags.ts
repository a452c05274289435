// Go's `flag` package rules, which CoreDNS's command line follows: one or two
// dashes, `-name=value` or `-name value` (booleans only take `=value`),
// parsing stops at the first non-flag argument or after `--`. Values are quoted
// in messages as Go's %q quotes them.

import { goQuote } from '../corefile/address.ts';
import { parseDuration } from '../plugin/pkg/duration.ts';

export interface FlagSpec {
  name: string;
  /** `duration`: a Go time.Duration flag (the value must parse as one; kept as written). */
  kind: 'string' | 'bool' | 'duration';
  usage: string;
  default: string;
  /** Shown in usage as: -name string */
  showDefault?: boolean;
  /** Other spellings sharing the same value (e.g. -p for -dns.port). */
  aliasOf?: string;
}

export class FlagError extends Error {
  readonly helpRequested: boolean;
  constructor(message: string, helpRequested = false) {
    super(message);
    this.helpRequested = helpRequested;
  }
}

export interface ParsedFlags {
  values: Map<string, string>;
  rest: string[];
}

export function parseFlags(specs: FlagSpec[], argv: string[]): ParsedFlags {
  const byName = new Map(specs.map((s) => [s.name, s]));
  const values = new Map<string, string>();
  for (const s of specs) if (s.aliasOf === undefined) values.set(s.name, s.default);
  let i = 0;
  while (i < argv.length) {
    const arg = argv[i]!;
    if (arg.length < 2 || arg[0] !== '-') break;
    let name = arg.slice(1);
    if (name.startsWith('-')) {
      name = name.slice(1);
      if (name === '') { i++; break; } // "--" ends the flags
    }
    if (name === '' || name[0] === '-' || name[0] === '=') throw new FlagError(`bad flag syntax: ${arg}`);
    i++;
    let value: string | undefined;
    const eq = name.indexOf('=');
    if (eq >= 0) {
      value = name.slice(eq + 1);
      name = name.slice(0, eq);
    }
    const spec = byName.get(name);
    if (spec === undefined) {
      if (name === 'h' || name === 'help') throw new FlagError('', true);
      throw new FlagError(`flag provided but not defined: -${name}`);
    }
    const target = spec.aliasOf ?? spec.name;
    if (spec.kind === 'bool') {
      if (value === undefined) value = 'true';
      const b = parseGoBool(value);
      if (b === undefined) throw new FlagError(`invalid boolean value ${goQuote(value)} for -${name}: parse error`);
      values.set(target, String(b));
    } else {
      if (value === undefined) {
        if (i >= argv.length) throw new FlagError(`flag needs an argument: -${name}`);
        value = argv[i++]!;
      }
      if (spec.kind === 'duration') {
        try { parseDuration(value); } catch { throw new FlagError(`invalid value ${goQuote(value)} for flag -${name}: parse error`); }
      }
      values.set(target, value);
    }
  }
  return { values, rest: argv.slice(i) };
}

function parseGoBool(v: string): boolean | undefined {
  if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(v)) return true;
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(v)) return false;
  return undefined;
}

/** Usage text in the shape Go's flag.PrintDefaults prints. */
export function usage(program: string, specs: FlagSpec[]): string {
  const lines = [`Usage of ${program}:`];
  for (const s of [...specs].sort((a, b) => a.name.localeCompare(b.name))) {
    lines.push(`  -${s.name}${s.kind === 'bool' ? '' : ' ' + s.kind}`);
    let u = `    \t${s.usage}`;
    if (s.kind === 'string' && s.default !== '') u += ` (default ${goQuote(s.default)})`;
    if (s.kind === 'duration' && s.default !== '0s') u += ` (default ${s.default})`;
    if (s.kind === 'bool' && s.default === 'true') u += ' (default true)';
    lines.push(u);
  }
  return lines.join('\n') + '\n';
}
