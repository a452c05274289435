import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { originsFromArgsOrServerBlock } from '../../corefile/address.ts';
import { isMetadataProvider } from '../pkg/metadata.ts';
import { Metadata } from './metadata.ts';

/** What `metadata [ZONES...]` configures. */
export interface MetadataOptions {
  /** The zones for which providers are asked (the block's zones without arguments). */
  zones: string[];
}

/**
 * Reads the block's one `metadata` line. As in CoreDNS, anything after it (a second `metadata` line,
 * a block with content) is `Wrong argument count`.
 */
export function parse(c: SetupContext): MetadataOptions {
  const d = c.dispenser;
  d.next();
  const zones = originsFromArgsOrServerBlock(d.remainingArgs(), c.config.keys);
  if (d.nextBlock() || d.next()) throw d.argErr();
  return { zones };
}

export const plugin: PluginDefinition = {
  name: 'metadata',
  setup(c) {
    const o = parse(c);
    let m: Metadata | undefined;
    c.addPlugin((next) => (m = new Metadata(o.zones, next)));
    c.config.setMetadataCollector((req) => { m?.collect(req); });
    c.onStartup(() => {
      if (m === undefined) return;
      m.providers = c.config.handlers.filter(isMetadataProvider);
    });
  },
};
