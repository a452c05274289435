// ESLint flat config: a few type-aware correctness rules, and the import boundaries of docs/architecture.md.
// `npm run lint` runs it; `npm test` runs it after the typecheck. No stylistic rule: formatting is not linted.
import path from 'node:path';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

const ROOT = import.meta.dirname;

// ---- import boundaries --------------------------------------------------------------------------------------
// Layers depend one way: wire <- corefile <- core <- plugin/<name> <- cli. Every import of a file of ours is
// resolved to a path under the repository and checked against the importing file's layer below. The layers are
// derived from the path, so a new plugin folder is covered without editing this file.

/** What of core a plugin (or the shared plugin helpers) may use: the request type, and the version constants. Logging comes through the setup context. */
const CORE_FOR_PLUGINS = ['src/core/request.ts', 'src/core/directives.ts', 'src/version.ts'];
/** What a plugin's own tests may use on top of what the plugin may: the server itself and the test helpers. */
const TEST_EXTRAS = ['src/core/', 'src/index.ts', 'test/helpers/'];

/** An allow-list entry ending in '/' is a folder (everything below it), otherwise one file. */
const allows = (list, target) => list.some((a) => (a.endsWith('/') ? target.startsWith(a) : target === a));

/**
 * The layer of a file (path relative to the repository, '/'-separated) and the files it may import; null when the
 * file's imports are not restricted.
 * @param {string} file
 * @returns {{ layer: string, allowed: string[] } | null}
 */
function boundaryOf(file) {
  const test = file.endsWith('.test.ts');
  const withTests = (list) => (test ? [...list, ...TEST_EXTRAS] : list);
  if (file.startsWith('src/wire/')) return { layer: 'src/wire', allowed: ['src/wire/'] };
  // The native addons' loader depends on nothing of ours; core and plugins may both use it.
  if (file.startsWith('src/native/')) return { layer: 'src/native', allowed: ['src/native/'] };
  if (file.startsWith('src/corefile/')) return { layer: 'src/corefile', allowed: ['src/corefile/', 'src/wire/'] };
  // core knows no plugin: the plugin contract (plugin.ts) only, not even the shared helpers in plugin/pkg.
  if (file.startsWith('src/core/') || file === 'src/version.ts') {
    return { layer: 'src/core', allowed: ['src/core/', 'src/version.ts', 'src/wire/', 'src/native/', 'src/corefile/', 'src/plugin/plugin.ts'] };
  }
  const base = ['src/wire/', 'src/native/', 'src/corefile/', 'src/plugin/plugin.ts', ...CORE_FOR_PLUGINS];
  if (file === 'src/plugin/plugin.ts') return { layer: 'src/plugin/plugin.ts', allowed: base };
  if (file === 'src/plugin/index.ts') return { layer: 'src/plugin/index.ts', allowed: ['src/plugin/', ...base] };
  // testing.ts builds requests, chains and Corefiles for the plugins' unit tests: it may use core like a test.
  if (file === 'src/plugin/pkg/testing.ts') return { layer: 'src/plugin/pkg/testing.ts', allowed: [...base, 'src/plugin/pkg/', 'src/core/'] };
  const plugin = /^src\/plugin\/([^/]+)\//.exec(file);
  if (plugin) {
    const own = `src/plugin/${plugin[1]}/`;
    // src/plugin/pkg/ is the shared helpers' own folder; any other name is one plugin, which may use pkg too.
    return { layer: own.slice(0, -1), allowed: withTests([own, 'src/plugin/pkg/', ...base]) };
  }
  // src/cli and src/index.ts may import anything of ours under src/.
  if (file.startsWith('src/')) return { layer: 'src', allowed: ['src/'] };
  // An example is written the way a user would: against the public API (src/index.ts, the package's export).
  if (file.startsWith('examples/')) return { layer: 'examples', allowed: ['examples/', 'src/index.ts'] };
  return null;
}

/** The repository path a specifier names, or null for node: builtins and other packages. */
function resolveSpecifier(spec, fromFile) {
  if (spec === 'nodens') return 'src/index.ts';
  if (spec.startsWith('nodens/')) return 'src/' + spec.slice('nodens/'.length);
  if (!spec.startsWith('./') && !spec.startsWith('../') && spec !== '.' && spec !== '..') return null;
  return path.relative(ROOT, path.resolve(path.dirname(fromFile), spec)).split(path.sep).join('/');
}

