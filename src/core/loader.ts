// Which Corefile runs: -conf FILE (or stdin), else ./Corefile, else the
// built-in default — CoreDNS's order. Errors carry CoreDNS's wording.

import { readFileSync, statSync } from 'node:fs';

export interface CorefileInput {
  contents: string;
  /** Path as printed in error messages. */
  file: string;
}

/** CoreDNS's built-in default: answer everything with whoami and log it. */
export function defaultCorefile(port: string): CorefileInput {
  return { contents: `.:${port} {\nwhoami\nlog\n}\n`, file: 'Corefile' };
}

/**
 * Load the Corefile named by `-conf` (`stdin` reads standard input unless it is
 * a terminal), or ./Corefile, or the default. Throws with CoreDNS's message.
 */
export function loadCorefile(conf: string, port: string): CorefileInput {
  if (conf === 'stdin') {
    if (!process.stdin.isTTY) {
      try {
        return { contents: readFileSync(0, 'utf8'), file: '/dev/stdin' };
      } catch (e) {
        throw new Error(`loading Caddyfile via flag: ${errText(e)}`);
      }
    }
  } else if (conf !== '') {
    try {
      return { contents: readFileSync(conf, 'utf8'), file: conf };
    } catch (e) {
      throw new Error(`loading Caddyfile via flag: ${errText(e)}`);
    }
  }
  try {
    if (statSync('Corefile').isFile()) return { contents: readFileSync('Corefile', 'utf8'), file: 'Corefile' };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`loading default Caddyfile: ${errText(e)}`);
  }
  return defaultCorefile(port);
}

/** Go-style OS error text: `open /nope: no such file or directory`. */
export function errText(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  const reasons: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EACCES: 'permission denied',
    EISDIR: 'is a directory',
    ENOTDIR: 'not a directory',
  };
  if (err && typeof err.code === 'string' && reasons[err.code] !== undefined) {
    return `${err.syscall ?? 'open'} ${err.path ?? ''}: ${reasons[err.code]}`;
  }
  return err instanceof Error ? err.message : String(e);
}
