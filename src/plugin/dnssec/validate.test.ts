// Signed replies checked by a real validator: keys made by dnssec-keygen (Debian bind9-utils) for each
// algorithm CoreDNS signs with, a nodens server signing template answers, and delv (bind9-dnsutils)
// validating them against a trust anchor for the test zone. Both tools are required: a missing one fails.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startServer } from '../../index.ts';

const run = promisify(execFile);

function need(tool: string): void {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'pipe' });
  } catch {
    assert.fail(`${tool} is required (apt-get install bind9-utils bind9-dnsutils)`);
  }
}

function keygen(dir: string, alg: string, ksk = false): string {
  const args = ['-q', '-K', dir, '-a', alg];
  if (alg.startsWith('RSA')) args.push('-b', '2048');
  if (ksk) args.push('-f', 'KSK');
  args.push('example.org');
  return join(dir, execFileSync('dnssec-keygen', args, { encoding: 'utf8' }).trim());
}

/** The DNSKEY line of a .key file as a BIND trust-anchors statement. */
function anchor(base: string): string {
  const line = readFileSync(base + '.key', 'utf8').split('\n').find((l) => l.includes('DNSKEY'))!;
  const f = line.trim().split(/\s+/);
  const i = f.indexOf('DNSKEY');
  return `trust-anchors { example.org. static-key ${f[i + 1]} ${f[i + 2]} ${f[i + 3]} "${f.slice(i + 4).join('')}"; };\n`;
}

const TEMPLATES = `
  template IN ANY example.org {
    match "^alias[.]"
    fallthrough
    answer "alias.example.org. 60 IN CNAME www.example.org."
  }
  template IN A example.org {
    match "^(www|db)[.]"
    fallthrough
    answer "{{ .Name }} 60 IN A 10.0.0.1"
    answer "{{ .Name }} 60 IN A 10.0.0.2"
  }
  template IN ANY example.org {
    match "^(www|db)[.]"
    fallthrough
    authority "example.org. 60 IN SOA ns.example.org. hostmaster.example.org. 1 60 60 60 60"
  }
  template IN ANY example.org {
    rcode NXDOMAIN
    authority "example.org. 60 IN SOA ns.example.org. hostmaster.example.org. 1 60 60 60 60"
  }
`;

async function delv(port: number, anchors: string, name: string, type: string): Promise<string> {
  try {
    const r = await run('delv', ['@127.0.0.1', '-p', String(port), '-a', anchors, '+root=example.org', name, type], { timeout: 20000 });
    return r.stdout + r.stderr;
  } catch (e) {
    const x = e as { stdout?: string; stderr?: string };
    return (x.stdout ?? '') + (x.stderr ?? '');
  }
}

async function validates(keys: string[], anchorKey: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-delv-'));
  const anchors = join(dir, 'anchors.conf');
  writeFileSync(anchors, anchor(anchorKey));
  const server = await startServer({
    corefile: `example.org:0 {\n  bind 127.0.0.1\n  dnssec {\n    key file ${keys.join(' ')}\n  }\n${TEMPLATES}}\n`,
    log: { sink: () => {} },
  });
  try {
    const port = server.addresses()[0]!.port;
    const cases: [string, string, RegExp][] = [
      ['www.example.org', 'A', /^; fully validated\n/m],
      ['example.org', 'DNSKEY', /^; fully validated\n/m],
      ['alias.example.org', 'A', /^; fully validated\n/m],
      ['alias.example.org', 'CNAME', /^; fully validated\n/m],
      ['nx.example.org', 'A', /^; negative response, fully validated\n/m],
      ['deep.nx.example.org', 'TXT', /^; negative response, fully validated\n/m],
      ['www.example.org', 'AAAA', /^; negative response, fully validated\n/m],
      ['www.example.org', 'DS', /^; negative response, fully validated\n/m],
      ['nx.example.org', 'NSEC', /^; fully validated\n/m],
    ];
    for (const [name, type, want] of cases) {
      const out = await delv(port, anchors, name, type);
      assert.match(out, want, `${name} ${type}:\n${out}`);
    }
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

test('delv validates what nodens signs, for every algorithm and with a KSK/ZSK split', async (t) => {
  need('dnssec-keygen');
  need('delv');
  const dir = mkdtempSync(join(tmpdir(), 'nodens-keys-'));
  try {
    for (const alg of ['RSASHA256', 'RSASHA512', 'ECDSAP256SHA256', 'ECDSAP384SHA384', 'ED25519']) {
      await t.test(alg, async () => {
        const k = keygen(dir, alg);
        await validates([k], k);
      });
    }
    await t.test('KSK + ZSK', async () => {
      const zsk = keygen(dir, 'ECDSAP256SHA256');
      const ksk = keygen(dir, 'ECDSAP256SHA256', true);
      await validates([zsk + '.key', ksk + '.private'], ksk);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
