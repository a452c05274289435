// A real Kubernetes API server for the tests: etcd and kube-apiserver as built by scripts/k8s-reference.sh
// (k8s.io/kubernetes v1.34 from Go modules), on free loopback ports, with a static token file, AlwaysAllow
// (or RBAC on request), a self-signed serving certificate the API server generates in its --cert-dir, and
// a kubeconfig for the admin token. No controller-manager or scheduler runs: objects stay exactly as the
// test creates them (EndpointSlices are written by the test, pod status is patched by the test).
//
// Both processes run under `setpriv --pdeathsig SIGKILL`, so they die with the test process even when it
// is killed; stop() and the process's exit also end them.

import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The directory holding kube-apiserver, etcd and kubectl ($NODENS_K8S_DIR, else .cache/k8s/<version>/). */
export function k8sBinDir(): string {
  const override = process.env.NODENS_K8S_DIR;
  let dir: string;
  if (override !== undefined && override !== '') {
    dir = override;
  } else {
    const gomod = readFileSync(path.join(ROOT, 'scripts/k8s-reference/go.mod'), 'utf8');
    const m = /^\s*k8s\.io\/kubernetes (v\S+)/m.exec(gomod);
    if (m === null) throw new Error('scripts/k8s-reference/go.mod names no k8s.io/kubernetes version');
    dir = path.join(ROOT, '.cache/k8s', m[1]);
  }
  const missing = ['kube-apiserver', 'etcd', 'kubectl'].filter((b) => !existsSync(path.join(dir, b)));
  if (missing.length > 0) {
    throw new Error(`${missing.join(', ')} not found in ${dir}: run scripts/k8s-reference.sh (builds them once, about 7 minutes)`);
  }
  return dir;
}

export interface KubectlResult { code: number; stdout: string; stderr: string }

export interface KubectlOptions {
  /** standard input (a manifest for `apply -f -`) */
  input?: string;
  /** another kubeconfig than the admin's */
  kubeconfig?: string;
  /** resolve with a non-zero exit instead of rejecting */
  allowFail?: boolean;
}

export interface KubeApiServer {
  /** https://127.0.0.1:<port> */
  url: string;
  /** kubeconfig for the admin token (group system:masters) */
  kubeconfig: string;
  /** the admin bearer token */
  token: string;
  /** the serving certificate (self-signed, with its CA): the kubeconfig's certificate-authority */
  caFile: string;
  /** temp dir holding everything (removed by stop) */
  dir: string;
  kubectl(args: string[], opts?: KubectlOptions): Promise<KubectlResult>;
  /** Writes a kubeconfig for another bearer token (a service account's) and returns its path. */
  kubeconfigFor(token: string, name: string): string;
  /** The audit log so far (with `audit`), one event per request at its ResponseComplete/ResponseStarted stage. */
  auditEvents(): AuditEvent[];
  /** What etcd and kube-apiserver printed (the last 100 kB of each). */
  logs(): string;
  /** etcd's client URL (its HTTP/JSON gateway: /v3/kv/put, /v3/kv/compaction). */
  etcdUrl: string;
  /** SIGKILLs kube-apiserver only (etcd keeps running). */
  killApiServer(): Promise<void>;
  /** Starts kube-apiserver again on the same port, certificates and etcd; waits for /readyz. */
  restartApiServer(): Promise<void>;
  /** Another kube-apiserver on the same etcd (an HA control plane's second member), with its own kubeconfig. */
  startSecondApiServer(): Promise<{ url: string; kubeconfig: string; stop(): Promise<void> }>;
  /** Stops etcd and kube-apiserver and keeps the files (clients still find the CA file they were given). */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** --authorization-mode Node,RBAC instead of AlwaysAllow */
  rbac?: boolean;
  /** more kube-apiserver flags */
  extraArgs?: string[];
  /** how long to wait for /readyz (default 60 s: the machine is shared) */
  readyTimeoutMs?: number;
  /** more static tokens: user name → token (no groups) */
  tokens?: Record<string, string>;
  /** write an audit log (every request's user, verb and URI, level Metadata) read by auditEvents() */
  audit?: boolean;
}

/** One line of the API server's audit log (the fields the tests read). */
export interface AuditEvent {
  stage: string;
  verb: string;
  requestURI: string;
  user: { username: string };
  responseStatus?: { code?: number };
}

async function freeTcpPort(): Promise<number> {
  return await new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => { resolve(p); });
    });
  });
}

interface Child { name: string; proc: ChildProcess; out: () => string; exit: Promise<void>; exited: () => boolean }

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // A test that ends without stop() (a failed assertion before its finally, a timeout) leaves no servers behind.
  process.on('exit', () => {
    for (const p of live) p.kill('SIGKILL');
  });
}

