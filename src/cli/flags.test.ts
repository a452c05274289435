// The command line as Go's `flag` package parses CoreDNS's flag set
// (coremain/run.go): parseFlags and usage on their own, then bin/nodens's real
// flag table through a child process, and — when the reference binary is at
// hand — the same command lines through CoreDNS itself.

import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { parseFlags, usage, FlagError, type FlagSpec } from './flags.ts';
import { COREDNS_VERSION } from '../version.ts';

// coremain/run.go init(): the flags CoreDNS defines, with their usage strings and defaults.
const COREDNS_FLAGS: FlagSpec[] = [
  { name: 'conf', kind: 'string', default: '', usage: 'Corefile to load (default "Corefile")' },
  { name: 'plugins', kind: 'bool', default: 'false', usage: 'List installed plugins' },
  { name: 'pidfile', kind: 'string', default: '', usage: 'Path to write pid file' },
  { name: 'version', kind: 'bool', default: 'false', usage: 'Show version' },
  { name: 'quiet', kind: 'bool', default: 'false', usage: 'Quiet mode (no initialization output)' },
  { name: 'dns.port', kind: 'string', default: '53', usage: 'Default port' },
  { name: 'p', kind: 'string', default: '53', usage: 'Default port', aliasOf: 'dns.port' },
  { name: 'log-format', kind: 'string', default: 'text', usage: 'Log format (text or json)' },
];

// `coredns -h` of CoreDNS (stderr, exit 0), program name aside.
const COREDNS_USAGE_BODY = [
  '  -conf string',
  '    \tCorefile to load (default "Corefile")',
  '  -dns.port string',
  '    \tDefault port (default "53")',
  '  -log-format string',
  '    \tLog format (text or json) (default "text")',
  '  -p string',
  '    \tDefault port (default "53")',
  '  -pidfile string',
  '    \tPath to write pid file',
  '  -plugins',
  '    \tList installed plugins',
  '  -quiet',
  '    \tQuiet mode (no initialization output)',
  '  -version',
  '    \tShow version',
].join('\n') + '\n';

function parse(argv: string[]): { values: Record<string, string>; rest: string[] } {
  const r = parseFlags(COREDNS_FLAGS, argv);
  return { values: Object.fromEntries(r.values), rest: r.rest };
}

function parseError(argv: string[]): FlagError {
  try {
    parseFlags(COREDNS_FLAGS, argv);
  } catch (e) {
    assert.ok(e instanceof FlagError, `not a FlagError: ${String(e)}`);
    return e;
  }
  assert.fail(`${JSON.stringify(argv)} parsed without error`);
}

const DEFAULTS = { conf: '', plugins: 'false', pidfile: '', version: 'false', quiet: 'false', 'dns.port': '53', 'log-format': 'text' };

