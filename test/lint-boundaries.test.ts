// The lint rules that keep the architecture true (eslint.config.js) are tested here, so they cannot rot into rules
// that never fire: in-memory snippets linted as if they were files at the given paths (which need not exist).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CHECKED = new Set(['nodens/import-boundaries', 'no-restricted-properties', 'no-console']);

// Without type information (the paths are made up, the project service would not know them), so only the rules
// that need none run; the type-aware ones are checked through the configuration below.
const eslint = new ESLint({
  cwd: ROOT,
  overrideConfig: { languageOptions: { parserOptions: { projectService: false, project: null } } },
  ruleFilter: ({ ruleId }) => CHECKED.has(ruleId),
});

/** The rules that fire when `code` is linted as the file `file` (relative to the repository). */
async function fired(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: `${ROOT}${file}` });
  const fatal = result!.messages.filter((m) => m.fatal);
  assert.deepEqual(fatal, [], `parse error in the snippet for ${file}`);
  return result!.messages.map((m) => m.ruleId!);
}

const imp = (spec: string): string => `import { x } from '${spec}';\nexport const y = x;\n`;

async function forbidden(file: string, spec: string): Promise<void> {
  assert.deepEqual(await fired(file, imp(spec)), ['nodens/import-boundaries'], `${file} importing ${spec} should be refused`);
}
async function allowed(file: string, spec: string): Promise<void> {
  assert.deepEqual(await fired(file, imp(spec)), [], `${file} importing ${spec} should be allowed`);
}

test('wire imports nothing of ours outside src/wire', async () => {
  await allowed('src/wire/decode.ts', './name.ts');
  await allowed('src/wire/decode.ts', 'node:buffer');
  await forbidden('src/wire/decode.ts', '../corefile/token.ts');
  await forbidden('src/wire/decode.ts', '../core/log.ts');
  await forbidden('src/wire/decode.ts', '../plugin/plugin.ts');
});

test('corefile imports only corefile and wire', async () => {
  await allowed('src/corefile/parser.ts', './lexer.ts');
  await allowed('src/corefile/parser.ts', '../wire/name.ts');
  await forbidden('src/corefile/parser.ts', '../core/log.ts');
  await forbidden('src/corefile/parser.ts', '../plugin/plugin.ts');
});

test('core knows no plugin: the plugin contract only', async () => {
  await allowed('src/core/serve.ts', '../plugin/plugin.ts');
  await allowed('src/core/serve.ts', '../wire/types.ts');
  await allowed('src/core/serve.ts', '../corefile/parser.ts');
  await allowed('src/core/serve.ts', './request.ts');
  await forbidden('src/core/serve.ts', '../plugin/forward/forward.ts');
  await forbidden('src/core/serve.ts', '../plugin/pkg/next.ts');
  await forbidden('src/core/serve.ts', '../plugin/index.ts');
  await forbidden('src/core/serve.ts', '../cli/flags.ts');
  await forbidden('src/version.ts', './plugin/pkg/metrics.ts');
  // 'nodens' is the package itself (src/index.ts): not a way around the rule.
  await forbidden('src/core/serve.ts', 'nodens');
});

test('plugin/pkg: wire, corefile, the contract, core requests, and itself', async () => {
  await allowed('src/plugin/pkg/next.ts', '../plugin.ts');
  await allowed('src/plugin/pkg/next.ts', './zones.ts');
  await allowed('src/plugin/pkg/proxy/conn.ts', '../../../wire/encode.ts');
  await allowed('src/plugin/pkg/proxy/conn.ts', '../metrics.ts');
  await forbidden('src/plugin/pkg/httpserver.ts', '../../core/log.ts');
  await allowed('src/plugin/pkg/fall.ts', '../../corefile/address.ts');
  await forbidden('src/plugin/pkg/next.ts', '../../core/serve.ts');
  await forbidden('src/plugin/pkg/next.ts', '../cache/cache.ts');
  await forbidden('src/plugin/pkg/proxy/conn.ts', '../../forward/forward.ts');
  // the unit-test helper builds chains and Corefiles: it may use core
  await allowed('src/plugin/pkg/testing.ts', '../../core/registry.ts');
  await forbidden('src/plugin/pkg/testing.ts', '../hosts/hosts.ts');
});

