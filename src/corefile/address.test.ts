import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  normalizeZones,
  normalizeHostExact,
  originsFromArgsOrServerBlock,
  parseKey,
  splitHostPort,
  splitTransport,
  zoneAddrString,
  goQuote,
} from './address.ts';
import { CorefileError } from './errors.ts';

const keyStrings = (key: string, port = '53') => parseKey(key, port).map(zoneAddrString);

function keyErr(key: string): string {
  try {
    parseKey(key, '53');
  } catch (e) {
    assert.ok(e instanceof CorefileError);
    return e.message;
  }
  assert.fail('expected an error');
}

test('zoneAddrString', () => {
  assert.equal(zoneAddrString({ transport: 'dns', zone: 'example.org.', port: '53' }), 'dns://example.org.:53');
  assert.equal(
    zoneAddrString({ transport: 'dns', zone: 'example.org.', port: '53', address: '127.0.0.1' }),
    'dns://example.org.:53 on 127.0.0.1',
  );
});

test('schemes and default ports', () => {
  assert.deepEqual(keyStrings('example.org'), ['dns://example.org.:53']);
  assert.deepEqual(keyStrings('example.org', '1053'), ['dns://example.org.:1053']);
  assert.deepEqual(keyStrings('dns://example.org', '1053'), ['dns://example.org.:1053']);
  assert.deepEqual(keyStrings('tls://example.org', '1053'), ['tls://example.org.:853']);
  assert.deepEqual(keyStrings('quic://example.org'), ['quic://example.org.:853']);
  assert.deepEqual(keyStrings('grpc://example.org'), ['grpc://example.org.:443']);
  assert.deepEqual(keyStrings('https://example.org'), ['https://example.org.:443']);
  assert.deepEqual(keyStrings('https3://example.org'), ['https3://example.org.:443']);
  assert.deepEqual(parseKey('unix://example.org', '53'), [{ transport: 'unix', zone: 'example.org.', port: '' }]);
  // explicit port wins
  assert.deepEqual(keyStrings('tls://example.org:8853'), ['tls://example.org.:8853']);
  assert.deepEqual(keyStrings('.:1053'), ['dns://.:1053']);
  // scheme matching is case-sensitive
  assert.deepEqual(keyStrings('DNS://x.example'), ['dns://dns://x.example.:53']);
  assert.deepEqual(splitTransport('https3://a'), { transport: 'https3', addr: 'a' });
});

test('port extraction', () => {
  assert.deepEqual(keyStrings('example.org:053'), ['dns://example.org.:53']);
  assert.deepEqual(keyStrings('example.org:+53'), ['dns://example.org.:53']);
  assert.deepEqual(keyStrings('example.org:-5'), ['dns://example.org.:-5']); // no range check here
  assert.deepEqual(keyStrings('example.org:99999'), ['dns://example.org.:99999']);
  // not an integer: the colon stays in the name
  assert.deepEqual(keyStrings('a:b'), ['dns://a:b.:53']);
  assert.deepEqual(keyStrings('a:99999999999999999999'), ['dns://a:99999999999999999999.:53']);
  assert.deepEqual(keyStrings('a:b:1053'), ['dns://a:b.:1053']);
  assert.equal(keyErr('example.org:'), 'error inspecting server blocks: expecting data after last colon: "example.org:"');
  assert.equal(keyErr(':'), 'error inspecting server blocks: expecting data after last colon: ":"');
  assert.equal(keyErr('a"\\:'), 'error inspecting server blocks: expecting data after last colon: "a\\"\\\\:"');
});

test('zone normalisation: lower-case and fully qualified', () => {
  assert.deepEqual(keyStrings('Example.ORG'), ['dns://example.org.:53']);
  assert.deepEqual(keyStrings('example.org.'), ['dns://example.org.:53']);
  assert.deepEqual(keyStrings('.'), ['dns://.:53']);
  assert.deepEqual(keyStrings('ÄBC.example'), ['dns://äbc.example.:53']);
});

