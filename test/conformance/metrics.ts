// Metrics conformance: for each case test/conformance/cases/metrics-*, run the reference CoreDNS and
// nodens on the case's Corefile, send both the case's queries, then compare their /metrics:
//
//   * every coredns_* and process_* family: same name, type and help text;
//   * every coredns_* family: the same series (label sets; the server label's port normalised);
//   * counters and gauges: the same values; histograms: the same counts (and, for sizes, the same
//     buckets and sums); timings, timestamps and process values are not compared;
//   * go_* families exist only in the Go binary and are skipped;
//   * nodens's own families are nodens_* (its additions) or nodejs_* (Node's runtime, where Go has
//     go_*): any other family only nodens has fails, so an addition cannot pass as a CoreDNS metric.
//
// Families a case expects to differ are listed in its metrics.json {"absent": {name: why},
// "extra": {name: why}} (absent = only in CoreDNS, extra = only in nodens), each with a reason.
//
//   node test/conformance/metrics.ts [--subject PATH] [--reference PATH] [CASE ...]
//
// The Corefile gets the endpoint port through {$NODENS_METRICS_PORT} (each side its own); without the
// variable (npm run conformance) it reads `127.0.0.1:`, a kernel-chosen port, so the plain runner can run
// the same cases for their DNS replies.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { queryTcp, queryUdp } from './lib/client.ts';
import { encodeQuery, parseQueriesFile } from './lib/query.ts';
import { REPO, freePort, nodensBinary, referenceBinary, startServer, waitReady, type Running } from './lib/servers.ts';
import { get, parseMetrics, type Family } from '../e2e/prometheus-util.ts';

interface MetricsCase { absent?: Record<string, string>; extra?: Record<string, string> }

const CASES_DIR = path.join(REPO, 'test/conformance/cases');

/** Families whose values depend on time or on the machine: only their series are compared. */
const VOLATILE = new Set([
  'coredns_dns_request_duration_seconds', 'coredns_health_request_duration_seconds',
  'coredns_health_request_failures_total', 'coredns_hosts_reload_timestamp_seconds',
]);
/** Labels whose values name the implementation, not the behaviour. */
const IMPLEMENTATION_LABELS: Record<string, string[]> = { coredns_build_info: ['revision', 'goversion'] };

function seriesKey(family: string, sampleName: string, labels: Record<string, string>, port: number, metricsPort: number): string {
  const skip = IMPLEMENTATION_LABELS[family] ?? [];
  const parts = Object.keys(labels).sort().map((k) => {
    let v = skip.includes(k) ? '*' : labels[k]!;
    if (k === 'server') v = v.replace(`:${port}`, ':PORT');
    if (k === 'hostsfile') v = path.basename(v);
    if (k === 'to' || k === 'address') v = v.replace(`:${metricsPort}`, ':MPORT');
    return `${k}=${JSON.stringify(v)}`;
  });
  return `${sampleName}{${parts.join(',')}}`;
}

function compareValues(f: Family, sampleName: string): boolean {
  if (VOLATILE.has(f.name)) return false;
  if (f.type === 'histogram') {
    if (f.name.endsWith('_seconds')) return sampleName.endsWith('_count');
    return true;
  }
  return true;
}

function compare(ref: Map<string, Family>, sub: Map<string, Family>, refPorts: [number, number], subPorts: [number, number], c: MetricsCase): string[] {
  const problems: string[] = [];
  const names = new Set([...ref.keys(), ...sub.keys()]);
  for (const name of [...names].sort()) {
    if (name.startsWith('go_')) continue;
    if (name.startsWith('nodens_') || name.startsWith('nodejs_')) {
      if (ref.has(name)) problems.push(`${name}: a nodens name that CoreDNS has too`);
      continue;
    }
    if (!name.startsWith('coredns_') && !name.startsWith('process_')) {
      if (!ref.has(name)) problems.push(`only in nodens, without the nodens_ prefix: ${name}`);
      continue;
    }
    const a = ref.get(name);
    const b = sub.get(name);
    if (a === undefined) {
      if (c.extra?.[name] === undefined) problems.push(`only in nodens: ${name}`);
      continue;
    }
    if (b === undefined) {
      if (c.absent?.[name] === undefined) problems.push(`missing in nodens: ${name} (${a.type})`);
      continue;
    }
    if (a.type !== b.type) problems.push(`${name}: type ${a.type} in CoreDNS, ${b.type} in nodens`);
    if (a.help !== b.help) problems.push(`${name}: help differs:\n      CoreDNS: ${a.help}\n      nodens:  ${b.help}`);
    if (name.startsWith('process_')) continue;
    const index = (f: Family, ports: [number, number]) => {
      const m = new Map<string, number>();
      for (const s of f.samples) m.set(seriesKey(name, s.name, s.labels, ports[0], ports[1]), s.value);
      return m;
    };
    const sa = index(a, refPorts);
    const sb = index(b, subPorts);
    for (const [k, v] of sa) {
      const w = sb.get(k);
      if (w === undefined) { problems.push(`series missing in nodens: ${k}`); continue; }
      const sample = k.slice(0, k.indexOf('{'));
      if (compareValues(a, sample) && v !== w) problems.push(`${k}: ${v} in CoreDNS, ${w} in nodens`);
    }
    for (const k of sb.keys()) if (!sa.has(k)) problems.push(`series only in nodens: ${k}`);
  }
  return problems;
}

