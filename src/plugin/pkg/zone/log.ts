// Lines as CoreDNS's file plugin prints them: auto and secondary run file's code for loading, reloading,
// transfers and NOTIFYs, so those lines say `plugin/file:` whichever plugin runs them.

import type { ServerLogger } from '../../plugin.ts';

export function fileLogger(l: ServerLogger): ServerLogger {
  // The server's own plugin logger also gets JSON records right (a `plugin` field, not a prefix in msg).
  if (l.plugin !== undefined) return l.plugin('file');
  return {
    get debugEnabled() { return l.debugEnabled; },
    debug: (m) => { l.debug('plugin/file: ' + m); },
    info: (m) => { l.info('plugin/file: ' + m); },
    warning: (m) => { l.warning('plugin/file: ' + m); },
    error: (m) => { l.error('plugin/file: ' + m); },
    fatal: (m) => { l.fatal('plugin/file: ' + m); },
  };
}
