// Real-world Corefiles, unchanged, served by the reference CoreDNS and by nodens in turn inside a network
// namespace of their own (so port 53 and addresses such as 169.254.10.10 are theirs), with real upstreams
// (dnsmasq), the test Kubernetes API server where the Corefile has a kubernetes block, and the same queries
// sent to both. Replies are compared with the conformance harness's renderer. See README.md.
//
//   node test/corefiles/run.ts [CASE...] [-v]      (root; exit 1 on any difference)

import { cpSync, existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import { Netns, available, type Proc } from '../netns/netns.ts';
import { referenceBinary } from '../conformance/lib/servers.ts';
import { DEFAULT_NORMALISE, renderPair, type Normalise, type Parsed } from '../conformance/lib/render.ts';
import { sideBySide } from '../conformance/lib/diff.ts';
import { BIN, ROOT } from '../helpers/server.ts';

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** setup.json of a case. */
export interface Setup {
  /** where the Corefile comes from (project, file, version) */
  source: string;
  /** CIDRs put on the namespace's lo (bind addresses, upstream addresses) */
  addresses?: string[];
  /** the namespace's /etc/resolv.conf, for `forward . /etc/resolv.conf` */
  resolvConf?: string;
  /** dnsmasq instances: the listen address and its record options (--host-record=…, --local=/zone/ …) */
  upstreams?: Array<{ address: string; options: string[] }>;
  /**
   * Start test/k8s-api in the namespace (state: the case's state.json, else the shared fixture) and add
   * `kubeconfig FILE` to every kubernetes block: in a cluster both servers would use the pod's service account.
   */
  kubernetes?: boolean;
  /** text substitutions applied to the Corefile (absolute paths of a node, e.g. /etc/coredns/ → {dir}/) */
  substitute?: Record<string, string>;
  /** readiness query, `@HOST[:PORT] NAME TYPE [+flags]` */
  probe: string;
  /** the queries, same form */
  queries: string[];
  /** subject TTLs may be this many seconds lower (cached answers: the two servers run one after the other) */
  ttlDecay?: number;
}

interface Ask { host: string; port: number; line: string }

function parseAsk(s: string): Ask {
  const m = /^@(\[[^\]]+\]|[^\s:]+)(?::(\d+))?\s+(.*)$/.exec(s.trim());
  if (!m) throw new Error(`query "${s}": expected @HOST[:PORT] NAME TYPE [+flags]`);
  return { host: m[1].replace(/^\[|\]$/g, ''), port: m[2] ? Number(m[2]) : 53, line: m[3] };
}

