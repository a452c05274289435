// Side-by-side conformance: each case's Corefile runs in the reference CoreDNS and in the subject (nodens),
// both get the same queries, and the replies must match after the normalisations the case declares.
//
//   npm run conformance [-- [--subject PATH] [--reference PATH] [--apiserver both|test|real] [-v] [CASE ...]]
//
// Subject: --subject, else $NODENS_SUBJECT, else bin/nodens if present, else the reference itself (a warning
// says so: that mode checks the harness, not nodens). Reference: --reference, else scripts/coredns-reference.sh.
// Each server gets `-conf <case>/Corefile -dns.port <free port> -quiet`, runs with the case folder as cwd and
// NODENS_CONFORMANCE_SIDE=reference|subject in its environment (so a Corefile may say {$NODENS_CONFORMANCE_SIDE}).
// A case whose Corefile says {$NODENS_K8S_KUBECONFIG} runs against the in-repo test API server (test/k8s-api) and
// again against a real kube-apiserver (scripts/k8s-reference.sh) holding the same cluster: --apiserver (or
// $NODENS_CONFORMANCE_APISERVER) picks test, real or both (the default).
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { queryHttps, queryTcp, queryUdp, type RawReply } from './lib/client.ts';
import { sideBySide } from './lib/diff.ts';
import { encodeQuery, parseQueriesFile, type QuerySpec } from './lib/query.ts';
import { signQuery } from './lib/tsig.ts';
import { DEFAULT_NORMALISE, parseReply, renderPair, type Normalise } from './lib/render.ts';
import { REPO, freePort, nodensBinary, referenceBinary, startServer, waitReady, type Running } from './lib/servers.ts';

export interface CaseConfig {
  description?: string;
  shuffle?: boolean;
  ttlDecay?: number;
  /** what to leave out of the comparison, each with its justification */
  ignore?: Partial<Record<'version' | 'size' | 'ttl' | 'rrsig', string>>;
  probe?: string;
}

const CASES_DIR = path.join(REPO, 'test/conformance/cases');

export function loadCaseConfig(dir: string): CaseConfig {
  const f = path.join(dir, 'case.json');
  if (!existsSync(f)) return {};
  const c = JSON.parse(readFileSync(f, 'utf8')) as CaseConfig & Record<string, unknown>;
  const known = new Set(['description', 'shuffle', 'ttlDecay', 'ignore', 'probe']);
  for (const k of Object.keys(c)) if (!known.has(k)) throw new Error(`${f}: unknown key ${k}`);
  for (const [k, why] of Object.entries(c.ignore ?? {})) {
    if (!['version', 'size', 'ttl', 'rrsig'].includes(k)) throw new Error(`${f}: unknown ignore key ${k}`);
    if (typeof why !== 'string' || why.trim().length < 10) throw new Error(`${f}: ignore.${k} needs a justification string`);
  }
  return c;
}

function normaliseFor(c: CaseConfig): Normalise {
  return {
    ...DEFAULT_NORMALISE,
    shuffle: c.shuffle === true,
    ttlDecay: c.ttlDecay ?? 0,
    version: c.ignore?.version !== undefined,
    ignoreSize: c.ignore?.size !== undefined,
    ignoreTtl: c.ignore?.ttl !== undefined,
    rrsig: c.ignore?.rrsig !== undefined,
  };
}

interface Fixture {
  port: number;
  env: Record<string, string>;
  stop(): Promise<void>;
}

type ApiServerKind = 'test' | 'real';

function stateFileOf(dir: string): string {
  const own = path.join(dir, 'state.json');
  return existsSync(own) ? own : path.join(REPO, 'test/k8s-api/fixtures/cluster.json');
}

/**
 * Hook for cases whose Corefile says {$NODENS_K8S_KUBECONFIG}: the test Kubernetes API server (test/k8s-api) serving
 * the case's state.json (else test/k8s-api/fixtures/cluster.json), and a kubeconfig pointing at it for both servers.
 */
