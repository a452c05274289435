// Builds the container image from the repository's Dockerfile with podman and
// runs it: it answers on :53 as uid 65532, carries no npm, devDependencies or
// sources, stays under a size bound, and `podman stop` ends it gracefully.
//
// No container registry is reachable here, so both base images are made
// locally and passed as build arguments: Debian bookworm from debootstrap
// (minbase, kept as a tarball in .cache/image/ and built once), and a "node"
// base on top of it holding the project's Node 24 binary (the npm `node`
// package's), the host's npm and the host's CA bundle. The Dockerfile itself runs unchanged: apt
// (Debian's mirror) and `npm ci` (the npm registry) inside its stages.
//
// Podman runs with its own storage under .cache/image/storage (vfs: no overlay
// mounts needed), runc (crun refuses this machine's hybrid cgroups), cgroupfs,
// and ulimits under this machine's hard limits. The container's network is a
// namespace this test creates.
//
// Run: node test/image/run.ts   (root; .ci/run installs podman and debootstrap)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
mkdirSync(join(repo, '.cache/image'), { recursive: true });
// The real path: podman records its storage root and refuses the same storage
// under another name (a worktree whose .cache is a symlink).
const cacheDir = realpathSync(join(repo, '.cache/image'));
const version = (JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { version: string }).version;
/** The tag docs/deploy.md uses. */
const IMAGE = `localhost/nodens:${version}`;
const DEBIAN_IMAGE = 'localhost/nodens-test/debian:bookworm';
const NODE_IMAGE = 'localhost/nodens-test/node:24-bookworm';
const ROOTFS_TAR = join(cacheDir, 'debian-bookworm-minbase.tar');
/** Measured 256.2 MB (docs/deploy.md has the layers); about 7% of room for growth. */
const SIZE_BOUND_BYTES = 275 * 1000 * 1000;
const NONROOT_UID = 65532;

// Ulimits below this machine's hard limits (`ulimit -Hn` 20000, `ulimit -Hu` 96365):
// podman's defaults ask for more and the container fails to start.
const ULIMITS = ['--ulimit', 'nofile=16384:16384', '--ulimit', 'nproc=4096:4096'];
const PODMAN_GLOBAL = [
  '--root', join(cacheDir, 'storage'), '--runroot', '/run/nodens-image-test',
  '--storage-driver', 'vfs', '--runtime', 'runc', '--cgroup-manager', 'cgroupfs', '--events-backend', 'file',
];

function run(cmd: string, args: string[], timeoutMs: number, input?: string): SpawnSyncReturns<string> {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: timeoutMs, input, maxBuffer: 64 * 1024 * 1024 });
  if (r.error && (r.error as NodeJS.ErrnoException).code === 'ENOENT') {
    throw new Error(`${cmd} is not installed (apt-get install -y podman debootstrap dnsutils curl iproute2; .ci/run does)`);
  }
  if (r.error) throw new Error(`${cmd} ${args.join(' ')}: ${r.error.message}`);
  return r;
}

