// `nodens doctor`: a static preflight for forwarding loops. First validates the
// Corefile as `nodens validate` does (every plugin's setup, no listener), then
// reads the Corefile and every file it references (imports, resolv.conf TOs),
// this host's (or pod's) interface addresses, kubelet's config (resolvConf)
// and systemd-resolved's configuration with its drop-ins (DNS=,
// DNSStubListener=), and predicts every loop it can with the explanation and
// remedy the loop plugin logs at run time.
// Exit status: 0 no loop predicted, 1 a loop predicted or a Corefile the server
// would refuse, 2 usage or read error.

import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseCorefile } from '../corefile/parser.ts';
import { normalizeName, parseKey } from '../corefile/address.ts';
import { isSubdomain } from '../wire/name.ts';
import type { Token } from '../corefile/token.ts';
import { COREDNS_DIRECTIVES } from '../core/directives.ts';
import { parseResolvConf } from '../plugin/pkg/resolvconf.ts';
import {
  canonicalIp, classifyAddress, isLocalAddress, localAddresses, remedyFor, type OriginLike,
} from '../plugin/pkg/loopguard.ts';
import { validateConf } from './validate.ts';

/** The version of the JSON report's shape (`--json`); raised when a field changes meaning or goes away. */
export const DOCTOR_SCHEMA_VERSION = 1;

export type Severity = 'loop' | 'warning' | 'info';

export interface Finding {
  severity: Severity;
  zone: string;
  /** The server block: `file:line (key)`. */
  block: string;
  upstream: string;
  /** Where the upstream came from: `file:line`. */
  origin: string;
  message: string;
  remedy: string;
  /** For loops through several hops: the path. */
  path?: string[];
}

interface Upstream {
  host: string;
  port: number;
  scheme: string;
  origin: OriginLike;
}

interface Fwd {
  from: string;
  except: string[];
  upstreams: Upstream[];
  line: number;
  file: string;
}

interface Block {
  label: string;
  zones: string[];
  port: number;
  hosts: string[]; // '' = wildcard
  forwards: Fwd[];
  loop: boolean;
}

export interface DoctorOptions {
  conf: string;
  /** kubelet's config file; default ROOT/var/lib/kubelet/config.yaml when it exists. */
  kubeletConfig?: string;
  /** One resolved.conf to read alone; default the main file and drop-ins systemd-resolved reads under ROOT. */
  resolvedConf?: string;
  /** Where the node's files are looked for (default `/`; tests give a fixture directory). */
  root?: string;
  /** Interface addresses (tests); default os.networkInterfaces(). */
  locals?: Set<string>;
}

export interface DoctorReport {
  /** DOCTOR_SCHEMA_VERSION. */
  schemaVersion: number;
  corefile: string;
  /** `nodens validate`'s verdict on the Corefile; when it has an error, nothing else was checked. */
  validation: { ok: boolean; error?: string; warnings: string[] };
  files: string[];
  interfaces: string[];
  /** kubelet's config file read, if any. */
  kubeletConfig?: string;
  kubeletResolvConf?: string;
  /** systemd-resolved's configuration files read, in the order they apply. */
  resolvedFiles: string[];
  findings: Finding[];
  loops: number;
}

function parseTo(tok: Token, extraFiles: Set<string>, notes: Finding[], blockLabel: string, from: string): Upstream[] {
  let t = tok.text;
  const origin: OriginLike = { file: tok.file, line: tok.line, source: 'corefile' };
  let scheme = 'dns';
  const m = /^([a-z0-9]+):\/\/(.*)$/.exec(t);
  if (m !== null) { scheme = m[1]!; t = m[2]!; }
  const defPort = scheme === 'tls' ? 853 : scheme === 'https' ? 443 : 53;
  const hp = /^\[([^\]]+)\](?::(\d+))?$/.exec(t) ?? /^([0-9.]+)(?::(\d+))?$/.exec(t) ?? /^([0-9a-fA-F:]+(?:%\S+)?)$/.exec(t);
  if (hp !== null && (hp[1]!.includes(':') || /^\d+\.\d+\.\d+\.\d+$/.test(hp[1]!))) {
    const host = hp[1]!.replace(/%.*$/, '').replace(/^([^%]*)%.*$/, '$1');
    const port = hp[2] !== undefined ? Number(hp[2]) : defPort;
    return [{ host, port, scheme, origin }];
  }
  if (scheme === 'dns' && existsSync(t) && statSync(t).isFile()) {
    extraFiles.add(t);
    return parseResolvConf(readFileSync(t, 'utf8')).map((ns) => ({
      host: ns.address.replace(/%.*$/, ''), port: 53, scheme: 'dns',
      origin: { file: t, line: ns.line, source: 'resolvconf' as const },
    }));
  }
  notes.push({
    severity: 'info', zone: from, block: blockLabel, upstream: tok.text, origin: `${tok.file}:${tok.line}`,
    message: `forward target ${JSON.stringify(tok.text)} is a hostname or a missing file; it cannot be checked statically`,
    remedy: '',
  });
  return [];
}

