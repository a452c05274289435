// Which Corefile runs (coremain/run.go confLoader/defaultLoader, caddy's
// LoadCaddyfile): -conf FILE, else ./Corefile, else the built-in default —
// with CoreDNS's error wording.

import { test, describe, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultCorefile, errText, loadCorefile } from './loader.ts';

describe('loadCorefile', () => {
  let dir: string;
  let cwd: string;
  before(() => {
    cwd = process.cwd();
    dir = mkdtempSync(join(tmpdir(), 'nodens-loader-'));
  });
  after(() => {
    process.chdir(cwd);
    rmSync(dir, { recursive: true, force: true });
  });
  // Each test gets an empty working directory.
  let work: string;
  let n = 0;
  beforeEach(() => {
    work = join(dir, `w${n++}`);
    mkdirSync(work);
    process.chdir(work);
  });

  test('-conf FILE: its contents, the path as given', () => {
    const file = join(work, 'my.conf');
    writeFileSync(file, 'example.org {\n  whoami\n}\n');
    assert.deepEqual(loadCorefile(file, '53'), { contents: 'example.org {\n  whoami\n}\n', file });
    writeFileSync('rel.conf', '. {\n}\n');
    assert.deepEqual(loadCorefile('rel.conf', '53'), { contents: '. {\n}\n', file: 'rel.conf' });
  });

  test('-conf is cleaned like Go\'s filepath.Clean before it is opened; messages keep the path as given', () => {
    // coremain/run.go confLoader: os.ReadFile(filepath.Clean(conf)), Filepath: conf. CoreDNS 1.14.7:
    // -conf ./nope → "open nope: …", -conf /tmp//ct/sub/../nope → "open /tmp/ct/nope: …".
    assert.throws(() => loadCorefile('./nope', '53'), { message: 'loading Caddyfile via flag: open nope: no such file or directory' });
    assert.throws(() => loadCorefile('nope/', '53'), { message: 'loading Caddyfile via flag: open nope: no such file or directory' });
    assert.throws(() => loadCorefile(`${work}//sub/../nope`, '53'), { message: `loading Caddyfile via flag: open ${work}/nope: no such file or directory` });
    // The cleaned path is the one opened: `missing/..` is not looked up, and `good/` is the file.
    writeFileSync('good', '. {\n}\n');
    assert.deepEqual(loadCorefile('missing/../good', '53'), { contents: '. {\n}\n', file: 'missing/../good' });
    assert.deepEqual(loadCorefile('good/', '53'), { contents: '. {\n}\n', file: 'good/' });
  });

  test('-conf wins over ./Corefile', () => {
    writeFileSync('Corefile', 'from-cwd\n');
    writeFileSync('other', 'from-flag\n');
    assert.equal(loadCorefile('other', '53').contents, 'from-flag\n');
  });

  test('a missing -conf file is an error in Go\'s wording, not a fallback', () => {
    writeFileSync('Corefile', 'from-cwd\n');
    assert.throws(() => loadCorefile('/nope', '53'), { message: 'loading Caddyfile via flag: open /nope: no such file or directory' });
    assert.throws(() => loadCorefile('/nope/Corefile', '53'), { message: 'loading Caddyfile via flag: open /nope/Corefile: no such file or directory' });
  });

  test('-conf naming a directory: the read fails, and Go names the path in the error', () => {
    mkdirSync('sub');
    const sub = join(work, 'sub');
    // CoreDNS 1.14.7: "loading Caddyfile via flag: read /tmp/x/sub: is a directory".
    assert.throws(() => loadCorefile(sub, '53'), { message: `loading Caddyfile via flag: read ${sub}: is a directory` });
    assert.throws(() => loadCorefile('sub', '53'), { message: 'loading Caddyfile via flag: read sub: is a directory' });
  });

  test('without -conf: ./Corefile, reported as `Corefile`', () => {
    writeFileSync('Corefile', '.:1053 {\n  whoami\n}\n');
    assert.deepEqual(loadCorefile('', '53'), { contents: '.:1053 {\n  whoami\n}\n', file: 'Corefile' });
  });

  test('an empty ./Corefile is still the one used', () => {
    writeFileSync('Corefile', '');
    assert.deepEqual(loadCorefile('', '53'), { contents: '', file: 'Corefile' });
  });

  test('a ./Corefile that cannot be read is an error in Go\'s wording, without a loader prefix', () => {
    // coremain/run.go defaultLoader: os.ReadFile("Corefile"); only "does not exist" falls back to the default,
    // and caddy returns the default loader's error unwrapped. CoreDNS 1.14.7 prints these on stderr, exit 1.
    mkdirSync('Corefile');
    assert.throws(() => loadCorefile('', '53'), { message: 'read Corefile: is a directory' });
    rmSync('Corefile', { recursive: true });
    symlinkSync('Corefile', 'Corefile');
    assert.throws(() => loadCorefile('', '53'), { message: 'open Corefile: too many levels of symbolic links' });
  });

  test('a dangling ./Corefile symlink does not exist: the default runs', () => {
    symlinkSync('nowhere', 'Corefile');
    assert.deepEqual(loadCorefile('', '1053'), defaultCorefile('1053'));
  });

  test('without -conf and ./Corefile: CoreDNS\'s default (whoami and log on -dns.port)', () => {
    // core/dnsserver/register.go DefaultInput: ".:" + Port + " {\nwhoami\nlog\n}\n", Filepath "Corefile".
    assert.deepEqual(loadCorefile('', '53'), { contents: '.:53 {\nwhoami\nlog\n}\n', file: 'Corefile' });
    assert.deepEqual(loadCorefile('', '1053'), { contents: '.:1053 {\nwhoami\nlog\n}\n', file: 'Corefile' });
    assert.deepEqual(defaultCorefile('5300'), { contents: '.:5300 {\nwhoami\nlog\n}\n', file: 'Corefile' });
  });
});

test('errText gives Go\'s *PathError text for the common errno codes', () => {
  const e = (code: string, syscall: string, path: string): NodeJS.ErrnoException =>
    Object.assign(new Error(`${code}: x`), { code, syscall, path });
  assert.equal(errText(e('ENOENT', 'open', '/a/b')), 'open /a/b: no such file or directory');
  assert.equal(errText(e('EACCES', 'open', '/etc/x')), 'open /etc/x: permission denied');
  assert.equal(errText(e('ENOTDIR', 'open', '/etc/passwd/x')), 'open /etc/passwd/x: not a directory');
  assert.equal(errText(e('EISDIR', 'read', '/tmp')), 'read /tmp: is a directory');
  // Anything else keeps Node's message.
  assert.equal(errText(e('EIO', 'read', '/x')), 'EIO: x');
  assert.equal(errText('plain'), 'plain');
});
