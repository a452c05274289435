// Writes the seed corpus (test/fuzz/corpus/<target>/seed-*), kept in the repo:
//   codec:    the conformance queries, and the reference CoreDNS's replies to those of
//             the self-contained cases (zones of every type, DNSSEC, CHAOS, whoami, ...);
//   corefile: the Corefiles of test/corefiles, of the conformance cases and of the READMEs;
//   setup:    every README's Corefile examples (each plugin's own), the same Corefiles;
//   hpack:    RFC 7541's request examples (C.3, C.4) and DoH requests as curl, Go and nghttp2 send them.
// Run once by hand (`node test/fuzz/seed.ts`) when cases or READMEs change.

import dgram from 'node:dgram';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../helpers/server.ts';
import { encodeQuery, parseQueriesFile } from '../conformance/lib/query.ts';
import { referenceCoreDNS } from '../drills/common.ts';
import { HPACK_SEEDS } from './targets.ts';

const CORPUS = join(ROOT, 'test', 'fuzz', 'corpus');
const CASES = join(ROOT, 'test', 'conformance', 'cases');
const hash = (b: Buffer): string => createHash('sha1').update(b).digest('hex').slice(0, 12);

function fresh(target: string): string {
  const dir = join(CORPUS, target);
  mkdirSync(dir, { recursive: true });
  for (const f of readdirSync(dir)) if (f.startsWith('seed-')) rmSync(join(dir, f));
  return dir;
}
const put = (dir: string, b: Buffer): void => writeFileSync(join(dir, `seed-${hash(b)}`), b);

/** Cases that need no upstream or API server: the reference answers them alone. */
const SELF_CONTAINED = ['file-types', 'file-basic', 'file-dnssec', 'dnssec-basic', 'chaos', 'whoami', 'any', 'hosts', 'template-records', 'nsid', 'minimal', 'truncation', 'header', 'local'];

async function replies(coredns: string, kase: string, queries: Buffer[], port: number): Promise<Buffer[]> {
  const dir = join(CASES, kase);
  const p = spawn(coredns, ['-conf', 'Corefile', '-dns.port', String(port)], { cwd: dir, stdio: 'ignore' });
  const sock = dgram.createSocket('udp4');
  const got: Buffer[] = [];
  sock.on('message', (m) => got.push(m));
  try {
    await new Promise((r) => setTimeout(r, 700));
    for (const q of queries) { sock.send(q, port, '127.0.0.1'); await new Promise((r) => setTimeout(r, 5)); }
    await new Promise((r) => setTimeout(r, 500));
  } finally { sock.close(); p.kill(); }
  return got;
}

const codec = fresh('codec');
const coredns = referenceCoreDNS();
let port = 25300;
let nq = 0; let nr = 0;
for (const kase of readdirSync(CASES).sort()) {
  const qf = join(CASES, kase, 'queries.txt');
  if (!existsSync(qf)) continue;
  const queries = parseQueriesFile(readFileSync(qf, 'utf8')).map((q, i) => encodeQuery(q, i + 1));
  for (const q of queries) put(codec, q);
  nq += queries.length;
  if (SELF_CONTAINED.includes(kase)) {
    const rs = await replies(coredns, kase, queries, port++);
    for (const r of rs) put(codec, r);
    nr += rs.length;
  }
}

const corefiles: Buffer[] = [];
for (const d of readdirSync(join(ROOT, 'test', 'corefiles'))) {
  const f = join(ROOT, 'test', 'corefiles', d, 'Corefile');
  if (existsSync(f)) corefiles.push(readFileSync(f));
}
for (const kase of readdirSync(CASES)) {
  const f = join(CASES, kase, 'Corefile');
  if (existsSync(f)) corefiles.push(readFileSync(f));
}
const readmeBlocks: Buffer[] = [];
const pluginDir = join(ROOT, 'src', 'plugin');
for (const p of readdirSync(pluginDir)) {
  const f = join(pluginDir, p, 'README.md');
  if (!existsSync(f)) continue;
  const text = readFileSync(f, 'utf8');
  for (const m of text.matchAll(/^(?:```|~~~) ?(?:corefile|txt)?\n([\s\S]*?)^(?:```|~~~)$/gm)) {
    const block = m[1]!;
    // Only Corefile-looking blocks: a server block or a directive line of this plugin.
    if (block.includes('{') || block.split('\n').some((l) => l.trim().split(/\s+/)[0] === p)) readmeBlocks.push(Buffer.from(block));
  }
}
const corefile = fresh('corefile');
for (const b of [...corefiles, ...readmeBlocks]) put(corefile, b);
const setup = fresh('setup');
for (const b of [...readmeBlocks, ...corefiles]) put(setup, b);
const hpack = fresh('hpack');
for (const b of HPACK_SEEDS) put(hpack, b);
console.log(`codec: ${nq} queries, ${nr} replies; hpack: ${HPACK_SEEDS.length}; corefile: ${corefiles.length + readmeBlocks.length}; setup: ${readmeBlocks.length + corefiles.length}`);