function must(cmd: string, args: string[], timeoutMs: number): string {
  const r = run(cmd, args, timeoutMs);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}:\n${r.stderr}${r.stdout}`.slice(0, 8000));
  return r.stdout;
}

function podman(args: string[], timeoutMs = 60_000): SpawnSyncReturns<string> {
  return run('podman', [...PODMAN_GLOBAL, ...args], timeoutMs);
}

function mustPodman(args: string[], timeoutMs = 60_000): string {
  return must('podman', [...PODMAN_GLOBAL, ...args], timeoutMs);
}

function seconds(fromMs: number): string {
  return ((Date.now() - fromMs) / 1000).toFixed(1);
}

const netns = `nodens-image-${process.pid}`;
const work = mkdtempSync(join(tmpdir(), 'nodens-image-'));
const container = `nodens-image-test-${process.pid}`;

/** Debian bookworm minbase as a tarball, made once by debootstrap (a few minutes) and cached. */
function debianRootfs(): void {
  if (existsSync(ROOTFS_TAR)) return;
  const t0 = Date.now();
  const dir = join(work, 'rootfs');
  must('debootstrap', ['--variant=minbase', 'bookworm', dir, 'http://deb.debian.org/debian'], 15 * 60_000);
  // Trimmed as debian:bookworm-slim is: no package lists or caches, no documentation, manual
  // pages or translations, and dpkg told to leave them out of later installs too.
  for (const p of ['var/lib/apt/lists', 'var/cache/apt/archives']) {
    rmSync(join(dir, p), { recursive: true, force: true });
    mkdirSync(join(dir, p, 'partial'), { recursive: true });
  }
  for (const p of ['usr/share/doc', 'usr/share/man', 'usr/share/info', 'usr/share/locale', 'usr/share/lintian']) {
    rmSync(join(dir, p), { recursive: true, force: true });
  }
  writeFileSync(join(dir, 'etc/dpkg/dpkg.cfg.d/slim'), ['doc/*', 'man/*', 'info/*', 'locale/*', 'lintian/*', 'groff/*']
    .map((p) => `path-exclude /usr/share/${p}\n`).join(''));
  const partial = `${ROOTFS_TAR}.${process.pid}`;
  must('tar', ['--numeric-owner', '--xattrs', '-C', dir, '-cf', partial, '.'], 5 * 60_000);
  renameSync(partial, ROOTFS_TAR);
  rmSync(dir, { recursive: true, force: true });
  console.log(`# debootstrap bookworm minbase: ${seconds(t0)} s (cached in ${ROOTFS_TAR})`);
}

function baseImages(): void {
  debianRootfs();
  if (podman(['image', 'exists', DEBIAN_IMAGE]).status !== 0) {
    const t0 = Date.now();
    mustPodman(['import', '--change', 'CMD ["/bin/bash"]', ROOTFS_TAR, DEBIAN_IMAGE], 5 * 60_000);
    console.log(`# podman import of the Debian base: ${seconds(t0)} s`);
  }
  // The local stand-in for node:24-bookworm-slim: Node 24 (the npm `node` package's
  // binary, the one the project runs on) and npm (the host's) on Debian bookworm.
  const ctx = join(work, 'node-base');
  mkdirSync(ctx, { recursive: true });
  const nodeBin = join(repo, 'node_modules/node/bin/node');
  assert.ok(existsSync(nodeBin), `${nodeBin} is missing: run npm ci`);
  cpSync(nodeBin, join(ctx, 'node'));
  // Node's headers, which the official node images carry in /usr/local/include/node: the image's build compiles
  // nodens's native addons against node_api.h.
  const nodeHeaders = join(repo, `node_modules/node/node_modules/node-linux-${process.arch}/include/node`);
  assert.ok(existsSync(join(nodeHeaders, 'node_api.h')), `${nodeHeaders}/node_api.h is missing: run npm ci`);
  cpSync(nodeHeaders, join(ctx, 'include'), { recursive: true });
  const npmDir = dirname(dirname(must('readlink', ['-f', must('sh', ['-c', 'command -v npm'], 5000).trim()], 5000).trim()));
  assert.ok(existsSync(join(npmDir, 'package.json')), `npm's package directory not found (${npmDir})`);
  cpSync(npmDir, join(ctx, 'npm'), { recursive: true });
  // The host's CA bundle, for the build's `npm ci`: where the npm registry is reached through a
  // TLS-inspecting proxy (as on this CI machine), the host trusts its CA and so must the base.
  const caBundle = '/etc/ssl/certs/ca-certificates.crt';
  assert.ok(existsSync(caBundle), `${caBundle} is missing: apt-get install -y ca-certificates`);
  cpSync(caBundle, join(ctx, 'ca-certificates.crt'));
  writeFileSync(join(ctx, 'Containerfile'), [
    `FROM ${DEBIAN_IMAGE}`,
    'COPY node /usr/local/bin/node',
    'COPY npm /usr/local/lib/node_modules/npm',
    'COPY include /usr/local/include/node',
    `COPY ca-certificates.crt ${caBundle}`,
    `ENV NODE_EXTRA_CA_CERTS=${caBundle}`,
    'RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && node --version && npm --version',
    '',
  ].join('\n'));
  const t0 = Date.now();
  mustPodman(['build', '--pull=never', '--network', 'host', ...ULIMITS, '-t', NODE_IMAGE, ctx], 5 * 60_000);
  console.log(`# node base image: ${seconds(t0)} s`);
}

