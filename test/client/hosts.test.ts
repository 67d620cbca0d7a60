import test from 'ava';
import { endpointsOf, parseHost, parseHostList } from '../../src/client/hosts.js';

const hostPort = (entry: string, port = 7734) => {
  const { host, port: p, address } = parseHost(entry, port);
  return { host, port: p, address };
};

test('host, host:port, [v6], [v6]:port and a bare IPv6 address', (t) => {
  t.deepEqual(hostPort('a'), { host: 'a', port: 7734, address: 'a:7734' });
  t.deepEqual(hostPort('a:7000'), { host: 'a', port: 7000, address: 'a:7000' });
  t.deepEqual(hostPort(' 10.0.0.1:1 '), { host: '10.0.0.1', port: 1, address: '10.0.0.1:1' });
  t.deepEqual(hostPort('[::1]:7735'), { host: '::1', port: 7735, address: '[::1]:7735' });
  t.deepEqual(hostPort('[::1]', 9), { host: '::1', port: 9, address: '[::1]:9' });
  t.deepEqual(hostPort('fe80::1'), { host: 'fe80::1', port: 7734, address: '[fe80::1]:7734' });
});

test('bad entries are RangeErrors naming the entry', (t) => {
  for (const entry of ['a:', 'a:0', 'a:65536', 'a:x', ':7734', '[]:1', '[::1]:', '']) {
    t.throws(() => parseHost(entry, 7734), { instanceOf: RangeError }, entry);
  }
  t.throws(() => parseHostList('a,,b', 7734), { instanceOf: RangeError, message: /empty entry/ });
});

test('a comma-separated list keeps its order; the default port fills in', (t) => {
  t.deepEqual(
    parseHostList('a:1,b,[::1]:3', 2).map((e) => e.address),
    ['a:1', 'b:2', '[::1]:3'],
  );
});

test('connect options: hosts (strings or objects, port as the default), or the single host/port as before', (t) => {
  t.deepEqual(
    endpointsOf({}, '127.0.0.1', 7734).map((e) => e.address),
    ['127.0.0.1:7734'],
  );
  t.deepEqual(
    endpointsOf({ host: 'h', port: 1 }, '127.0.0.1', 7734).map((e) => e.address),
    ['h:1'],
  );
  t.deepEqual(
    endpointsOf({ hosts: ['a', 'b:2', { host: 'c' }, { host: 'd', port: 4 }], port: 9 }, '127.0.0.1', 7734).map((e) => e.address),
    ['a:9', 'b:2', 'c:9', 'd:4'],
  );
  t.throws(() => endpointsOf({ hosts: [] }, '127.0.0.1', 7734), { instanceOf: RangeError, message: /empty/ });
  t.throws(() => endpointsOf({ hosts: ['a'], host: 'b' }, '127.0.0.1', 7734), { instanceOf: RangeError, message: /not both/ });
  t.throws(() => endpointsOf({ hosts: [{ host: 'a', port: 0 }] }, '127.0.0.1', 7734), { instanceOf: RangeError });
});
