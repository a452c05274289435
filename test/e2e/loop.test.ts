// loop, end to end: seed 001 (`. { loop; forward . 127.0.0.1 }`) side by side with the
// real CoreDNS, each in its own network namespace so both own port 53; then nodens's
// containment of the same loop; then `nodens doctor`.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, ROOT, startProcess } from '../helpers/server.ts';
import { Netns, available, digIn } from '../netns/netns.ts';
import { dig } from '../helpers/dig.ts';

const SEED_001 = '. {\n    loop\n    forward . 127.0.0.1\n}\n';
const FATAL = /^\[FATAL\] plugin\/loop: Loop \(127\.0\.0\.1:(\d+) -> :53\) detected for zone "\.", see https:\/\/coredns\.io\/plugins\/loop#troubleshooting\. Query: "HINFO (\d+)\.(\d+)\."$/;

/** The reference CoreDNS (built once by the script when missing: .ci/run builds it before the tests). */
function referenceCoreDNS(): string {
  const r = spawnSync(join(ROOT, 'scripts', 'coredns-reference.sh'), { encoding: 'utf8', timeout: 900_000 });
  assert.equal(r.status, 0, `scripts/coredns-reference.sh failed: ${r.stderr}`);
  return r.stdout.trim();
}

/** These scenarios need their own port 53: network namespaces, so root and iproute2 (CI runs as root). */
function requireNetns(): void {
  assert.ok(available(), 'network namespaces unavailable: run as root with iproute2 installed');
}

/** GET a URL from inside a namespace with our own Node (no curl needed). */
function fetchIn(ns: Netns, url: string): { status: string; body: string } {
  const script = `fetch(${JSON.stringify(url)}).then(async (r) => process.stdout.write(r.status + '\\n' + await r.text()), (e) => { process.stdout.write('ERR\\n' + e.message); })`;
  const out = ns.exec(process.execPath, ['-e', script]).stdout;
  const nl = out.indexOf('\n');
  return { status: out.slice(0, nl), body: out.slice(nl + 1) };
}

test('seed 001: plain `loop` exits like CoreDNS (FATAL line shape, exit 1), side by side', { timeout: 900_000 }, async () => {
  requireNetns();
  const coredns = referenceCoreDNS();
  const nsN = new Netns('seed1n');
  const nsC = new Netns('seed1c');
  try {
    const t0 = Date.now();
    const n = nsN.nodens(SEED_001);
    const c = nsC.run(coredns, ['-conf', nsC.file('Corefile', SEED_001)]);
    const [nCode, cCode] = await Promise.all([n.exited, c.exited]);
    const nLine = n.out.find((l) => l.startsWith('[FATAL]'));
    assert.equal(nCode, 1, n.out.join('\n'));
    assert.match(nLine ?? '', FATAL);
    const m = FATAL.exec(nLine!)!;
    assert.ok(Number(m[2]) < 2 ** 62 && Number(m[3]) < 2 ** 62);
    assert.ok(Date.now() - t0 < 35_000);
    const cLine = c.out.find((l) => l.startsWith('[FATAL]'));
    assert.equal(cCode, 1, c.out.join('\n'));
    assert.match(cLine ?? '', FATAL);
    // Same shape once the random parts are masked.
    const mask = (s: string): string => s.replace(/127\.0\.0\.1:\d+/, '127.0.0.1:P').replace(/HINFO \d+\.\d+\./, 'HINFO R1.R2.');
    assert.equal(mask(nLine!), mask(cLine!));
  } finally {
    await nsN.close();
    await nsC.close();
  }
});