/** The Corefile as both servers get it: substitutions, and kubeconfig lines in kubernetes blocks. */
export function prepareCorefile(text: string, setup: Setup, dir: string, kubeconfig?: string): string {
  let out = text;
  for (const [from, to] of Object.entries(setup.substitute ?? {})) out = out.split(from).join(to.split('{dir}').join(dir));
  if (kubeconfig !== undefined) {
    out = out.replace(/^(\s*)kubernetes\b([^{\n]*)\{[ \t]*$/gm, (_m, ind: string, rest: string) =>
      `${ind}kubernetes${rest}{\n${ind}    kubeconfig ${kubeconfig} nodens-test`);
  }
  return out;
}

interface SideResult { replies: Parsed[]; log: string[]; error?: string }

async function runSide(ns: Netns, bin: string, probe: Ask, asks: Ask[], node: string): Promise<SideResult> {
  const server: Proc = ns.run(bin, ['-conf', path.join(ns.dir, 'Corefile')]);
  try {
    const probeFile = ns.file('probe.json', JSON.stringify([probe]));
    const ready = ns.exec(node, [path.join(HERE, 'query.ts'), '--wait', '20000', probeFile], 30_000);
    if (ready.status !== 0) return { replies: [], log: server.out, error: `not ready: ${ready.stdout.trim()}` };
    const qFile = ns.file('queries.json', JSON.stringify(asks));
    const r = ns.exec(node, [path.join(HERE, 'query.ts'), qFile], 120_000);
    if (r.status !== 0) return { replies: [], log: server.out, error: `query tool failed: ${r.stdout.trim()}` };
    const replies = r.stdout.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => (JSON.parse(l) as { parsed: Parsed }).parsed);
    if (server.proc.exitCode !== null) return { replies, log: server.out, error: `exited during the queries (code ${server.proc.exitCode})` };
    return { replies, log: server.out };
  } finally {
    await server.stop();
  }
}

export interface CaseResult { passed: number; failed: number; report: string[] }

export async function runCase(name: string, reference: string, verbose = false): Promise<CaseResult> {
  const caseDir = path.join(HERE, name);
  const setup = JSON.parse(readFileSync(path.join(caseDir, 'setup.json'), 'utf8')) as Setup;
  const report: string[] = [`== ${name}  (${setup.source})`];
  const asks = setup.queries.map(parseAsk);
  const node = process.execPath;
  const ns = new Netns(name.slice(0, 12));
  let upstreamNs: Netns | undefined;
  try {
    cpSync(caseDir, ns.dir, { recursive: true });
    for (const a of setup.addresses ?? []) ns.addLoopbackAddress(a);
    if (setup.resolvConf !== undefined) ns.resolvConf(setup.resolvConf);
    // Upstreams live in a peer namespace behind a veth pair, routed by address: a wildcard listener on :53
    // (the Corefile's) cannot share its namespace with an upstream bound to a specific address on :53.
    if (setup.upstreams?.length) {
      upstreamNs = ns.veth('10.254.0.1/30', '10.254.0.2/30');
      for (const u of setup.upstreams) {
        upstreamNs.addLoopbackAddress(`${u.address}/32`);
        ns.route(`${u.address}/32`, '10.254.0.2');
        const d = upstreamNs.run('dnsmasq', ['--keep-in-foreground', '--conf-file=/dev/null', `--listen-address=${u.address}`, '--bind-interfaces',
          '--port=53', '--no-resolv', '--no-hosts', '--pid-file=', '--user=root', '--local-ttl=300', '--log-facility=-', ...u.options]);
        await d.waitFor(/started, version/);
      }
    }
    let kubeconfig: string | undefined;
    if (setup.kubernetes) {
      kubeconfig = path.join(ns.dir, 'kubeconfig');
      const state = existsSync(path.join(caseDir, 'state.json')) ? path.join(caseDir, 'state.json') : path.join(ROOT, 'test/k8s-api/fixtures/cluster.json');
      const api = ns.run(node, [path.join(ROOT, 'test/k8s-api/server.ts'), '--state', state, '--port', '6443', '--kubeconfig', kubeconfig]);
      await api.waitFor(/k8s-api listening/);
    }
    writeFileSync(path.join(ns.dir, 'Corefile'), prepareCorefile(readFileSync(path.join(caseDir, 'Corefile'), 'utf8'), setup, ns.dir, kubeconfig));
    const probe = parseAsk(setup.probe);
    const ref = await runSide(ns, reference, probe, asks, node);
    const sub = await runSide(ns, BIN, probe, asks, node);
    for (const [side, r] of [['reference (CoreDNS)', ref], ['nodens', sub]] as const) {
      if (r.error !== undefined) {
        report.push(`  FAIL ${side}: ${r.error}`, ...r.log.slice(-30).map((l) => `       | ${l}`));
        return { passed: 0, failed: asks.length, report };
      }
    }
    // loadbalance shuffles each reply's records at random: sections are then compared as sorted sets.
    const shuffle = /^\s*loadbalance\b/m.test(readFileSync(path.join(ns.dir, 'Corefile'), 'utf8'));
    if (shuffle) report[0] += '  [shuffle: loadbalance]';
    const norm: Normalise = { ...DEFAULT_NORMALISE, shuffle, ttlDecay: setup.ttlDecay ?? 1, soaSerial: setup.kubernetes === true };
    let passed = 0, failed = 0;
    asks.forEach((a, i) => {
      const [la, lb] = renderPair(ref.replies[i], sub.replies[i], norm);
      const label = `@${a.host}${a.port === 53 ? '' : `:${a.port}`} ${a.line}`;
      if (la.length === lb.length && la.every((l, j) => l === lb[j])) {
        passed++;
        report.push(`  ok   ${label}`);
        if (verbose) report.push(...la.map((l) => `         ${l.replace(/\t/g, '  ')}`));
      } else {
        failed++;
        report.push(`  FAIL ${label}`, sideBySide(la, lb, 'reference (CoreDNS)', 'nodens'));
      }
    });
    return { passed, failed, report };
  } finally {
    await upstreamNs?.close();
    await ns.close();
  }
}

export function caseNames(): string[] {
  return readdirSync(HERE).filter((d) => statSync(path.join(HERE, d)).isDirectory() && existsSync(path.join(HERE, d, 'setup.json'))).sort();
}

async function main(argv: string[]): Promise<number> {
  if (!available()) throw new Error('network namespaces unavailable: run as root with iproute2 installed');
  if (spawnSync('sh', ['-c', 'command -v dnsmasq']).status !== 0) throw new Error('dnsmasq is not installed (apt-get install -y dnsmasq-base)');
  const verbose = argv.includes('-v');
  const wanted = argv.filter((a) => !a.startsWith('-'));
  const all = caseNames();
  for (const w of wanted) if (!all.includes(w)) throw new Error(`no case named ${w}`);
  const reference = referenceBinary();
  console.log(`reference: ${reference}\nsubject:   ${BIN}`);
  let passed = 0, failed = 0;
  for (const name of wanted.length ? wanted : all) {
    const r = await runCase(name, reference, verbose);
    console.log(r.report.join('\n'));
    passed += r.passed;
    failed += r.failed;
  }
  console.log(`\n${passed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).then((c) => { process.exitCode = c; }, (e: unknown) => {
    console.error(e);
    console.log('0 passed, 1 failed');
    process.exitCode = 1;
  });
}
