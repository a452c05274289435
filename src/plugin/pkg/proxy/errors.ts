// Errors of one upstream attempt, worded as Go's net package words them
// (`read udp 127.0.0.1:40370->8.8.8.8:53: i/o timeout`), so the errors plugin
// logs what CoreDNS logs.

export type UpstreamErrorKind = 'timeout' | 'refused' | 'closed' | 'dial' | 'write' | 'other' | 'stopped' | 'case';

export class UpstreamError extends Error {
  readonly kind: UpstreamErrorKind;
  /** A reused connection turned out to be closed by the peer before anything was read (CoreDNS ErrCachedClosed). */
  readonly cachedClosed: boolean;
  constructor(kind: UpstreamErrorKind, message: string, cachedClosed = false) {
    super(message);
    this.name = 'UpstreamError';
    this.kind = kind;
    this.cachedClosed = cachedClosed;
  }
}

/** Go's texts for the errno codes sockets fail with. */
export function errnoText(e: unknown): string {
  const code = (e as NodeJS.ErrnoException | undefined)?.code ?? '';
  switch (code) {
    case 'ECONNREFUSED': return 'connection refused';
    case 'ECONNRESET': return 'connection reset by peer';
    case 'EPIPE': return 'broken pipe';
    case 'EHOSTUNREACH': return 'no route to host';
    case 'ENETUNREACH': return 'network is unreachable';
    case 'EADDRNOTAVAIL': return 'cannot assign requested address';
    case 'ETIMEDOUT': return 'i/o timeout';
    case 'EACCES': return 'permission denied';
    case 'EMFILE': return 'too many open files';
    case 'ENFILE': return 'too many open files in system';
    default: return e instanceof Error ? e.message : String(e);
  }
}

/**
 * A failed dial as Go words it: the system call that failed, then its error. Out of descriptors
 * (or buffers), socket(2) fails before any connect: `socket: too many open files`.
 */
export function dialFailure(e: unknown): string {
  const code = (e as NodeJS.ErrnoException | undefined)?.code ?? '';
  if (code === 'EMFILE' || code === 'ENFILE' || code === 'ENOBUFS') return `socket: ${errnoText(e)}`;
  return code.startsWith('E') ? `connect: ${errnoText(e)}` : errnoText(e);
}

export function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
