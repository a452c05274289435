// A small coverage-guided fuzzer. Coverage comes from V8's own block coverage
// (the inspector's Profiler.takePreciseCoverage with call counts, which also
// resets the counters), so no instrumentation or native addon is needed; see
// docs/reliability.md for why jazzer.js is not used. An input that reaches a
// block of src/ not reached before, or a block's hit count in a new power-of-two
// bucket (as AFL does), joins the in-memory corpus and is mutated further.
//
// A finding: the target throws something it must not (a programming error),
// or breaks an invariant, or takes longer than `slowMs` on one input. The
// input goes to test/fuzz/corpus/<target>/crash-<hash> and the run fails.

import { Session } from 'node:inspector';
import { createHash, randomInt } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Target {
  name: string;
  /** Runs one input; throws (or rejects) only on a finding. */
  run(input: Buffer): void | Promise<void>;
  /** Tokens the mutator splices in (directive names, braces, special bytes). */
  dictionary?: readonly Buffer[];
  /** Called once before the first input (loads what the first input would otherwise pay for). */
  warm?(): Promise<void>;
  /** Largest input the mutator makes. */
  maxLen: number;
}

export interface Finding { input: Buffer; error: string; file: string }
export interface FuzzStats { target: string; execs: number; corpus: number; seeds: number; features: number; ms: number; findings: Finding[] }

const session = new Session();
session.connect();

/** Inspector calls on the main thread's own session complete synchronously; this makes that explicit. */
function post<T>(method: string, params?: object): T {
  let result: T | undefined;
  let error: Error | null = null;
  let done = false;
  session.post(method, params, (err, res) => { error = err; result = res as T; done = true; });
  if (!done) throw new Error(`inspector ${method} did not complete synchronously`);
  if (error) throw error;
  return result!;
}

interface Coverage { result: Array<{ scriptId: string; url: string; functions: Array<{ ranges: Array<{ startOffset: number; endOffset: number; count: number }> }> }> }

post('Profiler.enable');
post('Profiler.startPreciseCoverage', { callCount: true, detailed: true });

const bucket = (n: number): number => (n >= 128 ? 8 : 32 - Math.clz32(n)); // 1, 2–3, 4–7, … 128+

/** The features (block × hit-count bucket) run since the previous call, for src/ only. */
function takeFeatures(): Set<string> {
  const out = new Set<string>();
  const cov = post<Coverage>('Profiler.takePreciseCoverage');
  for (const s of cov.result) {
    if (!s.url.includes('/src/')) continue;
    for (const f of s.functions) {
      for (const r of f.ranges) if (r.count > 0) out.add(`${s.scriptId}:${r.startOffset}:${r.endOffset}:${bucket(r.count)}`);
    }
  }
  return out;
}

const INTERESTING = [0, 1, 0x7f, 0x80, 0xff, 0xc0, 0x3f, 0x40];

function mutate(src: Buffer, corpus: readonly Buffer[], dict: readonly Buffer[], maxLen: number): Buffer {
  let b = Buffer.from(src);
  for (let n = 1 << randomInt(4); n > 0; n--) {
    const at = b.length ? randomInt(b.length) : 0;
    switch (randomInt(dict.length ? 10 : 8)) {
      case 0: if (b.length) b[at] = b[at]! ^ (1 << randomInt(8)); break;
      case 1: if (b.length) b[at] = randomInt(256); break;
      case 2: if (b.length) b[at] = INTERESTING[randomInt(INTERESTING.length)]!; break;
      case 3: b = Buffer.concat([b.subarray(0, at), Buffer.from([randomInt(256)]), b.subarray(at)]); break;
      case 4: if (b.length) b = Buffer.concat([b.subarray(0, at), b.subarray(Math.min(b.length, at + 1 + randomInt(8)))]); break;
      case 5: { // copy a chunk of the input over another place
        if (b.length < 2) break;
        const from = randomInt(b.length); const len = randomInt(1, Math.min(16, b.length - from) + 1);
        b = Buffer.concat([b.subarray(0, at), b.subarray(from, from + len), b.subarray(at)]);
        break;
      }
      case 6: { // splice with another corpus entry
        const o = corpus[randomInt(corpus.length)]!;
        if (!o.length) break;
        const cut = randomInt(o.length);
        b = Buffer.concat([b.subarray(0, at), o.subarray(cut, cut + randomInt(1, 64))]);
        break;
      }
      case 7: if (b.length >= 2) b.writeUInt16BE(randomInt(2) ? randomInt(65536) : INTERESTING[randomInt(INTERESTING.length)]!, randomInt(b.length - 1)); break;
      default: { // dictionary token, inserted or overwriting
        const d = dict[randomInt(dict.length)]!;
        b = randomInt(2) ? Buffer.concat([b.subarray(0, at), d, b.subarray(at)]) : Buffer.concat([b.subarray(0, at), d, b.subarray(at + d.length)]);
      }
    }
  }
  return b.length > maxLen ? b.subarray(0, maxLen) : b;
}

