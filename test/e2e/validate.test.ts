// `nodens validate`: the real-world Corefiles pass; an unknown directive, a bad argument and a setup error fail
// with the server's own message and place; a missing zone file fails with its place; nothing is bound,
// connected or left running (ports held by the test stay usable by it, a Kubernetes API that counts
// connections sees none, no handle is left); `nodens doctor` validates first.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import dgram from 'node:dgram';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, ROOT, freePort } from '../helpers/server.ts';
import { prepareCorefile, type Setup } from '../corefiles/run.ts';
import { validateCorefile } from '../../src/core/validate.ts';
import { createRegistry } from '../../src/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'nodens-validate-'));
const write = (name: string, text: string): string => { const f = join(dir, name); writeFileSync(f, text); return f; };
const run = (...args: string[]) => spawnSync(BIN, args, { encoding: 'utf8', cwd: dir, timeout: 30_000 });

/** A kubeconfig naming `server`: validate must not connect to it. */
function kubeconfig(server: string): string {
  return write(`kubeconfig-${server.replace(/\W/g, '_')}`, [
    'apiVersion: v1', 'kind: Config', 'current-context: nodens-test',
    'clusters:', '- name: c', '  cluster:', `    server: ${server}`,
    'contexts:', '- name: nodens-test', '  context:', '    cluster: c', '    user: u',
    'users:', '- name: u', '  user:', '    token: t', '',
  ].join('\n'));
}

