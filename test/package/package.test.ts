// The npm package as a user gets it: `npm pack` of this checkout (dist/ must be built: `npm test` builds
// first), its file list, then a fresh project that installs the tarball (runtime dependencies from the npm
// cache or registry), imports `startServer` from 'nodens' and answers dig, runs the installed bin (and its
// refusal on the machine's old system Node), and compiles the external TypeScript plugin example against
// the installed .d.ts and serves with it. Measured at ~90 s (mostly npm install and tsc), so .ci/run runs it
// after `npm test` rather than inside it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ROOT } from '../helpers/server.ts';
import { dig } from '../helpers/dig.ts';

const work = mkdtempSync(join(tmpdir(), 'nodens-package-'));
const project = join(work, 'consumer');
/** PATH with this project's Node 24 (and its npm) first. */
const PATH24 = `${dirname(process.execPath)}:${join(ROOT, 'node_modules', '.bin')}:${process.env.PATH ?? ''}`;
const env24 = { ...process.env, PATH: PATH24 };
let tarball = '';

function npm(args: string[], cwd: string): string {
  const r = spawnSync('npm', args, { cwd, env: env24, encoding: 'utf8', timeout: 300_000 });
  assert.equal(r.status, 0, `npm ${args.join(' ')}: ${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** Run `node FILE` in the project until it prints `port N`; returns the port and a stop function. */
async function serve(file: string): Promise<{ port: number; stop: () => Promise<void>; out: () => string }> {
  const p = spawn(process.execPath, [file], { cwd: project, env: env24, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout.on('data', (d: Buffer) => { out += d.toString(); });
  p.stderr.on('data', (d: Buffer) => { out += d.toString(); });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => { reject(new Error(`no port within 30 s: ${out}`)); }, 30_000);
    const check = (): void => {
      const m = /port (\d+)/.exec(out);
      if (m !== null) { clearTimeout(timer); resolve(Number(m[1])); }
    };
    p.stdout.on('data', check);
    p.once('exit', (code) => { clearTimeout(timer); reject(new Error(`exited ${code}: ${out}`)); });
  });
  return {
    port,
    out: () => out,
    stop: () => new Promise<void>((resolve) => { p.removeAllListeners('exit'); p.once('exit', () => { resolve(); }); p.kill('SIGTERM'); }),
  };
}

test('npm pack: the built library, bin, docs and license; no tests, benchmarks, CI or TypeScript sources', () => {
  assert.ok(existsSync(join(ROOT, 'dist', 'index.js')), 'dist/ is not built: run `npm run build` first');
  // prepare would rebuild dist/ (npm test has just built it).
  const packed = JSON.parse(npm(['pack', '--ignore-scripts', '--json', '--pack-destination', work], ROOT)) as Array<{ filename: string; size: number; unpackedSize: number; files: Array<{ path: string }> }>;
  const info = packed[0]!;
  tarball = join(work, info.filename);
  const listed = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).trim().split('\n').map((p) => p.replace(/^package\//, ''));
  assert.deepEqual(listed.slice().sort(), info.files.map((f) => f.path).sort());
  for (const f of ['package.json', 'README.md', 'LICENSE', 'coredns.version', 'bin/nodens', 'dist/index.js', 'dist/index.d.ts', 'dist/cli/bin.js', 'dist/bundle/nodens.js', 'dist/bundle/nodens.js.map', 'dist/plugin/plugin.d.ts', 'src/plugin/forward/README.md', 'man/nodens.1', 'man/nodens-forward.7', 'CHANGELOG.md', 'SECURITY.md']) {
    assert.ok(listed.includes(f), `missing ${f}`);
  }
  for (const f of listed) {
    // The one script shipped: the native addons' build, run at `npm install` of the package.
    if (f === 'scripts/build-native.mjs') continue;
    assert.doesNotMatch(f, /^(test|bench|\.ci|scripts|examples|node_modules|\.cache)\//, f);
    assert.doesNotMatch(f, /\.test\./, f);
    assert.doesNotMatch(f, /\/testdata\//, f);
    assert.ok(!f.startsWith('src/') || f.endsWith('/README.md'), `source file shipped: ${f}`);
  }
  assert.match(readFileSync(join(ROOT, 'LICENSE'), 'utf8'), /Apache License\s+Version 2\.0/);
  // Measured 2026-11-23: 1448 files, 2.16 MB packed, 8.2 MB unpacked (dist/ 1178 of them, with inlined-source maps,
  // of which dist/bundle/ 270 then: what bin/nodens runs, chunks and their maps; docs/api 155). Since the bundle
  // became one CommonJS file, dist/bundle/ holds 3 (nodens.js, its map, package.json). 2026-11-24, after gRPC,
  // dynupdate, proxyproto and Go's full text/template: 1300 files, 2.50 MB packed, 9.5 MB unpacked. The bounds
  // catch an accident (tests, node_modules or a build cache shipped), with room for the code still to come.
  assert.ok(listed.length >= 700 && listed.length <= 1700, `file count ${listed.length}`);
  assert.ok(info.size < 3_200_000, `packed size ${info.size}`);
  assert.ok(info.unpackedSize < 12_500_000, `unpacked size ${info.unpackedSize}`);
});

test('installed into a fresh project: import { startServer } from "nodens" answers dig', async () => {
  assert.notEqual(tarball, '', 'the pack test runs first');
  execFileSync('mkdir', ['-p', project]);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }, null, 2));
  // Runtime dependencies come from the npm cache when present (--prefer-offline), else the registry;
  // @types/node for the TypeScript consumer below.
  npm(['install', '--prefer-offline', '--no-audit', '--no-fund', tarball, '@types/node@24'], project);
  const pkg = JSON.parse(readFileSync(join(project, 'node_modules', 'nodens', 'package.json'), 'utf8')) as { version: string };
  writeFileSync(join(project, 'serve.mjs'), [
    "import { startServer } from 'nodens';",
    "const server = await startServer({ corefile: '.:0 {\\n  whoami\\n}\\n', log: { sink: () => {} } });",
    "console.log(`port ${server.port}`);",
    "process.on('SIGTERM', () => { void server.stop().then(() => process.exit(0)); });",
    '',
  ].join('\n'));
  const s = await serve('serve.mjs');
  try {
    const out = await dig(s.port, 'whoami.example', 'A');
    assert.match(out, /status: NOERROR/, out);
    assert.match(out, /_udp\.whoami\.example\.\s+0\s+IN\s+SRV/, out);
  } finally {
    await s.stop();
  }
  assert.match(pkg.version, /^\d+\.\d+\.\d+/);
});

test('the installed bin: -version and -plugins on Node 24; a clear refusal and exit 1 on the system Node 20', () => {
  const bin = join(project, 'node_modules', '.bin', 'nodens');
  const v = spawnSync('npx', ['nodens', '-version'], { cwd: project, env: env24, encoding: 'utf8', timeout: 60_000 });
  assert.equal(v.status, 0, v.stdout + v.stderr);
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  const coredns = readFileSync(join(ROOT, 'coredns.version'), 'utf8').trim();
  assert.match(v.stdout, new RegExp(`^CoreDNS-${coredns.replaceAll('.', '\\.')}\\n.*node-v24\\.[^,]*, nodens-${version.replaceAll('.', '\\.')}\\n$`));
  const p = spawnSync('npx', ['nodens', '-plugins'], { cwd: project, env: env24, encoding: 'utf8', timeout: 60_000 });
  assert.equal(p.status, 0, p.stdout + p.stderr);
  assert.match(p.stdout, /^acl\n/);
  assert.match(p.stdout, /\nwhoami\n/);
  assert.match(p.stdout, /\nkubernetes\n/);

  // The machine image's Node (CI's too) is older than 24: the installed package has no Node of its own,
  // so the bin uses PATH's and must say so plainly.
  const old = spawnSync('/usr/bin/node', ['--version'], { encoding: 'utf8' });
  assert.equal(old.status, 0, '/usr/bin/node (the system Node) is needed for this check');
  assert.ok(Number(/^v(\d+)/.exec(old.stdout)![1]) < 24, `system Node is ${old.stdout.trim()}: the refusal cannot be checked`);
  const r = spawnSync(bin, ['-version'], { cwd: project, env: { ...process.env, PATH: '/usr/bin:/bin' }, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.equal(r.stdout, '');
  assert.equal(r.stderr, `nodens needs Node.js 24 or newer; /usr/bin/node is ${old.stdout.trim()}.\nInstall Node.js 24 LTS, or put a newer \`node\` first on PATH.\n`);
});

