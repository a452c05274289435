// `nodens validate`: the start-up of a server up to, and not including, its
// first side effect. The Corefile is parsed, every directive's setup runs in
// every block (so every argument is checked by the code that would use it, and
// files the setups read — zone files, hosts files, certificates, kubeconfigs —
// are read), the chains are built and the listen addresses grouped with
// CoreDNS's overlap rules. What it stops before: the startup hooks (where
// setups open health/metrics listeners, connect to the Kubernetes API, start
// timers and watchers) and the DNS listeners (Instance.start).

import { Instance } from './instance.ts';
import { Logger } from './log.ts';
import type { PluginRegistry } from './registry.ts';

export interface ValidateOptions {
  corefile: string;
  /** Path as printed in messages. */
  file: string;
  /** -dns.port: the port of keys without one. */
  defaultPort: string;
  registry: PluginRegistry;
  env?: Record<string, string | undefined>;
}

export interface ValidationResult {
  /** No error and no setup warning. */
  ok: boolean;
  /** The error that would stop the server, worded as the server prints it. */
  error?: string;
  /**
   * Warnings the setups logged: the server would start, degraded (a zone file it cannot open
   * answers SERVFAIL until it can). Each is `FILE:LINE - [WARNING] …`, the place being the
   * directive whose setup logged it (no place for the parser's own warnings).
   */
  warnings: string[];
  /**
   * The parser's warnings (an import glob that matches no file): printed, not failing — Corefiles such as
   * k3s's and AKS's import optional customisations that are usually absent.
   */
  notices: string[];
  /** Server blocks set up (0 when the error came first). */
  serverBlocks: number;
}

export async function validateCorefile(opts: ValidateOptions): Promise<ValidationResult> {
  const warnings: string[] = [];
  const notices: string[] = [];
  let at = '';
  const logger = new Logger({
    sink: (line) => {
      if (!/^\[(WARNING|ERROR|FATAL)\] /.test(line)) return;
      // Before the first setup the lines are the parser's.
      if (at === '') notices.push(line);
      else warnings.push(`${at} - ${line}`);
    },
    // A setup that logs [FATAL] is reported; nothing ends the process.
    onFatal: () => undefined,
  });
  try {
    const inst = await Instance.create({
      corefile: opts.corefile, file: opts.file, defaultPort: opts.defaultPort, registry: opts.registry, env: opts.env,
      logger, onSetup: (_directive, file, line) => { at = `${file}:${line}`; },
    });
    return { ok: warnings.length === 0, warnings, notices, serverBlocks: inst.blockConfigs().length };
  } catch (e) {
    const error = e instanceof Error ? e.message : String(e);
    return { ok: false, error, warnings, notices, serverBlocks: 0 };
  }
}
