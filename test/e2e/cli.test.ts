// bin/nodens as a CoreDNS user runs it: flags, exit statuses, error messages,
// the default Corefile, pidfile, signals — and answers checked with real dig
// and kdig over UDP and TCP.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, mkdirSync, openSync, symlinkSync, writeFileSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, ROOT, startProcess, freePort, type NodensProcess } from '../helpers/server.ts';
import { dig, kdig, status, flags } from '../helpers/dig.ts';
import { COREDNS_VERSION } from '../../src/version.ts';

function run(args: string[], opts: { cwd?: string; timeoutMs?: number } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(BIN, args, { cwd: opts.cwd, timeout: opts.timeoutMs ?? 10000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr });
    });
  });
}

describe('answers through bin/nodens, checked with dig and kdig', () => {
  let p: NodensProcess;
  before(async () => {
    p = await startProcess(`.:{PORT} {
  any
  chaos nodens-test admin@example.org
  hosts {
    192.0.2.10 www.example.org
    2001:db8::10 www.example.org
    fallthrough
  }
  whoami
}
minimal.example:{PORT} {
  minimal
  hosts {
    192.0.2.20 a.minimal.example
  }
}
`);
  });
  after(async () => { await p.stop(); });

  for (const transport of ['+notcp', '+tcp']) {
    test(`hosts A and AAAA, authoritative (${transport})`, async () => {
      const a = await dig(p.port, transport, 'www.example.org', 'A');
      assert.equal(status(a), 'NOERROR');
      assert.deepEqual(flags(a), ['aa', 'qr', 'rd']);
      assert.match(a, /^www\.example\.org\.\s+3600\s+IN\s+A\s+192\.0\.2\.10$/m);
      const k = await kdig(p.port, transport === '+tcp' ? '+tcp' : '+notcp', 'www.example.org', 'AAAA');
      assert.match(k, /status: NOERROR/);
      assert.match(k, /www\.example\.org\.\s+3600\s+IN\s+AAAA\s+2001:db8::10/);
    });

    test(`whoami answers names hosts does not know (${transport})`, async () => {
      const out = await dig(p.port, transport, 'Some.Other.Name', 'A');
      assert.equal(status(out), 'NOERROR');
      assert.match(out, /^Some\.Other\.Name\.\s+0\s+IN\s+A\s+127\.0\.0\.1$/m);
      assert.match(out, new RegExp(`^_${transport === '+tcp' ? 'tcp' : 'udp'}\\.Some\\.Other\\.Name\\.\\s+0\\s+IN\\s+SRV\\s+0 0 \\d+ \\.$`, 'm'));
    });
  }

  test('chaos answers version.bind and authors.bind in class CH', async () => {
    assert.match(await dig(p.port, 'version.bind', 'TXT', 'CH'), /version\.bind\.\s+0\s+CH\s+TXT\s+"nodens-test"/);
    assert.match(await kdig(p.port, 'authors.bind', 'TXT', 'CH'), /authors\.bind\.\s+0\s+CH\s+TXT\s+"admin@example\.org"/);
  });

  test('any answers ANY with the RFC 8482 HINFO', async () => {
    const out = await dig(p.port, 'www.example.org', 'ANY');
    assert.match(out, /www\.example\.org\.\s+8482\s+IN\s+HINFO\s+"ANY obsoleted" "See RFC 8482"/);
  });

  test('minimal keeps only the answer section', async () => {
    const out = await dig(p.port, 'a.minimal.example', 'A');
    assert.match(out, /ANSWER: 1, AUTHORITY: 0, ADDITIONAL: 1/); // the 1 additional is dig's OPT
  });

  test('the server stays up after all of that and logs nothing on stderr', () => {
    assert.equal(p.proc.exitCode, null);
    assert.equal(p.stderr.join(''), '');
  });
});