function startChild(name: string, argv: string[], cwd: string): Child {
  installExitHook();
  // setpriv makes the kernel SIGKILL the child if this process dies without running exit hooks.
  const proc = spawn('setpriv', ['--pdeathsig', 'SIGKILL', '--', ...argv], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(proc);
  let out = '';
  const keep = (d: Buffer) => {
    out += d.toString();
    if (out.length > 200_000) out = out.slice(-100_000);
  };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  let done = false;
  const exit = new Promise<void>((resolve) => {
    proc.on('exit', () => { done = true; live.delete(proc); resolve(); });
    proc.on('error', (e) => { out += `spawn error: ${e.message}\n`; done = true; live.delete(proc); resolve(); });
  });
  return { name, proc, out: () => out, exit, exited: () => done };
}

async function stopChild(c: Child): Promise<void> {
  if (c.exited()) return;
  c.proc.kill('SIGTERM');
  const t = setTimeout(() => { c.proc.kill('SIGKILL'); }, 10_000);
  await c.exit;
  clearTimeout(t);
}

/** GET url with the token; resolves with the status and body, or undefined when the connection fails. */
function get(url: string, token: string): Promise<{ status: number; body: string } | undefined> {
  return new Promise((resolve) => {
    // The serving certificate is checked by every real client through the kubeconfig; this poll only waits.
    const req = https.get(url, { headers: { Authorization: `Bearer ${token}` }, rejectUnauthorized: false, timeout: 2000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { body += d; });
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body }); });
      res.on('error', () => { resolve(undefined); });
    });
    req.on('timeout', () => { req.destroy(); });
    req.on('error', () => { resolve(undefined); });
  });
}

export function kubeconfigText(url: string, caFile: string, token: string, user = 'admin'): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: ${url}
    certificate-authority: ${caFile}
users:
- name: ${user}
  user:
    token: ${token}
contexts:
- name: test
  context:
    cluster: test
    user: ${user}
