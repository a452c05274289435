// Corefile generation against node-cache's own expectations (cache_app_test.go's template and cases),
// written out as literal text here rather than recomputed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderCorefile } from './corefile.ts';
import { emptyKubeDNSConfig, type KubeDNSConfig } from './kubedns.ts';

// node-cache's test template (note the 12-space force_tcp and the indented closing braces).
const TEMPLATE = `
cluster.local:53 {
    errors
    cache {
            success 9984 30
            denial 9984 5
    }
    reload
    loop
    bind __PILLAR__LOCAL__DNS__
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    }
.:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__UPSTREAM__SERVERS__ {
            force_tcp
    }
    prometheus :9253
    }
`;

const cfg = (stubs: Array<[string, string[]]>, ups: string[]): KubeDNSConfig => ({ ...emptyKubeDNSConfig(), stubDomains: new Map(stubs), upstreamNameservers: ups });

test('no kube-dns config: every placeholder substituted, resolv.conf upstream keeps force_tcp, DNS__SERVER blanked', () => {
  const r = renderCorefile({ base: TEMPLATE, localIPStr: '169.254.20.10,10.0.0.10', localPort: '53', clusterDNS: '9.10.11.12', kubeDNS: emptyKubeDNSConfig() });
  assert.equal(r.text, `
cluster.local:53 {
    errors
    cache {
            success 9984 30
            denial 9984 5
    }
    reload
    loop
    bind 169.254.20.10 10.0.0.10
    forward . 9.10.11.12 {
            force_tcp
    }
    prometheus :9253
    }
.:53 {
    errors
    cache 30
    reload
    loop
    bind 169.254.20.10 10.0.0.10 
    forward . /etc/resolv.conf {
            force_tcp
    }
    prometheus :9253
    }
`);
  assert.equal(r.upstreamServers, '/etc/resolv.conf');
  assert.equal(r.udpBlockNotFound, false);
});

test('custom upstreams: the TCP block becomes a plain UDP forward; stub domains appended in order', () => {
  const r = renderCorefile({
    base: TEMPLATE, localIPStr: '169.254.20.10,10.0.0.10', localPort: '53', clusterDNS: '9.10.11.12',
    kubeDNS: cfg([['acme.local', ['1.1.1.1']], ['widget.local', ['2.2.2.2:10053', '3.3.3.3']]], ['2.2.2.2:10053', '3.3.3.3']),
  });
  assert.ok(r.text.endsWith(`    bind 169.254.20.10 10.0.0.10 
    forward . 2.2.2.2:10053 3.3.3.3
    prometheus :9253
    }

acme.local:53 {
    errors
    cache 30
    bind 169.254.20.10 10.0.0.10
    forward . 1.1.1.1
}

widget.local:53 {
    errors
    cache 30
    bind 169.254.20.10 10.0.0.10
    forward . 2.2.2.2:10053 3.3.3.3
}
`), r.text);
  // The cluster-domain forward is not the upstream block: it stays TCP.
  assert.match(r.text, /forward \. 9\.10\.11\.12 \{\n            force_tcp\n    \}/);
  assert.equal(r.upstreamServers, '2.2.2.2:10053 3.3.3.3');
});

test('custom upstreams with a differently indented block: substituted in place, reported', () => {
  const base = '.:53 {\n    forward . __PILLAR__UPSTREAM__SERVERS__ {\n        force_tcp\n    }\n}\n';
  const r = renderCorefile({ base, localIPStr: '169.254.20.10', localPort: '53', clusterDNS: '<nil>', kubeDNS: cfg([], ['8.8.8.8']) });
  assert.equal(r.text, '.:53 {\n    forward . 8.8.8.8 {\n        force_tcp\n    }\n}\n');
  assert.equal(r.udpBlockNotFound, true);
});

test('missing upstream Service: <nil> is written (CoreDNS then refuses the file); DNS__DOMAIN is left alone', () => {
  const base = '__PILLAR__DNS__DOMAIN__:53 {\n    forward . __PILLAR__CLUSTER__DNS__\n}\n';
  const r = renderCorefile({ base, localIPStr: '169.254.20.10', localPort: '5353', clusterDNS: '<nil>', kubeDNS: cfg([['corp.example', ['10.1.1.1']]], []) });
  assert.equal(r.text, '__PILLAR__DNS__DOMAIN__:53 {\n    forward . <nil>\n}\n\ncorp.example:5353 {\n    errors\n    cache 30\n    bind 169.254.20.10\n    forward . 10.1.1.1\n}\n');
});

test('IPv6 local IPs and upstream (node-cache TestUpdateIPv6CoreFile values)', () => {
  const r = renderCorefile({
    base: TEMPLATE, localIPStr: 'fe80:169:254::1,fd00:1:2:3::5', localPort: '53', clusterDNS: '2001:db8::1',
    kubeDNS: cfg([['acme.local', ['2001:db8:1:1:1::1']]], ['[2001:db8:2:2:2::2]:10053', '2001:db8:3:3:3::3']),
  });
  assert.match(r.text, /bind fe80:169:254::1 fd00:1:2:3::5\n {4}forward \. 2001:db8::1 \{/);
  assert.match(r.text, /\n {4}forward \. \[2001:db8:2:2:2::2\]:10053 2001:db8:3:3:3::3\n {4}prometheus/);
  assert.match(r.text, /\nacme\.local:53 \{\n {4}errors\n {4}cache 30\n {4}bind fe80:169:254::1 fd00:1:2:3::5\n {4}forward \. 2001:db8:1:1:1::1\n\}\n$/);
});
