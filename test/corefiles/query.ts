// Runs inside a test network namespace (`ip netns exec NS node query.ts FILE`): sends each query of FILE
// (a JSON array of {host, port, line}) and prints one JSON line per query with the parsed reply, rendered
// later by run.ts with the conformance harness's renderer. `--wait MS` retries the first query until a
// reply comes (the readiness probe).
import { readFileSync } from 'node:fs';
import { encodeQuery, parseQueryLine } from '../conformance/lib/query.ts';
import { queryTcp, queryUdp, type RawReply } from '../conformance/lib/client.ts';
import { parseReply } from '../conformance/lib/render.ts';

interface Ask { host: string; port: number; line: string }

async function ask(a: Ask, id: number): Promise<RawReply> {
  const q = parseQueryLine(a.line);
  const msg = encodeQuery(q, id);
  return q.tcp ? queryTcp(a.host, a.port, msg) : queryUdp(a.host, a.port, msg);
}

async function main(argv: string[]): Promise<void> {
  let waitMs = 0;
  const files: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--wait') waitMs = Number(argv[++i]);
    else files.push(argv[i]);
  }
  const asks = JSON.parse(readFileSync(files[0], 'utf8')) as Ask[];
  if (waitMs > 0) {
    const deadline = Date.now() + waitMs;
    for (;;) {
      const r = await ask(asks[0], 4242);
      if (r.bytes) break;
      if (Date.now() > deadline) throw new Error(`no reply to "${asks[0].line}" from ${asks[0].host}:${asks[0].port} within ${waitMs} ms: ${r.error}`);
      await new Promise((res) => setTimeout(res, 50));
    }
    return;
  }
  for (const a of asks) {
    const id = 1 + Math.floor(Math.random() * 65534);
    const parsed = parseReply(await ask(a, id), id);
    process.stdout.write(JSON.stringify({ line: a.line, host: a.host, parsed }) + '\n');
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  process.stderr.write(`${String((e as Error).stack ?? e)}\n`);
  process.exit(1);
});
