#!/usr/bin/env node
// Builds nodens's optional native addons: every native/<name>.c becomes build/native/<name>.node.
//
// Plain JavaScript (not TypeScript) because it runs at `npm install` of the published package, where Node does not
// strip types from files under node_modules. The addons use Node-API only (ABI-stable), so one C compiler call per
// file is the whole build: no node-gyp, no Python, no download of headers.
//
// The addons are an optimisation, never a requirement: on a machine without a C compiler, or not on Linux, the
// build says so and exits 0, and nodens runs its pure-Node paths. NODENS_REQUIRE_NATIVE=1 (CI) turns that into an
// error, so the tests are known to cover the native paths.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const sources = path.join(root, 'native');
const out = path.join(root, 'build', 'native');
const required = process.env.NODENS_REQUIRE_NATIVE === '1';

function skip(why) {
  if (required) {
    console.error(`nodens: native addons: ${why} (NODENS_REQUIRE_NATIVE=1)`);
    process.exit(1);
  }
  console.error(`nodens: native addons not built (${why}); the pure-Node paths are used`);
  process.exit(0);
}

/** Node-API headers: those of the running Node (node_api.h is stable across versions), or $npm_config_nodedir's. */
function includeDir() {
  const candidates = [
    path.join(path.dirname(process.execPath), '..', 'include', 'node'),
    process.env.npm_config_nodedir && path.join(process.env.npm_config_nodedir, 'include', 'node'),
    '/usr/include/node',
  ].filter(Boolean);
  return candidates.find((dir) => existsSync(path.join(dir, 'node_api.h')));
}

if (process.platform !== 'linux') skip(`recvmmsg and sendmmsg are Linux system calls; this is ${process.platform}`);
if (process.env.NODENS_NATIVE === '0') skip('NODENS_NATIVE=0');
const files = existsSync(sources) ? readdirSync(sources).filter((f) => f.endsWith('.c')) : [];
if (files.length === 0) process.exit(0);
const include = includeDir();
if (!include) skip('no node_api.h found next to this Node or in $npm_config_nodedir');
const cc = process.env.CC || 'cc';
mkdirSync(out, { recursive: true });
for (const file of files) {
  const src = path.join(sources, file);
  const target = path.join(out, file.replace(/\.c$/, '.node'));
  if (existsSync(target) && statSync(target).mtimeMs >= statSync(src).mtimeMs) continue;
  const args = ['-std=gnu11', '-O2', '-Wall', '-Wextra', '-Werror', '-fPIC', '-shared', '-fvisibility=hidden',
    '-DNAPI_VERSION=8', '-I', include, '-o', target, src];
  try {
    execFileSync(cc, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  } catch (err) {
    skip(`${cc} ${file} failed: ${err.code === 'ENOENT' ? `no C compiler (${cc})` : `exit ${err.status}`}`);
  }
}
