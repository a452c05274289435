// The first module `bin/nodens` runs: refuses a Node.js too old for nodens with
// a plain message, before any module that needs Node 24 is loaded (static
// imports would be evaluated before a check written in main.ts). No top-level
// await here or in main.ts: the bundle bin/nodens runs is CommonJS
// (scripts/bundle.ts), and a rejection still ends the process as an uncaught
// exception does.

import { setFlagsFromString } from 'node:v8'; // (a builtin of every Node, old ones too)

const MIN_NODE_MAJOR = 24;
const major = Number(process.versions.node.split('.')[0]);
if (!(major >= MIN_NODE_MAJOR)) {
  process.stderr.write(`nodens needs Node.js ${MIN_NODE_MAJOR} or newer; ${process.execPath} is ${process.version}.\n`
    + 'Install Node.js 24 LTS, or put a newer `node` first on PATH.\n');
  process.exit(1);
}
// Full collections when the old generation has grown by half since the last one, instead of V8's factor of up to
// four for a fast-allocating program: a forwarding server promotes ~1 KB of short-lived state per query, so its
// old generation swung between 10 and 40 MB (peak RSS 130 MiB forwarding at 25k q/s, 98 MiB with this) for a
// few milliseconds of marking more per second. A node flag (`node --heap-growing-percent=N`) wins.
if (!process.execArgv.some((a) => /^--heap[-_]growing[-_]percent=/.test(a))) {
  setFlagsFromString('--heap-growing-percent=50');
}
void import('./main.ts');
