export type { Token } from './token.ts';
export { CorefileError } from './errors.ts';
export { lex } from './lexer.ts';
export { parseCorefile, replaceEnvVars, MAX_FILE_EXPANSIONS, MAX_SNIPPET_EXPANSIONS } from './parser.ts';
export type { ParseOptions, ServerBlock } from './parser.ts';
export { Dispenser } from './dispenser.ts';
export {
  zoneAddrString,
  parseKey,
  parseKeys,
  splitHostPort,
  splitTransport,
  normalizeZones,
  normalizeHostExact,
  normalizeName,
  originsFromArgsOrServerBlock,
  Transport,
  DefaultPorts,
} from './address.ts';
export type { ZoneAddr } from './address.ts';
export { isDomainName, isFqdn, fqdn } from '../wire/name.ts';
export { serverBlocksSha512, serverBlocksJson } from './hash.ts';
