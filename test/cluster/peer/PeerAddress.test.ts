import test from 'ava';
import { createServer } from 'node:net';
import { addressTowards, formatPeerAddress, parseAdvertised, parsePeerAddress } from '../../../src/cluster/peer/PeerAddress.js';

// `--advertise`, and the addresses nodes declare: the host is what the other nodes dial, so it is
// never a wildcard.

test('host:port and [ipv6]:port are split, and written back the same way', (t) => {
  for (const [text, host, port] of [
    ['10.0.0.1:7735', '10.0.0.1', 7735],
    ['node-a.example:1', 'node-a.example', 1],
    ['[fd00::1]:7735', 'fd00::1', 7735],
  ] as const) {
    t.deepEqual(parsePeerAddress(text), { host, port });
    t.is(formatPeerAddress({ host, port }), text);
  }
});

test('--advertise takes a host alone, or with a port', (t) => {
  t.deepEqual(parseAdvertised('10.0.0.1'), { host: '10.0.0.1', port: undefined });
  t.deepEqual(parseAdvertised('[fd00::1]'), { host: 'fd00::1', port: undefined });
  t.deepEqual(parseAdvertised('node-a:8000'), { host: 'node-a', port: 8000 });
});

test('a wildcard host, a bad port, or a bare IPv6 address is refused with the reason', (t) => {
  for (const text of ['0.0.0.0:7735', '[::]:7735', '*:7735', '0.0.0.0', '[::]']) t.throws(() => parseAdvertised(text), { message: /cannot be a wildcard/ });
  for (const text of ['10.0.0.1:', '10.0.0.1:65536', '10.0.0.1:0', 'fd00::1:7735', ':7735', '10.0.0.1:x']) {
    t.throws(() => parseAdvertised(text), { message: /is not a host/ }, text);
  }
  t.throws(() => parsePeerAddress('10.0.0.1'), { message: /is not host:port/ });
});

test('without --advertise, a node learns the address it reaches etcd from: the local end of a connection to the first endpoint that takes one', async (t) => {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  const port = (server.address() as { port: number }).port;
  // The first endpoint refuses (nothing listens on port 1), the second takes the connection.
  t.is(await addressTowards(['http://127.0.0.1:1', `http://127.0.0.1:${port}`], 2_000), '127.0.0.1');
  await t.throwsAsync(addressTowards(['http://127.0.0.1:1'], 2_000), { message: /give it with --advertise/ });
});