test('a plugin imports its own folder, pkg, the contract, core requests, wire, corefile', async () => {
  const f = 'src/plugin/hosts/hosts.ts';
  await allowed(f, './hostsfile.ts');
  await allowed(f, '../pkg/zones.ts');
  await allowed(f, '../pkg/proxy/proxy.ts');
  await allowed(f, '../plugin.ts');
  await allowed(f, '../../core/request.ts');
  await forbidden(f, '../../core/log.ts');
  await allowed(f, '../../wire/types.ts');
  await allowed(f, '../../corefile/address.ts');
  await allowed(f, 'node:fs');
  await forbidden(f, '../forward/forward.ts');
  await forbidden(f, '../index.ts');
  await forbidden(f, '../../core/serve.ts');
  await forbidden(f, '../../core/instance.ts');
  await forbidden(f, '../../index.ts');
  await forbidden(f, '../../cli/main.ts');
  await forbidden(f, '../../../test/helpers/server.ts');
  // every way of naming a module counts
  assert.deepEqual(await fired(f, "export { x } from '../cache/cache.ts';\n"), ['nodens/import-boundaries']);
  assert.deepEqual(await fired(f, "export * from '../cache/cache.ts';\n"), ['nodens/import-boundaries']);
  assert.deepEqual(await fired(f, "export const m = () => import('../cache/cache.ts');\n"), ['nodens/import-boundaries']);
  assert.deepEqual(await fired(f, "export type C = typeof import('../cache/cache.ts');\n"), ['nodens/import-boundaries']);
  assert.deepEqual(await fired(f, "import type { Cache } from '../cache/cache.ts';\nexport type C = Cache;\n"), ['nodens/import-boundaries']);
});

test('a new plugin folder is covered without editing the config', async () => {
  const f = 'src/plugin/brandnew/brandnew.ts';
  await allowed(f, './setup.ts');
  await allowed(f, '../pkg/next.ts');
  await forbidden(f, '../hosts/hosts.ts');
  await forbidden(f, '../../core/loader.ts');
});

test("a plugin's tests may also use core, the package entry and test/helpers, but not another plugin", async () => {
  const f = 'src/plugin/hosts/hosts.test.ts';
  await allowed(f, '../../core/instance.ts');
  await allowed(f, '../../index.ts');
  await allowed(f, '../../../test/helpers/server.ts');
  await allowed(f, '../pkg/testing.ts');
  await forbidden(f, '../forward/setup.ts');
  await forbidden(f, '../../cli/main.ts');
});

test('plugin/index.ts lists the plugins; cli and index.ts may import anything of ours', async () => {
  await allowed('src/plugin/index.ts', './hosts/setup.ts');
  await forbidden('src/plugin/index.ts', '../core/serve.ts');
  await allowed('src/cli/main.ts', '../plugin/forward/resolvconf.ts');
  await allowed('src/cli/main.ts', '../core/runtime.ts');
  await allowed('src/index.ts', './core/instance.ts');
  // outside src: tests and benches are free; an example uses the public API only
  await allowed('test/e2e/x.test.ts', '../../src/core/serve.ts');
  await allowed('bench/x.ts', '../src/plugin/cache/cache.ts');
  await allowed('examples/external-plugin/x.ts', '../../src/index.ts');
  await allowed('examples/external-plugin/x.ts', 'nodens');
  await forbidden('examples/external-plugin/x.ts', '../../src/core/serve.ts');
});

test('process.exit only in src/cli; no console in library code', async () => {
  const exit = 'export function f(): void { process.exit(1); }\n';
  assert.deepEqual(await fired('src/core/runtime.ts', exit), ['no-restricted-properties']);
  assert.deepEqual(await fired('src/plugin/hosts/hosts.ts', 'export function f(): void { const { exit } = process; exit(1); }\n'), ['no-restricted-properties']);
  assert.deepEqual(await fired('src/wire/decode.test.ts', exit), ['no-restricted-properties']);
  assert.deepEqual(await fired('test/e2e/x.test.ts', exit), ['no-restricted-properties']);
  assert.deepEqual(await fired('src/cli/main.ts', exit), []);
  assert.deepEqual(await fired('test/k8s-api/server.ts', exit), []);
  assert.deepEqual(await fired('bench/serve.ts', exit), []);
  // setting the exit code is how library code and tests report failure
  assert.deepEqual(await fired('src/core/runtime.ts', 'export function f(): void { process.exitCode = 1; }\n'), []);
  const print = "export function f(): void { console.log('hi'); }\n";
  assert.deepEqual(await fired('src/plugin/hosts/hosts.ts', print), ['no-console']);
  assert.deepEqual(await fired('src/core/log.ts', print), ['no-console']);
  assert.deepEqual(await fired('src/cli/main.ts', print), []);
  assert.deepEqual(await fired('src/plugin/hosts/hosts.test.ts', print), []);
  assert.deepEqual(await fired('bench/x.ts', print), []);
});

test('the type-aware rules are on for every TypeScript folder', async () => {
  const full = new ESLint({ cwd: ROOT });
  for (const file of ['src/core/serve.ts', 'src/plugin/hosts/hosts.test.ts', 'test/e2e/core.test.ts', 'bench/run.ts', 'examples/external-plugin/run.ts']) {
    const config = await full.calculateConfigForFile(`${ROOT}${file}`) as { rules: Record<string, unknown[]> };
    for (const rule of ['@typescript-eslint/no-floating-promises', '@typescript-eslint/no-misused-promises',
      '@typescript-eslint/await-thenable', '@typescript-eslint/no-unused-vars', '@typescript-eslint/consistent-type-imports',
      'nodens/import-boundaries']) {
      assert.equal(config.rules[rule]?.[0], 2, `${rule} is an error in ${file}`);
    }
  }
});
