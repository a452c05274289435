// reload end to end (bin/nodens, a Corefile on disk): the SHA512 line, polling
// that reloads on a changed hash and only then, parse-failure warnings, a broken
// Corefile that keeps the old one serving with CoreDNS's log lines and metrics,
// and the endpoints' ports across all of it. Plus the INTERVAL/JITTER rules.

import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { startInProcess, startProcess, freePort, type NodensProcess } from '../helpers/server.ts';
import { period } from '../../src/plugin/reload/setup.ts';
import { parseCorefile } from '../../src/corefile/parser.ts';
import { serverBlocksSha512 } from '../../src/corefile/hash.ts';
import { COREDNS_VERSION } from '../../src/version.ts';
import { get, query, scrape, sleep, until, value } from './prometheus-util.ts';

const S = 1000000000n;

function confPath(p: NodensProcess): string {
  const args = p.proc.spawnargs;
  return args[args.indexOf('-conf') + 1]!;
}

function shaLines(p: NodensProcess): string[] {
  return p.stdout.filter((l) => l.startsWith('[INFO] plugin/reload: Running configuration SHA512 = '));
}

describe('reload: INTERVAL and JITTER', () => {
  test('defaults: 30s ± 7.5s', () => {
    assert.equal(period([], () => 0), 30n * S - 15n * S / 2n);
    const hi = period([], () => 0.999999999);
    assert.ok(hi < 30n * S + 15n * S / 2n && hi > 37n * S);
  });
  test('0s jitter: the exact interval; jitter capped at INTERVAL/2', () => {
    assert.equal(period(['2s', '0s']), 2n * S);
    assert.equal(period(['10s', '8s'], () => 0), 10n * S - 5n * S / 2n);
  });
  test('validation errors as CoreDNS words them', async () => {
    assert.throws(() => period(['1s']), /^Error: interval value must be greater or equal to 2s$/);
    assert.throws(() => period(['2s', '500ms']), /^Error: jitter value must be 0 or greater or equal to 1s$/);
    assert.throws(() => period(['soon']), /time: invalid duration "soon"/);
    await assert.rejects(startInProcess('.:0 {\n reload 1s\n whoami\n}\n'), /plugin\/reload: interval value must be greater or equal to 2s/);
    await assert.rejects(startInProcess('.:0 {\n reload 5s 1s 1s\n whoami\n}\n'),
      /plugin\/reload: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after '1s'/);
  });
});

describe('reload: polling bin/nodens', () => {
  test('SHA512 logged at start, reload on change, none on a comment edit, broken file keeps the old config', { timeout: 60000 }, async () => {
    const [hp, mp] = [await freePort(), await freePort()];
    const corefile = (answer: string) =>
      `.:{PORT} {\n reload 2s 0s\n health 127.0.0.1:${hp}\n prometheus 127.0.0.1:${mp}\n ${answer}\n}\n`;
    const p = await startProcess(corefile('whoami'));
    const file = confPath(p);
    try {
      const first = await p.waitFor(/^\[INFO\] plugin\/reload: Running configuration SHA512 = [0-9a-f]{128}$/);
      const expected = serverBlocksSha512(parseCorefile(readFileSync(file, 'utf8'), file, { isDirective: () => true }));
      assert.equal(first.split(' = ')[1], expected);
      assert.equal(p.stdout.indexOf(first), p.stdout.indexOf(`CoreDNS-${COREDNS_VERSION}`) - 1, 'SHA512 line just before the version lines');

      // Only a trailing comment: same parsed blocks, no reload.
      writeFileSync(file, readFileSync(file, 'utf8') + '# a comment\n');
      await sleep(2600);
      assert.ok(!p.stdout.includes('[INFO] Reloading'), p.stdout.join('\n'));

      // A real change: reloaded, new hash logged, endpoints on the same ports throughout.
      let probeFailures = 0;
      let stop = false;
      const prober = (async () => {
        while (!stop) {
          try { if ((await get(hp, '/health', 1000)).status !== 200) probeFailures++; } catch { probeFailures++; }
          await sleep(20);
        }
      })();
      writeFileSync(file, corefile('chaos\n whoami').replace('{PORT}', String(p.port)));
      await p.waitFor(/^\[INFO\] Reloading complete$/, 8000);
      const shas = shaLines(p);
      assert.equal(shas.length, 2);
      assert.notEqual(shas[0], shas[1]);
      const newHash = shas[1]!.split(' = ')[1]!;
      assert.equal((await query(p.port, 'example.org.')).rcode, 'NOERROR');
      const m = await scrape(mp);
      assert.equal(value(m, 'coredns_reload_version_info', { hash: 'sha512', value: newHash }), 1);
      assert.equal(value(m, 'coredns_reload_failed_total'), 0);

      // A file that does not parse: a warning every tick, nothing else.
      writeFileSync(file, `.:${p.port} {\n whoami\n`);
      await p.waitFor(/^\[WARNING\] plugin\/reload: Corefile parse failed: /, 5000);

      // A file that parses but fails to set up: CoreDNS's two error lines, the counter, the old config serving.
      writeFileSync(file, corefile('whoami').replace('{PORT}', String(p.port)).replace(`health 127.0.0.1:${hp}`, 'health 8080'));
      const failed = await p.waitFor(/^\[ERROR\] plugin\/reload: Corefile changed but reload failed: /, 8000);
      assert.equal(failed, '[ERROR] plugin/reload: Corefile changed but reload failed: starting with listener file descriptors: plugin/health: address 8080: missing port in address');
      assert.ok(p.stdout.includes('[ERROR] Restart failed: plugin/health: address 8080: missing port in address'));
      const m2 = await until('the failure counted', async () => {
        const mm = await scrape(mp);
        return value(mm, 'coredns_reload_failed_total') === 1 ? mm : undefined;
      }, 3000);
      assert.equal(m2.get('coredns_reload_failed_total')?.type, 'counter');
      assert.equal(m2.get('coredns_reload_version_info')?.type, 'gauge');
      assert.equal((await query(p.port, 'example.org.')).rcode, 'NOERROR');
      assert.equal((await get(hp, '/health')).status, 200);
      // The bad file is not retried while it stays the same.
      await sleep(2500);
      assert.equal(p.stdout.filter((l) => l.startsWith('[ERROR] Restart failed')).length, 1);
      stop = true;
      await prober;
      assert.equal(probeFailures, 0);
      assert.equal(shaLines(p).length, 2);
    } finally {
      await p.stop();
    }
  });

  test('a reload that moves the metrics port moves the listener', { timeout: 30000 }, async () => {
    const [a, b] = [await freePort(), await freePort()];
    const p = await startProcess(`.:{PORT} {\n reload 2s 0s\n prometheus 127.0.0.1:${a}\n whoami\n}\n`);
    try {
      await p.waitFor(/Running configuration SHA512/);
      assert.equal((await get(a, '/metrics')).status, 200);
      writeFileSync(confPath(p), `.:${p.port} {\n reload 2s 0s\n prometheus 127.0.0.1:${b}\n whoami\n}\n`);
      await p.waitFor(/^\[INFO\] Reloading complete$/, 8000);
      assert.equal((await get(b, '/metrics')).status, 200);
      await assert.rejects(get(a, '/metrics', 500), /ECONNREFUSED/);
    } finally {
      await p.stop();
    }
  });
});
