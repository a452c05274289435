import { statSync } from 'node:fs';
import type { PluginDefinition, SetupContext } from '../plugin.ts';

/** Go's syscall error texts for the errno codes stat can fail with. */
const ERRNO_TEXT: Record<string, string> = {
  EACCES: 'permission denied',
  ENOTDIR: 'not a directory',
  ELOOP: 'too many levels of symbolic links',
  ENAMETOOLONG: 'file name too long',
  EIO: 'input/output error',
  EPERM: 'operation not permitted',
};

/** What `root PATH` configures. */
export interface RootOptions {
  /** The directory relative paths of the block's file plugins are resolved against (the last line wins). */
  path: string;
}

/**
 * Reads the block's `root` lines. A PATH that does not exist only draws a warning (it may appear
 * later); one that cannot be examined is an error.
 */
export function parse(c: SetupContext): RootOptions {
  const d = c.dispenser;
  let path = c.config.root;
  while (d.next()) {
    if (!d.nextArg()) throw d.argErr();
    path = d.val();
  }
  try {
    statSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? '';
    if (code !== 'ENOENT') {
      throw d.errf(`unable to access root path '${path}': stat ${path}: ${ERRNO_TEXT[code] ?? (e as Error).message}`);
    }
    c.log.warning(`Root path does not exist: ${path}`);
  }
  return { path };
}

export const plugin: PluginDefinition = {
  name: 'root',
  setup(c) {
    const { path } = parse(c);
    c.config.root = path;
  },
};