before(() => {
  must('ip', ['netns', 'add', netns], 10_000);
  must('ip', ['-n', netns, 'link', 'set', 'lo', 'up'], 10_000);
  baseImages();
  const t0 = Date.now();
  // --network host for the build's RUN steps only (apt and npm reach their mirrors as .ci/run does).
  mustPodman(['build', '--pull=never', '--network', 'host', ...ULIMITS,
    '--build-arg', `NODE_IMAGE=${NODE_IMAGE}`, '--build-arg', `RUNTIME_IMAGE=${DEBIAN_IMAGE}`,
    '-t', IMAGE, '-f', join(repo, 'Dockerfile'), repo], 20 * 60_000);
  console.log(`# nodens image build: ${seconds(t0)} s`);
});

after(() => {
  podman(['rm', '-f', '-t', '0', container]);
  // vfs keeps a full copy of the tree per layer: drop the layers no tag uses any more
  // (an earlier build's), so that .cache/image/storage does not grow run after run.
  podman(['image', 'prune', '-f'], 5 * 60_000);
  run('ip', ['netns', 'del', netns], 10_000);
  rmSync(work, { recursive: true, force: true });
});

/** `podman run --rm` of the image with another entrypoint or arguments. */
function inImage(entrypoint: string | undefined, args: string[]): SpawnSyncReturns<string> {
  return podman(['run', '--rm', '--network', 'none', ...ULIMITS,
    ...(entrypoint === undefined ? [] : ['--entrypoint', entrypoint]), IMAGE, ...args], 60_000);
}

test('the image is smaller than the bound', () => {
  const size = Number(mustPodman(['image', 'inspect', '--format', '{{.Size}}', IMAGE]).trim());
  console.log(`# image size: ${(size / 1e6).toFixed(1)} MB (bound ${SIZE_BOUND_BYTES / 1e6} MB)`);
  assert.ok(size > 50e6, `implausible size ${size}`);
  assert.ok(size < SIZE_BOUND_BYTES, `image is ${size} bytes`);
});

