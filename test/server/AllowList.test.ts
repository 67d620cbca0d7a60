import test from 'ava';
import { FileFormatError } from '../../src/files/FileFormatError.js';
import { AllowList, normalizeAddress } from '../../src/server/AllowList.js';

const list = (text: string): AllowList => AllowList.parse(text, '/etc/lockserver/hosts');

test('the shipped defaults: 127.0.0.1 and ::1, in any spelling', (t) => {
  const hosts = list('127.0.0.1\n::1\n');
  for (const peer of ['127.0.0.1', '::ffff:127.0.0.1', '::FFFF:127.0.0.1', '::ffff:7f00:1', '0:0:0:0:0:ffff:7f00:1', '::1', '0:0:0:0:0:0:0:1']) {
    t.true(hosts.allows(peer), peer);
  }
  for (const peer of ['127.0.0.2', '::ffff:127.0.0.2', '::2', '10.0.0.1', undefined, 'garbage']) {
    t.false(hosts.allows(peer), String(peer));
  }
});

test('CIDR ranges of both families', (t) => {
  const hosts = list('10.1.0.0/16\nfd00::/8\n');
  t.true(hosts.allows('10.1.2.3'));
  t.true(hosts.allows('::ffff:10.1.2.3'));
  t.true(hosts.allows('::ffff:a01:203'), 'hex spelling of an IPv4-mapped address');
  t.false(hosts.allows('10.2.0.1'));
  t.true(hosts.allows('fd12::1'));
  t.false(hosts.allows('fe80::1'));
});

test('only IPv4-mapped IPv6 counts as IPv4: embedded dotted quads and NAT64 do not', (t) => {
  const hosts = list('10.1.0.0/16\n127.0.0.0/8\n');
  t.false(hosts.allows('::10.1.2.3'), 'IPv4-compatible (deprecated) is IPv6');
  t.false(hosts.allows('64:ff9b::10.1.2.3'), 'NAT64 is IPv6');
  t.false(hosts.allows('64:ff9b::a01:203'));
  t.true(hosts.allows('::ffff:7f00:1'), 'the hex form of ::ffff:127.0.0.1 matches 127.0.0.0/8');
});

test('IPv6 entries written with a dotted quad are IPv6 entries, mapped ones IPv4', (t) => {
  t.true(list('::10.1.2.3\n').allows('::a01:203'));
  t.false(list('::10.1.2.3\n').allows('10.1.2.3'));
  t.true(list('::ffff:10.0.0.0/104\n').allows('10.200.0.1'));
  t.false(list('::ffff:10.0.0.0/104\n').allows('11.0.0.1'));
});

test('comments, blank lines and surrounding blanks are ignored', (t) => {
  const hosts = list('# office\n\n   127.0.0.1   # me\n\t::1\t\n#10.0.0.1\n');
  t.is(hosts.size, 2);
  t.false(hosts.allows('10.0.0.1'));
});

test('an empty file allows nobody', (t) => {
  t.false(list('').allows('127.0.0.1'));
});

test('a bad line is an error naming the file and the line', (t) => {
  for (const [text, line] of [
    ['127.0.0.1\nlocalhost\n', 2],
    ['10.0.0.0/33', 1],
    ['\n\n::1/129', 3],
    ['1.2.3', 1],
    ['127.0.0.1 10.0.0.1', 1],
    ['fe80::1%eth0', 1],
    ['10.0.0.0/', 1],
  ] as const) {
    const error = t.throws(() => list(text), { instanceOf: FileFormatError });
    t.is(error?.line, line, text);
    t.regex(error.message, new RegExp(`^/etc/lockserver/hosts:${line}: `));
  }
});

test('normalizeAddress reduces every spelling to one family and one form', (t) => {
  t.deepEqual(normalizeAddress('::ffff:127.0.0.1'), { family: 4, address: '127.0.0.1' });
  t.deepEqual(normalizeAddress('::ffff:7f00:1'), { family: 4, address: '127.0.0.1' });
  t.deepEqual(normalizeAddress('::10.1.2.3'), { family: 6, address: '::a01:203' });
  t.deepEqual(normalizeAddress('fe80::1%lo'), { family: 6, address: 'fe80::1' });
  t.is(normalizeAddress('not an address'), undefined);
});

test('warnings: a CIDR with host bits set (it still allows its whole range), and an empty list', (t) => {
  const hosts = list('# x\n10.0.0.1/8\n10.0.0.0/8\n127.0.0.1\n::1/64\nfd00::/8\n::ffff:10.1.2.3/104\n127.0.0.1/32\n');
  t.deepEqual(hosts.warnings, [
    { line: 2, reason: '"10.0.0.1/8" has host bits set; it allows the whole range 10.0.0.0/8' },
    { line: 5, reason: '"::1/64" has host bits set; it allows the whole range ::/64' },
    { line: 7, reason: '"::ffff:10.1.2.3/104" has host bits set; it allows the whole range 10.0.0.0/8' },
  ]);
  t.true(hosts.allows('10.200.0.1'));
  for (const text of ['', '# nobody\n\n']) {
    t.deepEqual(list(text).warnings, [{ line: undefined, reason: 'no entries: every connection will be refused' }]);
  }
  t.deepEqual(list('127.0.0.1\n::1\n').warnings, []);
});
