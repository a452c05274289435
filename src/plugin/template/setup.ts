// template's Corefile syntax (CoreDNS plugin/template/setup.go).

import { templateMetrics } from './metrics.ts';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { originsFromArgsOrServerBlock } from '../../corefile/address.ts';
import { classToString, rcodeToString, stringToClass, stringToRcode, stringToType, typeToString } from '../../wire/constants.ts';
import { Fall } from '../pkg/fall.ts';
import { GoRegexp, GoRegexpError } from '../pkg/regexp.ts';
import { GoTemplateError, goQuote, type GoTemplate } from '../pkg/gotemplate.ts';
import { Expression, ExpressionError, UnsupportedExpression, reservedName, type ExprScope, type ExprType } from '../pkg/expression.ts';
import { newTemplate, parseUint, Template, type TemplateSpec } from './template.ts';

/** CoreDNS's limit on a `match` pattern's length. */
const MAX_REGEXP_LEN = 10000;

/** What the block's `template CLASS TYPE [ZONE...] { ... }` lines configure. */
export interface TemplateOptions {
  /** Every template's zones, in order (the handler's zones: a query outside all of them goes on). */
  zones: string[];
  /** One entry per `template` line, tried in order. */
  templates: TemplateSpec[];
}

/** CoreDNS's varNameRegexp. */
const VAR_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/**
 * expr.Compile over the template's env: ExpressionError and UnsupportedExpression become the setup
 * error `could not compile expression: [NAME, ]...`.
 */
function compileExpr(d: SetupContext['dispenser'], source: string, scope: ExprScope, name: string | undefined): Expression {
  try {
    return Expression.compile(source, scope);
  } catch (e) {
    if (e instanceof ExpressionError || e instanceof UnsupportedExpression) {
      throw d.errf(`could not compile expression: ${name === undefined ? '' : name + ', '}${e.message}`);
    }
    throw e;
  }
}

/** miekg's StringToClass: the exact mnemonics only. */
function exactClass(s: string): number | undefined {
  const n = stringToClass(s);
  return n !== undefined && classToString(n) === s ? n : undefined;
}

/** miekg's StringToType: the exact mnemonics only. */
function exactType(s: string): number | undefined {
  const n = stringToType(s);
  return n !== undefined && typeToString(n) === s ? n : undefined;
}

/** miekg's StringToRcode: the exact mnemonics, and NOTIMPL. */
function exactRcode(s: string): number | undefined {
  const n = stringToRcode(s);
  return n !== undefined && (rcodeToString(n) === s || s === 'NOTIMPL') ? n : undefined;
}

/** Reads every `template` line of the block. */
export function parse(c: SetupContext): TemplateOptions {
  const d = c.dispenser;
  const o: TemplateOptions = { zones: [], templates: [] };
  while (d.next()) {
    if (!d.nextArg()) throw d.argErr();
    const qclass = exactClass(d.val());
    if (qclass === undefined) throw d.errf(`invalid query class ${d.val()}`);
    if (!d.nextArg()) throw d.argErr();
    const qtype = exactType(d.val());
    if (qtype === undefined) throw d.errf(`invalid RR class ${d.val()}`);
    const zones = originsFromArgsOrServerBlock(d.remainingArgs(), c.config.keys);
    o.zones.push(...zones);
    const t: TemplateSpec = {
      qclass, qtype, zones, regex: [], answer: [], additional: [], authority: [], rcode: 0,
      ederror: undefined, fall: new Fall(), vars: [], exprs: [],
    };
    const scopeVars: { name: string; type: ExprType }[] = [];
    const scope: ExprScope = { vars: scopeVars, group: true };
    while (d.nextBlock()) {
      const opt = d.val();
      switch (opt) {
        case 'match': {
          const args = d.remainingArgs();
          if (args.length === 0) throw d.argErr();
          for (const re of args) {
            if (Buffer.byteLength(re) > MAX_REGEXP_LEN) {
              throw d.errf(`regex pattern too long: ${Buffer.byteLength(re)} > ${MAX_REGEXP_LEN}`);
            }
            try {
              t.regex.push(GoRegexp.compile(re));
            } catch (e) {
              if (e instanceof GoRegexpError) throw d.errf(`could not parse regex: ${re}, ${e.message}`);
              throw e;
            }
          }
          break;
        }
        case 'answer': case 'additional': case 'authority': {
          const args = d.remainingArgs();
          if (args.length === 0) throw d.argErr();
          for (const text of args) {
            let tmpl: GoTemplate;
            try {
              tmpl = newTemplate(opt, text);
            } catch (e) {
              if (e instanceof GoTemplateError) {
                // CoreDNS's additional/authority messages end with a newline.
                throw d.errf(`could not compile template: ${d.val()}, ${e.message}${opt === 'answer' ? '' : '\n'}`);
              }
              throw e;
            }
            t[opt].push(tmpl);
          }
          break;
        }
        case 'rcode': {
          if (!d.nextArg()) throw d.argErr();
          const rcode = exactRcode(d.val());
          if (rcode === undefined) throw d.errf(`unknown rcode ${d.val()}`);
          t.rcode = rcode;
          break;
        }
        case 'ederror': {
          const args = d.remainingArgs();
          if (args.length !== 1 && args.length !== 2) throw d.argErr();
          const code = parseUint(args[0]!, 10, 16);
          if (typeof code === 'string') throw d.errf(`error parsing extended DNS error code ${d.val()}, ${code}\n`);
          t.ederror = { code: Number(code), reason: args[1] ?? '' };
          break;
        }
        case 'fallthrough':
          t.fall.setZonesFromArgs(d.remainingArgs());
          break;
        case 'upstream':
          // Accepted and ignored, as in CoreDNS: CNAME targets are always resolved through the server.
          d.remainingArgs();
          break;
        case 'var': {
          const args = d.remainingArgs();
          if (args.length < 2) throw d.argErr();
          const name = args[0]!;
          if (!VAR_NAME.test(name)) throw d.errf(`invalid variable name ${goQuote(name)}`);
          if (reservedName(name, scope)) throw d.errf(`variable name ${goQuote(name)} is reserved`);
          const expr = compileExpr(d, args.slice(1).join(' '), scope, name);
          // CoreDNS declares the variable with its expression's static type, or as new(any) when there is none.
          const type: ExprType = expr.type === 'interface {}' || expr.type === 'nil' ? '*interface {}' : expr.type;
          scopeVars.push({ name, type });
          t.vars.push({ name, type, expr });
          break;
        }
        case 'expr': {
          const args = d.remainingArgs();
          if (args.length === 0) throw d.argErr();
          t.exprs.push(compileExpr(d, args.join(' '), scope, undefined));
          break;
        }
        default:
          throw d.argErr();
      }
    }
    if (t.regex.length === 0) {
      t.matchAll = GoRegexp.compile('.*');
      t.regex.push(t.matchAll);
    }
    o.templates.push(t);
  }
  return o;
}

export const plugin: PluginDefinition = {
  name: 'template',
  setup(c) {
    const o = parse(c);
    const metrics = templateMetrics(c.instance.metrics);
    c.addPlugin((next) => new Template(o.zones, o.templates, next, metrics));
  },
};