test('zone validation errors', () => {
  assert.equal(keyErr('a..b'), 'error inspecting server blocks: zone is not a valid domain name: a..b');
  assert.equal(keyErr('.a'), 'error inspecting server blocks: zone is not a valid domain name: .a');
  assert.equal(keyErr('a\\'), 'error inspecting server blocks: zone is not a valid domain name: a\\');
  assert.equal(keyErr('x'.repeat(64)), `error inspecting server blocks: zone is not a valid domain name: ${'x'.repeat(64)}`);
  assert.deepEqual(keyStrings('x'.repeat(63)), [`dns://${'x'.repeat(63)}.:53`]);
  const long = 'abcdefg.'.repeat(32); // 256 characters
  assert.equal(keyErr(long), 'error inspecting server blocks: specified zone is too long: 256 > 255');
  // 255 characters without the dot fail on the qualified check
  assert.equal(keyErr(long.slice(0, 255)), 'error inspecting server blocks: specified zone is too long: 256 > 255');
  // the empty key after scheme stripping
  assert.equal(keyErr('dns://'), 'error inspecting server blocks: expecting data after last colon: ""');
});

test('IPv4 CIDR keys become reverse zones', () => {
  assert.deepEqual(keyStrings('10.0.0.0/8'), ['dns://10.in-addr.arpa.:53']);
  assert.deepEqual(keyStrings('10.0.0.1/8'), ['dns://10.in-addr.arpa.:53']); // host bits ignored
  assert.deepEqual(keyStrings('10.0.0.0/16'), ['dns://0.10.in-addr.arpa.:53']);
  assert.deepEqual(keyStrings('192.168.1.0/24'), ['dns://1.168.192.in-addr.arpa.:53']);
  assert.deepEqual(keyStrings('192.168.1.7/32'), ['dns://7.1.168.192.in-addr.arpa.:53']);
  assert.deepEqual(keyStrings('0.0.0.0/0'), ['dns://in-addr.arpa.:53']);
  assert.deepEqual(keyStrings('10.0.0.0/8:1053'), ['dns://10.in-addr.arpa.:1053']);
  assert.deepEqual(keyStrings('tls://10.0.0.0/24'), ['tls://0.0.10.in-addr.arpa.:853']);
});

test('IPv4 CIDR off a label boundary expands to the next boundary', () => {
  const z17 = keyStrings('10.0.0.0/17');
  assert.equal(z17.length, 128);
  assert.equal(z17[0], 'dns://0.0.10.in-addr.arpa.:53');
  assert.equal(z17[1], 'dns://1.0.10.in-addr.arpa.:53');
  assert.equal(z17[127], 'dns://127.0.10.in-addr.arpa.:53');
  const z27 = keyStrings('10.0.0.0/27');
  assert.equal(z27.length, 32);
  assert.equal(z27[0], 'dns://0.0.0.10.in-addr.arpa.:53');
  assert.equal(z27[31], 'dns://31.0.0.10.in-addr.arpa.:53');
  assert.deepEqual(keyStrings('10.0.0.128/25'), Array.from({ length: 128 }, (_, i) => `dns://${128 + i}.0.0.10.in-addr.arpa.:53`));
  assert.deepEqual(keyStrings('172.16.0.0/12').slice(0, 2), ['dns://16.172.in-addr.arpa.:53', 'dns://17.172.in-addr.arpa.:53']);
  assert.equal(keyStrings('172.16.0.0/12').length, 16);
  assert.equal(keyStrings('128.0.0.0/1').at(-1), 'dns://255.in-addr.arpa.:53');
});

test('IPv6 CIDR keys', () => {
  assert.deepEqual(keyStrings('2001:db8::/32'), ['dns://8.b.d.0.1.0.0.2.ip6.arpa.:53']);
  assert.deepEqual(keyStrings('2001:DB8::/32'), ['dns://8.b.d.0.1.0.0.2.ip6.arpa.:53']);
  assert.deepEqual(
    keyStrings('2001:db8::/33'),
    Array.from({ length: 8 }, (_, i) => `dns://${i}.8.b.d.0.1.0.0.2.ip6.arpa.:53`),
  );
  assert.deepEqual(keyStrings('fd00::/8'), ['dns://d.f.ip6.arpa.:53']);
  assert.deepEqual(keyStrings('2001:db8:1:2::/64'), ['dns://2.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.:53']);
  assert.deepEqual(keyStrings('2001:db8::/32:1053'), ['dns://8.b.d.0.1.0.0.2.ip6.arpa.:1053']);
  assert.equal(keyErr('::/0'), 'error inspecting server blocks: invalid CIDR ::/0');
  assert.equal(keyErr('0::/64'), 'error inspecting server blocks: invalid CIDR 0::/64');
  assert.equal(keyErr('::ffff:10.0.0.0/104'), 'error inspecting server blocks: invalid CIDR ::ffff:10.0.0.0/104');
});

