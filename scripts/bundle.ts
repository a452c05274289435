// Bundles the `nodens` command (src/cli/bin.ts) into dist/bundle/ with esbuild: what bin/nodens runs.
//
// Why: Node's module loaders pay per module (resolution, package.json lookups, reading, linking), and a server's
// start loaded ~150 of them (dist/ from tsc, prom-client, re2js, js-yaml). The bundle is one CommonJS file,
// dist/bundle/nodens.js (dist/bundle/package.json says `"type": "commonjs"`, so the path stays the one bin/nodens,
// the image's entrypoint and the docs name). One file and not ES module chunks: esbuild wraps every module that
// the entry does not need at once (each plugin, which src/plugin/index.ts imports on first use, the subcommands, the
// -workers primary, the metrics definitions) in a lazy initializer, and in CommonJS output a module's require() of
// a builtin sits inside that initializer, so node:http2, node:tls, node:child_process... load only with the plugin
// that uses them. (ES module output must hoist every `import` of a builtin to the top of the file, which is why the
// ES module bundle had to be code-split; its 37 chunks for the hosts-only start cost ~15 ms of the ESM loader, see
// docs/performance-notes.md.) @kubernetes/client-node (and mmdb-lib, read by geoip) stay outside the bundle: they
// are loaded from node_modules by the plugin that needs them, through import().
//
// tsc still builds dist/ for the library export (`import … from 'nodens'`) and its .d.ts; NODENS_BUNDLE=0 makes
// bin/nodens run dist/cli/bin.js (one ES module per source file) instead.
//
//   node scripts/bundle.ts                         (npm run build runs it after tsc)
//   BUNDLE_FORMAT=esm BUNDLE_DIR=bundle-esm node scripts/bundle.ts
//                     (for A/B runs: the earlier code-split ES module bundle, in dist/bundle-esm/; its entry is
//                     nodens.js there too)
import { build, type Plugin } from 'esbuild';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const outdir = path.join(root, 'dist', process.env.BUNDLE_DIR ?? 'bundle');
const esm = process.env.BUNDLE_FORMAT === 'esm';

/**
 * Three modules find a file of the package relative to their own URL (src/version.ts: ../package.json,
 * src/core/directives.ts: ../../coredns.version, src/native/index.ts: ../../build/native/<name>.node). In the bundle
 * their code runs from dist/bundle/, so `import.meta.url` in every module of ours is replaced by the URL its tsc
 * output has in dist/ (same depth below the package root as its source under src/): those relative paths keep
 * working, from wherever the package is installed. In CommonJS output that URL is made from __dirname by
 * `__nodensModuleUrl` (the banner defines it: a module's own `require` may be shadowed, native/index.ts's is).
 */
const moduleUrlAsInDist: Plugin = {
  name: 'module-url-as-in-dist',
  setup(b) {
    b.onLoad({ filter: /\/src\/.*\.ts$/ }, async (args) => {
      const { readFile } = await import('node:fs/promises');
      let text = await readFile(args.path, 'utf8');
      if (text.includes('import.meta.url')) {
        const distFile = path.relative(root, args.path).replace(/^src\//, 'dist/').replace(/\.ts$/, '.js');
        // dist/bundle/<file>.js -> the package root is two levels up.
        const rel = JSON.stringify(`../../${distFile}`);
        text = text.replaceAll('import.meta.url', esm ? `new URL(${rel}, import.meta.url).href` : `__nodensModuleUrl(${rel})`);
      }
      return { contents: text, loader: 'ts' };
    });
  },
};

/**
 * (ES module output only.) node:http, node:https, node:http2 and node:crypto are loaded with require(), not
 * `import`: an ES module import of a builtin goes through Node's ESM facade, which reads every export once, lazy
 * getters included. For node:http that loads undici (its WebSocket, MessageEvent... getters): measured alone,
 * `import 'node:http'` costs ~95 ms CPU and 17 MB RSS against ~14 ms and 4 MB for require('node:http'). Each static
 * import of these becomes a small CommonJS module `module.exports = require('node:x')`, so esbuild's interop reads
 * a named export where it is used, never all of them at load. CommonJS output requires every builtin anyway.
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
  splitting: esm,
  format: esm ? 'esm' : 'cjs',
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
  banner: {
    js: esm
      // CommonJS dependencies (prom-client) call require() for Node's builtins: give the ES module chunks one.
      ? "import { createRequire as __nodensRequire } from 'node:module'; const require = __nodensRequire(import.meta.url);"
      : 'var __nodensModuleUrl = (p) => require("node:url").pathToFileURL(require("node:path").join(__dirname, p)).href;',
  },
  chunkNames: '[name]-[hash]',
  plugins: esm ? [moduleUrlAsInDist, builtinsThroughRequire] : [moduleUrlAsInDist],
  metafile: true,
  logLevel: 'warning',
});
// The package is "type": "module"; the CommonJS bundle's .js files are CommonJS by this nearer package.json.
mkdirSync(outdir, { recursive: true });
if (!esm) writeFileSync(path.join(outdir, 'package.json'), '{ "type": "commonjs" }\n');

const outputs = Object.entries(result.metafile.outputs).filter(([f]) => f.endsWith('.js'));
const bytes = outputs.reduce((n, [, o]) => n + o.bytes, 0);
console.error(`nodens: bundle: ${outputs.length} files, ${(bytes / 1024).toFixed(0)} KiB of JavaScript in ${path.relative(root, outdir)}/`);
