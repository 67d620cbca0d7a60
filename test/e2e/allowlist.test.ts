import test from 'ava';
import { writeFile } from 'node:fs/promises';
import { networkInterfaces } from 'node:os';
import { startServer } from '../helpers/serverProcess.js';
import { ask, hex } from '../helpers/wire.js';

// Clients bind to other loopback addresses (127.0.0.2, 127.0.0.3) to look like other hosts.

test('a peer not in the hosts file gets the single byte 0x00, is closed, and counted', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.1\n' });
  const refusedEvent = server.nextEvent('refused');
  const stranger = await server.connect({ localAddress: '127.0.0.2' });
  t.is(hex(await stranger.readUntilClose()), '00');
  t.like((await refusedEvent).fields, { peer: '127.0.0.2', reason: 'not-in-hosts-file' });
  const local = await server.accepted();
  t.like(await ask.stats(local), { rejectedNotInHosts: 1, rejectedTooBusy: 0, acceptedConnections: 1, activeConnections: 1 });
});

test('a refused peer that sends requests anyway gets nothing but the 0x00', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.1\n' });
  const stranger = await server.connect({ localAddress: '127.0.0.2' });
  stranger.send([0x02, 1, 0x6b, 1, 0x31, 1, 0x6d, 0, 0, 0, 0, 0, 0x08]);
  t.is(hex(await stranger.readUntilClose()), '00');
  const local = await server.accepted();
  t.is(await ask.findOwner(local, 'k', '1'), '');
  t.like(await ask.stats(local), { lockRequests: 0, statsRequests: 1, rejectedNotInHosts: 1 });
});

test('a CIDR range in the hosts file admits every address in it', async (t) => {
  const server = await startServer(t, { hosts: '# all of loopback\n127.0.0.0/8\n' });
  const two = await server.accepted({ localAddress: '127.0.0.2' });
  const three = await server.accepted({ localAddress: '127.0.0.3' });
  t.is(await ask.request(two, 'k', '1', 'two'), 1);
  t.is(await ask.request(three, 'k', '1', 'three'), 2);
  t.like(await ask.stats(three), { acceptedConnections: 2, rejectedNotInHosts: 0, activeConnections: 2 });
});

test('a single address in the hosts file admits that address and no neighbour', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.1\n127.0.0.2\n' });
  const two = await server.accepted({ localAddress: '127.0.0.2' });
  t.is(await ask.request(two, 'k', '1', 'two'), 1);
  const three = await server.connect({ localAddress: '127.0.0.3' });
  t.is(hex(await three.readUntilClose()), '00');
  t.like(await ask.stats(two), { acceptedConnections: 1, rejectedNotInHosts: 1 });
});

/** Whether this machine has the IPv6 loopback (ava wants tests declared synchronously). */
function ipv6LoopbackAvailable(): boolean {
  return Object.values(networkInterfaces()).some((addresses) => (addresses ?? []).some((a) => a.internal && a.family === 'IPv6' && a.address === '::1'));
}

/** Tests that need IPv6 loopback are reported as skipped where there is none. */
const ipv6Test = ipv6LoopbackAvailable() ? test : test.skip;

ipv6Test('a server on :: sees 127.0.0.1 as ::ffff:127.0.0.1 and matches it against IPv4 entries', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.1\n', listen: '::' });
  t.is((await server.event('started')).fields.address, '::');
  const mapped = await server.accepted({ host: '127.0.0.1' });
  t.is(await ask.request(mapped, 'k', '1', 'mapped'), 1);
  const refusedEvent = server.nextEvent('refused');
  const sixOnly = await server.connect({ host: '::1' });
  t.is(hex(await sixOnly.readUntilClose()), '00', '::1 is not in this hosts file');
  t.like((await refusedEvent).fields, { peer: '::1' });
  const other = await server.connect({ host: '127.0.0.1', localAddress: '127.0.0.2' });
  t.is(hex(await other.readUntilClose()), '00');
  t.like(await ask.stats(mapped), { acceptedConnections: 1, rejectedNotInHosts: 2 });
});

ipv6Test('an IPv6 entry admits the IPv6 loopback peer', async (t) => {
  const server = await startServer(t, { hosts: '::1\n', listen: '::1' });
  const six = await server.accepted({ host: '::1' });
  t.like(await ask.stats(six), { acceptedConnections: 1, activeConnections: 1 });
});

test('the log warns about a hosts line with host bits set and about an empty hosts file, at start and on reload', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.1\n127.0.0.9/8\n' });
  t.like((await server.event('hosts-warning')).fields, {
    file: server.hostsFile,
    line: '2',
    reason: '"127.0.0.9/8" has host bits set; it allows the whole range 127.0.0.0/8',
  });
  await writeFile(server.hostsFile, '# nobody for now\n');
  const warning = server.nextEvent('hosts-warning');
  const reloaded = server.nextEvent('hosts-reloaded');
  server.signal('SIGHUP');
  t.deepEqual((await warning).fields, {
    ts: (await warning).fields.ts!,
    event: 'hosts-warning',
    file: server.hostsFile,
    reason: 'no entries: every connection will be refused',
  });
  t.is((await reloaded).fields.entries, '0');
});