test('the image runs as uid 65532 and holds no npm, devDependencies, sources or tests', () => {
  const config = JSON.parse(mustPodman(['image', 'inspect', '--format', '{{json .Config}}', IMAGE])) as
    { User: string; Entrypoint: string[]; ExposedPorts: Record<string, unknown>; WorkingDir: string };
  assert.equal(config.User, `${NONROOT_UID}:${NONROOT_UID}`);
  assert.deepEqual(config.Entrypoint, ['/usr/local/bin/node', '--max-semi-space-size=4', '--use-openssl-ca', '--no-maglev', '/nodens/dist/bundle/nodens.js']);
  assert.deepEqual(Object.keys(config.ExposedPorts).sort(), ['53/tcp', '53/udp', '9153/tcp']);
  assert.equal(config.WorkingDir, '/');

  const id = inImage('id', ['-u']);
  assert.equal(id.status, 0, id.stderr);
  assert.equal(id.stdout.trim(), String(NONROOT_UID));

  const listing = inImage('/bin/sh', ['-c',
    // dash's `command -v` looks at its first name only: one call per name.
    'for t in npm npx yarn corepack; do command -v $t; done; ls /nodens; cd /nodens/node_modules && find . -name package.json -printf "%h\\n"; '
    + 'find /nodens -path /nodens/node_modules -prune -o -name "*.ts" ! -name "*.d.ts" -print | head -3; '
    + 'for t in ip iptables nft nodens; do command -v $t; done; ls /etc/ssl/certs/ca-certificates.crt']);
  assert.equal(listing.status, 0, listing.stderr);
  const out = listing.stdout;
  assert.doesNotMatch(out, /\/(npm|npx|yarn|corepack)\n/, 'a package manager is in the image');
  const lines = new Set(out.split('\n'));
  for (const want of ['bin', 'dist', 'node_modules', 'package.json', 'coredns.version']) {
    assert.ok(lines.has(want), `${want} missing from /nodens:\n${out}`);
  }
  for (const unwanted of ['src', 'test', 'bench', 'docs', 'tsconfig.json']) {
    assert.ok(!lines.has(unwanted), `${unwanted} is in the image:\n${out}`);
  }
  // Exactly the lock file's runtime packages: every non-dev one present, no dev-only one.
  const lock = JSON.parse(readFileSync(join(repo, 'package-lock.json'), 'utf8')) as
    { packages: Record<string, { dev?: boolean; optional?: boolean; devOptional?: boolean }> };
  const installed = new Set([...lines].filter((l) => l.startsWith('./')).map((l) => `node_modules/${l.slice(2)}`));
  let runtime = 0;
  for (const [path, meta] of Object.entries(lock.packages)) {
    if (path === '' || !path.startsWith('node_modules/')) continue;
    if (meta.dev === true) assert.ok(!installed.has(path), `devDependency ${path} is in the image`);
    else if (meta.optional !== true && meta.devOptional !== true) { runtime++; assert.ok(installed.has(path), `runtime dependency ${path} is missing`); }
  }
  assert.ok(runtime >= 4, `only ${runtime} runtime packages in the lock file`);
  assert.doesNotMatch(out, /\.ts\n/, 'TypeScript sources are in the image');
  // The system store the entrypoint's --use-openssl-ca reads (/etc/ssl/certs), as CoreDNS's image carries it.
  assert.ok(lines.has('/etc/ssl/certs/ca-certificates.crt'), `no system certificate store in the image:\n${out}`);
  for (const tool of ['/usr/sbin/ip', '/usr/sbin/iptables', '/usr/sbin/nft', '/usr/local/bin/nodens']) {
    assert.ok(lines.has(tool), `${tool} missing (node-cache and init containers need it):\n${out}`);
  }
});

test('-version and nodens doctor run in the image', () => {
  const v = inImage(undefined, ['-version']);
  assert.equal(v.status, 0, v.stderr);
  const coredns = readFileSync(join(repo, 'coredns.version'), 'utf8').trim();
  assert.match(v.stdout, new RegExp(`^CoreDNS-${coredns.replace(/^v/, '').replaceAll('.', '\\.')}\n`));
  assert.match(v.stdout, new RegExp(`node-v24\\.[0-9.]+, nodens-${version.replaceAll('.', '\\.')}`));
  // The init-container form docs/deploy.md shows: the launcher on PATH, a Corefile that loops.
  const doctor = inImage('/bin/sh', ['-c',
    'printf ". {\\n  forward . 127.0.0.1\\n}\\n" > /tmp/Corefile && nodens doctor -conf /tmp/Corefile; echo "exit=$?"']);
  assert.equal(doctor.status, 0, doctor.stderr);
  assert.match(doctor.stdout, /exit=1\n$/, `doctor should predict the loop:\n${doctor.stdout}${doctor.stderr}`);
  assert.match(doctor.stdout + doctor.stderr, /127\.0\.0\.1/);
});

test('node-cache mode runs in the image', () => {
  const r = inImage(undefined, ['node-cache', '-version']);
  assert.equal(r.status, 0, `node-cache -version exited ${r.status}: ${r.stderr}${r.stdout}`);
  // node-cache logs its start line first, as k8s-dns-node-cache does, then CoreDNS's version lines.
  assert.match(r.stdout, /^\[INFO\] Starting node-cache image: nodens \S+\nCoreDNS-\d+\.\d+\.\d+\n/);
});