current-context: test
`;
}

/** Starts etcd and kube-apiserver and waits until /readyz answers ok. */
export async function startKubeApiServer(opts: StartOptions = {}): Promise<KubeApiServer> {
  const bin = k8sBinDir();
  const dir = mkdtempSync(path.join(tmpdir(), 'nodens-kube-apiserver-'));
  const [etcdClient, etcdPeer, apiPort] = [await freeTcpPort(), await freeTcpPort(), await freeTcpPort()];
  const token = randomBytes(16).toString('hex');
  const extraTokens = Object.entries(opts.tokens ?? {}).map(([user, tok]) => `${tok},${user},${user}-uid\n`).join('');
  writeFileSync(path.join(dir, 'tokens.csv'), `${token},admin,admin-uid,"system:masters"\n${extraTokens}`);
  const auditLog = path.join(dir, 'audit.log');
  const auditArgs: string[] = [];
  if (opts.audit === true) {
    writeFileSync(path.join(dir, 'audit-policy.yaml'), 'apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n');
    auditArgs.push('--audit-policy-file', path.join(dir, 'audit-policy.yaml'), '--audit-log-path', auditLog, '--audit-log-mode', 'blocking');
  }
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  writeFileSync(path.join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
  writeFileSync(path.join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));

  const etcdUrl = `http://127.0.0.1:${etcdClient}`;
  const peerUrl = `http://127.0.0.1:${etcdPeer}`;
  const etcd = startChild('etcd', [
    path.join(bin, 'etcd'), '--name', 'test', '--data-dir', path.join(dir, 'etcd'),
    '--listen-client-urls', etcdUrl, '--advertise-client-urls', etcdUrl,
    '--listen-peer-urls', peerUrl, '--initial-advertise-peer-urls', peerUrl, '--initial-cluster', `test=${peerUrl}`,
    // A throwaway store: fsync only costs time here.
    '--unsafe-no-fsync', '--log-level', 'warn',
  ], dir);
  const certDir = path.join(dir, 'certs');
  const apiArgs = (port: number, certs: string): string[] => [
    path.join(bin, 'kube-apiserver'),
    '--etcd-servers', etcdUrl,
    '--bind-address', '127.0.0.1', '--advertise-address', '127.0.0.1', '--secure-port', String(port),
    '--cert-dir', certs,
    '--token-auth-file', path.join(dir, 'tokens.csv'),
    '--authorization-mode', opts.rbac === true ? 'Node,RBAC' : 'AlwaysAllow',
    '--service-account-issuer', 'https://kubernetes.default.svc.cluster.local',
    '--service-account-key-file', path.join(dir, 'sa.pub'),
    '--service-account-signing-key-file', path.join(dir, 'sa.key'),
    '--service-cluster-ip-range', '10.96.0.0/16',
    // kubeadm's setting: manifests with privileged containers are accepted.
    '--allow-privileged=true',
    // No controller-manager creates the namespaces' "default" service accounts, so pods the tests create
    // would be refused by the ServiceAccount admission plugin.
    '--disable-admission-plugins', 'ServiceAccount',
    '--profiling=false',
    ...auditArgs,
    ...(opts.extraArgs ?? []),
  ];
  let api = startChild('kube-apiserver', apiArgs(apiPort, certDir), dir);
  const url = `https://127.0.0.1:${apiPort}`;
  const caFile = path.join(certDir, 'apiserver.crt');
  const logs = () => `--- etcd ---\n${etcd.out()}\n--- kube-apiserver ---\n${api.out()}`;
  const extras: Child[] = [];
  const kill = async () => {
    for (const x of extras) await stopChild(x);
    await stopChild(api);
    await stopChild(etcd);
  };
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await kill();
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + (opts.readyTimeoutMs ?? 60_000);
  let last = '';
  for (;;) {
    if (etcd.exited() || api.exited()) {
      const out = logs();
      await stop();
      throw new Error(`${etcd.exited() ? 'etcd' : 'kube-apiserver'} exited before the API server was ready:\n${out.slice(-8000)}`);
    }
    const r = await get(`${url}/readyz`, token);
    if (r !== undefined && r.status === 200 && existsSync(caFile)) break;
    if (r !== undefined) last = `${r.status} ${r.body}`;
    if (Date.now() > deadline) {
      const out = logs();
      await stop();
      throw new Error(`kube-apiserver not ready after ${opts.readyTimeoutMs ?? 60_000} ms (last /readyz: ${last.slice(0, 2000)}):\n${out.slice(-8000)}`);
    }
    await new Promise((r2) => setTimeout(r2, 100));
  }

  const kubeconfigFor = (tok: string, name: string) => {
    const p = path.join(dir, `kubeconfig-${name}`);
    writeFileSync(p, kubeconfigText(url, caFile, tok, name));
    return p;
  };
  const kubeconfig = kubeconfigFor(token, 'admin');
  const kubectl = (args: string[], o: KubectlOptions = {}) => new Promise<KubectlResult>((resolve, reject) => {
    const child = execFile(path.join(bin, 'kubectl'), ['--kubeconfig', o.kubeconfig ?? kubeconfig, ...args], { timeout: 60_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
      if (code !== 0 && o.allowFail !== true) {
        reject(new Error(`kubectl ${args.join(' ')} exited ${code}: ${stderr}${stdout}`));
        return;
      }
      resolve({ code, stdout, stderr });
    });
    child.stdin!.end(o.input ?? '');
  });
  const auditEvents = () => {
    if (!existsSync(auditLog)) return [];
    return readFileSync(auditLog, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as AuditEvent);
  };
  const waitReady = async (base: string, child: Child, ca: string): Promise<void> => {
    const until = Date.now() + (opts.readyTimeoutMs ?? 60_000);
    for (;;) {
      if (child.exited()) throw new Error(`kube-apiserver exited before it was ready:\n${child.out().slice(-8000)}`);
      const r = await get(`${base}/readyz`, token);
      if (r !== undefined && r.status === 200 && existsSync(ca)) return;
      if (Date.now() > until) throw new Error(`kube-apiserver at ${base} not ready:\n${child.out().slice(-8000)}`);
      await new Promise((r2) => setTimeout(r2, 100));
    }
  };
  const killApiServer = async () => {
    api.proc.kill('SIGKILL');
    await api.exit;
  };
  const restartApiServer = async () => {
    if (!api.exited()) await killApiServer();
    api = startChild('kube-apiserver', apiArgs(apiPort, certDir), dir);
    await waitReady(url, api, caFile);
  };
  const startSecondApiServer = async () => {
    const port = await freeTcpPort();
    const certs = path.join(dir, `certs-${port}`);
    const child = startChild('kube-apiserver', apiArgs(port, certs), dir);
    extras.push(child);
    const base = `https://127.0.0.1:${port}`;
    await waitReady(base, child, path.join(certs, 'apiserver.crt'));
    const kc = path.join(dir, `kubeconfig-second-${port}`);
    writeFileSync(kc, kubeconfigText(base, path.join(certs, 'apiserver.crt'), token, 'admin'));
    return { url: base, kubeconfig: kc, stop: () => stopChild(child) };
  };
  return { url, kubeconfig, token, caFile, dir, etcdUrl, kubectl, kubeconfigFor, auditEvents, logs, kill, stop, killApiServer, restartApiServer, startSecondApiServer };
}