describe('command line', () => {
  test('-version prints the two version lines and exits 0', async () => {
    const r = await run(['-version']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, new RegExp(`^CoreDNS-${COREDNS_VERSION.replaceAll('.', '\\.')}\\nlinux/\\w+, node-v24\\.[\\d.]+, nodens-[\\d.]+\\n$`));
  });

  test('-plugins lists the plugins one per line, then a blank line', async () => {
    const r = await run(['-plugins']);
    assert.equal(r.code, 0);
    const lines = r.stdout.split('\n');
    assert.ok(lines.includes('whoami') && lines.includes('hosts'));
    assert.ok(r.stdout.endsWith('\n\n'));
  });

  test('an unknown flag prints usage on stderr and exits 2', async () => {
    const r = await run(['-nope']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^flag provided but not defined: -nope\nUsage of nodens:\n  -conf string\n/);
    assert.match(r.stderr, /\nSubcommands:\n  nodens doctor .*\n  nodens validate .*\n  nodens node-cache .*\nRun "nodens <subcommand> -h" for its flags\.\n$/);
  });

  test('-h prints the flags\' usage, then the subcommands, on stderr, exit 0', async () => {
    const r = await run(['-h']);
    assert.equal(r.code, 0);
    assert.match(r.stderr, /^Usage of nodens:\n  -conf string\n/);
    assert.match(r.stderr, /\n  -workers string\n.*\nSubcommands:\n  nodens doctor .*\n  nodens validate .*\n  nodens node-cache .*\nRun "nodens <subcommand> -h" for its flags\.\n$/);
  });

  test('extra arguments exit 1', async () => {
    const r = await run(['extra']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /extra command line arguments: \[extra\]/);
  });

  test('a missing -conf file exits 1 with Go\'s wording', async () => {
    const r = await run(['-conf', '/nonexistent/Corefile']);
    assert.equal(r.code, 1);
    assert.equal(r.stderr, 'loading Caddyfile via flag: open /nonexistent/Corefile: no such file or directory\n');
  });

  test('a ./Corefile that is a directory is read as CoreDNS reads it: Go\'s error alone on stderr, exit 1', async () => {
    // CoreDNS 1.14.7 in a directory whose Corefile is a directory: "read Corefile: is a directory" on stderr, exit 1.
    const dir = mkdtempSync(join(tmpdir(), 'nodens-cli-'));
    mkdirSync(join(dir, 'Corefile'));
    assert.deepEqual(await run(['-dns.port', '1053'], { cwd: dir }), { code: 1, stdout: '', stderr: 'read Corefile: is a directory\n' });
  });

  test('-conf stdin with a directory on standard input: the read error names /dev/stdin, as Go\'s os.Stdin does', async () => {
    // CoreDNS 1.14.7: "loading Caddyfile via flag: read /dev/stdin: is a directory" on stderr, exit 1.
    const fd = openSync(tmpdir(), 'r');
    try {
      const r = spawnSync(BIN, ['-conf', 'stdin'], { stdio: [fd, 'pipe', 'pipe'], encoding: 'utf8', timeout: 10000 });
      assert.deepEqual({ code: r.status, stdout: r.stdout, stderr: r.stderr },
        { code: 1, stdout: '', stderr: 'loading Caddyfile via flag: read /dev/stdin: is a directory\n' });
    } finally {
      closeSync(fd);
    }
  });

  test('a bad Corefile names file, line and token and exits 1', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nodens-cli-'));
    const file = join(dir, 'Corefile');
    writeFileSync(file, '.:1053 {\n  whoami\n  hosts {\n    ttl x\n  }\n}\n');
    const r = await run(['-conf', file]);
    assert.equal(r.code, 1);
    assert.equal(r.stderr, `plugin/hosts: ${file}:4 - Error during parsing: ttl needs a number of second\n`);
  });

  test('an unknown directive is CoreDNS\'s error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nodens-cli-'));
    writeFileSync(join(dir, 'Corefile'), '.:1053 {\n  whoami\n  frobnicate\n}\n');
    const r = await run([], { cwd: dir });
    assert.equal(r.code, 1);
    assert.equal(r.stderr, "Corefile:3 - Error during parsing: Unknown directive 'frobnicate'\n");
  });

  test('without a Corefile the built-in default (whoami + log) runs on -dns.port', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nodens-cli-'));
    const port = await freePort();
    const { spawn } = await import('node:child_process');
    const proc = spawn(BIN, ['-dns.port', String(port)], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (d) => { out += d; });
    try {
      for (let i = 0; i < 100 && !out.includes('CoreDNS-'); i++) await new Promise((r) => setTimeout(r, 50));
      assert.match(out, new RegExp(`^\\.:${port}\\n`));
      const answer = await dig(port, 'example.org', 'A');
      assert.match(answer, /^example\.org\.\s+0\s+IN\s+A\s+127\.0\.0\.1$/m);
      for (let i = 0; i < 40 && !out.includes('[INFO] 127.0.0.1:'); i++) await new Promise((r) => setTimeout(r, 50));
      assert.match(out, /\[INFO\] 127\.0\.0\.1:\d+ - \d+ "A IN example\.org\. udp \d+ false \d+" NOERROR qr,aa,rd \d+ [\d.]+s/);
    } finally {
      proc.kill('SIGTERM');
    }
  });

  test('-pidfile is written after start and removed on SIGTERM; exit 0 with CoreDNS\'s log line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nodens-cli-'));
    const pidfile = join(dir, 'nodens.pid');
    const p = await startProcess('.:{PORT} {\n  whoami\n}\n', { args: ['-pidfile', pidfile] });
    assert.equal(readFileSync(pidfile, 'utf8'), `${p.proc.pid}\n`);
    assert.equal(await p.stop('SIGTERM'), 0);
    assert.ok(p.stdout.includes('[INFO] SIGTERM: Shutting down servers then terminating'));
    assert.equal(existsSync(pidfile), false);
  });

  test('-quiet prints no banner', async () => {
    const p = await startProcess('.:{PORT} {\n  whoami\n}\n', { args: ['-quiet'], wait: false });
    try {
      for (let i = 0; i < 60; i++) {
        if (status(await dig(p.port, 'example.org').catch(() => '')) === 'NOERROR') break;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(p.stdout.filter((l) => l !== '').length, 0);
    } finally {
      await p.stop();
    }
  });

  test('with debug, an exception in a plugin ends the process as an unrecovered Go panic: `panic: ...` on stderr, exit 2', { timeout: 30_000 }, async () => {
    // CoreDNS 1.14.7 with `debug`, `minimal` and a `hosts` that knows nothing (minimal writes a nil reply):
    //   panic: runtime error: invalid memory address or nil pointer dereference
    //   [signal SIGSEGV: segmentation violation code=0x1 addr=0x78 pc=0x73d2f7]
    //   <blank line>
    //   goroutine 93 [running]:
    //   github.com/miekg/dns.(*Msg).IsEdns0(0x0)
    //   \t/root/go/pkg/mod/github.com/miekg/dns@v1.1.72/defaults.go:151 +0x17
    //   ...
    // and exit status 2. nodens answers that case without an exception (see the minimal README), so
    // whoami is made to throw by a preloaded test helper.
    const p = await startProcess('.:{PORT} {\n  debug\n  whoami\n}\n', {
      env: { NODE_OPTIONS: `--import ${join(ROOT, 'test', 'helpers', 'whoami-throws.ts')}`, NODENS_BUNDLE: '0' },
    });
    try {
      assert.equal(status(await dig(p.port, 'www.example.org')), 'NOERROR');
      await dig(p.port, '+tries=1', '+time=1', 'x.panic.test').catch(() => '');
      assert.equal(await p.exited, 2);
      const stderr = p.stderr.join('\n');
      assert.ok(stderr.startsWith('panic: whoami-throws: boom\n\tsecond line\n\ngoroutine 1 [running]:\n'), stderr);
      assert.match(stderr, /\nWhoami\.serveDNS\(\.\.\.\)\n\t\/\S+\/test\/helpers\/whoami-throws\.ts:\d+\n/);
      // No Node.js crash report.
      assert.doesNotMatch(stderr, /Node\.js v|throw e;|^Error:/m);
    } finally {
      await p.stop();
    }
  });

  test('SIGUSR1 reloads the Corefile; a broken one keeps the old configuration', async () => {
    const p = await startProcess('.:{PORT} {\n  hosts {\n    192.0.2.1 a.example.org\n  }\n}\n');
    try {
      const file = p.proc.spawnargs[p.proc.spawnargs.indexOf('-conf') + 1]!;
      writeFileSync(file, `.:${p.port} {\n  hosts {\n    192.0.2.2 a.example.org\n  }\n}\n`);
      p.proc.kill('SIGUSR1');
      await p.waitFor(/\[INFO\] Reloading complete/);
      assert.match(await dig(p.port, 'a.example.org'), /IN\s+A\s+192\.0\.2\.2/);
      writeFileSync(file, `.:${p.port} {\n  hosts {\n    192.0.2.3 a.example.org\n  }\n  frobnicate\n}\n`);
      p.proc.kill('SIGUSR1');
      await p.waitFor(/\[ERROR\] SIGUSR1: starting with listener file descriptors:/);
      assert.ok(p.stdout.some((l) => l.startsWith('[ERROR] Restart failed: ')));
      assert.match(await dig(p.port, 'a.example.org'), /IN\s+A\s+192\.0\.2\.2/);
    } finally {
      await p.stop();
    }
  });
});