function readBlocks(conf: string, files: Set<string>, notes: Finding[]): Block[] {
  const contents = readFileSync(conf, 'utf8');
  files.add(conf);
  const directives = new Set(COREDNS_DIRECTIVES);
  const sbs = parseCorefile(contents, conf, { isDirective: (n) => directives.has(n) });
  const out: Block[] = [];
  for (const sb of sbs) {
    for (const toks of sb.tokens.values()) for (const t of toks) if (t.file !== '') files.add(t.file);
    const zones: string[] = [];
    let port = 53;
    for (const k of sb.keys) {
      for (const za of parseKey(k.text, '53')) {
        zones.push(za.zone);
        port = Number(za.port);
      }
    }
    const first = sb.keys[0];
    const label = `${first?.file ?? conf}:${first?.line ?? 0} (${sb.keys.map((k) => k.text).join(' ')})`;
    const bindToks = sb.tokens.get('bind') ?? [];
    const hosts = bindToks.filter((t) => t.text !== 'bind' && t.text !== '{' && t.text !== '}' && t.text !== 'except').map((t) => t.text);
    const forwards: Fwd[] = [];
    const ft = sb.tokens.get('forward') ?? [];
    for (let i = 0; i < ft.length; i++) {
      if (ft[i]!.text !== 'forward') continue;
      const line = ft[i]!.line, file = ft[i]!.file;
      const args: Token[] = [];
      let j = i + 1;
      while (j < ft.length && ft[j]!.line === line && ft[j]!.file === file && ft[j]!.text !== '{') args.push(ft[j++]!);
      const except: string[] = [];
      if (j < ft.length && ft[j]!.text === '{') {
        for (j++; j < ft.length && ft[j]!.text !== '}'; j++) {
          if (ft[j]!.text === 'except') {
            const l = ft[j]!.line;
            for (j++; j < ft.length && ft[j]!.line === l && ft[j]!.text !== '}'; j++) except.push(normalizeName(ft[j]!.text));
            j--;
          }
        }
      }
      if (args.length < 2) continue;
      const from = normalizeName(args[0]!.text);
      const ups: Upstream[] = [];
      for (const a of args.slice(1)) ups.push(...parseTo(a, files, notes, label, from));
      forwards.push({ from, except, upstreams: ups, line, file });
      i = j;
    }
    out.push({ label, zones, port, hosts: hosts.length === 0 ? [''] : hosts, forwards, loop: sb.tokens.has('loop') });
  }
  return out;
}

/** The block of this Corefile that a query for `name` sent to host:port reaches, if any. */
function receiver(blocks: Block[], host: string, port: number, name: string, locals: Set<string>): Block | undefined {
  const h = canonicalIp(host);
  let best: Block | undefined;
  let bestLen = -1;
  for (const b of blocks) {
    if (b.port !== port) continue;
    const hit = b.hosts.some((x) => (x === '' ? isLocalAddress(h, locals) : canonicalIp(x) === h));
    if (!hit) continue;
    for (const z of b.zones) {
      if (isSubdomain(name, z) && z.length > bestLen) { best = b; bestLen = z.length; }
    }
  }
  return best;
}

function forwardFor(b: Block, name: string): Fwd | undefined {
  for (const f of b.forwards) {
    if (!isSubdomain(name, f.from)) continue;
    if (name !== f.from && f.except.some((e) => isSubdomain(name, e))) continue;
    return f;
  }
  return undefined;
}

