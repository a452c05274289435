import { hostsMetrics } from './metrics.ts';
import { statSync } from 'node:fs';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { originsFromArgsOrServerBlock } from '../../corefile/address.ts';
import { parseDuration, toMillis } from '../pkg/duration.ts';
import { Fall } from '../pkg/fall.ts';
import { Hosts, Hostsfile } from './hosts.ts';

/** Go's syscall error texts for the errno codes stat can fail with. */
const ERRNO_TEXT: Record<string, string> = {
  EACCES: 'permission denied',
  ENOTDIR: 'not a directory',
  ELOOP: 'too many levels of symbolic links',
  ENAMETOOLONG: 'file name too long',
  EIO: 'input/output error',
  EPERM: 'operation not permitted',
};

/** Go's strconv.Atoi acceptance: optional sign, decimal digits only. */
function atoi(s: string): number | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** What `hosts [FILE [ZONES...]] { ... }` configures. */
export interface HostsOptions {
  /** The hosts file (default /etc/hosts). */
  path: string;
  /** The zones answered (the block's zones when none are given). */
  origins: string[];
  /** TTL of the answers, in seconds (`ttl`, default 3600). */
  ttl: number;
  /** Answer PTR queries from the entries too (false with `no_reverse`). */
  autoReverse: boolean;
  /** How often the file is re-read, in nanoseconds (`reload`, default 5s; 0: never). */
  reload: bigint;
  /** `fallthrough [ZONES...]`. */
  fall: Fall;
  /** `fallthrough_unsupported`: also pass on query types hosts cannot answer. */
  fallthroughUnsupported: boolean;
  /** Entries written in the block (`IP NAME...` lines), as read. */
  inline: string[];
}

/**
 * Reads the block's `hosts` directive (once per block). A FILE that does not
 * exist or is a directory only draws a warning, as in CoreDNS; one that cannot
 * be examined is an error.
 */
export function parse(c: SetupContext): HostsOptions {
  const d = c.dispenser;
  const o: HostsOptions = {
    path: '/etc/hosts', origins: [], ttl: 3600, autoReverse: true, reload: 5000000000n, fall: new Fall(),
    fallthroughUnsupported: false, inline: [],
  };
  let i = 0;
  while (d.next()) {
    if (i > 0) throw new Error('plugin/hosts: this plugin can only be used once per Server Block');
    i++;
    let args = d.remainingArgs();
    if (args.length >= 1) {
      const path = args[0];
      o.path = path;
      args = args.slice(1);
      try {
        if (statSync(path).isDirectory()) c.log.warning(`Hosts file ${JSON.stringify(path)} is a directory`);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code ?? '';
        if (code !== 'ENOENT') {
          throw d.errf(`unable to access hosts file '${path}': stat ${path}: ${ERRNO_TEXT[code] ?? (e as Error).message}`);
        }
        c.log.warning(`File does not exist: ${path}`);
      }
    }
    o.origins = originsFromArgsOrServerBlock(args, c.config.keys);
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'fallthrough':
          o.fall.setZonesFromArgs(d.remainingArgs());
          break;
        case 'fallthrough_unsupported':
          if (d.remainingArgs().length !== 0) throw d.argErr();
          o.fallthroughUnsupported = true;
          break;
        case 'no_reverse':
          o.autoReverse = false;
          break;
        case 'ttl': {
          const rest = d.remainingArgs();
          if (rest.length < 1) throw d.errf('ttl needs a time in second');
          const n = atoi(rest[0]);
          if (n === undefined) throw d.errf('ttl needs a number of second');
          if (n <= 0 || n > 65535) throw d.errf('ttl provided is invalid');
          o.ttl = n;
          break;
        }
        case 'reload': {
          const rest = d.remainingArgs();
          if (rest.length !== 1) throw d.errf('reload needs a duration (zero seconds to disable)');
          let v: bigint;
          try {
            v = parseDuration(rest[0]);
          } catch {
            throw d.errf(`invalid duration for reload '${rest[0]}'`);
          }
          if (v < 0n) throw d.errf(`invalid negative duration for reload '${rest[0]}'`);
          o.reload = v;
          break;
        }
        default: {
          if (!o.fall.enabled) {
            o.inline.push([d.val(), ...d.remainingArgs()].join(' '));
            continue;
          }
          throw d.errf(`unknown property '${d.val()}'`);
        }
      }
    }
  }
  if (o.fallthroughUnsupported && !o.fall.enabled) throw d.err('fallthrough_unsupported requires fallthrough');
  return o;
}

export const plugin: PluginDefinition = {
  name: 'hosts',
  setup(c) {
    const { path, origins, ttl, autoReverse, reload, fall, fallthroughUnsupported, inline } = parse(c);

    const file = new Hostsfile(path, origins, autoReverse, inline, c.log, hostsMetrics(c.instance.metrics));
    const reloadMs = toMillis(reload);
    let timer: NodeJS.Timeout | undefined;
    c.onStartup(() => {
      file.readHosts();
      if (reloadMs > 0 && timer === undefined) {
        timer = setInterval(() => { file.readHosts(); }, reloadMs);
        timer.unref();
      }
    });
    c.onShutdown(() => {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
    });
    c.addPlugin((next) => new Hosts(next, file, { ttl, fall, fallthroughUnsupported }));
  },
};
