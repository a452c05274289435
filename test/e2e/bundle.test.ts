// The bundle that bin/nodens runs (dist/bundle/nodens.js, scripts/bundle.ts; `npm run build` makes it): it starts
// and answers, plugins initialized lazily work, the files found relative to a module (package.json,
// coredns.version, build/native/) are still found from the bundle, and the subcommands run from it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, ROOT, startProcess } from '../helpers/server.ts';
import { dig, status } from '../helpers/dig.ts';
import { COREDNS_VERSION, NODENS_VERSION } from '../../src/version.ts';

const BUNDLE = join(ROOT, 'dist', 'bundle');
const ENTRY = join(BUNDLE, 'nodens.js');

test('npm run build made the bundle: one CommonJS file with its source map', () => {
  assert.ok(existsSync(ENTRY), `${ENTRY} is missing: run \`npm run build\``);
  const js = readdirSync(BUNDLE).filter((f) => f.endsWith('.js'));
  assert.deepEqual(js, ['nodens.js']);
  // The package is "type": "module"; dist/bundle/package.json makes the bundle's .js CommonJS.
  assert.deepEqual(JSON.parse(readFileSync(join(BUNDLE, 'package.json'), 'utf8')), { type: 'commonjs' });
  // The map points at the TypeScript sources.
  const map = JSON.parse(readFileSync(join(BUNDLE, 'nodens.js.map'), 'utf8')) as { sources: string[] };
  assert.ok(map.sources.some((s) => s.endsWith('src/cli/bin.ts')), map.sources.join(' '));
  // @kubernetes/client-node stays in node_modules, imported (never required: it is an ES module) by the plugin.
  const text = readFileSync(ENTRY, 'utf8');
  assert.equal([...text.matchAll(/import\("@kubernetes\/client-node"\)/g)].length, 1);
  assert.doesNotMatch(text, /require\("@kubernetes\/client-node"\)/);
});

test('the plugins a start does not use stay unloaded: a quickstart Corefile loads no node:http(s/2), tls, crypto, zlib, dgram, dns', () => {
  // Every plugin is in the one file, each behind its lazy initializer with its own require()s of Node's builtins:
  // `validate` sets up the Corefile's plugins (hosts, whoami, log, errors) as a start does; a preloaded script lists
  // the builtins loaded by then.
  const dir = mkdtempSync(join(tmpdir(), 'nodens-bundle-'));
  const conf = join(dir, 'Corefile');
  writeFileSync(conf, '.:1053 {\n  bind 127.0.0.1\n  hosts {\n    192.0.2.10 www.example.org\n    fallthrough\n  }\n  whoami\n  log\n  errors\n}\n');
  const preload = join(dir, 'builtins.cjs');
  writeFileSync(preload, "process.on('exit', () => { process.stderr.write('BUILTINS ' + process.moduleLoadList.join(',') + '\\n'); });\n");
  const r = spawnSync(process.execPath, ['-r', preload, ENTRY, 'validate', '-conf', conf], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  const line = /^BUILTINS (.*)$/m.exec(r.stderr)?.[1] ?? '';
  const loaded = new Set(line.split(',').filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice('NativeModule '.length)));
  assert.ok(loaded.has('net'), `the listeners' builtins: ${[...loaded].join(' ')}`);
  // node:dgram and node:dns only for the pure-Node UDP path and addresses that are not literals, at listen.
  for (const m of ['http', 'https', 'http2', 'tls', 'crypto', 'zlib', 'dgram', 'dns']) assert.ok(!loaded.has(m), `node:${m} loaded`);
});

test('the module URLs rewritten in the bundle name files that exist (tsc\'s dist/ twin of each module)', () => {
  const text = readFileSync(ENTRY, 'utf8');
  let seen = 0;
  for (const m of text.matchAll(/__nodensModuleUrl\("(\.\.\/\.\.\/dist\/[^"]+)"\)/g)) {
    const target = join(BUNDLE, m[1]!);
    assert.ok(existsSync(target), `${m[1]} -> ${target}`);
    seen++;
  }
  // version.ts, core/directives.ts and native/index.ts.
  assert.ok(seen >= 3, `rewritten module URLs: ${seen}`);
});

test('bin/nodens runs the bundle: -version reads package.json and coredns.version from it', () => {
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

test('-workers 2 from the bundle: each worker thread runs the bundle\'s entry again', { timeout: 30_000 }, async () => {
  const p = await startProcess('.:{PORT} {\n  whoami\n}\n', { args: ['-workers', '2'] });
  try {
    // startProcess returns once the port answers; bin/nodens execs node, so the spawned pid is the process.
    for (let i = 0; i < 10; i++) assert.equal(status(await dig(p.port, `q${i}.example`)), 'NOERROR');
    const pid = p.proc.pid!;
    assert.ok(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(ENTRY));
    assert.equal(readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim(), '', 'no worker processes');
    const names = readdirSync(`/proc/${pid}/task`).map((t) => readFileSync(`/proc/${pid}/task/${t}/comm`, 'utf8').trim());
    assert.deepEqual(names.filter((n) => n.startsWith('nodens-worker')), ['nodens-worker-2'], 'the main thread is worker 1');
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