// ---------------------------------------------------------------- reading the Corefile, against CoreDNS itself

/** The reference CoreDNS: scripts/coredns-reference.sh prints it, building it once when missing. */
function referenceBinary(): string {
  const r = spawnSync(join(ROOT, 'scripts', 'coredns-reference.sh'), { encoding: 'utf8', timeout: 900_000 });
  assert.equal(r.status, 0, `scripts/coredns-reference.sh failed: ${r.stderr}`);
  return r.stdout.trim();
}

describe('the reference CoreDNS reads (or fails to read) the Corefile the same way', () => {
  test('same exit status and stderr for unreadable, directory and uncleaned Corefile paths', async () => {
    const reference = referenceBinary();
    const dir = mkdtempSync(join(tmpdir(), 'nodens-cli-'));
    const at = (name: string): string => { const d = join(dir, name); mkdirSync(d); return d; };
    mkdirSync(join(at('dircwd'), 'Corefile'));
    symlinkSync('Corefile', join(at('loopcwd'), 'Corefile'));
    const plain = at('plain');
    mkdirSync(join(plain, 'sub'));
    writeFileSync(join(plain, 'bad'), '.:1053 {\n  whoami\n  frobnicate\n}\n');
    const cases: Array<{ cwd: string; args: string[] }> = [
      { cwd: join(dir, 'dircwd'), args: [] },
      { cwd: join(dir, 'loopcwd'), args: [] },
      { cwd: plain, args: ['-conf', join(plain, 'sub')] },
      { cwd: plain, args: ['-conf', 'sub/'] },
      { cwd: plain, args: ['-conf', '.'] },
      { cwd: plain, args: ['-conf', './nope'] },
      { cwd: plain, args: ['-conf', 'nope/'] },
      { cwd: plain, args: ['-conf', `${plain}//sub/../nope`] },
      { cwd: plain, args: ['-conf', './missing/../bad'] },
      { cwd: plain, args: ['-conf', 'bad/'] },
    ];
    const both = await Promise.all(cases.map(async ({ cwd, args }) => {
      const [ours, theirs] = await Promise.all([run(args, { cwd }), runFile(reference, args, cwd)]);
      return { what: `${cwd}: ${args.join(' ')}`, ours, theirs };
    }));
    for (const { what, ours, theirs } of both) {
      assert.equal(theirs.code, 1, what);
      assert.deepEqual({ code: ours.code, stderr: ours.stderr }, { code: theirs.code, stderr: theirs.stderr }, what);
    }
  });
});

function runFile(file: string, args: string[], cwd: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd, timeout: 10000 }, (err, _stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stderr });
    });
  });
}