test('seed 001 with `loop { }`: no exit, SERVFAIL with EDE 22, other blocks keep answering, metrics, ready 503', { timeout: 60_000 }, async () => {
  requireNetns();
  const ns = new Netns('seed1x');
  try {
    const n = ns.nodens(`. {
    loop {
        recheck 1s
    }
    forward . 127.0.0.1
    prometheus 127.0.0.1:9153
    ready 127.0.0.1:8181
}
cluster.local {
    hosts {
        10.0.0.1 kube-dns.kube-system.svc.cluster.local
    }
}
`);
    const line = await n.waitFor(/\[ERROR\] plugin\/loop: Loop detected/);
    assert.match(line, /zone "\." through upstream 127\.0\.0\.1:53 \(Corefile .*Corefile:5\)/);
    assert.match(line, /remedy: /);
    assert.ok(n.out.some((l) => /\[WARNING\] plugin\/loop: Upstream 127\.0\.0\.1:53 .* own listen address/.test(l)));
    for (const type of ['A', 'AAAA', 'MX', 'HINFO', 'TXT']) {
      const r = digIn(ns, '127.0.0.1', `q${type}.example.com`, type);
      assert.equal(r.status, 'SERVFAIL', r.out);
      assert.match(r.ede, /^22 \(No Reachable Authority\): \(nodens: forwarding loop/);
    }
    const k = digIn(ns, '127.0.0.1', 'kube-dns.kube-system.svc.cluster.local', 'A');
    assert.equal(k.status, 'NOERROR');
    assert.match(k.out, /10\.0\.0\.1/);
    const metrics = fetchIn(ns, 'http://127.0.0.1:9153/metrics');
    assert.equal(metrics.status, '200', metrics.body);
    assert.match(metrics.body, /nodens_loop_detections_total\{zone="\.",upstream="127\.0\.0\.1:53"\} 1/);
    assert.match(metrics.body, /nodens_loop_quarantined_upstreams 1/);
    assert.equal(fetchIn(ns, 'http://127.0.0.1:8181/ready').status, '503');
    assert.equal(n.proc.exitCode, null);
  } finally {
    await ns.close();
  }
});

test('a `loop { }` self-loop on 127.0.0.1 is answered at once once quarantined (no packet upstream)', { timeout: 30_000 }, async () => {
  const p = await startProcess(`.:{PORT} {
    loop {
        probe_interval 0
    }
    forward . 127.0.0.1:{PORT}
}
`);
  try {
    await p.waitFor(/Loop detected/);
    const t0 = Date.now();
    const out = await dig(p.port, 'x.example.net', 'A');
    assert.match(out, /status: SERVFAIL/);
    assert.match(out, /EDE: 22/);
    assert.ok(Date.now() - t0 < 1500);
    assert.equal(p.proc.exitCode, null);
  } finally {
    await p.stop();
  }
});

test('`loop { action exit }`: diagnosis line, then the CoreDNS-shaped FATAL, exit 1', { timeout: 30_000 }, async () => {
  const p = await startProcess(`.:{PORT} {
    loop {
        action exit
    }
    forward . 127.0.0.1:{PORT}
}
`, { wait: false });
  const code = await p.exited;
  assert.equal(code, 1);
  assert.ok(p.stdout.some((l) => /^\[ERROR\] plugin\/loop: Loop detected for zone "\." through upstream 127\.0\.0\.1:\d+/.test(l)), p.stdout.join('\n'));
  assert.ok(p.stdout.some((l) => /^\[FATAL\] plugin\/loop: Loop \(.* -> 127\.0\.0\.1:\d+\) detected for zone "\.", see https:\/\/coredns\.io\/plugins\/loop#troubleshooting\. Query: "HINFO \d+\.\d+\."$/.test(l)), p.stdout.join('\n'));
});

test('nodens doctor predicts seed 001, 000/002 and 004 loops and exits 1; a clean Corefile exits 0', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-doctor-'));
  const w = (n: string, t: string): string => { const f = join(dir, n); writeFileSync(f, t); return f; };
  // An empty root: this machine's own systemd-resolved and kubelet files stay out of the predictions.
  const root = mkdtempSync(join(tmpdir(), 'nodens-doctor-root-'));
  const run = (...args: string[]) => spawnSync(BIN, ['doctor', '--root', root, ...args], { encoding: 'utf8', cwd: dir });

  const seed1 = run('-conf', w('c1', SEED_001));
  assert.equal(seed1.status, 1, seed1.stdout + seed1.stderr);
  assert.match(seed1.stdout, /LOOP zone "\." .*upstream 127\.0\.0\.1:53 \(Corefile .*c1:3\) is this block's own listen address/);

  const rc = w('resolv.conf', '# stub\nnameserver 127.0.0.53\nsearch .\n');
  const seed0 = run('-conf', w('c0', `.:53 {\n    loop\n    forward . ${rc}\n}\n`), '--json');
  assert.equal(seed0.status, 1);
  const j = JSON.parse(seed0.stdout) as { loops: number; findings: Array<{ severity: string; origin: string; remedy: string }> };
  assert.equal(j.loops, 1);
  assert.equal(j.findings[0]!.origin, `${rc}:2`);
  // No kubelet involved (no kubelet config, a resolv.conf of its own): the remedy does not send the operator to kubelet.
  assert.match(j.findings[0]!.remedy, /DNSStubListener=no/);
  assert.doesNotMatch(j.findings[0]!.remedy, /kubelet/);

  const nl = w('resolv-nl.conf', 'options timeout:2 attempts:3 rotate single-request-reopen\nnameserver 169.254.25.10\n');
  const seed4 = run('-conf', w('c4', `cluster.local:53 {\n    bind 169.254.25.10\n    forward . 10.96.0.10\n}\n.:53 {\n    bind 169.254.25.10\n    loop\n    forward . ${nl}\n}\n`));
  assert.equal(seed4.status, 1, seed4.stdout);
  assert.match(seed4.stdout, /LOOP zone "\." .*169\.254\.25\.10:53 .*resolv-nl\.conf:2\)/);

  const kube = w('kubelet.yaml', 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nresolvConf: ' + rc + '\n');
  const kc = run('-conf', w('c5', '.:53 {\n    bind 10.1.2.3\n    loop\n    forward . /etc/resolv.conf\n}\n'), '--kubelet-config', kube);
  assert.equal(kc.status, 1, kc.stdout);
  assert.match(kc.stdout, /kubelet's resolvConf .* lists 127\.0\.0\.53 at line 2/);

  const resolved = w('resolved.conf', '[Resolve]\nDNS=10.1.2.3\n');
  const two = run('-conf', w('c6', `.:53 {\n    bind 10.1.2.3\n    forward . ${rc}\n}\n`), '--resolved-conf', resolved, '--json');
  const jt = JSON.parse(two.stdout) as { loops: number; findings: Array<{ message: string }> };
  assert.equal(two.status, 1, two.stdout);
  assert.match(jt.findings[0]!.message, /systemd-resolved's stub/);

  const clean = run('-conf', w('c7', '.:53 {\n    loop\n    forward . 192.0.2.53\n}\n'));
  assert.equal(clean.status, 0, clean.stdout);
  assert.match(clean.stdout, /no forwarding loop predicted/);
});

test('with cache in front (the Kubernetes Corefile shape) the client still gets the loop EDE', { timeout: 30_000 }, async () => {
  const p = await startProcess(`.:{PORT} {
    cache 30
    loop {
        probe_interval 0
    }
    forward . 127.0.0.1:{PORT}
}
`);
  try {
    await p.waitFor(/Loop detected/);
    for (const name of ['a.example.net', 'a.example.net', 'b.example.net']) {
      const out = await dig(p.port, name, 'A');
      assert.match(out, /status: SERVFAIL/);
      assert.match(out, /EDE: 22 \(No Reachable Authority\)/, out);
    }
    assert.equal(p.proc.exitCode, null);
  } finally {
    await p.stop();
  }
});

test('-workers 2: the self-loop is detected and contained whichever worker receives the probe', { timeout: 30_000 }, async () => {
  const p = await startProcess(`.:{PORT} {
    loop {
        probe_interval 1s
    }
    forward . 127.0.0.1:{PORT}
}
`, { args: ['-workers', '2'] });
  try {
    // Each worker probes on its own; the probe lands on either worker (SO_REUSEPORT), and both must claim it.
    const deadline = Date.now() + 15_000;
    while (p.stdout.filter((l) => /\[ERROR\] plugin\/loop: Loop detected/.test(l)).length < 2 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(p.stdout.filter((l) => /\[ERROR\] plugin\/loop: Loop detected/.test(l)).length >= 2, p.stdout.join('\n'));
    for (let i = 0; i < 10; i++) {
      const out = await dig(p.port, `w${i}.example.net`, 'A');
      assert.match(out, /status: SERVFAIL/);
      assert.match(out, /EDE: 22/);
    }
    assert.equal(p.proc.exitCode, null);
  } finally {
    assert.equal(await p.stop(), 0);
  }
});