test('every real-world Corefile of test/corefiles validates (exit 0, one OK line)', () => {
  const casesDir = join(ROOT, 'test', 'corefiles');
  const cases = readdirSync(casesDir).filter((d) => existsSync(join(casesDir, d, 'setup.json')));
  assert.ok(cases.length >= 10, `cases: ${cases.join(' ')}`);
  const kc = kubeconfig('http://127.0.0.1:9');
  for (const name of cases) {
    const caseDir = join(casesDir, name);
    const setup = JSON.parse(readFileSync(join(caseDir, 'setup.json'), 'utf8')) as Setup;
    const text = prepareCorefile(readFileSync(join(caseDir, 'Corefile'), 'utf8'), setup, caseDir, setup.kubernetes ? kc : undefined);
    const file = write(`Corefile.${name}`, text);
    const r = run('validate', '-conf', file);
    assert.equal(r.status, 0, `${name}: ${r.stdout}${r.stderr}`);
    assert.match(r.stdout, new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: OK \\(\\d+ server blocks?\\)\\n$`), name);
    // Only the parser's notice about optional imports that are absent (k3s, AKS) may appear.
    for (const l of r.stderr.split('\n').filter(Boolean)) assert.match(l, /^\[WARNING\] No files matching import glob pattern: /, name);
  }
});

test('an unknown directive, a bad argument and a setup error fail as the server fails, with file:line', () => {
  const cases: Array<{ name: string; corefile: string; files?: Record<string, string>; expect: RegExp }> = [
    { name: 'unknown', corefile: '.:{PORT} {\n    whoami\n    foo bar\n}\n', expect: /^FILE:3 - Error during parsing: Unknown directive 'foo'\n$/ },
    { name: 'badarg', corefile: '.:{PORT} {\n    bufsize abc\n}\n', expect: /^plugin\/bufsize: plugin\/bufsize: FILE:2 - Error during parsing: Wrong argument count or unexpected line ending after 'abc'\n$/ },
    { name: 'cacheprop', corefile: '.:{PORT} {\n    cache {\n        nonsense 1\n    }\n}\n', expect: /^plugin\/cache: FILE:3 - Error during parsing: .*'nonsense'\n$/ },
    { name: 'forward', corefile: '.:{PORT} {\n    forward . 127.0.0.1 {\n        max_fails x\n    }\n}\n', expect: /^plugin\/forward: strconv\.ParseUint: parsing "x": invalid syntax\n$/ },
    // An error in an imported file is placed in that file.
    { name: 'imported', corefile: '.:{PORT} {\n    import snippet.conf\n}\n', files: { 'snippet.conf': 'whoami\nlog\nbogus\n' }, expect: /^SNIPPET:3 - Error during parsing: Unknown directive 'bogus'\n$/ },
    { name: 'overlap', corefile: '.:{PORT} {\n    whoami\n}\n.:{PORT} {\n    whoami\n}\n', expect: /^cannot serve dns:\/\/\.:\d+ - it is already defined\n$/ },
  ];
  for (const c of cases) {
    const port = String(20000 + Math.floor(Math.random() * 20000));
    for (const [n, t] of Object.entries(c.files ?? {})) write(n, t);
    const file = write(`bad-${c.name}`, c.corefile.replaceAll('{PORT}', port));
    const v = run('validate', '-conf', file);
    const expect = new RegExp(c.expect.source.replaceAll('FILE', file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).replaceAll('SNIPPET', join(dir, 'snippet.conf').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    assert.equal(v.status, 1, `${c.name}: ${v.stdout}${v.stderr}`);
    assert.equal(v.stdout, '', c.name);
    assert.match(v.stderr, expect, c.name);
    // The server itself refuses the same Corefile with the same text (and exit 1).
    const s = run('-conf', file);
    assert.equal(s.status, 1, `${c.name}: server ${s.stdout}${s.stderr}`);
    assert.equal(v.stderr, s.stderr, c.name);
  }
});

test('a missing zone file fails validation with file:line (the server would start and answer SERVFAIL)', () => {
  const file = write('Corefile.zone', `example.org:53 {\n    log\n    file ${join(dir, 'db.missing')}\n}\n`);
  const v = run('validate', '-conf', file);
  assert.equal(v.status, 1, v.stdout + v.stderr);
  assert.equal(v.stderr, `${file}:3 - [WARNING] plugin/file: Failed to open "open ${join(dir, 'db.missing')}: no such file or directory": trying again in 1m0s\n`);
  writeFileSync(join(dir, 'db.present'), 'example.org. 3600 IN SOA ns.example.org. admin.example.org. 1 7200 3600 1209600 3600\nexample.org. 3600 IN NS ns.example.org.\n');
  const ok = run('validate', '-conf', write('Corefile.zone2', `example.org:53 {\n    file ${join(dir, 'db.present')}\n}\n`));
  assert.equal(ok.status, 0, ok.stdout + ok.stderr);
});

/** Hold TCP and UDP on 127.0.0.1:port (for the DNS port) or TCP only. */
async function hold(port: number, udp: boolean): Promise<() => Promise<void>> {
  const tcp: Server = createServer();
  await new Promise<void>((resolve, reject) => { tcp.once('error', reject); tcp.listen(port, '127.0.0.1', resolve); });
  const u = udp ? dgram.createSocket('udp4') : undefined;
  if (u !== undefined) await new Promise<void>((resolve, reject) => { u.once('error', reject); u.bind(port, '127.0.0.1', resolve); });
  return async () => {
    await new Promise<void>((r) => { tcp.close(() => { r(); }); });
    if (u !== undefined) await new Promise<void>((r) => { u.close(() => { r(); }); });
  };
}

test('validate binds nothing, connects to nothing and leaves nothing running', async () => {
  // A Kubernetes API stand-in that counts connections: validate must make none.
  let apiConnections = 0;
  const api = createServer((s) => { apiConnections++; s.destroy(); });
  await new Promise<void>((r) => { api.listen(0, '127.0.0.1', r); });
  const kc = kubeconfig(`http://127.0.0.1:${(api.address() as { port: number }).port}`);
  const [dns, health, metrics, ready] = [await freePort(), await freePort(), await freePort(), await freePort()];
  writeFileSync(join(dir, 'hosts'), '192.0.2.1 host.example\n');
  const corefile = [
    `.:${dns} {`,
    `    health 127.0.0.1:${health}`,
    `    prometheus 127.0.0.1:${metrics}`,
    `    ready 127.0.0.1:${ready}`,
    '    reload 2s',
    `    hosts ${join(dir, 'hosts')} {`,
    '        fallthrough',
    '    }',
    '    kubernetes cluster.local {',
    `        kubeconfig ${kc} nodens-test`,
    '    }',
    '    cache 30',
    '    loop',
    '    forward . 127.0.0.1:9',
    '}',
    '',
  ].join('\n');
  const file = write('Corefile.sidefx', corefile);
  // While the test holds every port the Corefile names, validate still passes: it never tries to bind them.
  const releases = [await hold(dns, true), await hold(health, false), await hold(metrics, false), await hold(ready, false)];
  releases.push(() => new Promise<void>((r) => { api.close(() => { r(); }); }));
  try {
    const r = run('validate', '-conf', file);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /: OK \(1 server block\)\n$/);
    // The server itself cannot start on the held ports (the check above is not vacuous).
    const s = run('-conf', file);
    assert.notEqual(s.status, 0, s.stdout + s.stderr);

    // In this process: no handle keeps the event loop alive after validating (no socket, timer or watcher).
    const before = process.getActiveResourcesInfo().sort();
    const result = await validateCorefile({ corefile, file, defaultPort: '53', registry: createRegistry() });
    assert.equal(result.ok, true, JSON.stringify(result));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(process.getActiveResourcesInfo().sort(), before);
  } finally {
    for (const release of releases) await release();
  }
  assert.equal(apiConnections, 0);
});

test('nodens doctor validates first: an unknown directive fails it; its JSON carries schemaVersion', () => {
  const empty = mkdtempSync(join(tmpdir(), 'nodens-doctor-root-'));
  const bad = write('Corefile.doctor-bad', '.:53 {\n    loop\n    forwrd . 192.0.2.53\n}\n');
  const d = run('doctor', '-conf', bad, '--root', empty);
  assert.equal(d.status, 1, d.stdout + d.stderr);
  assert.match(d.stdout, new RegExp(`${bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:3 - Error during parsing: Unknown directive 'forwrd'`));
  const j = run('doctor', '-conf', bad, '--root', empty, '--json');
  assert.equal(j.status, 1);
  const report = JSON.parse(j.stdout) as { schemaVersion: number; validation: { ok: boolean; error?: string } };
  assert.equal(report.schemaVersion, 1);
  assert.equal(report.validation.ok, false);
  assert.match(report.validation.error ?? '', /Unknown directive 'forwrd'/);

  const good = write('Corefile.doctor-good', '.:53 {\n    loop\n    forward . 192.0.2.53\n}\n');
  const g = run('doctor', '-conf', good, '--root', empty, '--json');
  assert.equal(g.status, 0, g.stdout + g.stderr);
  const gr = JSON.parse(g.stdout) as { schemaVersion: number; validation: { ok: boolean }; loops: number };
  assert.deepEqual([gr.schemaVersion, gr.validation.ok, gr.loops], [1, true, 0]);
});
