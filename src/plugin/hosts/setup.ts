import { statSync } from 'node:fs';
import type { PluginDefinition } from '../plugin.ts';
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

export const plugin: PluginDefinition = {
  name: 'hosts',
  setup(c) {
    const d = c.dispenser;
    let path = '/etc/hosts';
    let origins: string[] = [];
    let ttl = 3600;
    let autoReverse = true;
    let reload = 5000000000n;
    const fall = new Fall();
    let fallthroughUnsupported = false;
    const inline: string[] = [];
    let i = 0;
    while (d.next()) {
      if (i > 0) throw new Error('plugin/hosts: this plugin can only be used once per Server Block');
      i++;
      let args = d.remainingArgs();
      if (args.length >= 1) {
        path = args[0];
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
      origins = originsFromArgsOrServerBlock(args, c.config.keys);
      while (d.nextBlock()) {
        switch (d.val()) {
          case 'fallthrough':
            fall.setZonesFromArgs(d.remainingArgs());
            break;
          case 'fallthrough_unsupported':
            if (d.remainingArgs().length !== 0) throw d.argErr();
            fallthroughUnsupported = true;
            break;
          case 'no_reverse':
            autoReverse = false;
            break;
          case 'ttl': {
            const rest = d.remainingArgs();
            if (rest.length < 1) throw d.errf('ttl needs a time in second');
            const n = atoi(rest[0]);
            if (n === undefined) throw d.errf('ttl needs a number of second');
            if (n <= 0 || n > 65535) throw d.errf('ttl provided is invalid');
            ttl = n;
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
            reload = v;
            break;
          }
          default: {
            if (!fall.enabled) {
              inline.push([d.val(), ...d.remainingArgs()].join(' '));
              continue;
            }
            throw d.errf(`unknown property '${d.val()}'`);
          }
        }
      }
    }
    if (fallthroughUnsupported && !fall.enabled) throw d.err('fallthrough_unsupported requires fallthrough');

    const file = new Hostsfile(path, origins, autoReverse, inline, c.log);
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
