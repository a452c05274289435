// Which Corefile runs: -conf FILE (or stdin), else ./Corefile, else the
// built-in default — CoreDNS's order. Errors carry CoreDNS's wording.

import { closeSync, openSync, readFileSync } from 'node:fs';
import { goClean } from '../corefile/gopath.ts';

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
      // Go's os.Stdin is named /dev/stdin, which its read errors print.
      try {
        return { contents: readFd(0, '/dev/stdin'), file: '/dev/stdin' };
      } catch (e) {
        throw new Error(`loading Caddyfile via flag: ${errText(e)}`);
      }
    }
  } else if (conf !== '') {
    try {
      // CoreDNS opens the cleaned path; the Corefile's own messages keep the path as given.
      return { contents: readFileGo(goClean(conf)), file: conf };
    } catch (e) {
      throw new Error(`loading Caddyfile via flag: ${errText(e)}`);
    }
  }
  // CoreDNS's defaultLoader: only a ./Corefile that does not exist means the default; any other failure (a
  // directory, no permission) ends the start-up with the bare *PathError text, which caddy does not prefix.
  try {
    return { contents: readFileGo('Corefile'), file: 'Corefile' };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(errText(e));
  }
  return defaultCorefile(port);
}

/**
 * Go's os.ReadFile: open, then read to the end. An error carries the step that failed and `name`
 * (Node's EISDIR comes from the read and names no path), so errText prints `open NAME: …` or `read NAME: …`.
 */
function readFileGo(name: string): string {
  let fd: number;
  try {
    fd = openSync(name, 'r');
  } catch (e) {
    throw Object.assign(e as NodeJS.ErrnoException, { syscall: 'open', path: name });
  }
  try {
    return readFd(fd, name);
  } finally {
    closeSync(fd);
  }
}

/** Read an open file to the end; an error is `read NAME: …`. */
function readFd(fd: number, name: string): string {
  try {
    return readFileSync(fd, 'utf8');
  } catch (e) {
    throw Object.assign(e as NodeJS.ErrnoException, { syscall: 'read', path: name });
  }
}

/** Go-style OS error text: `open /nope: no such file or directory`. */
export function errText(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  const reasons: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EACCES: 'permission denied',
    EISDIR: 'is a directory',
    ENOTDIR: 'not a directory',
    ELOOP: 'too many levels of symbolic links',
    ENAMETOOLONG: 'file name too long',
    ENXIO: 'no such device or address',
    EPERM: 'operation not permitted',
    EMFILE: 'too many open files',
    ENFILE: 'too many open files in system',
  };
  if (err && typeof err.code === 'string' && reasons[err.code] !== undefined) {
    return `${err.syscall ?? 'open'} ${err.path ?? ''}: ${reasons[err.code]}`;
  }
  return err instanceof Error ? err.message : String(e);
}
