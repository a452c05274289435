// autopath's Corefile syntax (CoreDNS plugin/autopath/setup.go).

import { autopathMetrics } from './metrics.ts';
import { readFileSync } from 'node:fs';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { goLower, originsFromArgsOrServerBlock } from '../../corefile/address.ts';
import { isAutoPather } from '../pkg/autopath.ts';
import { parseResolvConfSearch } from '../pkg/resolvconf.ts';
import { fqdn } from '../../wire/name.ts';
import { AutoPath } from './autopath.ts';

/** What `autopath [ZONE...] RESOLV-CONF` configures (a later `autopath` line replaces an earlier one's zones). */
export interface AutoPathOptions {
  /** The zones autopath works in (the block's zones when none are given). */
  zones: string[];
  /**
   * `RESOLV-CONF` as a file: its search list, lower-cased and fully qualified, ending with the
   * empty-string sentinel (the name itself). Empty with `@PLUGIN`.
   */
  search: string[];
  /** `@PLUGIN`: the plugin of the block whose per-query search path is used ('' with a file). */
  plugin: string;
}

/** Go's error texts for the errno codes reading the file can fail with. */
const ERRNO_TEXT: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  ENOTDIR: 'not a directory',
  ELOOP: 'too many levels of symbolic links',
  ENAMETOOLONG: 'file name too long',
  EPERM: 'operation not permitted',
};

/** miekg dns.ClientConfigFromFile's search list, with its errors as Go prints them. */
function readSearch(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? '';
    // A directory opens in Go, and miekg ignores the failed read: an empty search list.
    if (code === 'EISDIR') return [];
    throw new Error(`failed to parse ${JSON.stringify(path)}: open ${path}: ${ERRNO_TEXT[code] ?? (e as Error).message}`);
  }
  return parseResolvConfSearch(text);
}

/** Reads every `autopath` line of the block: the last one counts. */
export function parse(c: SetupContext): AutoPathOptions {
  const d = c.dispenser;
  const o: AutoPathOptions = { zones: [], search: [], plugin: '' };
  while (d.next()) {
    const args = d.remainingArgs();
    if (args.length < 1) throw new Error('no resolv-conf specified');
    const resolv = args[args.length - 1]!;
    if (resolv.startsWith('@')) {
      o.plugin = resolv.slice(1);
    } else {
      o.search = readSearch(resolv).map((s) => goLower(fqdn(s)));
      o.search.push(''); // the sentinel: the name itself
    }
    o.zones = originsFromArgsOrServerBlock(args.slice(0, -1), c.config.keys);
  }
  return o;
}

export const plugin: PluginDefinition = {
  name: 'autopath',
  setup(c) {
    const o = parse(c);
    const ap = new AutoPath(o.zones, o.search, autopathMetrics(c.instance.metrics));
    // As CoreDNS: at startup, once every plugin of the block is in place. A plugin that is not in
    // the block leaves autopath without a search path (it does nothing), as in CoreDNS.
    c.onStartup(() => {
      if (o.plugin === '') return;
      const h = c.config.handlers.find((x) => x.name === o.plugin);
      if (h === undefined) return;
      if (!isAutoPather(h)) throw new Error(`plugin/autopath: ${o.plugin} does not implement the AutoPather interface`);
      ap.searchFunc = (req) => h.autoPath(req);
    });
    c.addPlugin((next) => { ap.next = next; return ap; });
  },
};
