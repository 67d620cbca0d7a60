import test from 'ava';
import { createServer } from 'node:net';
import { ConnectionClosedError, FencingUnsupportedError, ProtocolError } from '../../src/client/errors.js';
import { LockClient } from '../../src/client/LockClient.js';
import { Command } from '../../src/protocol/constants.js';
import { connectClient, oldServerInFrontOf } from '../helpers/lockClient.js';
import { startServer } from '../helpers/serverProcess.js';

test('every command, answered as the codec decodes it', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);

  t.is(await client.request('users', '42', 'alice', { ttl: 30, ttw: 60, priority: 10 }), 1);
  t.is(await client.request('users', '42', 'bob', { ttl: 30, ttw: 60, priority: 5 }), 2);
  t.deepEqual(await client.findOwner('users', '42'), Buffer.from('alice'));
  t.deepEqual(await client.findOwner('users', '43'), Buffer.alloc(0));
  t.is(await client.location('users', '42', 'bob'), 2);
  t.is(await client.location('users', '42', 'carol'), 0);
  t.true(await client.renew('users', '42', 'alice'));
  t.false(await client.renew('users', '42', 'carol'));
  t.deepEqual(await client.list('users'), [
    { index: Buffer.from('42'), owner: Buffer.from('alice'), priority: 10, ttl: 30, ttw: 60, isOwner: true, position: 1 },
    { index: Buffer.from('42'), owner: Buffer.from('bob'), priority: 5, ttl: 30, ttw: 60, isOwner: false, position: 2 },
  ]);
  t.is(await client.release('users', '42', 'alice'), 1);
  t.deepEqual(await client.findOwner('users', '42'), Buffer.from('bob'));
  t.is(await client.request('users', '7', 'bob'), 1);
  t.is(await client.release('users', '*', 'bob'), 2);
  t.is(await client.request('orders', '1', 'alice'), 1);
  t.is(await client.releaseAll('alice'), 1);
  t.is(await client.releaseAll('alice'), 0);

  const stats = await client.stats();
  t.is(stats.lockRequests, 4);
  t.is(stats.ownerLookups, 3);
  t.is(stats.statsRequests, 1);
  t.is(stats.owners, 0);
  t.is(stats.activeConnections, 1);
  await client.close();
});

test('keys are bytes: Buffers, latin1 strings and utf8 strings reach the server as the same bytes', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const text = await connectClient(t, server.port, { stringEncoding: 'utf8' });
  const key = Buffer.from([0x00, 0xff, 0x0a, 0x5c]);

  t.is(await client.request(key, Buffer.from('caf\xc3\xa9', 'latin1'), 'o'), 1);
  // The same index as a latin1 byte string, and as text sent as UTF-8.
  t.deepEqual(await client.findOwner('\x00\xff\n\\', 'caf\xc3\xa9'), Buffer.from('o'));
  t.deepEqual(await text.findOwner(key, 'café'), Buffer.from('o'));
  const [entry] = await client.list(key);
  t.deepEqual(entry!.index, Buffer.from('café', 'utf8'));
  t.is(await client.request(Buffer.alloc(255, 0x41), Buffer.alloc(0), Buffer.alloc(0)), 1);
  t.deepEqual(await client.findOwner('A'.repeat(255), ''), Buffer.alloc(0), 'an empty owner reads as no owner');
});

test('bad arguments reject before any byte is sent, and the connection stays usable', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  await t.throwsAsync(client.request('k', 'i', 'o', { ttl: 65536 }), { instanceOf: RangeError, message: /ttl/ });
  await t.throwsAsync(client.request('k', 'i', 'o', { priority: 256 }), { instanceOf: RangeError, message: /priority/ });
  await t.throwsAsync(client.request('k', 'i', 'o', { ttw: 1.5 }), { instanceOf: RangeError, message: /ttw/ });
  await t.throwsAsync(client.findOwner('x'.repeat(256), 'i'), { instanceOf: RangeError, message: /255/ });
  await t.throwsAsync(client.findOwner('€', 'i'), { instanceOf: RangeError, message: /U\+00FF/ });
  await t.throwsAsync(client.call({ command: Command.List, key: 'y'.repeat(300) }), { instanceOf: RangeError });
  t.is(await client.request('k', 'i', 'o'), 1);
  t.is(client.inFlight, 0);
});

test('pipelining: a burst issued at once goes out together and is answered in order', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const owners = Array.from({ length: 500 }, (_, i) => `owner-${i}`);
  const positions = Promise.all(owners.map((owner) => client.request('queue', '1', owner)));
  t.is(client.inFlight, owners.length);
  t.deepEqual(
    await positions,
    owners.map((_, i) => i + 1),
  );
  const mixed = await Promise.all([
    client.findOwner('queue', '1'),
    client.location('queue', '1', 'owner-499'),
    client.list('queue'),
    client.stats(),
    client.releaseAll('owner-0'),
    client.findOwner('queue', '1'),
  ]);
  t.deepEqual(mixed[0], Buffer.from('owner-0'));
  t.is(mixed[1], 500);
  t.is(mixed[2].length, 500);
  t.deepEqual(mixed[2].at(-1)!.owner, Buffer.from('owner-499'));
  t.is(mixed[2].at(-1)!.position, 500);
  t.is(mixed[3].contenders, 499);
  t.is(mixed[4], 1);
  t.deepEqual(mixed[5], Buffer.from('owner-1'));
});

