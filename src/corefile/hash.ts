// The configuration hash the reload plugin logs:
//   [INFO] plugin/reload: Running configuration SHA512 = <hex>
// CoreDNS computes SHA-512 over Go's json.Marshal of the []caddyfile.ServerBlock that
// caddyfile.Parse returns (Keys []string, Tokens map[string][]Token{File, Line, Text};
// map keys sorted; tokens of the main file have File "" because only imported tokens
// get a file name; HTML-sensitive characters escaped as \u003c etc.).

import { createHash } from 'node:crypto';
import type { ServerBlock } from './parser.ts';
import { compareBytes } from './parser.ts';

/** Go encoding/json string encoding (with HTML escaping, as json.Marshal does). */
export function goJsonString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c !== 0x22 && c !== 0x5c && c !== 0x3c && c !== 0x3e && c !== 0x26 && c < 0x7f) {
      out += s[i];
      continue;
    }
    if (c >= 0x7f) {
      if (c === 0x2028 || c === 0x2029) {
        out += '\\u' + c.toString(16);
        continue;
      }
      if (c >= 0xd800 && c <= 0xdfff) {
        // a valid surrogate pair passes through; a lone surrogate is invalid UTF-8 in Go
        const hi = c <= 0xdbff;
        const next = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
        if (hi && next >= 0xdc00 && next <= 0xdfff) {
          out += s[i] + s[i + 1];
          i++;
        } else out += '\\ufffd';
        continue;
      }
      out += s[i];
      continue;
    }
    switch (c) {
      case 0x22:
        out += '\\"';
        break;
      case 0x5c:
        out += '\\\\';
        break;
      case 0x0a:
        out += '\\n';
        break;
      case 0x0d:
        out += '\\r';
        break;
      case 0x09:
        out += '\\t';
        break;
      case 0x08:
        out += '\\b';
        break;
      case 0x0c:
        out += '\\f';
        break;
      default:
        out += '\\u00' + c.toString(16).padStart(2, '0');
    }
  }
  return out + '"';
}

/**
 * The JSON CoreDNS hashes. `mainFile` is the path the Corefile was parsed from; tokens
 * from it are written with File "" (defaults to each block's `file`).
 */
export function serverBlocksJson(blocks: readonly ServerBlock[], mainFile?: string): string {
  if (blocks.length === 0) return 'null';
  const parts: string[] = [];
  for (const b of blocks) {
    const main = mainFile ?? b.file;
    const keys = b.keys.length === 0 ? 'null' : '[' + b.keys.map((k) => goJsonString(k.text)).join(',') + ']';
    const names = [...b.tokens.keys()].sort(compareBytes);
    const dirs = names.map((name) => {
      const toks = b.tokens.get(name)!;
      const list = toks
        .map(
          (t) =>
            `{"File":${goJsonString(t.file === main ? '' : t.file)},"Line":${t.line},"Text":${goJsonString(t.text)}}`,
        )
        .join(',');
      return `${goJsonString(name)}:[${list}]`;
    });
    parts.push(`{"Keys":${keys},"Tokens":{${dirs.join(',')}}}`);
  }
  return '[' + parts.join(',') + ']';
}

/** SHA-512 (hex) of the parsed server blocks, as logged by CoreDNS's reload plugin. */
export function serverBlocksSha512(blocks: readonly ServerBlock[], mainFile?: string): string {
  return createHash('sha512').update(serverBlocksJson(blocks, mainFile), 'utf8').digest('hex');
}