describe('parseFlags with CoreDNS\'s flag set', () => {
  test('no arguments: every default, nothing left over; aliases have no value of their own', () => {
    assert.deepEqual(parse([]), { values: DEFAULTS, rest: [] });
  });

  test('string flags: -name value, -name=value, --name value, --name=value', () => {
    for (const argv of [['-conf', 'x'], ['-conf=x'], ['--conf', 'x'], ['--conf=x']]) {
      assert.deepEqual(parse(argv), { values: { ...DEFAULTS, conf: 'x' }, rest: [] }, argv.join(' '));
    }
    assert.equal(parse(['-pidfile', '/run/coredns.pid']).values.pidfile, '/run/coredns.pid');
    assert.equal(parse(['-dns.port', '1053']).values['dns.port'], '1053');
    assert.equal(parse(['-dns.port=1053']).values['dns.port'], '1053');
  });

  test('a string value may be empty, contain `=`, or start with a dash', () => {
    assert.equal(parse(['-conf=']).values.conf, '');
    assert.equal(parse(['-conf', '']).values.conf, '');
    assert.equal(parse(['-conf=a=b']).values.conf, 'a=b');
    // The next argument is the value, whatever it looks like.
    assert.deepEqual(parse(['-conf', '-quiet']), { values: { ...DEFAULTS, conf: '-quiet' }, rest: [] });
  });

  test('-p and -dns.port share one value; the last one given wins', () => {
    assert.equal(parse(['-p', '1053']).values['dns.port'], '1053');
    assert.equal(parse(['-p', '1', '-dns.port', '2']).values['dns.port'], '2');
    assert.equal(parse(['-dns.port', '2', '-p=1']).values['dns.port'], '1');
    assert.equal(parse(['-conf', 'a', '-conf', 'b']).values.conf, 'b');
    assert.equal('p' in parse(['-p', '1']).values, false);
  });

  test('booleans: bare means true; only -name=value sets a value, with strconv.ParseBool spellings', () => {
    assert.equal(parse(['-quiet']).values.quiet, 'true');
    assert.equal(parse(['--quiet']).values.quiet, 'true');
    for (const t of ['1', 't', 'T', 'true', 'TRUE', 'True']) assert.equal(parse([`-quiet=${t}`]).values.quiet, 'true', t);
    for (const f of ['0', 'f', 'F', 'false', 'FALSE', 'False']) assert.equal(parse([`-quiet=${f}`]).values.quiet, 'false', f);
    assert.equal(parse(['-quiet', '-quiet=false']).values.quiet, 'false');
    // `-quiet false`: the flag is true and `false` is the first non-flag argument.
    assert.deepEqual(parse(['-quiet', 'false']), { values: { ...DEFAULTS, quiet: 'true' }, rest: ['false'] });
    assert.deepEqual(parse(['-version', '-plugins=true']).values, { ...DEFAULTS, version: 'true', plugins: 'true' });
  });

  test('a bad boolean value', () => {
    assert.equal(parseError(['-quiet=maybe']).message, 'invalid boolean value "maybe" for -quiet: parse error');
    assert.equal(parseError(['-quiet=']).message, 'invalid boolean value "" for -quiet: parse error');
    assert.equal(parseError(['--version=yes']).message, 'invalid boolean value "yes" for -version: parse error');
    assert.equal(parseError(['-quiet=tRUE']).message, 'invalid boolean value "tRUE" for -quiet: parse error');
  });

  test('the bad value is quoted as Go\'s %q (strconv.Quote) quotes it', () => {
    // CoreDNS 1.14.7, byte for byte: -quiet=a"b, a backslash, control characters, printable and
    // non-printable non-ASCII characters.
    assert.equal(parseError(['-quiet=a"b']).message, 'invalid boolean value "a\\"b" for -quiet: parse error');
    assert.equal(parseError(['-version=é\\x01']).message, 'invalid boolean value "é\\\\x01" for -version: parse error');
    assert.equal(parseError(['-plugins=\t\x7f\u00a0é\u{1F600}']).message, 'invalid boolean value "\\t\\x7f\\u00a0é\u{1F600}" for -plugins: parse error');
    assert.equal(parseError(['-quiet=\x00\n\x1b']).message, 'invalid boolean value "\\x00\\n\\x1b" for -quiet: parse error');
  });

  test('parsing stops at the first non-flag argument, at `-` and after `--`', () => {
    assert.deepEqual(parse(['foo', '-quiet']), { values: DEFAULTS, rest: ['foo', '-quiet'] });
    assert.deepEqual(parse(['-quiet', 'foo', '-conf', 'x']), { values: { ...DEFAULTS, quiet: 'true' }, rest: ['foo', '-conf', 'x'] });
    assert.deepEqual(parse(['-', 'x']), { values: DEFAULTS, rest: ['-', 'x'] });
    assert.deepEqual(parse(['--', '-version']), { values: DEFAULTS, rest: ['-version'] });
    assert.deepEqual(parse(['-quiet', '--', '--']), { values: { ...DEFAULTS, quiet: 'true' }, rest: ['--'] });
  });

  test('unknown flags', () => {
    const e = parseError(['-nope']);
    assert.equal(e.message, 'flag provided but not defined: -nope');
    assert.equal(e.helpRequested, false);
    assert.equal(parseError(['--nope=1']).message, 'flag provided but not defined: -nope');
    assert.equal(parseError(['-conf', 'x', '-Quiet']).message, 'flag provided but not defined: -Quiet');
    // Flags are not prefixes of one another.
    assert.equal(parseError(['-ver']).message, 'flag provided but not defined: -ver');
  });

  test('a string flag at the end without its value', () => {
    assert.equal(parseError(['-conf']).message, 'flag needs an argument: -conf');
    assert.equal(parseError(['-quiet', '--dns.port']).message, 'flag needs an argument: -dns.port');
    assert.equal(parseError(['-p']).message, 'flag needs an argument: -p');
  });

  test('bad flag syntax: three dashes, or `=` right after the dashes', () => {
    assert.equal(parseError(['---conf']).message, 'bad flag syntax: ---conf');
    assert.equal(parseError(['-=x']).message, 'bad flag syntax: -=x');
    assert.equal(parseError(['--=x']).message, 'bad flag syntax: --=x');
  });

  test('-h and -help ask for the usage (also with two dashes or a value)', () => {
    for (const a of ['-h', '-help', '--h', '--help', '-h=x']) {
      const e = parseError([a]);
      assert.equal(e.helpRequested, true, a);
      assert.equal(e.message, '', a);
    }
    // Flags before it are parsed first; a bad one is reported instead.
    assert.equal(parseError(['-nope', '-h']).helpRequested, false);
  });
});

