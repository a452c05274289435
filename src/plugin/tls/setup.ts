// tls's Corefile syntax (CoreDNS plugin/tls/tls.go): the server certificate and client-authentication policy of
// the block's `tls://` (DNS over TLS) and `https://` (DNS over HTTPS) listeners. No handler: the core's
// listeners read BlockConfig.tls. The files are read at setup, with Go's error texts (pem.ts).

import { closeSync, openSync, writeSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ClientAuth, PluginDefinition, ServerTlsConfig, SetupContext } from '../plugin.ts';
import { goQuote } from '../../corefile/address.ts';
import { CorefileError } from '../../corefile/errors.ts';
import { goOpenError, loadKeyPair, loadRoots } from './pem.ts';

/** What `tls CERT KEY [CA] { client_auth POLICY; keylog FILE }` configures. */
export interface TlsOptions {
  /** CERT and KEY as given (relative to the working directory). */
  certFile: string;
  keyFile: string;
  /** CA: verifies client certificates; undefined: the default roots. */
  caFile: string | undefined;
  /** `client_auth`: nocert (default), request, require, verify_if_given, require_and_verify. */
  clientAuth: ClientAuth;
  /** `keylog FILE`: the absolute file, and the `FILE:LINE` its open errors name (the block's closing brace, as CoreDNS's). */
  keylog: { file: string; at: string } | undefined;
}

const POLICIES: ReadonlySet<string> = new Set(['nocert', 'request', 'require', 'verify_if_given', 'require_and_verify']);
const ACME_OPTIONS: ReadonlySet<string> = new Set(['acme', 'email', 'ca', 'storage', 'ca_root', 'resolver']);

/** Reads every `tls` line of the block; the last one wins, as in CoreDNS. */
export function parse(c: SetupContext): TlsOptions {
  const d = c.dispenser;
  let o: TlsOptions | undefined;
  while (d.next()) {
    const at = `${d.file()}:${d.line()}`;
    const args = d.remainingArgs();
    if (args.length === 0) {
      parseAcme(c);
      // The ACME options are valid: nodens has no ACME client (see README).
      throw new CorefileError(`${at} - Error during parsing: automatic certificates (ACME) are not supported by nodens; give CERT and KEY`);
    }
    if (args.length < 2 || args.length > 3) throw new Error('plugin/tls: plugin/tls: ' + d.argErr().message);
    let clientAuth: ClientAuth = 'nocert';
    let keylog: string | undefined;
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'client_auth': {
          const a = d.remainingArgs();
          if (a.length !== 1) throw d.argErr();
          if (!POLICIES.has(a[0]!)) throw d.errf(`unknown authentication type '${a[0]}'`);
          clientAuth = a[0] as ClientAuth;
          break;
        }
        case 'keylog': {
          const a = d.remainingArgs();
          if (a.length !== 1) throw d.argErr();
          keylog = a[0];
          break;
        }
        default:
          throw d.errf(`unknown option '${d.val()}'`);
      }
    }
    o = {
      certFile: args[0]!, keyFile: args[1]!, caFile: args[2], clientAuth,
      keylog: keylog === undefined ? undefined : { file: resolve(keylog), at: `${d.file()}:${d.line()}` },
    };
  }
  return o!;
}

/** CoreDNS's parseACMETLS and validateACMEOptions, up to the first check that needs the ACME client. */
function parseAcme(c: SetupContext): void {
  const d = c.dispenser;
  const seen = new Set<string>();
  let domains = 0;
  while (d.nextBlock()) {
    const name = d.val();
    const args = d.remainingArgs();
    if (seen.has(name)) throw d.errf(`ACME option ${goQuote(name)} can only be specified once`);
    seen.add(name);
    if (!ACME_OPTIONS.has(name)) throw d.errf(`unknown ACME option ${goQuote(name)}`);
    if (name === 'acme' ? args.length === 0 : args.length !== 1) throw d.argErr();
    if (name === 'acme') domains = args.length;
  }
  if (domains === 0) throw new Error('plugin/tls: ACME requires at least one domain');
}

/** Loads the files: the block's TLS configuration (errors as CoreDNS's, without file:line). */
export function load(o: TlsOptions, keyLog: ((line: Buffer) => void) | undefined): ServerTlsConfig {
  let pair: { cert: Buffer; key: Buffer };
  try {
    pair = loadKeyPair(o.certFile, o.keyFile);
  } catch (e) {
    throw new Error(`plugin/tls: could not load TLS cert: ${(e as Error).message}`);
  }
  const ca = o.caFile === undefined ? undefined : loadRoots(o.caFile);
  return { cert: pair.cert, key: pair.key, ca, clientAuth: o.clientAuth, keyLog };
}

export const plugin: PluginDefinition = {
  name: 'tls',
  setup(c) {
    const o = parse(c);
    const cfg = load(o, undefined);
    let keyLog: ((line: Buffer) => void) | undefined;
    if (o.keylog !== undefined) {
      const file = o.keylog.file;
      let fd: number;
      try {
        fd = openSync(file, 'a', 0o600);
      } catch (e) {
        throw new CorefileError(`${o.keylog.at} - Error during parsing: unable to write TLS Key Log to ${goQuote(file)}: ${goOpenError(file, e)}`);
      }
      let open = true;
      keyLog = (line) => { if (open) writeSync(fd, line); };
      c.onShutdown(() => {
        if (open) closeSync(fd);
        open = false;
      });
      c.log.warning(`Writing TLS Key Log to ${goQuote(file)}`);
    }
    c.config.tls = { ...cfg, keyLog };
  },
};
