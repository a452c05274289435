// The running server across reloads: owns the current instance, swaps it for a
// new one on reload (keeping the sockets), and shuts down gracefully. No
// process.exit here; the CLI decides what a signal means for the process.

import { Instance, LineageStore, StartupError } from './instance.ts';
import type { PluginRegistry } from './registry.ts';
import type { MetricsRegistry, ReloadControl } from '../plugin/plugin.ts';
import { Logger, type LoggerOptions } from './log.ts';

export interface RuntimeOptions {
  corefile: string;
  file: string;
  defaultPort: string;
  registry: PluginRegistry;
  env?: Record<string, string | undefined>;
  /**
   * Re-reads the Corefile for reloads (the CLI: -conf, ./Corefile or the default).
   * Without it, a reload request re-reads the text last loaded.
   */
  source?: () => { contents: string; file: string };
  /**
   * This server's logger: its sink, and what a [FATAL] line does (the CLI exits 1).
   * Default: the default sink, and a fatal line stops this server without ending the process.
   */
  logger?: Logger;
  /** Without `logger`: the sink and fatal handler of the logger made for this server. */
  log?: LoggerOptions;
  /** The server's metrics registry, kept across reloads (default: the process's, as the nodens command uses). */
  metrics?: MetricsRegistry;
}

/** Fired after every successful start or reload (caddy's instance-startup event). */
export type StartedListener = (inst: Instance, reload: boolean) => void;

export class Runtime {
  private current: Instance;
  private readonly opts: RuntimeOptions & { reloadControl: ReloadControl; lineage: LineageStore; logger: Logger };
  private readonly startedListeners: StartedListener[] = [];
  private reloading: Promise<unknown> = Promise.resolve();

  private constructor(inst: Instance, opts: RuntimeOptions & { reloadControl: ReloadControl; lineage: LineageStore; logger: Logger }) {
    this.current = inst;
    this.opts = opts;
  }

  /** Parse, set up, run startup hooks and open every listener. Throws StartupError and listen errors. */
  static async start(opts: RuntimeOptions): Promise<Runtime> {
    let runtime: Runtime | undefined;
    let fatalBeforeStart = false;
    const logger = opts.logger ?? new Logger({
      sink: opts.log?.sink,
      format: opts.log?.format,
      // By default a library server that hits a fatal condition (a plain `loop` finding a loop) stops; its host goes on.
      onFatal: opts.log?.onFatal ?? (() => {
        if (runtime === undefined) fatalBeforeStart = true;
        else void runtime.stopAfterFatal();
      }),
    });
    opts = { ...opts, logger };
    const lineage = new LineageStore();
    const reloadControl: ReloadControl = {
      readCorefile: () => opts.source?.() ?? { contents: opts.corefile, file: opts.file },
      reload: (contents, file) => {
        if (runtime === undefined) return Promise.resolve(new Error('not started'));
        return runtime.reload(contents, file);
      },
    };
    const inst = await Instance.create({ ...opts, reloadControl, lineage });
    try {
      await inst.start();
    } catch (e) {
      // Startup hooks may have opened endpoints (health, metrics): close them before giving up.
      await inst.runHooks('shutdown');
      await inst.runHooks('finalShutdown');
      throw e;
    }
    runtime = new Runtime(inst, { ...opts, reloadControl, lineage, logger });
    if (fatalBeforeStart) void runtime.stopAfterFatal();
    return runtime;
  }

  /** The server's logger. */
  get log(): Logger { return this.opts.logger; }

  // Declared before fatalStop: fields are defined in order, and fatalStop's executor sets this one.
  private resolveFatalStop: (() => void) | undefined;
  /** Resolves once the server stopped because of a [FATAL] line (library default). */
  readonly fatalStop: Promise<void> = new Promise((resolve) => { this.resolveFatalStop = resolve; });
  private stopping: Promise<Error[]> | undefined;

  private async stopAfterFatal(): Promise<void> {
    await this.stop();
    this.resolveFatalStop?.();
  }

  get instance(): Instance { return this.current; }

  onStarted(fn: StartedListener): void { this.startedListeners.push(fn); }

  /** The instance-startup event of the first start (the CLI calls it after the banner's zone lines). */
  async announceStart(): Promise<void> {
    await this.current.runHooks('instanceStartup');
    for (const fn of this.startedListeners) fn(this.current, false);
  }

  /**
   * Replace the configuration. On failure the old one keeps serving and the
   * error is returned (and logged as CoreDNS logs it). Reloads never overlap.
   */
  reload(corefile: string, file = this.opts.file): Promise<Error | undefined> {
    const run = this.reloading.then(() => this.doReload(corefile, file));
    // A reload that threw (not one that failed cleanly) must not poison every later reload and the stop.
    this.reloading = run.catch(() => undefined);
    return run;
  }

  private async doReload(corefile: string, file: string): Promise<Error | undefined> {
    const old = this.current;
    const log = this.opts.logger;
    log.std('[INFO] Reloading');
    await old.runHooks('restart');
    let next: Instance | undefined;
    try {
      next = await Instance.create({ ...this.opts, corefile, file });
      await next.start(old);
    } catch (e) {
      const err = e instanceof Error ? e : new Error(String(e));
      if (next !== undefined) {
        await next.runHooks('shutdown');
        await next.closeListeners(old);
      }
      await old.runHooks('restartFailed');
      old.applyDebug();
      log.std(`[ERROR] Restart failed: ${err.message}`);
      return err;
    }
    this.current = next;
    this.opts.corefile = corefile;
    this.opts.file = file;
    await old.closeListeners(next);
    await old.runHooks('shutdown');
    await next.runHooks('instanceStartup');
    for (const fn of this.startedListeners) fn(next, true);
    log.std('[INFO] Reloading complete');
    return undefined;
  }

  /**
   * Graceful stop: shutdown and final-shutdown hooks run while DNS is still
   * served (lameduck), then listeners close after their queries in flight.
   * Returns the hook errors (CoreDNS exits 4 when there are any).
   */
  stop(): Promise<Error[]> {
    return this.stopping ??= this.doStop();
  }

  private async doStop(): Promise<Error[]> {
    await this.reloading;
    const errors = await this.current.runHooks('shutdown');
    errors.push(...await this.current.runHooks('finalShutdown'));
    await this.current.closeListeners();
    return errors;
  }
}

export { StartupError };