export function corpusDir(root: string, target: string): string { return join(root, target); }

export function loadCorpus(dir: string): Buffer[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).sort().map((f) => readFileSync(join(dir, f)));
}

const hash = (b: Buffer): string => createHash('sha1').update(b).digest('hex').slice(0, 16);

function describe(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}\n${e.stack?.split('\n').slice(1, 6).join('\n') ?? ''}` : String(e);
}

/**
 * Fuzz `t` for `seconds` (or `maxExecs`), starting from the corpus in `dir`. New
 * interesting inputs are written back to `dir` only when `save` is set (the long
 * run grows the corpus; CI only reads it). `progress` receives a line every 5 s.
 */
export async function fuzz(t: Target, dir: string, o: { seconds: number; maxExecs?: number; save: boolean; minimize?: boolean; slowMs: number; progress?: (s: string) => void }): Promise<FuzzStats> {
  const started = Date.now();
  const seen = new Set<string>();
  const corpus: Buffer[] = [];
  const findings: Finding[] = [];
  const seeds = loadCorpus(dir);
  await t.warm?.();
  mkdirSync(dir, { recursive: true });
  let execs = 0;

  const run = async (input: Buffer): Promise<void> => {
    const t0 = performance.now();
    let error: string | undefined;
    try { await t.run(input); } catch (e) { error = describe(e); }
    const ms = performance.now() - t0;
    if (error === undefined && ms > o.slowMs) error = `slow: ${ms.toFixed(0)} ms on one input (bound ${o.slowMs} ms)`;
    execs++;
    if (error !== undefined) {
      const file = join(dir, `crash-${hash(input)}`);
      if (!findings.some((x) => x.file === file)) {
        writeFileSync(file, input);
        findings.push({ input, error, file });
        o.progress?.(`[${t.name}] FINDING ${file}\n${error}`);
      }
    }
  };

  // Taking coverage costs far more than running an input (it serializes every
  // function of every script), so inputs run in batches with one take each; a
  // batch that reached something new is split in halves until the inputs that
  // did are found, and those join the corpus.
  const explore = async (batch: Buffer[], keep: (b: Buffer) => void): Promise<void> => {
    takeFeatures();
    for (const b of batch) await run(b);
    const fresh = [...takeFeatures()].filter((f) => !seen.has(f));
    if (fresh.length === 0) return;
    if (batch.length === 1) {
      for (const f of fresh) seen.add(f);
      keep(batch[0]!);
      return;
    }
    const half = batch.length >> 1;
    await explore(batch.slice(0, half), keep);
    await explore(batch.slice(half), keep);
    for (const f of fresh) seen.add(f); // what only the whole batch together reached (shared state) is not chased again
  };

  for (let i = 0; i < seeds.length; i += 64) {
    await explore(seeds.slice(i, i + 64), (b) => corpus.push(b));
    o.progress?.(`[${t.name}] seeds ${Math.min(i + 64, seeds.length)}/${seeds.length}`);
  }
  if (o.minimize) {
    // Keep only the seeds that reached something the others did not (and every crash and hang input).
    const kept = new Set(corpus.map(hash));
    for (const f of readdirSync(dir)) {
      if ((f.startsWith('seed-') || f.startsWith('new-')) && !kept.has(hash(readFileSync(join(dir, f))))) unlinkSync(join(dir, f));
    }
  }
  if (corpus.length === 0) corpus.push(seeds[0] ?? Buffer.alloc(0));
  o.progress?.(`[${t.name}] seeds: ${seeds.length} run, ${corpus.length} kept, features ${seen.size}`);
  const dict = t.dictionary ?? [];
  let lastReport = Date.now();
  const batchSize = 64;
  while (Date.now() - started < o.seconds * 1000 && (o.maxExecs === undefined || execs < o.maxExecs)) {
    const batch: Buffer[] = [];
    for (let i = 0; i < batchSize; i++) {
      // Favour recent finds a little: they sit at the frontier of the coverage.
      const parent = corpus[randomInt(2) ? randomInt(corpus.length) : Math.max(0, corpus.length - 1 - randomInt(Math.min(16, corpus.length)))]!;
      batch.push(mutate(parent, corpus, dict, t.maxLen));
    }
    await explore(batch, (child) => {
      corpus.push(child);
      if (o.save) writeFileSync(join(dir, `new-${hash(child)}`), child);
    });
    if (Date.now() - lastReport > 5000) {
      lastReport = Date.now();
      o.progress?.(`[${t.name}] ${((Date.now() - started) / 1000).toFixed(0)} s: ${execs} execs, corpus ${corpus.length}, features ${seen.size}`);
    }
  }
  return { target: t.name, execs, corpus: corpus.length, seeds: seeds.length, features: seen.size, ms: Date.now() - started, findings };
}
