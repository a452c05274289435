// Side by side: the reference CoreDNS and nodens, both pointed through a
// kubeconfig at one test API server holding a cluster state, get the same
// queries; the replies are rendered like the conformance runner does and
// compared after sorting RRsets (CoreDNS's order inside an RRset follows Go map
// iteration) and masking the SOA serial (the Unix time each server processed
// its last change).
//
//   node test/k8s-api/compare.ts test/conformance/cases/kubernetes-basic [-v]
//
// A case folder holds Corefile (with {$NODENS_K8S_KUBECONFIG} where the
// kubeconfig path goes), queries.txt and state.json.

import { mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { queryTcp, queryUdp, type RawReply } from '../conformance/lib/client.ts';
import { sideBySide } from '../conformance/lib/diff.ts';
import { encodeQuery, parseQueriesFile, type QuerySpec } from '../conformance/lib/query.ts';
import { DEFAULT_NORMALISE, parseReply, renderPair } from '../conformance/lib/render.ts';
import { REPO, referenceBinary, startServer, waitReady, type Running } from '../conformance/lib/servers.ts';
import { K8sApiServer, kubeconfigFor, type ClusterState } from './server.ts';

export interface CompareResult {
  passed: number;
  failed: { query: string; diff: string }[];
  /** rendered reference answers, by query line */
  reference: Map<string, string[]>;
}

function ask(s: Running, q: QuerySpec, id: number): Promise<RawReply> {
  const msg = encodeQuery(q, id);
  return q.tcp ? queryTcp('127.0.0.1', s.port, msg) : queryUdp('127.0.0.1', s.port, msg);
}

export function maskSerial(lines: string[]): string[] {
  return lines.map((l) => l.replace(/(\tSOA\t\S+ \S+ )\d+/, '$1<serial>'));
}

export interface Pair {
  api: K8sApiServer;
  ref: Running;
  sub: Running;
  dir: string;
  stop(): Promise<void>;
}

/** The reference CoreDNS and nodens running one Corefile. */
export interface DnsPair {
  ref: Running;
  sub: Running;
  dir: string;
  stop(): Promise<void>;
}

/**
 * Starts CoreDNS and nodens on one Corefile (text) with {$NODENS_K8S_KUBECONFIG} set to `kubeconfig`, and
 * waits until both answer `probe`.
 */
export async function startDnsPair(corefile: string, kubeconfig: string, opts: { env?: Record<string, string>; probe?: string; dir?: string } = {}): Promise<DnsPair> {
  const dir = opts.dir ?? mkdtempSync(path.join(tmpdir(), 'nodens-k8s-'));
  const conf = path.join(dir, 'Corefile');
  writeFileSync(conf, corefile);
  const env = { NODENS_K8S_KUBECONFIG: kubeconfig, ...opts.env };
  const nodens = path.join(REPO, 'bin/nodens');
  const [ref, sub] = await Promise.all([
    startServer({ name: 'coredns', command: referenceBinary(), conf, cwd: dir, env }),
    startServer({ name: 'nodens', command: nodens, conf, cwd: dir, env }),
  ]);
  const stop = async () => { await Promise.all([ref.stop(), sub.stop()]); };
  try {
    await Promise.all([waitReady(ref, opts.probe), waitReady(sub, opts.probe)]);
  } catch (e) {
    await stop();
    throw e;
  }
  return { ref, sub, dir, stop };
}

/** Starts the API server (state), CoreDNS and nodens (Corefile text) and waits until both answer. */
export async function startPair(corefile: string, state: ClusterState, opts: { env?: Record<string, string>; probe?: string; apiOptions?: ConstructorParameters<typeof K8sApiServer>[1] } = {}): Promise<Pair> {
  const api = new K8sApiServer(state, opts.apiOptions);
  await api.start(0);
  const dir = mkdtempSync(path.join(tmpdir(), 'nodens-k8s-'));
  const kc = path.join(dir, 'kubeconfig');
  writeFileSync(kc, kubeconfigFor(`http://127.0.0.1:${api.port}`));
  let pair: DnsPair;
  try {
    pair = await startDnsPair(corefile, kc, { env: opts.env, probe: opts.probe, dir });
  } catch (e) {
    await api.stop();
    throw e;
  }
  const stop = async () => {
    await pair.stop();
    await api.stop();
  };
  return { api, ref: pair.ref, sub: pair.sub, dir, stop };
}

/** Sends every query to both servers and compares the rendered replies. */
export async function compareQueries(p: { ref: Running; sub: Running }, queries: QuerySpec[]): Promise<CompareResult> {
  const norm = { ...DEFAULT_NORMALISE, shuffle: true };
  const res: CompareResult = { passed: 0, failed: [], reference: new Map() };
  for (const q of queries) {
    const id = 1 + Math.floor(Math.random() * 65534);
    const [ra, rb] = await Promise.all([ask(p.ref, q, id), ask(p.sub, q, id)]);
    const [la0, lb0] = renderPair(parseReply(ra, id), parseReply(rb, id), norm);
    const la = maskSerial(la0);
    const lb = maskSerial(lb0);
    res.reference.set(q.line, la);
    if (la.length === lb.length && la.every((l, i) => l === lb[i])) res.passed++;
    else res.failed.push({ query: q.line, diff: sideBySide(la, lb, 'reference (CoreDNS)', 'subject (nodens)') });
  }
  return res;
}

/** Runs a case folder (Corefile, state.json, queries.txt). */
export async function runCase(dir: string, verbose = false): Promise<CompareResult> {
  const corefile = readFileSync(path.join(dir, 'Corefile'), 'utf8');
  const state = JSON.parse(readFileSync(path.join(dir, existsSync(path.join(dir, 'state.json')) ? 'state.json' : '../../../k8s-api/fixtures/cluster.json'), 'utf8')) as ClusterState;
  const queries = parseQueriesFile(readFileSync(path.join(dir, 'queries.txt'), 'utf8'));
  const p = await startPair(corefile, state, { probe: 'dns-version.cluster.local. TXT' });
  try {
    const r = await compareQueries(p, queries);
    if (verbose) for (const [q, lines] of r.reference) console.log(`== ${q}\n${lines.join('\n')}`);
    return r;
  } finally {
    await p.stop();
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2);
  const verbose = args.includes('-v');
  const dirs = args.filter((a) => a !== '-v');
  let failed = 0;
  for (const d of dirs) {
    const r = await runCase(path.resolve(d), verbose);
    console.log(`${d}: ${r.passed} passed, ${r.failed.length} failed`);
    for (const f of r.failed) console.log(`  FAIL ${f.query}\n${f.diff}`);
    failed += r.failed.length;
  }
  process.exitCode = failed ? 1 : 0;
}