async function scrapeText(port: number): Promise<string> {
  const r = await get(port, '/metrics', 5000);
  if (r.status !== 200) throw new Error(`/metrics on :${port} answered ${r.status}`);
  return r.body;
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  let subject: string | undefined;
  let reference: string | undefined;
  const wanted: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--subject') subject = path.resolve(argv[++i]!);
    else if (argv[i] === '--reference') reference = path.resolve(argv[++i]!);
    else wanted.push(argv[i]!);
  }
  reference ??= referenceBinary();
  subject ??= process.env.NODENS_SUBJECT ?? nodensBinary();
  if (subject === undefined) throw new Error('no subject: bin/nodens is missing');
  const all = readdirSync(CASES_DIR).filter((d) => d.startsWith('metrics-')).sort();
  const selected = wanted.length ? all.filter((c) => wanted.includes(c)) : all;
  let failed = 0;
  for (const name of selected) {
    const dir = path.join(CASES_DIR, name);
    const cfgFile = path.join(dir, 'metrics.json');
    const cfg = existsSync(cfgFile) ? JSON.parse(readFileSync(cfgFile, 'utf8')) as MetricsCase : {};
    for (const [k, why] of Object.entries({ ...cfg.absent, ...cfg.extra })) {
      if (typeof why !== 'string' || why.length < 10) throw new Error(`${cfgFile}: ${k} needs a reason`);
    }
    const queries = parseQueriesFile(readFileSync(path.join(dir, 'queries.txt'), 'utf8'));
    console.log(`\n== ${name}`);
    const [mRef, mSub] = [await freePort(), await freePort()];
    const conf = path.join(dir, 'Corefile');
    const servers: Running[] = [];
    try {
      const ref = await startServer({ name: 'reference', command: reference, conf, cwd: dir,
        env: { NODENS_CONFORMANCE_SIDE: 'reference', NODENS_METRICS_PORT: String(mRef) } });
      servers.push(ref);
      const sub = await startServer({ name: 'nodens', command: subject, conf, cwd: dir,
        env: { NODENS_CONFORMANCE_SIDE: 'subject', NODENS_METRICS_PORT: String(mSub) } });
      servers.push(sub);
      await Promise.all([waitReady(ref, '. SOA'), waitReady(sub, '. SOA')]);
      // The readiness probes are counted too, and not the same number of times on both sides:
      // compare what the case's queries added to a first scrape.
      const before = [parseMetrics(await scrapeText(mRef)), parseMetrics(await scrapeText(mSub))] as const;
      let id = 1;
      for (const q of queries) {
        const msg = encodeQuery(q, id++);
        await Promise.all([ref, sub].map((s) => (q.tcp ? queryTcp('127.0.0.1', s.port, msg) : queryUdp('127.0.0.1', s.port, msg))));
      }
      const after = [parseMetrics(await scrapeText(mRef)), parseMetrics(await scrapeText(mSub))] as const;
      const problems = compare(subtract(after[0], before[0]), subtract(after[1], before[1]), [ref.port, mRef], [sub.port, mSub], cfg);
      if (problems.length === 0) {
        console.log(`  ok   ${[...after[0].keys()].filter((n) => n.startsWith('coredns_')).length} coredns_* families, ${queries.length} queries`);
      } else {
        failed++;
        for (const p of problems) console.log(`  FAIL ${p}`);
      }
      for (const [k, why] of Object.entries(cfg.absent ?? {})) console.log(`  note: ${k} only in CoreDNS: ${why}`);
      for (const [k, why] of Object.entries(cfg.extra ?? {})) console.log(`  note: ${k} only in nodens: ${why}`);
    } catch (e) {
      failed++;
      console.log(`  FAIL ${(e as Error).stack ?? e}`);
      for (const s of servers) console.log(`  ${s.name} output:\n${s.output()}`);
    } finally {
      await Promise.all(servers.map((s) => s.stop()));
    }
  }
  console.log(`\n${selected.length - failed} cases passed, ${failed} failed`);
  return failed ? 1 : 0;
}

/** after - before, for the samples of counters and histograms; series keep existing (label sets still compare). */
function subtract(after: Map<string, Family>, before: Map<string, Family>): Map<string, Family> {
  const out = new Map<string, Family>();
  for (const [name, f] of after) {
    const b = before.get(name);
    if (b === undefined || (f.type !== 'counter' && f.type !== 'histogram')) { out.set(name, f); continue; }
    const prev = new Map(b.samples.map((s) => [s.name + JSON.stringify(Object.entries(s.labels).sort()), s.value]));
    out.set(name, { ...f, samples: f.samples.map((s) => ({ ...s, value: s.value - (prev.get(s.name + JSON.stringify(Object.entries(s.labels).sort())) ?? 0) })) });
  }
  return out;
}

main().then((code) => { process.exitCode = code; }, (e) => {
  console.error(e);
  process.exitCode = 1;
});
