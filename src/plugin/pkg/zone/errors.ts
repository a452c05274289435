// Go's texts for the file-system errors CoreDNS prints (os.PathError: "open PATH: REASON").

/** Go's syscall error texts for the errno codes opening or examining a file can fail with. */
const ERRNO_TEXT: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EISDIR: 'is a directory',
  ENOTDIR: 'not a directory',
  ELOOP: 'too many levels of symbolic links',
  ENAMETOOLONG: 'file name too long',
  EIO: 'input/output error',
  EPERM: 'operation not permitted',
};

/** The reason of a Node file-system error as Go words it. */
export function goErrnoText(e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code ?? '';
  return ERRNO_TEXT[code] ?? (e as Error).message;
}

/** Go's `open PATH: REASON`. */
export function goOpenError(path: string, e: unknown): string {
  return `open ${path}: ${goErrnoText(e)}`;
}

/** Go's `read PATH: REASON` (reading a directory fails at read time in Go, at open time in Node). */
export function goReadError(path: string, e: unknown): string {
  return `read ${path}: ${goErrnoText(e)}`;
}
