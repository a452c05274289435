import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { Expression, ExpressionError, UnsupportedExpression } from '../pkg/expression.ts';
import { View, viewFilter } from './view.ts';

/** What `view NAME { expr EXPRESSION }` configures. */
export interface ViewOptions {
  /** The view's name: the `view` label of the metrics, `view/name` metadata. */
  name: string;
  /** The compiled `expr` lines, in order: all must be true for the block to serve a query. */
  exprs: Expression[];
}

/**
 * Reads the block's `view` line. An `expr` line's arguments are joined by one space and compiled as
 * CoreDNS compiles them (expr-lang): a compile error reads as CoreDNS prints it (expr's message and
 * snippet, no Corefile position); expr-lang syntax outside what nodens implements is an error at the
 * `expr` line.
 */
export function parse(c: SetupContext): ViewOptions {
  const d = c.dispenser;
  let i = 0;
  let name = '';
  const exprs: Expression[] = [];
  while (d.next()) {
    if (++i > 1) throw new Error('plugin/view: this plugin can only be used once per Server Block');
    const args = d.remainingArgs();
    if (args.length !== 1) throw d.argErr();
    name = args[0]!;
    while (d.nextBlock()) {
      if (d.val() !== 'expr') throw d.errf(`unknown property '${d.val()}'`);
      const source = d.remainingArgs().join(' ');
      try {
        exprs.push(Expression.compile(source));
      } catch (e) {
        if (e instanceof UnsupportedExpression) throw d.err(e.message);
        if (e instanceof ExpressionError) throw new Error(`plugin/view: ${e.message}`);
        throw e;
      }
    }
  }
  return { name, exprs };
}

export const plugin: PluginDefinition = {
  name: 'view',
  setup(c) {
    const o = parse(c);
    c.addPlugin((next) => new View(o.name, o.exprs, next));
    c.config.addFilter(o.name, viewFilter(o.exprs));
  },
};
