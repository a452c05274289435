// Versions printed by -version and the startup banner.
import { readFileSync } from 'node:fs';
import { COREDNS_VERSION } from './core/directives.ts';

export { COREDNS_VERSION };

export const NODENS_VERSION: string = (() => {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
})();

/** Go's GOOS/GOARCH spelling of this platform. */
export function platform(): string {
  const arch: Record<string, string> = { x64: 'amd64', ia32: '386', arm64: 'arm64', arm: 'arm' };
  return `${process.platform}/${arch[process.arch] ?? process.arch}`;
}

/** The two version lines: CoreDNS's first line (what nodens is compatible with), then the runtime. */
export function versionLines(): [string, string] {
  return [`CoreDNS-${COREDNS_VERSION}`, `${platform()}, node-${process.version}, nodens-${NODENS_VERSION}`];
}