async function startK8sApi(dir: string): Promise<Fixture> {
  const mod = await import('../k8s-api/server.ts');
  const stateFile = stateFileOf(dir);
  const api = new mod.K8sApiServer(mod.readState(stateFile));
  await api.start(0);
  const tmp = mkdtempSync(path.join(tmpdir(), 'nodens-conformance-k8s-'));
  const kc = path.join(tmp, 'kubeconfig');
  writeFileSync(kc, mod.kubeconfigFor(`http://127.0.0.1:${api.port}`));
  return {
    port: api.port,
    env: { NODENS_K8S_KUBECONFIG: kc },
    stop: async () => {
      await api.stop();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

/**
 * The same hook with a real kube-apiserver and etcd loaded with the case's state (lib/real-k8s.ts). Cases only read
 * the cluster, so one API server serves consecutive cases with the same state; stopRealApi() ends the last one.
 */
let realApi: { key: string; loaded: import('./lib/real-k8s.ts').Loaded } | undefined;

async function startRealK8sApi(dir: string): Promise<Fixture & { omitted: string[]; reused: boolean }> {
  const stateFile = stateFileOf(dir);
  const key = readFileSync(stateFile, 'utf8');
  const reused = realApi?.key === key;
  if (!reused) {
    await stopRealApi();
    const { startRealCluster } = await import('./lib/real-k8s.ts');
    realApi = { key, loaded: await startRealCluster(stateFile) };
  }
  const { api, omitted } = realApi!.loaded;
  // The context is named as in the test server's kubeconfig: a Corefile may select it (`kubeconfig FILE nodens-test`).
  const kc = path.join(api.dir, 'kubeconfig-conformance');
  if (!reused) {
    writeFileSync(kc, JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'nodens-test',
      clusters: [{ name: 'real', cluster: { server: api.url, 'certificate-authority': api.caFile } }],
      users: [{ name: 'admin', user: { token: api.token } }],
      contexts: [{ name: 'nodens-test', context: { cluster: 'real', user: 'admin' } }],
    }, null, 2));
  }
  return {
    port: Number(new URL(api.url).port),
    env: { NODENS_K8S_KUBECONFIG: kc },
    omitted: omitted.map((o) => `${o.object} (${o.why})`),
    reused,
    stop: async () => { /* kept for the next case; stopRealApi() ends it */ },
  };
}

async function stopRealApi(): Promise<void> {
  const r = realApi;
  realApi = undefined;
  if (r !== undefined) await r.loaded.api.stop();
}

/** The ports and certificate of a side's DoT and DoH blocks ({$NODENS_CONFORMANCE_TLS_PORT} and friends). */
interface SecurePorts { tls: number; https: number; ca: Buffer }

function ask(s: Running, q: QuerySpec, msg: Buffer, secure: SecurePorts | undefined): Promise<RawReply> {
  const host = q.v6 ? '::1' : '127.0.0.1';
  if (q.secure !== undefined) {
    if (secure === undefined) throw new Error(`${q.line}: +${q.secure} needs a Corefile with {$NODENS_CONFORMANCE_TLS_PORT} or {$NODENS_CONFORMANCE_HTTPS_PORT}`);
    if (q.secure === 'tls') return queryTcp(host, secure.tls, msg, 3000, secure.ca);
    return queryHttps(host, secure.https, msg, secure.ca, q.secure === 'https-get');
  }
  return q.tcp ? queryTcp(host, s.port, msg) : queryUdp(host, s.port, msg);
}

/**
 * For a Corefile that says {$NODENS_CONFORMANCE_TLS_PORT} or {$NODENS_CONFORMANCE_HTTPS_PORT}: a free port of each
 * kind per side, and a CA, server certificate and key (for 127.0.0.1 and localhost) in
 * {$NODENS_CONFORMANCE_CERT}, {$NODENS_CONFORMANCE_KEY}, {$NODENS_CONFORMANCE_CA}.
 */
async function securePorts(): Promise<{ env: Record<string, string>; ports: SecurePorts }> {
  const { testCerts } = await import('../helpers/certs.ts');
  const c = testCerts();
  const ports = { tls: await freePort(), https: await freePort(), ca: readFileSync(c.ca) };
  return {
    ports,
    env: {
      NODENS_CONFORMANCE_TLS_PORT: String(ports.tls), NODENS_CONFORMANCE_HTTPS_PORT: String(ports.https),
      NODENS_CONFORMANCE_CERT: c.cert, NODENS_CONFORMANCE_KEY: c.key, NODENS_CONFORMANCE_CA: c.ca,
    },
  };
}

function indent(text: string, by = '    '): string {
  return text.split('\n').map((l) => by + l).join('\n');
}

interface Args { subject?: string; reference?: string; verbose: boolean; cases: string[]; apiservers: ApiServerKind[] }

function apiServerKinds(w: string | undefined): ApiServerKind[] {
  if (w === undefined || w === '' || w === 'both') return ['test', 'real'];
  if (w === 'test' || w === 'real') return [w];
  throw new Error(`--apiserver takes both, test or real, not ${w}`);
}

function parseArgs(argv: string[]): Args {
  const a: Args = { verbose: false, cases: [], apiservers: apiServerKinds(process.env.NODENS_CONFORMANCE_APISERVER) };
  for (let i = 0; i < argv.length; i++) {
    const w = argv[i];
    if (w === '--subject') a.subject = argv[++i];
    else if (w === '--reference') a.reference = argv[++i];
    else if (w === '--apiserver') a.apiservers = apiServerKinds(argv[++i]);
    else if (w === '-v' || w === '--verbose') a.verbose = true;
    else if (w.startsWith('-')) throw new Error(`unknown flag ${w}`);
    else a.cases.push(w);
  }
  return a;
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  // absolute paths: the servers run with the case folder as cwd
  const abs = (p: string | undefined) => (p && p.includes('/') ? path.resolve(p) : p);
  const reference = abs(args.reference) ?? referenceBinary();
  let subject = abs(args.subject ?? process.env.NODENS_SUBJECT) ?? nodensBinary();
  if (!subject) {
    subject = reference;
    console.log('WARNING: bin/nodens does not exist yet; the subject is the reference CoreDNS itself (harness self-check).');
  }
  const subjectName = path.basename(subject) === 'nodens' ? 'nodens' : path.basename(subject);
  console.log(`reference: ${reference}`);
  console.log(`subject:   ${subject}`);

  const all = readdirSync(CASES_DIR).filter((d) => statSync(path.join(CASES_DIR, d)).isDirectory()).sort();
  const selected = args.cases.length ? all.filter((c) => args.cases.includes(c)) : all;
  for (const c of args.cases) if (!all.includes(c)) throw new Error(`no case named ${c}`);

  let passed = 0;
  let failed = 0;
  // Every case once (kubernetes cases against the test API server), then the kubernetes cases against the real
  // one, grouped by cluster state so that each state is loaded into a real API server once.
  const jobs: { name: string; apiKind: ApiServerKind | undefined }[] = [];
  const realJobs: { name: string; apiKind: ApiServerKind; state: string }[] = [];
  for (const name of selected) {
    const dir = path.join(CASES_DIR, name);
    const k8sCase = readFileSync(path.join(dir, 'Corefile'), 'utf8').includes('{$NODENS_K8S_KUBECONFIG}');
    if (!k8sCase) jobs.push({ name, apiKind: undefined });
    if (k8sCase && args.apiservers.includes('test')) jobs.push({ name, apiKind: 'test' });
    if (k8sCase && args.apiservers.includes('real')) realJobs.push({ name, apiKind: 'real', state: stateFileOf(dir) });
  }
  const stateOrder = [...new Set(realJobs.map((j) => readFileSync(j.state, 'utf8')))];
  realJobs.sort((a, b) => stateOrder.indexOf(readFileSync(a.state, 'utf8')) - stateOrder.indexOf(readFileSync(b.state, 'utf8')));
  jobs.push(...realJobs);
  let realSeconds = 0;
  for (const { name, apiKind } of jobs) {
    const dir = path.join(CASES_DIR, name);
    const cfg = loadCaseConfig(dir);
    const queries = parseQueriesFile(readFileSync(path.join(dir, 'queries.txt'), 'utf8'));
    const norm = normaliseFor(cfg);
    const declared = [
      cfg.shuffle ? 'shuffle' : '', cfg.ttlDecay ? `ttlDecay=${cfg.ttlDecay}` : '',
      ...Object.keys(cfg.ignore ?? {}).map((k) => `ignore ${k}`),
    ].filter(Boolean);
    const conf = path.join(dir, 'Corefile');
    const caseStart = Date.now();
    {
      console.log(`\n== ${name}${apiKind === undefined ? '' : ` (API server: ${apiKind})`}${declared.length ? `  [${declared.join(', ')}]` : ''}`);
      const servers: Running[] = [];
      const fixtures: Fixture[] = [];
      try {
        const env: Record<string, string> = {};
        if (apiKind === 'test') {
          const k8s = await startK8sApi(dir);
          fixtures.push(k8s);
          Object.assign(env, k8s.env);
          norm.soaSerial = true;
          console.log(`  (API server: test, from test/k8s-api on :${k8s.port}; SOA serials masked: they are the time each server saw its last change)`);
        } else if (apiKind === 'real') {
          const t0 = Date.now();
          const k8s = await startRealK8sApi(dir);
          Object.assign(env, k8s.env);
          norm.soaSerial = true;
          console.log(`  (API server: real kube-apiserver on :${k8s.port}, ${k8s.reused ? 'same cluster as the case before' : `started and loaded with kubectl in ${((Date.now() - t0) / 1000).toFixed(1)} s`}; SOA serials masked)`);
          for (const o of k8s.omitted) console.log(`  (not in the real cluster, which refuses it: ${o})`);
        }
        const text = readFileSync(conf, 'utf8');
        const secure = text.includes('{$NODENS_CONFORMANCE_TLS_PORT}') || text.includes('{$NODENS_CONFORMANCE_HTTPS_PORT}');
        const refSecure = secure ? await securePorts() : undefined;
        const subSecure = secure ? await securePorts() : undefined;
        const [ref, sub] = await Promise.all([
          startServer({ name: 'reference', command: reference, conf, cwd: dir, env: { ...env, ...refSecure?.env, NODENS_CONFORMANCE_SIDE: 'reference' } }),
          startServer({ name: subjectName, command: subject, conf, cwd: dir, env: { ...env, ...subSecure?.env, NODENS_CONFORMANCE_SIDE: 'subject' } }),
        ]);
        servers.push(ref, sub);
        const ready = await Promise.allSettled([waitReady(ref, cfg.probe), waitReady(sub, cfg.probe)]);
        const problems = ready.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason?.message ?? r));
        if (problems.length) {
          console.log(`  FAIL could not start:\n${problems.map((p) => indent(p)).join('\n')}`);
          failed += queries.length;
          continue;
        }
        for (const q of queries) {
          const id = 1 + Math.floor(Math.random() * 65534);
          // A signed query is signed once: both servers get the same bytes (same time, same MAC).
          const { wire, ctx } = q.tsig ? signQuery(encodeQuery(q, id), q.tsig) : { wire: encodeQuery(q, id), ctx: undefined };
          const [ra, rb] = await Promise.all([ask(ref, q, wire, refSecure?.ports), ask(sub, q, wire, subSecure?.ports)]);
          const pa = parseReply(ra, id, ctx);
          const pb = parseReply(rb, id, ctx);
          if (ra.note !== undefined) pa.head.unshift(`;; ${ra.note}`);
          if (rb.note !== undefined) pb.head.unshift(`;; ${rb.note}`);
          const [la, lb] = renderPair(pa, pb, norm);
          const same = la.length === lb.length && la.every((l, i) => l === lb[i]);
          if (same) {
            passed++;
            console.log(`  ok   ${q.line}`);
            if (args.verbose) console.log(indent(la.join('\n').replace(/\t/g, '  '), '       '));
          } else {
            failed++;
            console.log(`  FAIL ${q.line}`);
            console.log(sideBySide(la, lb, `reference (CoreDNS) :${ref.port}`, `subject (${subjectName}) :${sub.port}`));
          }
        }
        for (const s of servers) {
          const ex = s.exited();
          if (ex) console.log(`  note: ${s.name} exited during the case (code ${ex.code}, signal ${ex.signal}):\n${indent(s.output())}`);
        }
      } catch (e) {
        console.log(`  FAIL ${(e as Error).stack ?? e}`);
        failed += queries.length || 1;
      } finally {
        await Promise.all(servers.map((s) => s.stop()));
        for (const f of fixtures) await f.stop();
        if (apiKind === 'real') realSeconds += (Date.now() - caseStart) / 1000;
      }
    }
  }
  await stopRealApi();
  if (realJobs.length > 0) console.log(`\n${realJobs.length} kubernetes cases against the real kube-apiserver took ${realSeconds.toFixed(0)} s`);
  console.log(`\n${passed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

main().then((code) => { process.exitCode = code; }, (e) => {
  console.error(e);
  console.log('0 passed, 1 failed');
  process.exitCode = 1;
});