test('the external TypeScript plugin example, compiled against the installed package, serves', async () => {
  const src = join(project, 'src');
  execFileSync('mkdir', ['-p', src]);
  // The example as a user would write it: importing 'nodens' instead of the repository's sources.
  const hello = readFileSync(join(ROOT, 'examples', 'external-plugin', 'hello.ts'), 'utf8');
  assert.match(hello, /from '\.\.\/\.\.\/src\/index\.ts'/);
  writeFileSync(join(src, 'hello.ts'), hello.replaceAll("'../../src/index.ts'", "'nodens'"));
  writeFileSync(join(src, 'main.ts'), [
    "import { startServer } from 'nodens';",
    "import { hello } from './hello.ts';",
    'const server = await startServer({',
    "  corefile: '.:0 {\\n  hello \"hello from a TypeScript plugin\"\\n  whoami\\n}\\n',",
    "  plugins: [{ plugin: hello, before: 'whoami' }],",
    '  log: { sink: () => {} },',
    '});',
    'console.log(`port ${server.port}`);',
    "process.on('SIGTERM', () => { void server.stop().then(() => process.exit(0)); });",
    '',
  ].join('\n'));
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      target: 'es2024', module: 'nodenext', moduleResolution: 'nodenext', strict: true, types: ['node'],
      allowImportingTsExtensions: true, rewriteRelativeImportExtensions: true, rootDir: 'src', outDir: 'out',
    },
    include: ['src'],
  }, null, 2));
  // No skipLibCheck: the installed declarations must type-check as they are.
  const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project], { cwd: project, env: env24, encoding: 'utf8', timeout: 180_000 });
  assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
  assert.ok(existsSync(join(project, 'out', 'main.js')));
  const s = await serve('out/main.js');
  try {
    const txt = await dig(s.port, 'example.org', 'TXT');
    assert.match(txt, /status: NOERROR/, txt);
    assert.match(txt, /example\.org\.\s+0\s+IN\s+TXT\s+"hello from a TypeScript plugin"/, txt);
    // Other types pass on to whoami.
    const a = await dig(s.port, 'example.org', 'A');
    assert.match(a, /_udp\.example\.org\.\s+0\s+IN\s+SRV/, a);
  } finally {
    await s.stop();
  }
});
