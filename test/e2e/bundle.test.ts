// The bundle that bin/nodens runs (dist/bundle/, scripts/bundle.ts; `npm run build` makes it): it starts and
// answers, plugins loaded lazily from their own chunks work, the files found relative to a module (package.json,
// coredns.version, build/native/) are still found from a chunk, and the subcommands run from it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BIN, ROOT, startProcess } from '../helpers/server.ts';
import { dig, status } from '../helpers/dig.ts';
import { COREDNS_VERSION, NODENS_VERSION } from '../../src/version.ts';

const BUNDLE = join(ROOT, 'dist', 'bundle');
const ENTRY = join(BUNDLE, 'nodens.js');

test('npm run build made the bundle: an entry and its chunks, with source maps', () => {
  assert.ok(existsSync(ENTRY), `${ENTRY} is missing: run \`npm run build\``);
  const files = readdirSync(BUNDLE);
  const js = files.filter((f) => f.endsWith('.js'));
  assert.ok(js.length > 10, `code splitting: ${js.length} files`);
  for (const f of js) assert.ok(files.includes(`${f}.map`), `no source map for ${f}`);
  // The maps point at the TypeScript sources.
  const map = JSON.parse(readFileSync(join(BUNDLE, 'nodens.js.map'), 'utf8')) as { sources: string[] };
  assert.ok(map.sources.some((s) => s.endsWith('src/cli/bin.ts')), map.sources.join(' '));
  // @kubernetes/client-node stays in node_modules, imported by the kubernetes plugin's chunk only.
  const importers = js.filter((f) => readFileSync(join(BUNDLE, f), 'utf8').includes('"@kubernetes/client-node"'));
  assert.equal(importers.length, 1, importers.join(' '));
  assert.notEqual(importers[0], 'nodens.js');
  // node:http(s/2) and node:crypto are never imported as ES modules (scripts/bundle.ts: that loads undici and
  // webcrypto), only required; the other builtins keep their imports.
  let required = 0;
  for (const f of js) {
    const text = readFileSync(join(BUNDLE, f), 'utf8');
    assert.doesNotMatch(text, /\bfrom\s*["']node:(https?|http2|crypto)["']/, f);
    required += [...text.matchAll(/__require\("node:(https?|http2|crypto)"\)/g)].length;
  }
  assert.ok(required >= 3, `require() of node:http, https, crypto: ${required}`);
});

test('the module URLs rewritten for a chunk name files that exist (tsc\'s dist/ twin of each module)', () => {
  let seen = 0;
  for (const f of readdirSync(BUNDLE).filter((x) => x.endsWith('.js'))) {
    const text = readFileSync(join(BUNDLE, f), 'utf8');
    for (const m of text.matchAll(/new URL\("(\.\.\/\.\.\/dist\/[^"]+)",import\.meta\.url\)/g)) {
      const target = fileURLToPath(new URL(m[1]!, pathToFileURL(join(BUNDLE, f))));
      assert.ok(existsSync(target), `${f}: ${m[1]} -> ${target}`);
      seen++;
    }
  }
  // version.ts and core/directives.ts at least (native/index.ts too once a module of the start uses an addon).
  assert.ok(seen >= 2, `rewritten module URLs: ${seen}`);
});

test('bin/nodens runs the bundle: -version reads package.json and coredns.version from a chunk', () => {
  const out = execFileSync(BIN, ['-version'], { encoding: 'utf8' });
  assert.equal(out, `CoreDNS-${COREDNS_VERSION}\n${out.split('\n')[1]}\n`);
  assert.match(out, new RegExp(`, nodens-${NODENS_VERSION.replaceAll('.', '\\.')}\\n$`));
  assert.notEqual(NODENS_VERSION, '0.0.0');
});

test('a server from the bundle answers, with lazily loaded plugins (hosts, template, rewrite, whoami)', { timeout: 30_000 }, async () => {
  const p = await startProcess('.:{PORT} {\n  bind 127.0.0.1\n  rewrite name exact alias.example.org. www.example.org.\n' +
    '  hosts {\n    192.0.2.10 www.example.org\n    fallthrough\n  }\n' +
    '  template IN A tpl.example {\n    answer "{{ .Name }} 60 IN A 192.0.2.99"\n  }\n  whoami\n}\n');
  try {
    const cmdline = readFileSync(`/proc/${p.proc.pid}/cmdline`, 'utf8');
    // bin/nodens execs node: the process is node running the bundle's entry.
    assert.ok(cmdline.split('\0').includes(ENTRY), cmdline);
    assert.match(await dig(p.port, '+short', 'www.example.org'), /^192\.0\.2\.10$/m);
    assert.match(await dig(p.port, '+short', 'alias.example.org'), /^192\.0\.2\.10$/m);
    assert.match(await dig(p.port, '+short', 'x.tpl.example'), /^192\.0\.2\.99$/m);
    const who = await dig(p.port, 'other.example.org');
    assert.equal(status(who), 'NOERROR');
    assert.match(who, /_udp\.other\.example\.org\./);
  } finally {
    await p.stop();
  }
});

test('-workers 2 from the bundle: node:cluster re-runs the bundle\'s entry in each worker', { timeout: 30_000 }, async () => {
  const p = await startProcess('.:{PORT} {\n  whoami\n}\n', { args: ['-workers', '2'] });
  try {
    // startProcess returns once the port answers; bin/nodens execs node, so the spawned pid is the primary.
    for (let i = 0; i < 10; i++) assert.equal(status(await dig(p.port, `q${i}.example`)), 'NOERROR');
    const children = readFileSync(`/proc/${p.proc.pid}/task/${p.proc.pid}/children`, 'utf8').trim().split(/\s+/).filter((x) => x !== '');
    assert.equal(children.length, 2, `workers: ${children.join(' ')}`);
    for (const c of children) assert.ok(readFileSync(`/proc/${c}/cmdline`, 'utf8').split('\0').includes(ENTRY));
  } finally {
    await p.stop();
  }
});

test('subcommands from the bundle: validate, doctor, node-cache -h', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-bundle-'));
  const good = join(dir, 'Corefile');
  writeFileSync(good, '.:1053 {\n  cache 30\n  whoami\n}\n');
  const bad = join(dir, 'Corefile.bad');
  writeFileSync(bad, '.:1053 {\n  nosuch\n}\n');
  const v = spawnSync(BIN, ['validate', '-conf', good], { encoding: 'utf8' });
  assert.equal(v.status, 0, v.stdout + v.stderr);
  const vb = spawnSync(BIN, ['validate', '-conf', bad], { encoding: 'utf8' });
  assert.equal(vb.status, 1, vb.stdout + vb.stderr);
  assert.match(vb.stdout + vb.stderr, /nosuch/);
  const d = spawnSync(BIN, ['doctor', '-h'], { encoding: 'utf8' });
  assert.equal(d.status, 0, d.stdout + d.stderr);
  assert.match(d.stdout + d.stderr, /-conf/);
  const n = spawnSync(BIN, ['node-cache', '-h'], { encoding: 'utf8' });
  assert.match(n.stdout + n.stderr, /-localip/);
});