function hp(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

function originStr(o: OriginLike): string { return `${o.file}:${o.line}`; }

interface ResolvedDns { host: string; port: number; file: string; line: number }
interface Resolved { dns: ResolvedDns[]; stub: boolean; files: string[] }

/**
 * The files systemd-resolved reads, in the order they apply (resolved.conf(5), systemd.syntax(7)): the first
 * main file found of /etc, /run, /usr/local/lib, /usr/lib (…/systemd/resolved.conf), then the `*.conf` drop-ins
 * of those directories' resolved.conf.d/ sorted by file name whatever their directory; of drop-ins with the
 * same name only the one in the highest directory counts (/etc over /run over /usr/local/lib over /usr/lib),
 * and one that is a symlink to /dev/null (or empty) masks the others.
 */
export function resolvedFiles(root: string): string[] {
  const dirs = ['etc/systemd', 'run/systemd', 'usr/local/lib/systemd', 'usr/lib/systemd'];
  const files: string[] = [];
  const main = dirs.map((d) => join(root, d, 'resolved.conf')).find((f) => isFile(f));
  if (main !== undefined) files.push(main);
  const dropins = new Map<string, string>();
  for (const d of dirs) {
    const dir = join(root, d, 'resolved.conf.d');
    let names: string[];
    try { names = readdirSync(dir); } catch { continue; }
    for (const n of names) if (n.endsWith('.conf') && !dropins.has(n)) dropins.set(n, join(dir, n));
  }
  for (const n of [...dropins.keys()].sort()) {
    const f = dropins.get(n)!;
    if (!isMasked(f) && isFile(f)) files.push(f);
  }
  return files;
}

function isFile(f: string): boolean {
  try { return statSync(f).isFile(); } catch { return false; }
}

/** systemd's mask: a symlink to /dev/null, or an empty file. */
function isMasked(f: string): boolean {
  try {
    if (lstatSync(f).isSymbolicLink() && readlinkSync(f) === '/dev/null') return true;
    const st = statSync(f);
    return st.isFile() && st.size === 0;
  } catch {
    return false;
  }
}

/**
 * systemd-resolved's DNS= servers and whether its stub listener runs (default yes), from its files in order:
 * only the [Resolve] section counts; DNS= adds to the list and an empty DNS= empties it; the last
 * DNSStubListener= wins.
 */
function readResolved(files: string[]): Resolved {
  const out: Resolved = { dns: [], stub: true, files };
  for (const path of files) {
    let section = '';
    readFileSync(path, 'utf8').split('\n').forEach((raw, i) => {
      const l = raw.trim();
      if (l.startsWith('#') || l.startsWith(';')) return;
      const sec = /^\[([^\]]+)\]$/.exec(l);
      if (sec !== null) { section = sec[1]!; return; }
      if (section !== 'Resolve') return;
      const m = /^([A-Za-z]+)\s*=\s*(.*)$/.exec(l);
      if (m === null) return;
      if (m[1] === 'DNS') {
        const values = m[2]!.split(/\s+/).filter(Boolean);
        if (values.length === 0) out.dns = [];
        for (const s of values) {
          const a = s.replace(/#.*$/, '');
          const x = /^\[([^\]]+)\]:(\d+)/.exec(a) ?? /^(\d+\.\d+\.\d+\.\d+):(\d+)/.exec(a);
          if (x !== null) out.dns.push({ host: x[1]!, port: Number(x[2]), file: path, line: i + 1 });
          else out.dns.push({ host: a.replace(/^\[|\]$/g, '').replace(/%.*$/, ''), port: 53, file: path, line: i + 1 });
        }
      } else if (m[1] === 'DNSStubListener') {
        out.stub = !/^(no|false|0|off)$/i.test(m[2]!.trim());
      }
    });
  }
  return out;
}

/**
 * kubelet's resolvConf from its KubeletConfiguration (YAML): the file it gives pods with dnsPolicy Default,
 * /etc/resolv.conf when the key is absent (kubelet's default). The line is where the key is written (0: absent).
 */