test('serves coredns/deployment\'s -conf /etc/coredns/Corefile on :53 as non-root, and stops gracefully', async () => {
  const corefileDir = join(work, 'coredns');
  mkdirSync(corefileDir);
  writeFileSync(join(corefileDir, 'Corefile'), [
    '.:53 {',
    '    errors',
    '    health :8080',
    '    ready :8181',
    '    hosts {',
    '        192.0.2.53 image.nodens.test',
    '    }',
    '    prometheus :9153',
    '}',
    '',
  ].join('\n'));
  // As coredns/deployment runs it: the ConfigMap mounted read-only at /etc/coredns, and the
  // container's securityContext (capabilities drop ALL, add NET_BIND_SERVICE;
  // allowPrivilegeEscalation: false; readOnlyRootFilesystem: true).
  mustPodman(['run', '-d', '--name', container, '--network', `ns:/run/netns/${netns}`, ...ULIMITS,
    '--cap-drop', 'ALL', '--cap-add', 'NET_BIND_SERVICE', '--security-opt', 'no-new-privileges', '--read-only',
    '-v', `${corefileDir}:/etc/coredns:ro`, IMAGE, '-conf', '/etc/coredns/Corefile']);

  let answer = '';
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const r = run('ip', ['netns', 'exec', netns, 'dig', '@127.0.0.1', '-p', '53', '+time=1', '+tries=1', '+short',
      'image.nodens.test', 'A'], 5000);
    answer = r.stdout.trim();
    if (answer === '192.0.2.53') break;
    await new Promise((ok) => setTimeout(ok, 300));
  }
  assert.equal(answer, '192.0.2.53', `no answer on :53; logs:\n${podman(['logs', container]).stderr}`);
  const tcp = must('ip', ['netns', 'exec', netns, 'dig', '@127.0.0.1', '-p', '53', '+tcp', '+time=2', '+tries=1', '+short',
    'image.nodens.test', 'A'], 10_000);
  assert.equal(tcp.trim(), '192.0.2.53');

  // Non-root for real: the server process's uid, and the capability (not a lowered
  // unprivileged-port sysctl) is what lets it hold :53.
  const pid = mustPodman(['inspect', '--format', '{{.State.Pid}}', container]).trim();
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  assert.match(status, new RegExp(`^Uid:\\s+${NONROOT_UID}\\s+${NONROOT_UID}\\s+${NONROOT_UID}\\s+${NONROOT_UID}$`, 'm'));
  const capEff = BigInt(`0x${/^CapEff:\s+([0-9a-f]+)$/m.exec(status)![1]}`);
  assert.equal(capEff, 1n << 10n, 'effective capabilities should be CAP_NET_BIND_SERVICE alone');
  const portStart = must('ip', ['netns', 'exec', netns, 'cat', '/proc/sys/net/ipv4/ip_unprivileged_port_start'], 5000);
  assert.equal(portStart.trim(), '1024');

  const metrics = must('ip', ['netns', 'exec', netns, 'curl', '-sf', 'http://127.0.0.1:9153/metrics'], 10_000);
  assert.match(metrics, /^coredns_dns_requests_total\{.*server="dns:\/\/:53".*\} [1-9]/m);
  const health = must('ip', ['netns', 'exec', netns, 'curl', '-sf', 'http://127.0.0.1:8080/health'], 10_000);
  assert.equal(health, 'OK');
  const ready = must('ip', ['netns', 'exec', netns, 'curl', '-sf', 'http://127.0.0.1:8181/ready'], 10_000);
  assert.equal(ready, 'OK');

  // Graceful stop: SIGTERM reaches node as PID 1, nodens logs CoreDNS's line and
  // exits 0 well within podman's 10 s stop timeout (a SIGKILL would take 10 s and exit 137).
  const t0 = Date.now();
  mustPodman(['stop', '-t', '10', container], 30_000);
  const stopMs = Date.now() - t0;
  console.log(`# podman stop: ${stopMs} ms`);
  const exitCode = mustPodman(['inspect', '--format', '{{.State.ExitCode}}', container]).trim();
  const logs = podman(['logs', container]);
  const text = logs.stdout + logs.stderr;
  assert.equal(exitCode, '0', text);
  assert.ok(stopMs < 5000, `podman stop took ${stopMs} ms`);
  assert.match(text, /\[INFO\] SIGTERM: Shutting down servers then terminating/);
});