test('strings that are not CIDRs stay names', () => {
  assert.deepEqual(keyStrings('10.0.0.0/33'), ['dns://10.0.0.0/33.:53']);
  assert.deepEqual(keyStrings('010.0.0.0/8'), ['dns://010.0.0.0/8.:53']);
  assert.deepEqual(keyStrings('10.0.0.0/8.'), ['dns://10.0.0.0/8.:53']);
  assert.deepEqual(keyStrings('10.0.0/8'), ['dns://10.0.0/8.:53']);
  assert.deepEqual(keyStrings('10.0.0.0'), ['dns://10.0.0.0.:53']);
});

test('a CIDR key off a label boundary expands to every reverse zone it covers', () => {
  assert.deepEqual(keyStrings('10.0.0.0/31'), ['dns://0.0.0.10.in-addr.arpa.:53', 'dns://1.0.0.10.in-addr.arpa.:53']);
  assert.deepEqual(keyStrings('fd00::/7'), ['dns://c.f.ip6.arpa.:53', 'dns://d.f.ip6.arpa.:53']);
});

test('splitHostPort', () => {
  assert.deepEqual(splitHostPort('example.org:53'), { hosts: ['example.org'], port: '53' });
  assert.deepEqual(splitHostPort('Example.org'), { hosts: ['Example.org'], port: '' });
  assert.deepEqual(splitHostPort('10.0.0.0/23'), { hosts: ['0.0.10.in-addr.arpa.', '1.0.10.in-addr.arpa.'], port: '' });
  assert.throws(() => splitHostPort('a..b'), { message: 'zone is not a valid domain name: a..b' });
});

test('normalizeZones: plugin zone arguments', () => {
  assert.deepEqual(
    normalizeZones(['Example.ORG', 'dns://foo.bar:53', 'tls://x.y', 'a..b', 'in-addr.arpa', '10.0.0.0/24', 'x:']),
    ['example.org.', 'foo.bar.', 'x.y.', 'in-addr.arpa.', '0.0.10.in-addr.arpa.'],
  );
  assert.deepEqual(normalizeZones(['10.0.0.0/30']), ['0.0.0.10.in-addr.arpa.', '1.0.0.10.in-addr.arpa.', '2.0.0.10.in-addr.arpa.', '3.0.0.10.in-addr.arpa.']);
  assert.deepEqual(normalizeZones(['10.0.0.0/23']), ['0.0.10.in-addr.arpa.', '1.0.10.in-addr.arpa.']);
  assert.deepEqual(normalizeZones([]), []);
  assert.deepEqual(normalizeHostExact('.'), ['.']);
});

test('originsFromArgsOrServerBlock', () => {
  const keys = ['dns://example.org.:53', 'tls://example.net.:853'];
  assert.deepEqual(originsFromArgsOrServerBlock([], keys), ['example.org.', 'example.net.']);
  assert.deepEqual(originsFromArgsOrServerBlock(['a.example'], keys), ['a.example.']);
  assert.deepEqual(originsFromArgsOrServerBlock([], ['bad:']), ['bad:']);
});

test('goQuote', () => {
  assert.equal(goQuote('a\tb\u0001ü\u200b'), '"a\\tb\\x01ü\\u200b"');
});

test('goQuote: printable is what Go\'s Unicode 15.0 tables say, not the newer Unicode of Node\'s regexps', () => {
  // strconv.Quote of Go 1.26 (unicode.Version 15.0.0) for each code point.
  const GO: Array<[number, string]> = [
    [0x088f, '"\\u088f"'], [0x1faef, '"\\U0001faef"'], [0x2ebf0, '"\\U0002ebf0"'], [0x13460, '"\\U00013460"'],
    [0x323b0, '"\\U000323b0"'], [0x33479, '"\\U00033479"'],
    [0x1f600, '"\u{1f600}"'], [0xfffd, '"\ufffd"'], [0x323af, '"\u{323af}"'],
    [0xe000, '"\\ue000"'], [0x2028, '"\\u2028"'], [0x3347a, '"\\U0003347a"'],
  ];
  for (const [cp, want] of GO) assert.equal(goQuote(String.fromCodePoint(cp)), want, cp.toString(16));
});
