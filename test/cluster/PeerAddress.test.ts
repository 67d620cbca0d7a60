import test from 'ava';
import { formatPeerAddress, parsePeerAddress } from '../../src/cluster/PeerAddress.js';

// `--peer host:port`: the host is what the other nodes dial, so it is never a wildcard.

test('host:port and [ipv6]:port are split, and written back the same way', (t) => {
  for (const [text, host, port] of [
    ['10.0.0.1:7735', '10.0.0.1', 7735],
    ['node-a.example:0', 'node-a.example', 0],
    ['[fd00::1]:7735', 'fd00::1', 7735],
  ] as const) {
    t.deepEqual(parsePeerAddress(text), { host, port });
    t.is(formatPeerAddress({ host, port }), text);
  }
});

test('a wildcard host, a missing or bad port, or a bare IPv6 address is refused with the reason', (t) => {
  for (const text of ['0.0.0.0:7735', '[::]:7735', '*:7735']) t.throws(() => parsePeerAddress(text), { message: /cannot be a wildcard/ });
  for (const text of ['10.0.0.1', '10.0.0.1:', '10.0.0.1:65536', 'fd00::1:7735', ':7735', '10.0.0.1:x']) {
    t.throws(() => parsePeerAddress(text), { message: /is not host:port/ }, text);
  }
});
