/**
 * Loads nodens's optional native addons (build/native/<name>.node, built from native/<name>.c by
 * scripts/build-native.mjs at `npm install`/`npm run build`). Every caller has a pure-Node path for when an addon is
 * absent: another OS, no C compiler at install, or NODENS_NATIVE=0 (which the tests use to cover both paths).
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);

/** Why the last load of each addon failed, for the start-up log line that says which path a server runs. */
const failures = new Map<string, string>();

/**
 * The addon `name`, or undefined when it is not available (the reason is kept for {@link nativeUnavailable}). The
 * path is the same from src/native (the TypeScript sources the tests run) and dist/native (the build).
 */
export function loadNative<T>(name: string): T | undefined {
  if (process.env.NODENS_NATIVE === '0') {
    failures.set(name, 'NODENS_NATIVE=0');
    return undefined;
  }
  const file = fileURLToPath(new URL(`../../build/native/${name}.node`, import.meta.url));
  try {
    return require(file) as T;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    failures.set(name, code === 'MODULE_NOT_FOUND' ? `${file} not built` : (err as Error).message);
    return undefined;
  }
}

/** Why `name` could not be loaded, or undefined if it loaded (or was never asked for). */
export function nativeUnavailable(name: string): string | undefined {
  return failures.get(name);
}