const importBoundaries = {
  meta: {
    type: 'problem',
    docs: { description: 'Keep the layers of docs/architecture.md: each folder imports only what its layer may' },
    schema: [],
    messages: {
      forbidden: "{{layer}} may not import '{{spec}}' ({{target}}); it may import only: {{allowed}}",
      selfReference: "'{{spec}}' is this package: inside src, import the file itself",
    },
  },
  create(context) {
    const file = path.relative(ROOT, context.filename).split(path.sep).join('/');
    const boundary = boundaryOf(file);
    if (!boundary) return {};
    const check = (source) => {
      if (!source || source.type !== 'Literal' || typeof source.value !== 'string') return;
      const spec = source.value;
      const target = resolveSpecifier(spec, context.filename);
      if (target === null) return;
      const self = spec === 'nodens' || spec.startsWith('nodens/');
      // Inside src a file imports files; 'nodens' (the package's export) is for examples and tests.
      if (self && file.startsWith('src/')) {
        context.report({ node: source, messageId: 'selfReference', data: { spec } });
        return;
      }
      if (self && file.startsWith('examples/')) return;
      if (allows(boundary.allowed, target)) return;
      context.report({
        node: source,
        messageId: 'forbidden',
        data: { layer: boundary.layer, spec, target, allowed: boundary.allowed.join(', ') },
      });
    };
    return {
      ImportDeclaration: (node) => check(node.source),
      ExportAllDeclaration: (node) => check(node.source),
      ExportNamedDeclaration: (node) => check(node.source),
      ImportExpression: (node) => check(node.source),
      TSImportType: (node) => check(node.argument?.type === 'TSLiteralType' ? node.argument.literal : node.argument),
    };
  },
};

// ---- rules --------------------------------------------------------------------------------------------------

// process.exit belongs to the CLI (flags, signals, exit codes). Library code that exits takes down an embedding
// application, and a test file that exits cuts node:test's report short. Stand-alone programs under test/ (a fake
// API server run as a child), bench/ and examples/ may exit.
const noProcessExit = [
  'error',
  { object: 'process', property: 'exit', message: 'Only src/cli exits the process; return an error or set process.exitCode.' },
];

export default defineConfig([
  { ignores: ['node_modules/', '.cache/', 'tmp/', 'dist/'] },
  {
    files: ['**/*.ts'],
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: ROOT },
    },
    plugins: { '@typescript-eslint': tseslint.plugin, nodens: { rules: { 'import-boundaries': importBoundaries } } },
    rules: {
      'nodens/import-boundaries': 'error',
      // Promises: an unhandled rejection ends a Node process, so every promise is awaited, returned, caught or
      // explicitly discarded with `void` (and the reason written beside it). node:test's test()/describe() promises
      // never reject (a failure is reported, not thrown), so calling them bare is fine; `t.test()` is still checked.
      '@typescript-eslint/no-floating-promises': ['error', {
        allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] }],
      }],
      // An async callback where a void one is expected (an event listener, setTimeout, forEach) drops its rejection.
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unused-vars': ['error', {
        args: 'after-used',
        argsIgnorePattern: '^_',
        varsIgnorePattern: '^_',
        caughtErrorsIgnorePattern: '^_',
        destructuredArrayIgnorePattern: '^_',
        ignoreRestSiblings: true,
      }],
      // verbatimModuleSyntax keeps every import not marked as a type: a class imported only for its type would
      // still be loaded at run time (a needless edge in the module graph, and a cycle waiting to happen). Mark such
      // imports `import type`. `typeof import('x')` in a type is erased anyway, so it stays allowed.
      '@typescript-eslint/consistent-type-imports': ['error', {
        prefer: 'type-imports', fixStyle: 'inline-type-imports', disallowTypeAnnotations: false,
      }],
      // `import { type A } from 'x'` still loads 'x' under verbatimModuleSyntax; `import type { A }` does not.
      '@typescript-eslint/no-import-type-side-effects': 'error',
      // `==` only against null (matching null and undefined at once).
      eqeqeq: ['error', 'always', { null: 'ignore' }],
    },
  },
  {
    // Library code logs through src/core/log.ts (CoreDNS's prefixes, a sink an embedder can replace), never the
    // console; src/cli prints (-version, -plugins, usage).
    files: ['src/**/*.ts'],
    ignores: ['src/cli/**', 'src/**/*.test.ts'],
    rules: { 'no-console': 'error' },
  },
  {
    files: ['src/**/*.ts', '**/*.test.ts'],
    ignores: ['src/cli/**'],
    rules: { 'no-restricted-properties': noProcessExit },
  },
]);