test('a list reply larger than any socket chunk is reassembled', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const long = (i: number): string => i.toString().padStart(255, '-');
  await Promise.all(Array.from({ length: 2000 }, (_, i) => client.request('big', long(i), long(i))));
  const entries = await client.list('big');
  t.is(entries.length, 2000);
  t.true(entries.every((e, i) => e.index.toString('latin1') === long(i) && e.isOwner && e.position === 1));
});

test('close() lets requests already issued finish, then refuses new ones', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const answered = Promise.all([client.request('c', '1', 'a'), client.findOwner('c', '1'), client.stats()]);
  const closed = client.close();
  await t.throwsAsync(client.stats(), { instanceOf: ConnectionClosedError });
  const [position, owner, stats] = await answered;
  t.is(position, 1);
  t.deepEqual(owner, Buffer.from('a'));
  t.is(stats.lockRequests, 1);
  await closed;
  t.false(client.isOpen);
  await client.close();
});

test('destroy() rejects what is still awaited', async (t) => {
  const server = await startServer(t);
  const client = await LockClient.connect({ port: server.port });
  const pending = client.stats();
  client.destroy();
  await t.throwsAsync(pending, { instanceOf: ConnectionClosedError });
  await client.closed;
});

test('fence (0x09) and request with fence (0x0A): a token per grant, growing, kept by renewals, 0 for a non-owner', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);

  const alice = await client.requestFenced('users', '42', 'alice', { ttl: 30, ttw: 60, priority: 10 });
  t.is(alice.position, 1);
  t.true(alice.token > 0);
  t.deepEqual(await client.requestFenced('users', '42', 'bob'), { position: 2, token: 0 }, 'a waiter has no token');
  t.is(await client.fence('users', '42', 'alice'), alice.token);
  t.is(await client.fence('users', '42', 'bob'), 0);
  t.is(await client.fence('users', '42', 'carol'), 0, 'no entry: 0');
  t.deepEqual(await client.requestFenced('users', '42', 'alice'), alice, 'a re-request renews and keeps the token');
  t.true(await client.renew('users', '42', 'alice'));
  t.is(await client.fence('users', '42', 'alice'), alice.token, 'renewal keeps the token');

  t.is(await client.release('users', '42', 'alice'), 1);
  const bob = await client.fence('users', '42', 'bob');
  t.true(bob > alice.token, 'the promoted waiter has a greater token');
  t.is(await client.fence('users', '42', 'alice'), 0);
  t.is(await client.release('users', '42', 'bob'), 1);
  const again = await client.requestFenced('users', '42', 'alice');
  t.is(again.position, 1);
  t.true(again.token > bob, 'a new grant has a greater token than every earlier one');
  // A plain request (0x02) is granted a token too.
  t.is(await client.request('users', '43', 'dave'), 1);
  t.true((await client.fence(Buffer.from('users'), Buffer.from('43'), Buffer.from('dave'))) > again.token);
});

test('fence and request with fence pipeline with the 0.9b commands, and check their arguments before sending', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  await t.throwsAsync(client.requestFenced('k', 'i', 'o', { ttl: 65536 }), { instanceOf: RangeError, message: /ttl/ });
  await t.throwsAsync(client.requestFenced('k', 'i', 'o', { priority: 256 }), { instanceOf: RangeError, message: /priority/ });
  await t.throwsAsync(client.fence('k', 'i', 'x'.repeat(256)), { instanceOf: RangeError, message: /255/ });
  const [first, owner, second, token, location] = await Promise.all([
    client.requestFenced('k', 'i', 'a'),
    client.findOwner('k', 'i'),
    client.requestFenced('k', 'i', 'b'),
    client.fence('k', 'i', 'a'),
    client.location('k', 'i', 'b'),
  ]);
  t.is(first.position, 1);
  t.deepEqual(owner, Buffer.from('a'));
  t.deepEqual(second, { position: 2, token: 0 });
  t.is(token, first.token);
  t.is(location, 2);
  t.is(client.inFlight, 0);
});

test('a server without the extension (0.9b) closes the connection on 0x09: FencingUnsupportedError; replies before it arrive', async (t) => {
  const server = await startServer(t);
  const old = await oldServerInFrontOf(t, server.port);
  const client = await connectClient(t, old);
  const [request, fence, after] = await Promise.allSettled([client.request('k', 'i', 'a'), client.fence('k', 'i', 'a'), client.stats()]);
  t.deepEqual(request, { status: 'fulfilled', value: 1 });
  t.is(fence.status, 'rejected');
  const fenceError = (fence as PromiseRejectedResult).reason as Error;
  t.true(fenceError instanceof FencingUnsupportedError, fenceError.message);
  t.regex(fenceError.message, /closed the connection instead of answering fence: a server without fencing tokens/);
  const afterError = (after as PromiseRejectedResult).reason as Error;
  t.true(afterError instanceof ConnectionClosedError && !(afterError instanceof FencingUnsupportedError), 'the requests after it: closed');
  const again = await connectClient(t, old);
  await t.throwsAsync(again.requestFenced('k', 'i', 'a'), { instanceOf: FencingUnsupportedError, message: /request-fenced/ });
});

test('a token beyond 2^53 fails the connection with ProtocolError', async (t) => {
  // A stand-in greets, then answers anything with eight 0xff bytes.
  const listener = createServer((socket) => {
    socket.on('error', () => {});
    socket.write(Buffer.from([0x01]));
    socket.once('data', () => socket.write(Buffer.alloc(8, 0xff)));
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  t.teardown(() => void listener.close());
  const client = await connectClient(t, (listener.address() as { port: number }).port);
  await t.throwsAsync(client.fence('k', 'i', 'o'), { instanceOf: ProtocolError, message: /beyond 2\^53/ });
  t.false(client.isOpen);
});
