// An exception that nothing caught, reported the way Go's runtime reports an
// unrecovered panic: `panic: <value>`, a blank line, the goroutine's trace, and
// exit status 2. With the debug plugin on, CoreDNS does not recover a panic in a
// plugin and crashes exactly so; nodens's core rethrows such an exception
// outside the serving code (core/serve.ts) and the command line reports it here.

import { fileURLToPath } from 'node:url';

/** Go's exit status after an unrecovered panic. */
export const PANIC_EXIT_STATUS = 2;

/**
 * What Go's runtime prints on stderr for an unrecovered panic with `value`.
 * The value is printed as Go prints an error's Error() or a string (every
 * newline followed by a tab); the trace is the JavaScript stack in Go's layout
 * for frames whose arguments are not shown: `name(...)`, then a tab and
 * `file:line`. Node runs all of the serving on one thread: goroutine 1.
 */
export function goPanicText(value: unknown): string {
  const message = value instanceof Error ? value.message : String(value);
  let out = `panic: ${message.replaceAll('\n', '\n\t')}\n\ngoroutine 1 [running]:\n`;
  const stack = value instanceof Error && typeof value.stack === 'string' ? value.stack : '';
  for (const line of stack.split('\n')) {
    const frame = goFrame(line);
    if (frame !== undefined) out += frame;
  }
  return out;
}

/** One `    at …` line of a V8 stack as Go prints a frame; undefined for other lines. */
function goFrame(line: string): string | undefined {
  const m = /^\s+at (?:async )?(.*)$/.exec(line);
  if (m === null) return undefined;
  const at = m[1]!;
  // `name (location)` or a bare location (an anonymous function).
  const named = /^(.*?) \((.*)\)$/.exec(at);
  const name = named ? named[1]! : '<anonymous>';
  const location = named ? named[2]! : at;
  return `${name}(...)\n\t${goLocation(location)}\n`;
}

/** `file:///a/b.ts:12:5` → `/a/b.ts:12`; locations without a line (`native`, `<anonymous>`) as they are. */
function goLocation(location: string): string {
  const m = /^(.*):(\d+):\d+$/.exec(location);
  if (m === null) return location;
  let file = m[1]!;
  if (file.startsWith('file://')) {
    try {
      file = fileURLToPath(file);
    } catch { /* not a path: keep the URL */ }
  }
  return `${file}:${m[2]!}`;
}
