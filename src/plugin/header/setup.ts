// header's Corefile syntax (CoreDNS plugin/header/setup.go and header.go).

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { Header, type Flag, type Rule } from './header.ts';

/** What `header { query|response set|clear FLAG... }` configures. */
export interface HeaderOptions {
  /** Applied to the query before the rest of the chain sees it, in order. */
  query: Rule[];
  /** Applied to every reply written by the rest of the chain, in order. */
  response: Rule[];
}

const FLAGS: ReadonlySet<string> = new Set(['aa', 'ra', 'rd']);

/** CoreDNS's newRules: one action and at least one flag. */
function newRules(action: string, args: string[]): Rule[] {
  if (action === '') throw new Error('no flag action provided');
  if (args.length < 1) throw new Error('invalid length for flags, at least one should be provided');
  const a = action.toLowerCase();
  let state: boolean;
  if (a === 'set') state = true;
  else if (a === 'clear') state = false;
  else throw new Error(`unknown flag action=${a}, should be set or clear`);
  const rules: Rule[] = [];
  for (const arg of args) {
    const flag = arg.toLowerCase();
    if (!FLAGS.has(flag)) throw new Error(`unknown/unsupported flag=${flag}`);
    rules.push({ flag: flag as Flag, state });
  }
  return rules;
}

/**
 * Reads the block's `header` lines up to the first one that yields rules (the
 * others are not looked at, as in CoreDNS); no rule at all is an argument error.
 */
export function parse(c: SetupContext): HeaderOptions {
  const d = c.dispenser;
  while (d.next()) {
    const query: Rule[] = [];
    const response: Rule[] = [];
    while (d.nextBlock()) {
      const selector = d.val().toLowerCase();
      if (selector !== 'query' && selector !== 'response') {
        throw new Error(`setting up rule: invalid selector=${selector} should be query or response`);
      }
      const action = d.nextArg() ? d.val() : '';
      const args = d.remainingArgs();
      let rules: Rule[];
      try {
        rules = newRules(action, args);
      } catch (e) {
        throw new Error('setting up rule: ' + (e as Error).message);
      }
      (selector === 'response' ? response : query).push(...rules);
    }
    if (query.length > 0 || response.length > 0) return { query, response };
  }
  throw d.argErr();
}

export const plugin: PluginDefinition = {
  name: 'header',
  setup(c) {
    const o = parse(c);
    c.addPlugin((next) => new Header(o.query, o.response, next));
  },
};
