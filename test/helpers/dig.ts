// Real third-party clients for end-to-end tests. A missing tool is a loud
// failure (CI installs dnsutils and knot-dnsutils), never a skipped test.

import { execFile } from 'node:child_process';

/**
 * Debian's Python, where `.ci/run`'s apt packages (python3-dnspython, python3-httpx, python3-h2) install: the
 * `python3` first on PATH may be another interpreter without them (pyenv's, on this machine image).
 */
export const DEBIAN_PYTHON = '/usr/bin/python3';

function run(tool: string, args: string[], timeoutMs = 10000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(tool, args, { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') {
        reject(new Error(`${tool} is not installed: apt-get install -y ${tool === 'kdig' ? 'knot-dnsutils' : 'dnsutils'}`));
        return;
      }
      // dig exits 9 on no reply, 10/1 on usage; tests look at the text.
      if (err && stdout === '') { reject(new Error(`${tool} ${args.join(' ')} failed: ${stderr || err.message}`)); return; }
      resolve(stdout);
    });
  });
}

/** `dig @127.0.0.1 -p PORT ARGS...` with short timeouts and one try. */
export function dig(port: number, ...args: string[]): Promise<string> {
  return run('dig', ['@127.0.0.1', '-p', String(port), '+time=2', '+tries=1', ...args]);
}

/** `kdig @127.0.0.1 -p PORT ARGS...` */
export function kdig(port: number, ...args: string[]): Promise<string> {
  return run('kdig', ['@127.0.0.1', '-p', String(port), '+time=2', '+retry=0', ...args]);
}

/** The status word of a dig/kdig reply (`NOERROR`, `REFUSED`, ...). */
export function status(out: string): string | undefined {
  return /status: ([A-Z0-9]+)/.exec(out)?.[1];
}

/** The flags of a dig/kdig reply header, e.g. ['qr', 'aa', 'rd']. */
export function flags(out: string): string[] {
  const m = /;; flags: ([a-z ]*);/.exec(out) ?? /;; Flags: ([a-z ]*);/.exec(out);
  return m ? m[1]!.trim().split(/\s+/).filter(Boolean).sort() : [];
}
