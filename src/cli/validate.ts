// `nodens validate [-conf FILE] [-dns.port PORT]`: loads the Corefile the server
// would load (-conf, stdin, ./Corefile or the default) through every plugin's
// setup without opening a listener (src/core/validate.ts). Errors go to stderr
// worded as the server prints them; exit 1 on an error or a setup warning
// (the parser's warnings are printed but do not fail),
// 0 with one OK line on stdout, 2 on a usage error.

import { writeSync } from 'node:fs';
import { createRegistry } from '../index.ts';
import { loadCorefile } from '../core/loader.ts';
import { validateCorefile, type ValidationResult } from '../core/validate.ts';
import { parseFlags, usage, type FlagError, type FlagSpec } from './flags.ts';

const FLAGS: FlagSpec[] = [
  { name: 'conf', kind: 'string', default: '', usage: 'Corefile to validate (default "Corefile")' },
  { name: 'dns.port', kind: 'string', default: '53', usage: 'Default port' },
  { name: 'p', kind: 'string', default: '53', usage: 'Default port', aliasOf: 'dns.port' },
];

/** Load and validate what `-conf`/`-dns.port` name; `error` is a load failure worded as the server words it. */
export async function validateConf(conf: string, port: string): Promise<ValidationResult & { file: string }> {
  let input;
  try {
    input = loadCorefile(conf, port);
  } catch (e) {
    return { ok: false, error: (e as Error).message, warnings: [], notices: [], serverBlocks: 0, file: conf };
  }
  const r = await validateCorefile({ corefile: input.contents, file: input.file, defaultPort: port, registry: createRegistry() });
  return { ...r, file: input.file };
}

/** The result as lines: the error and warnings for stderr, or the OK line for stdout. */
export function formatValidation(r: ValidationResult & { file: string }): { stdout: string; stderr: string } {
  const lines = [...r.notices, ...r.warnings];
  if (r.error !== undefined) lines.push(r.error);
  const stderr = lines.map((l) => l + '\n').join('');
  if (r.ok) return { stdout: `${r.file}: OK (${r.serverBlocks} server block${r.serverBlocks === 1 ? '' : 's'})\n`, stderr };
  return { stdout: '', stderr };
}

/** Entry point of `nodens validate ARGS`; returns the exit status. */
export async function runValidate(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags(FLAGS, argv);
  } catch (e) {
    const fe = e as FlagError;
    writeSync(2, fe.helpRequested ? usage('nodens validate', FLAGS) : `${fe.message}\n${usage('nodens validate', FLAGS)}`);
    return fe.helpRequested ? 0 : 2;
  }
  if (parsed.rest.length > 0) {
    writeSync(2, `extra command line arguments: [${parsed.rest.join(' ')}]\n${usage('nodens validate', FLAGS)}`);
    return 2;
  }
  const r = await validateConf(parsed.values.get('conf') ?? '', parsed.values.get('dns.port') ?? '53');
  const out = formatValidation(r);
  if (out.stdout !== '') writeSync(1, out.stdout);
  if (out.stderr !== '') writeSync(2, out.stderr);
  return r.ok ? 0 : 1;
}
