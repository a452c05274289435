// CacheApp's Corefile life cycle on real files and timers, after node-cache's TestUpdateCoreFile: the first
// write at init, a template change, then kube-dns stub domains and upstreams, each picked up by the 10 s poll.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CacheApp, CONFIG_SYNC_PERIOD_MS } from './app.ts';
import type { ConfigParams } from './params.ts';

const TEMPLATE = `cluster.local:53 {
    errors
    loop
    bind __PILLAR__LOCAL__DNS__
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
}
.:53 {
    errors
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__UPSTREAM__SERVERS__ {
            force_tcp
    }
}
`;

function paramsIn(dir: string, over: Partial<ConfigParams> = {}): ConfigParams {
  return {
    localIPStr: '169.254.20.10,10.0.0.10', localIPs: ['169.254.20.10', '10.0.0.10'], ipv6: false, localPort: '53',
    metricsListenAddress: '127.0.0.1:0', setupInterface: false, interfaceName: 'nodelocaldns', intervalMs: 60_000,
    pidfile: '', baseCoreFile: join(dir, 'base', 'Corefile.base'), coreFile: join(dir, 'Corefile'),
    kubednsCMPath: join(dir, 'kube-dns'), upstreamSvcName: 'test-svc', healthPort: '8080', setupIptables: false,
    skipTeardown: false, reloadWithSignal: false, firewall: 'auto', ...over,
  };
}

function logger(): { lines: string[]; log: { debug(m: string): void; info(m: string): void; warning(m: string): void; error(m: string): void } } {
  const lines: string[] = [];
  return { lines, log: { debug: (m) => lines.push('[DEBUG] ' + m), info: (m) => lines.push('[INFO] ' + m), warning: (m) => lines.push('[WARNING] ' + m), error: (m) => lines.push('[ERROR] ' + m) } };
}

async function until(file: string, pred: (s: string) => boolean, ms: number): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    const s = readFileSync(file, 'utf8');
    if (pred(s)) return s;
    if (Date.now() > deadline) return s;
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('Corefile written at init, rewritten on a template change and on kube-dns ConfigMap changes (10 s polls)', { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-nodecache-'));
  mkdirSync(join(dir, 'base'));
  mkdirSync(join(dir, 'kube-dns'));
  writeFileSync(join(dir, 'base', 'Corefile.base'), TEMPLATE);
  const { lines, log } = logger();
  let signals = 0;
  const app = new CacheApp(paramsIn(dir, { reloadWithSignal: true }), log, { env: { TEST_SVC_SERVICE_HOST: '9.10.11.12' }, reloadSignal: () => { signals++; } });
  try {
    await app.init();
    const out = join(dir, 'Corefile');
    assert.equal(readFileSync(out, 'utf8'), TEMPLATE
      .replaceAll('__PILLAR__LOCAL__DNS__', '169.254.20.10 10.0.0.10').replace('__PILLAR__CLUSTER__DNS__', '9.10.11.12')
      .replace('__PILLAR__UPSTREAM__SERVERS__', '/etc/resolv.conf').replace('__PILLAR__DNS__SERVER__', ''));
    assert.ok(lines.includes('[INFO] Updated Corefile with 0 custom stubdomains and upstream servers /etc/resolv.conf'), lines.join('\n'));
    assert.ok(signals >= 1);

    // The node-local-dns ConfigMap changes: `loop` → `template` (node-cache's own test edit).
    writeFileSync(join(dir, 'base', 'Corefile.base'), TEMPLATE.replaceAll('loop', 'template'));
    const t0 = Date.now();
    const second = await until(out, (s) => s.includes('template'), CONFIG_SYNC_PERIOD_MS + 5000);
    assert.ok(second.includes('    template\n') && !second.includes('loop'), second);
    process.stdout.write(`# template change picked up after ${Date.now() - t0} ms\n`);

    // kube-dns ConfigMap: upstreams switch the `.` forward to UDP; stub domains are appended.
    writeFileSync(join(dir, 'kube-dns', 'upstreamNameservers'), '["2.2.2.2:10053", "3.3.3.3"]');
    writeFileSync(join(dir, 'kube-dns', 'stubDomains'), '{"acme.local": ["1.1.1.1"]}');
    const third = await until(out, (s) => s.includes('acme.local'), CONFIG_SYNC_PERIOD_MS + 5000);
    assert.ok(third.includes('    bind 169.254.20.10 10.0.0.10 \n    forward . 2.2.2.2:10053 3.3.3.3\n}\n'), third);
    assert.ok(third.endsWith('\nacme.local:53 {\n    errors\n    cache 30\n    bind 169.254.20.10 10.0.0.10\n    forward . 1.1.1.1\n}\n'), third);
    assert.ok(lines.includes('[INFO] Updated Corefile with 1 custom stubdomains and upstream servers 2.2.2.2:10053 3.3.3.3'), lines.join('\n'));
    assert.ok(lines.some((l) => l.startsWith('[INFO] Sending reload signal to PID ')));
    assert.equal(await app.metrics.value('configmap'), 0);

    // Invalid data: the file stays, the configmap error counts.
    writeFileSync(join(dir, 'kube-dns', 'stubDomains'), '{"acme.local": ["ns.acme.local"]}');
    const deadline = Date.now() + CONFIG_SYNC_PERIOD_MS + 5000;
    while (await app.metrics.value('configmap') === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    assert.equal(await app.metrics.value('configmap'), 1);
    assert.ok(lines.some((l) => l.startsWith('[ERROR] Invalid config: invalid nameservers [ns.acme.local] for the stub domain acme.local')), lines.join('\n'));
    assert.equal(readFileSync(out, 'utf8'), third);
  } finally {
    app.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('missing upstream Service variable: warning and <nil>; an unwritable -conf counts a configmap error', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-nodecache-'));
  mkdirSync(join(dir, 'base'));
  writeFileSync(join(dir, 'base', 'Corefile.base'), '.:53 {\n    forward . __PILLAR__CLUSTER__DNS__\n}\n');
  const { lines, log } = logger();
  const app = new CacheApp(paramsIn(dir, { coreFile: '', kubednsCMPath: join(dir, 'absent') }), log, { env: {} });
  try {
    await app.init();
    assert.equal(app.clusterDNS, '<nil>');
    assert.ok(lines.includes('[WARNING] Unable to lookup IP address of Upstream service test-svc, env $TEST_SVC_SERVICE_HOST ``'), lines.join('\n'));
    assert.ok(lines.includes('[ERROR] Failed to write config file  - err open : no such file or directory'), lines.join('\n'));
    assert.ok(lines.includes(`[ERROR] Failed to sync kube-dns config directory ${join(dir, 'absent')}, err: lstat ${join(dir, 'absent')}: no such file or directory`), lines.join('\n'));
    assert.equal(await app.metrics.value('configmap'), 1);
  } finally {
    app.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the upstream Service\'s ClusterIP among -localip is called out (a loop node-cache walks into with -upstreamsvc kube-dns)', () => {
  const { lines, log } = logger();
  const app = new CacheApp(paramsIn(tmpdir(), { upstreamSvcName: 'kube-dns' }), log, { env: { KUBE_DNS_SERVICE_HOST: '10.0.0.10' } });
  assert.equal(app.clusterDNS, '10.0.0.10');
  assert.ok(lines.some((l) => /^\[WARNING\] Upstream service kube-dns \(10\.0\.0\.10\) is one of -localip/.test(l)), lines.join('\n'));
});
