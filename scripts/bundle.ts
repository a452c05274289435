// Bundles the `nodens` command (src/cli/bin.ts) into dist/bundle/ with esbuild: what bin/nodens runs.
//
// Why: Node's ESM loader pays per module (resolution, package.json lookups, linking), and a server's start loaded
// ~150 of them (dist/ from tsc, prom-client, re2js, js-yaml). The bundle is a handful of files. Code splitting keeps
// what a start does not need out of the first chunk: each plugin (src/plugin/index.ts imports it on first use), the
// metrics definitions, the subcommands (doctor, validate, node-cache) and the -workers primary stay chunks loaded by
// their dynamic import(). @kubernetes/client-node (and mmdb-lib, read by geoip) stay outside the bundle: they are
// loaded from node_modules by the plugin that needs them.
//
// tsc still builds dist/ for the library export (`import … from 'nodens'`) and its .d.ts; NODENS_BUNDLE=0 makes
// bin/nodens run dist/cli/bin.js (one module per source file) instead.
//
//   node scripts/bundle.ts          (npm run build runs it after tsc)
//   BUNDLE_SPLIT=0 BUNDLE_DIR=bundle1 node scripts/bundle.ts   (for A/B runs: one file, without code splitting,
//                                   in dist/bundle1/; measured slower to start for the quickstart Corefile)
import { build, type Plugin } from 'esbuild';
import { rmSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const outdir = path.join(root, 'dist', process.env.BUNDLE_DIR ?? 'bundle');

/**
 * Three modules find a file of the package relative to their own URL (src/version.ts: ../package.json,
 * src/core/directives.ts: ../../coredns.version, src/native/index.ts: ../../build/native/<name>.node). In the bundle
 * their code runs from a chunk in dist/bundle/, so `import.meta.url` in every module of ours is replaced by the URL
 * its tsc output has in dist/ (same depth below the package root as its source under src/): those relative paths
 * keep working, from wherever the package is installed.
 */
const moduleUrlAsInDist: Plugin = {
  name: 'module-url-as-in-dist',
  setup(b) {
    b.onLoad({ filter: /\/src\/.*\.ts$/ }, async (args) => {
      const { readFile } = await import('node:fs/promises');
      let text = await readFile(args.path, 'utf8');
      if (text.includes('import.meta.url')) {
        const distFile = path.relative(root, args.path).replace(/^src\//, 'dist/').replace(/\.ts$/, '.js');
        // dist/bundle/<chunk>.js -> the package root is two levels up.
        const expr = `new URL(${JSON.stringify(`../../${distFile}`)}, import.meta.url).href`;
        text = text.replaceAll('import.meta.url', expr);
      }
      return { contents: text, loader: 'ts' };
    });
  },
};

/**
 * node:http, node:https, node:http2 and node:crypto are loaded with require(), not `import`: an ES module import
 * of a builtin goes through Node's ESM facade, which reads every export once, lazy getters included. For node:http
 * that loads undici (its WebSocket, MessageEvent... getters): measured alone, `import 'node:http'` costs ~95 ms CPU
 * and 17 MB RSS against ~14 ms and 4 MB for require('node:http'); `import 'node:crypto'` loads webcrypto likewise.
 * Each static import of these becomes a small CommonJS module `module.exports = require('node:x')`, so esbuild's
 * interop reads a named export where it is used, never all of them at load. Only these four: routing every builtin
 * so cost the hosts-only server 4.7 MiB more idle RSS (measured, cause not found), these four none.
 */
const builtinsThroughRequire: Plugin = {
  name: 'builtins-through-require',
  setup(b) {
    // Static imports only: esbuild gives a dynamic import() of a CommonJS module nothing but its default export,
    // so `const { x } = await import('node:y')` (the lazily loaded builtins) stays Node's own import.
    b.onResolve({ filter: /^node:(http|https|http2|crypto)$/ }, (args) => (args.kind === 'import-statement' ? { path: args.path, namespace: 'builtin' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'builtin' }, (args) => ({ contents: `module.exports = require(${JSON.stringify(args.path)});`, loader: 'js' }));
  },
};

rmSync(outdir, { recursive: true, force: true });
const result = await build({
  absWorkingDir: root,
  entryPoints: { nodens: 'src/cli/bin.ts' },
  outdir,
  bundle: true,
  splitting: process.env.BUNDLE_SPLIT !== '0',
  format: 'esm',
  platform: 'node',
  target: 'node24',
  // Linked maps with the sources inlined (the package ships no src/): `node --enable-source-maps` (or
  // NODE_OPTIONS) makes stack traces point at src/. Not on by default: it costs start-up time.
  sourcemap: 'linked',
  sourcesContent: false,
  // Whitespace and syntax only: identifiers keep their names (stack traces, class names in messages).
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: 'eof',
  external: ['@kubernetes/client-node', 'mmdb-lib'],
  // CommonJS dependencies (prom-client) call require() for Node's builtins: give the ES module chunks one.
  banner: { js: "import { createRequire as __nodensRequire } from 'node:module'; const require = __nodensRequire(import.meta.url);" },
  chunkNames: '[name]-[hash]',
  plugins: [moduleUrlAsInDist, builtinsThroughRequire],
  metafile: true,
  logLevel: 'warning',
});

const outputs = Object.entries(result.metafile.outputs).filter(([f]) => f.endsWith('.js'));
const bytes = outputs.reduce((n, [, o]) => n + o.bytes, 0);
console.error(`nodens: bundle: ${outputs.length} files, ${(bytes / 1024).toFixed(0)} KiB of JavaScript in ${path.relative(root, outdir)}/`);
