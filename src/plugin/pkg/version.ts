// The name and version nodens reports about itself (chaos `version.bind`).

import pkg from '../../../package.json' with { type: 'json' };

export const APP_NAME = 'nodens';
export const APP_VERSION: string = pkg.version;

/** `nodens-<version>`, the counterpart of CoreDNS's `CoreDNS-<version>`. */
export function appVersionString(): string {
  return APP_NAME + '-' + APP_VERSION;
}
