// on's Corefile syntax and hooks (caddy's onevent plugin, which CoreDNS 1.15.0 lists in plugin.cfg): run a command
// when the server has started (and after each reload), or when it shuts down.

import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { bareSetupError, type PluginDefinition, type ServerLogger, type SetupContext } from '../plugin.ts';
import { splitCommand } from './shlex.ts';
import { workerId } from '../pkg/workers.ts';

/** caddy's hook.SupportedEvents: `certrenew` is accepted and never fires (CoreDNS renews no certificates). */
export const EVENTS = ['startup', 'shutdown', 'certrenew'] as const;
export type OnEvent = typeof EVENTS[number];

/** One `on` line: caddy's hook.Config. */
export interface OnHook {
  id: string;
  event: OnEvent;
  command: string;
  /** Mutable, as caddy's: a trailing `&` is removed by the first run (later runs of the same hook block). */
  args: string[];
}

/** Reads every `on` line of the block. Errors are caddy's Controller errors, printed without a plugin prefix. */
export function parse(c: SetupContext): OnHook[] {
  const d = c.dispenser;
  const hooks: OnHook[] = [];
  while (d.next()) {
    if (!d.nextArg()) throw bareSetupError(d.argErr());
    const name = d.val().toLowerCase();
    const event = EVENTS.find((e) => e === name);
    if (event === undefined) throw bareSetupError(d.errf(`Wrong event name or event not supported: '${d.val()}'`));
    // caddy joins the rest of the line with spaces and splits it again as a shell would (google/shlex).
    const line = d.remainingArgs().join(' ');
    let parts: string[];
    try {
      parts = splitCommand(line);
    } catch (e) {
      throw bareSetupError(d.err(`error parsing command: ${(e as Error).message}`));
    }
    if (parts.length === 0) throw bareSetupError(d.err(`no command contained in '${line}'`));
    hooks.push({ id: randomUUID(), event, command: parts[0]!, args: parts.slice(1) });
  }
  return hooks;
}

/** Go's exec error text for a command that could not start. */
function startError(command: string, e: NodeJS.ErrnoException): string {
  if (e.code === 'ENOENT' && !command.includes('/')) return `exec: ${JSON.stringify(command)}: executable file not found in $PATH`;
  const reason = e.code === 'ENOENT' ? 'no such file or directory' : e.code === 'EACCES' ? 'permission denied' : e.message;
  return `fork/exec ${command}: ${reason}`;
}

/**
 * caddy's Hook: stdin, stdout and stderr are the server's; a trailing `&` starts the command without waiting, else
 * the event waits for it to end. Resolves to the error caddy's EmitEvent logs, or undefined.
 */
export function runHook(h: OnHook, log: ServerLogger): Promise<string | undefined> {
  let nonblock = false;
  if (h.args.length >= 1 && h.args[h.args.length - 1] === '&') {
    nonblock = true;
    h.args = h.args.slice(0, -1);
  }
  const say = (line: string): void => { if (log.std !== undefined) log.std(line); else log.info(line); };
  say(`[INFO] ${nonblock ? 'Nonblocking' : 'Blocking'} Command "${h.command} ${h.args.join(' ')}" with ID ${h.id}`);
  return new Promise((resolve) => {
    const child = spawn(h.command, h.args, { stdio: 'inherit' });
    child.once('error', (e: NodeJS.ErrnoException) => { resolve(startError(h.command, e)); });
    if (nonblock) {
      // Started (or failed to): the event does not wait for the end. The child must not keep the server alive.
      child.once('spawn', () => { child.unref(); resolve(undefined); });
      return;
    }
    child.once('exit', (code, signal) => {
      if (signal !== null) resolve(`signal: ${signalName(signal)}`);
      else if (code !== 0) resolve(`exit status ${code}`);
      else resolve(undefined);
    });
  });
}

/** Go's syscall.Signal.String() for the common signals. */
function signalName(s: NodeJS.Signals): string {
  const names: Partial<Record<NodeJS.Signals, string>> = {
    SIGKILL: 'killed', SIGTERM: 'terminated', SIGINT: 'interrupt', SIGHUP: 'hangup', SIGQUIT: 'quit',
    SIGABRT: 'aborted', SIGSEGV: 'segmentation fault', SIGPIPE: 'broken pipe', SIGUSR1: 'user defined signal 1',
    SIGUSR2: 'user defined signal 2',
  };
  return names[s] ?? s;
}

/** caddy's EmitEvent for this block's hooks of `event`: one after another; failures are logged, never fatal. */
async function emit(hooks: OnHook[], event: OnEvent, log: ServerLogger): Promise<void> {
  for (const h of hooks) {
    if (h.event !== event) continue;
    const err = await runHook(h, log);
    if (err !== undefined) {
      const line = `error on 'on-${h.id}' hook: ${err}`;
      if (log.std !== undefined) log.std(line); else log.error(line);
    }
  }
}

export const plugin: PluginDefinition = {
  name: 'on',
  setup(c) {
    const hooks = parse(c);
    // With -workers N, every worker runs this setup: the commands run in the first worker only, once, as in
    // CoreDNS's single process.
    if (workerId() > 1) return;
    const log = c.instance.log;
    // startup: caddy's InstanceStartupEvent, after the first start and after each successful reload.
    if (hooks.some((h) => h.event === 'startup')) c.onInstanceStartup(() => emit(hooks, 'startup', log));
    // shutdown: caddy's ShutdownEvent, when the process is stopped by SIGTERM or SIGINT (not on a reload).
    if (hooks.some((h) => h.event === 'shutdown')) c.onFinalShutdown(() => emit(hooks, 'shutdown', log));
  },
};