async function kubeletResolvConf(path: string): Promise<{ file: string; line: number }> {
  const text = readFileSync(path, 'utf8');
  // Only doctor needs a YAML parser: loaded here, not with the server.
  const yaml = await import('js-yaml');
  const doc = yaml.load(text, { filename: path }) as unknown;
  const value = doc !== null && typeof doc === 'object' ? (doc as Record<string, unknown>).resolvConf : undefined;
  if (typeof value !== 'string' || value === '') return { file: '/etc/resolv.conf', line: 0 };
  const line = text.split('\n').findIndex((l) => /^["']?resolvConf["']?\s*:/.test(l)) + 1;
  return { file: value, line };
}

/** A node's path as doctor reads it under ROOT. */
function underRoot(root: string, p: string): string {
  return root === '/' || !p.startsWith('/') ? p : join(root, p);
}

/** The kubelet part of the remedy only where kubelet is involved: its config was found, or the file is its resolvConf or under its directory. */
function remedy(o: OriginLike, kubelet: { config?: string; resolvConf?: string }): string {
  if (o.source !== 'resolvconf') return remedyFor(o);
  const byKubelet = kubelet.config !== undefined || o.file === kubelet.resolvConf || o.file.startsWith('/var/lib/kubelet/');
  if (byKubelet) return remedyFor(o);
  return `remedy: make ${o.file} list the real upstream resolvers and no local/loopback or node-local address `
    + '(with systemd-resolved: /run/systemd/resolve/resolv.conf lists them, its stub file does not), '
    + 'or disable the local stub resolver (systemd-resolved DNSStubListener=no), '
    + 'or forward to explicit upstream addresses instead of the file';
}

export async function diagnose(opts: DoctorOptions, validation: DoctorReport['validation'] = { ok: true, warnings: [] }): Promise<DoctorReport> {
  const root = opts.root ?? '/';
  const files = new Set<string>();
  const findings: Finding[] = [];
  const locals = opts.locals ?? localAddresses();
  const blocks = readBlocks(opts.conf, files, findings);
  for (const w of validation.warnings) {
    findings.push({ severity: 'warning', zone: '', block: '', upstream: '', origin: '', message: `the Corefile loads with a warning: ${w}`, remedy: '' });
  }

  const resolvedConfs = opts.resolvedConf !== undefined ? [opts.resolvedConf] : resolvedFiles(root);
  const resolved = resolvedConfs.length > 0 ? readResolved(resolvedConfs) : undefined;
  for (const f of resolvedConfs) files.add(f);
  const kubeletConfig = opts.kubeletConfig ?? (isFile(join(root, 'var/lib/kubelet/config.yaml')) ? join(root, 'var/lib/kubelet/config.yaml') : undefined);
  let kubelet: { file: string; line: number } | undefined;
  if (kubeletConfig !== undefined) {
    files.add(kubeletConfig);
    kubelet = await kubeletResolvConf(kubeletConfig);
  }
  const kubeletInfo = { config: kubeletConfig, resolvConf: kubelet?.file };
  // The file a discovered config names is the node's, read under ROOT; one given with --kubelet-config names its own.
  const kubeletRoot = opts.kubeletConfig !== undefined ? '/' : root;

  for (const b of blocks) {
    for (const z of b.zones) {
      for (const f of b.forwards) {
        // The names this forward sees from this block: the deeper of zone and FROM.
        const probe = isSubdomain(z, f.from) ? z : isSubdomain(f.from, z) ? f.from : undefined;
        if (probe === undefined || f.except.some((e) => isSubdomain(probe, e))) continue;
        for (const u of f.upstreams) {
          const base = { zone: probe, block: b.label, upstream: hp(u.host, u.port), origin: originStr(u.origin), remedy: remedy(u.origin, kubeletInfo) };
          if (u.scheme !== 'dns') continue;
          // Follow the query through this Corefile's own blocks.
          const path = [hp(u.host, u.port)];
          let at: { host: string; port: number } = u;
          let cur: Block | undefined = b;
          const visited = new Set<Block>();
          let loopFound = false;
          for (let hop = 0; hop < 16; hop++) {
            const r = receiver(blocks, at.host, at.port, probe, locals);
            if (r === undefined) break;
            if (r === b || visited.has(r)) {
              loopFound = true;
              const self = r === b && hop === 0;
              findings.push({
                ...base, severity: 'loop', path,
                message: self
                  ? `upstream ${hp(u.host, u.port)} (${u.origin.source === 'resolvconf' ? 'resolv.conf ' : 'Corefile '}${originStr(u.origin)}) is this block's own listen address: every query for ${JSON.stringify(probe)} forwarded there comes straight back`
                  : `queries for ${JSON.stringify(probe)} forwarded to ${hp(u.host, u.port)} (${originStr(u.origin)}) come back to this block through this server's own blocks: ${path.join(' -> ')}`,
              });
              break;
            }
            visited.add(r);
            const nf = forwardFor(r, probe);
            if (nf === undefined || nf.upstreams.length === 0) break;
            at = nf.upstreams[0]!;
            path.push(hp(at.host, at.port));
            cur = r;
          }
          void cur;
          if (loopFound) continue;
          const cls = classifyAddress(u.host);
          if (u.origin.source === 'resolvconf' && cls === 'loopback') {
            // 127.0.0.53 on a host with systemd-resolved: loops when resolved forwards back to us.
            const back = resolved?.dns.find((d) => receiver(blocks, d.host, d.port, probe, locals) !== undefined);
            if (resolved !== undefined && resolved.stub && back !== undefined && canonicalIp(u.host) === '127.0.0.53') {
              findings.push({
                ...base, severity: 'loop', path: [hp(u.host, u.port), hp(back.host, back.port)],
                message: `upstream ${hp(u.host, u.port)} (resolv.conf ${originStr(u.origin)}) is systemd-resolved's stub, whose DNS= ${hp(back.host, back.port)} (${back.file}:${back.line}) is this server: two-hop loop`,
              });
            } else {
              findings.push({
                ...base, severity: 'warning',
                message: `upstream ${hp(u.host, u.port)} is a loopback address taken from resolv.conf ${originStr(u.origin)}: inside a pod or container that is the pod itself (a loop if this server listens there, or no DNS at all); on a host it is a local stub resolver that must not forward back here`,
              });
            }
            continue;
          }
          if (cls === 'link-local' && blocks.some((x) => x.hosts.some((h) => h !== '' && canonicalIp(h) === canonicalIp(u.host)))) {
            findings.push({
              ...base, severity: 'loop',
              message: `upstream ${hp(u.host, u.port)} (${originStr(u.origin)}) is a node-local cache address this Corefile binds`,
            });
          }
        }
      }
    }
  }

  // kubelet hands its resolvConf to every dnsPolicy: Default pod, CoreDNS and node-local-dns included.
  let kubeletFile: string | undefined;
  if (kubelet !== undefined) {
    kubeletFile = kubelet.file;
    let ns: Array<{ address: string; line: number }> = [];
    try {
      ns = parseResolvConf(readFileSync(underRoot(kubeletRoot, kubelet.file), 'utf8'));
      files.add(underRoot(kubeletRoot, kubelet.file));
    } catch (e) {
      findings.push({
        severity: 'warning', zone: '.', block: '', upstream: '', origin: `${kubeletConfig}:${kubelet.line}`,
        message: `kubelet resolvConf ${kubelet.file} cannot be read: ${e instanceof Error ? e.message : String(e)}`, remedy: '',
      });
    }
    const usesEtc = blocks.some((b) => b.forwards.some((f) => f.upstreams.some((u) => u.origin.source === 'resolvconf' && u.origin.file === '/etc/resolv.conf')));
    for (const n of ns) {
      const host = n.address.replace(/%.*$/, '');
      const cls = classifyAddress(host);
      const origin: OriginLike = { file: kubelet.file, line: n.line, source: 'resolvconf' };
      const bound = blocks.find((b) => b.hosts.some((h) => h !== '' && canonicalIp(h) === canonicalIp(host)));
      if (cls === 'loopback' || bound !== undefined) {
        findings.push({
          severity: usesEtc ? 'loop' : 'warning', zone: '.', block: bound?.label ?? '', upstream: hp(host, 53),
          origin: `${kubelet.file}:${n.line}`,
          message: `kubelet's resolvConf (${kubelet.line > 0 ? `${kubeletConfig}:${kubelet.line}` : `${kubeletConfig}, unset: the default`}) is ${kubelet.file}, which lists ${host} at line ${n.line}: `
            + (cls === 'loopback' ? 'pods with dnsPolicy Default (CoreDNS among them) get a loopback nameserver, which inside a pod is the pod itself' : 'that is a node-local cache address this Corefile binds')
            + (usesEtc ? '; this Corefile forwards to /etc/resolv.conf, which in such a pod is that file: forwarding loop' : ''),
          remedy: remedyFor(origin),
        });
      }
    }
  }
  if (resolved !== undefined) {
    for (const d of resolved.dns) {
      const r = blocks.find((b) => receiver([b], d.host, d.port, '.', locals) !== undefined);
      if (r !== undefined && !findings.some((f) => f.severity === 'loop' && f.path?.includes(hp(d.host, d.port)))) {
        findings.push({
          severity: 'info', zone: '.', block: r.label, upstream: hp(d.host, d.port), origin: `${d.file}:${d.line}`,
          message: `systemd-resolved forwards to this server (DNS=${d.host}); fine as long as this server never forwards to resolved's stub (127.0.0.53) or to a resolv.conf naming it`,
          remedy: '',
        });
      }
    }
  }
  for (const b of blocks) {
    if (b.forwards.length > 0 && !b.loop) {
      findings.push({
        severity: 'info', zone: b.zones[0] ?? '.', block: b.label, upstream: '', origin: '',
        message: 'this block forwards but has no loop plugin: a loop that appears at run time would go unnoticed (add `loop { }`)', remedy: '',
      });
    }
  }
  const order: Record<Severity, number> = { loop: 0, warning: 1, info: 2 };
  findings.sort((a, b) => order[a.severity] - order[b.severity]);
  return {
    schemaVersion: DOCTOR_SCHEMA_VERSION, corefile: opts.conf, validation, files: [...files], interfaces: [...locals],
    kubeletConfig, kubeletResolvConf: kubeletFile, resolvedFiles: resolvedConfs, findings,
    loops: findings.filter((f) => f.severity === 'loop').length,
  };
}

export function formatReport(r: DoctorReport): string {
  const out: string[] = [];
  if (r.validation.error !== undefined) {
    return `nodens doctor: ${r.corefile}: the server would refuse this Corefile:\n${r.validation.error}\n`;
  }
  out.push(`nodens doctor: ${r.corefile} (read: ${r.files.join(', ')})`);
  out.push(`local addresses: ${r.interfaces.join(', ')}`);
  for (const f of r.findings) {
    const tag = f.severity === 'loop' ? 'LOOP' : f.severity === 'warning' ? 'WARN' : 'INFO';
    out.push(`${tag}${f.zone !== '' ? ` zone ${JSON.stringify(f.zone)}` : ''}${f.block !== '' ? ` block ${f.block}` : ''}: ${f.message}`);
    if (f.remedy !== '') out.push(`     ${f.remedy}`);
  }
  const w = r.findings.filter((f) => f.severity === 'warning').length;
  out.push(r.loops > 0 ? `${r.loops} forwarding loop(s) predicted, ${w} warning(s)` : `no forwarding loop predicted, ${w} warning(s)`);
  return out.join('\n') + '\n';
}

const USAGE = `Usage: nodens doctor [-conf FILE] [--kubelet-config FILE] [--resolved-conf FILE] [--root DIR] [--json]
Validates a Corefile as \`nodens validate\` does, then predicts forwarding loops from it, the files it
references, this host's addresses, kubelet's resolvConf (DIR/var/lib/kubelet/config.yaml unless
--kubelet-config) and systemd-resolved's configuration (DIR/etc/systemd/resolved.conf and the drop-in
directories unless --resolved-conf; DIR defaults to /). Exit status 1 when the server would refuse the
Corefile or a loop is predicted, 2 on a usage or read error.
`;

/** Entry point of `nodens doctor ARGS`; returns the exit status. */
export async function runDoctor(argv: string[]): Promise<number> {
  const opts: DoctorOptions = { conf: 'Corefile' };
  let json = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!.replace(/^--?/, '-');
    const [k, inline] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    const val = (): string => {
      if (inline !== undefined) return inline;
      const v = argv[++i];
      if (v === undefined) throw new Error(`flag needs an argument: ${k}`);
      return v;
    };
    try {
      switch (k) {
        case '-conf': opts.conf = val(); break;
        case '-kubelet-config': opts.kubeletConfig = val(); break;
        case '-resolved-conf': opts.resolvedConf = val(); break;
        case '-root': opts.root = val(); break;
        case '-json': json = true; break;
        case '-h': case '-help': process.stdout.write(USAGE); return 0;
        default: throw new Error(`unknown flag: ${argv[i]}`);
      }
    } catch (e) {
      process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n${USAGE}`);
      return 2;
    }
  }
  let report: DoctorReport;
  try {
    readFileSync(opts.conf);
    const v = await validateConf(opts.conf, '53');
    const validation = { ok: v.ok, error: v.error, warnings: v.warnings };
    for (const n of v.notices) process.stderr.write(n + '\n');
    report = v.error !== undefined ? refused(opts, validation) : await diagnose(opts, validation);
  } catch (e) {
    process.stderr.write(`nodens doctor: ${e instanceof Error ? e.message : String(e)}\n`);
    return 2;
  }
  process.stdout.write(json ? JSON.stringify(report, null, 2) + '\n' : formatReport(report));
  return report.loops > 0 || report.validation.error !== undefined ? 1 : 0;
}

/** The report on a Corefile the server would refuse: nothing else is checked. */
function refused(opts: DoctorOptions, validation: DoctorReport['validation']): DoctorReport {
  return {
    schemaVersion: DOCTOR_SCHEMA_VERSION, corefile: opts.conf, validation, files: [opts.conf], interfaces: [],
    resolvedFiles: [], findings: [], loops: 0,
  };
}
