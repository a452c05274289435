// Releases the resident pages of clean, read-only file mappings (native/memory.c): after start-up and after each
// reload, the code and data of Node's binary that only starting touched stop counting in the process's RSS.
import { loadNative } from './index.ts';

interface MemoryAddon {
  release(dataOnly?: boolean): number;
}

let addon: MemoryAddon | undefined | null = null;

/**
 * kB released; 0 when nothing was, or the addon is absent (another OS, no C compiler, NODENS_NATIVE=0). `dataOnly`
 * leaves the binary's code alone: the pages a start is about to run again.
 */
export function releaseCleanPages(dataOnly = false): number {
  if (addon === null) addon = loadNative<MemoryAddon>('memory');
  return addon?.release(dataOnly) ?? 0;
}
