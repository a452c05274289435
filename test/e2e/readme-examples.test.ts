// Every Corefile example in the plugin READMEs (and the project README) must
// start: parsed, set up and listening. Ports are rewritten to 0 so examples can
// keep the ports a user would write.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { startServer } from '../../src/index.ts';
import { ROOT } from '../helpers/server.ts';
import { testCerts } from '../helpers/certs.ts';

function examples(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  // Fenced blocks tagged corefile (or txt blocks that look like a server block).
  const re = /```(corefile|txt)\n([\s\S]*?)```/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const body = m[2]!;
    if (m[1] === 'txt' && !/^\S[^\n]*\{\s*$/m.test(body)) continue; // syntax synopses, not configs
    if (/^~/m.test(body)) continue; // marked as not runnable on purpose
    out.push(body);
  }
  return out;
}

/** Rewrite the port of every server block key to 0 (a free port); keys without one get 0 through dnsPort. */
function withFreePorts(corefile: string): string {
  let depth = 0;
  return corefile.split('\n').map((line) => {
    const code = line.replace(/#.*/, '');
    let out = line;
    if (depth === 0 && code.trim() !== '') {
      out = code.replace(/(\S+?):\d+(?=[\s,{]|$)/g, '$1:0');
    }
    for (const ch of code) {
      if (ch === '{') depth++;
      else if (ch === '}') depth--;
    }
    return out;
  }).join('\n');
}

/** `cert.pem`, `key.pem` and `ca.pem` as arguments become certificates made for the test (test/helpers/certs.ts). */
function withCerts(corefile: string): string {
  if (!/\b(cert|key|ca)\.pem\b/.test(corefile)) return corefile;
  const c = testCerts();
  return corefile.replace(/(?<=\s)cert\.pem\b/g, c.cert).replace(/(?<=\s)key\.pem\b/g, c.key).replace(/(?<=\s)ca\.pem\b/g, c.ca);
}

const files = [join(ROOT, 'README.md')];
const pluginDir = join(ROOT, 'src', 'plugin');
for (const d of readdirSync(pluginDir)) {
  const f = join(pluginDir, d, 'README.md');
  if (existsSync(f)) files.push(f);
}

for (const file of files) {
  if (!existsSync(file)) continue;
  examples(file).forEach((corefile, i) => {
    test(`${file.slice(ROOT.length + 1)} example ${i + 1} starts`, async () => {
      // Examples naming cert.pem, key.pem, ca.pem (the tls plugin's) get test certificates by those names.
      const server = await startServer({ corefile: withCerts(withFreePorts(corefile)), dnsPort: 0, file: 'Corefile' });
      try {
        assert.ok(server.addresses().length > 0);
      } finally {
        await server.stop();
      }
    });
  });
}
