// The first module `bin/nodens` runs: refuses a Node.js too old for nodens with
// a plain message, before any module that needs Node 24 is loaded (static
// imports would be evaluated before a check written in main.ts). No top-level
// await here or in main.ts: the bundle bin/nodens runs is CommonJS
// (scripts/bundle.ts), and a rejection still ends the process as an uncaught
// exception does.

const MIN_NODE_MAJOR = 24;
const major = Number(process.versions.node.split('.')[0]);
if (!(major >= MIN_NODE_MAJOR)) {
  process.stderr.write(`nodens needs Node.js ${MIN_NODE_MAJOR} or newer; ${process.execPath} is ${process.version}.\n`
    + 'Install Node.js 24 LTS, or put a newer `node` first on PATH.\n');
  process.exit(1);
}
void import('./main.ts');