describe('usage', () => {
  test('prints the flags like Go\'s flag.PrintDefaults: sorted, type for strings, non-empty defaults', () => {
    assert.equal(usage('coredns', COREDNS_FLAGS), 'Usage of coredns:\n' + COREDNS_USAGE_BODY);
  });

  test('a string default is quoted as Go\'s %q quotes it', () => {
    const spec: FlagSpec = { name: 'x', kind: 'string', default: 'a"b\\c\u00a0', usage: 'X' };
    assert.equal(usage('t', [spec]), 'Usage of t:\n  -x string\n    \tX (default "a\\"b\\\\c\\u00a0")\n');
  });
});

// ---------------------------------------------------------------- the real command line

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = join(ROOT, 'src', 'cli', 'main.ts');

interface Run { code: number | null; stdout: string; stderr: string }

function run(file: string, args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    // The compile cache bin/nodens uses: a warm start of main.ts takes ~0.2 s instead of ~0.5 s.
    const env = { ...process.env, NODE_OPTIONS: '', NODE_COMPILE_CACHE: join(ROOT, '.cache', 'node-compile-cache') };
    execFile(file, args, { cwd: ROOT, timeout: 30000, env }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr });
    });
  });
}

// main.ts defines the flag table and starts on import, so it is run as bin/nodens does (a few runs only: each is a process).
const nodens = (args: string[]): Promise<Run> => run(process.execPath, [MAIN, ...args]);

// nodens's one extra flag, printed in its sorted place (last).
const WORKERS_USAGE = '  -workers string\n    \tnodens: serve with N worker threads (0 = one per CPU) (default "1")\n';
// After the flags, in CoreDNS's format above, nodens's subcommands.
const SUBCOMMANDS = [
  'Subcommands:',
  '  nodens doctor [flags]      check a Corefile and this host for forwarding loops before deploying',
  '  nodens validate [flags]    load a Corefile through every plugin\'s setup without serving; exit 1 on an error',
  '  nodens node-cache [flags]  run as node-local-dns does (link-local address, iptables rules, health port)',
  'Run "nodens <subcommand> -h" for its flags.',
].join('\n') + '\n';
const NODENS_USAGE = 'Usage of nodens:\n' + COREDNS_USAGE_BODY + WORKERS_USAGE + SUBCOMMANDS;

/**
 * What CoreDNS's Run() does with a command line, up to loading the Corefile, as
 * main.ts implements it: help → usage, exit 0; a flag error → the error line and
 * the usage, exit 2; arguments left → Go's log line, exit 1; -version → exit 0.
 */
function expectedRun(argv: string[], program: string, flags: FlagSpec[] = COREDNS_FLAGS): { code: number; stderr: string; version: boolean } | undefined {
  try {
    const r = parseFlags(flags, argv);
    if (r.rest.length > 0) return { code: 1, stderr: `extra command line arguments: [${r.rest.join(' ')}]\n`, version: false };
    if (r.values.get('version') === 'true') return { code: 0, stderr: '', version: true };
    return undefined; // would go on to load a Corefile
  } catch (e) {
    const fe = e as FlagError;
    const u = usage(program, flags);
    return fe.helpRequested ? { code: 0, stderr: u, version: false } : { code: 2, stderr: `${fe.message}\n${u}`, version: false };
  }
}

/** Go's log timestamp taken out of a startup error line. */
function untimed(stderr: string): string {
  return stderr.replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d /, '');
}

describe('bin/nodens command line', () => {
  test('-h: the usage of CoreDNS\'s flags plus -workers, then the subcommands, on stderr, exit 0', async () => {
    assert.deepEqual(await nodens(['-h']), { code: 0, stdout: '', stderr: NODENS_USAGE });
  });

  test('a flag error: the error line, then the usage, on stderr; exit 2', async () => {
    assert.deepEqual(await nodens(['-version=false', '-conf']), { code: 2, stdout: '', stderr: `flag needs an argument: -conf\n${NODENS_USAGE}` });
    assert.deepEqual(await nodens(['-nope']), { code: 2, stdout: '', stderr: `flag provided but not defined: -nope\n${NODENS_USAGE}` });
  });

  test('arguments left after the flags: Go\'s log line with its timestamp on stderr, exit 1', async () => {
    const r = await nodens(['-quiet', 'false', '-version']);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d extra command line arguments: \[false -version\]\n$/);
  });

  test('every flag of the table, in every form, is accepted before -version (which exits before any Corefile is read)', async () => {
    const r = await nodens(['-quiet=F', '--conf=/nope', '-p', '1', '-dns.port=1053', '-pidfile', '/nonexistent/pid', '--plugins=false', '-workers', '4', '-version=T']);
    assert.equal(r.code, 0);
    assert.ok(r.stdout.startsWith(`CoreDNS-${COREDNS_VERSION}\n`), r.stdout);
    assert.equal(r.stderr, '');
  });

  test('-version=false and -plugins=0 neither print nor exit: the -conf file is loaded next', async () => {
    const r = await nodens(['-version=false', '-plugins=0', '-conf', '/nope']);
    assert.deepEqual(r, { code: 1, stdout: '', stderr: 'loading Caddyfile via flag: open /nope: no such file or directory\n' });
  });
});

// ---------------------------------------------------------------- against CoreDNS itself

/** The reference CoreDNS: scripts/coredns-reference.sh prints it, building it once when missing (.ci/run builds it first). */
function referenceBinary(): string {
  const r = spawnSync(join(ROOT, 'scripts', 'coredns-reference.sh'), { encoding: 'utf8', timeout: 900_000 });
  assert.equal(r.status, 0, `scripts/coredns-reference.sh failed: ${r.stderr}`);
  return r.stdout.trim();
}

// CoreDNS 1.15.0's flag set, -log-format included, is nodens's (without -workers).
const REFERENCE_FLAGS: FlagSpec[] = COREDNS_FLAGS;

describe('the reference CoreDNS agrees', () => {
  const REFERENCE = referenceBinary();
  test('same exit status, stderr and -version decision as parseFlags/usage predict, for each command line', async () => {
    const lines = [
      ['-nope'], ['--nope=1'], ['-conf'], ['-quiet=maybe'], ['-quiet='], ['--version=yes'], ['---conf'], ['-=x'], ['--=x'],
      ['-h'], ['-help'], ['--help'], ['--h'], ['-h=x'], ['-nope', '-h'], ['-version=false', '-plugins=false', '-conf'], ['-p'],
      ['-quiet', 'false'], ['-', 'x'], ['--', '-version'], ['foo', '-version'], ['-quiet', '--', '--'],
      ['-version'], ['-quiet', '-version'], ['-quiet=F', '-version'], ['-version=1'], ['-version=T'], ['-p', '1', '-version'],
      ['-conf', '-quiet', '-version'], ['-conf=a=b', '-version'], ['-plugins=0', '-version'], ['-log-format'], ['-log-format=text', '-version'],
      ['-quiet=a"b'], ['-version=é\\x01'], ['-plugins=\t\x7f\u00a0é\u{1F600}'], ['-quiet=\x01\n\x1b'], ['--quiet=\\'],
    ];
    const rs = await Promise.all(lines.map((argv) => run(REFERENCE!, argv)));
    rs.forEach((ref, i) => {
      const argv = lines[i]!;
      const what = argv.join(' ');
      const want = expectedRun(argv, REFERENCE!, REFERENCE_FLAGS);
      assert.ok(want !== undefined, what);
      assert.equal(ref.code, want.code, what);
      assert.equal(untimed(ref.stderr), want.stderr, what);
      assert.equal(ref.stdout.startsWith(`CoreDNS-${COREDNS_VERSION}\n`), want.version, what);
    });
  });
});
