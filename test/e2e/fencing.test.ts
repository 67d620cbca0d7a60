import test from 'ava';
import { writeFile } from 'node:fs/promises';
import { TOKENS_PER_MS } from '../../src/locks/LocalLockService.js';
import { Command, STATS_REPLY_LENGTH } from '../../src/protocol/constants.js';
import { decodeReply } from '../../src/protocol/decodeReply.js';
import type { FencedPosition, Request } from '../../src/protocol/messages.js';
import { get, sample } from '../helpers/metrics.js';
import type { RawClient } from '../helpers/rawClient.js';
import { LOOPBACK_HOSTS, serverFiles, startServer, tempDir } from '../helpers/serverProcess.js';
import { ask, bytes, call, frames, hex, req } from '../helpers/wire.js';

// The extension commands over a real server process: fence (0x09) and request with fence (0x0A),
// with literal bytes where a client would write them by hand, and the token rules through a
// release, a drain, a clean restart and a kill -9.

const NO_TOKEN = '0000000000000000';

/** Request with fence (0x0A) with no TTL or TTW unless given. */
function fencedRequest(
  key: string,
  index: string,
  owner: string,
  { ttl = 0, ttw = 0, priority = 0 } = {},
): Request & { command: typeof Command.RequestFenced } {
  return { command: Command.RequestFenced, key, index, owner, ttl, ttw, priority };
}

function requestFenced(client: RawClient, key: string, index: string, owner: string): Promise<FencedPosition> {
  return call(client, fencedRequest(key, index, owner));
}

function fence(client: RawClient, key: string, index: string, owner: string): Promise<number> {
  return call(client, { command: Command.Fence, key, index, owner });
}

test('0x0A request with fence then 0x09 fence, in literal bytes: the grant and its token; 0 for a waiter and a stranger', async (t) => {
  const startedAfter = Date.now();
  const server = await startServer(t);
  const client = await server.accepted();
  // 0x0A: the 0x02 layout (key "user", index "42", owner "alice", TTL 30, TTW 60, priority 10).
  client.send(bytes(0x0a, 4, 'user', 2, '42', 5, 'alice', 0x00, 0x1e, 0x00, 0x3c, 0x0a));
  const granted = await client.read(10);
  t.is(hex(granted.subarray(0, 2)), '0001');
  const token = decodeReply(Command.RequestFenced, granted).token;
  t.true(token > startedAfter * TOKENS_PER_MS, `the token ${token} starts above the wall clock's milliseconds times ${TOKENS_PER_MS}`);
  t.true(Number.isSafeInteger(token));

  // 0x09 with alice: the same eight bytes; nothing else was sent.
  client.send(bytes(0x09, 4, 'user', 2, '42', 5, 'alice'));
  t.is(hex(await client.read(8)), hex(granted.subarray(2)));
  // bob waits: position 2 and no token; fence gives him 0, and 0 to someone absent.
  client.send(bytes(0x0a, 4, 'user', 2, '42', 3, 'bob', 0x00, 0x1e, 0x00, 0x3c, 0x05));
  t.is(hex(await client.read(10)), '0002' + NO_TOKEN);
  client.send(bytes(0x09, 4, 'user', 2, '42', 3, 'bob'));
  t.is(hex(await client.read(8)), NO_TOKEN);
  client.send(bytes(0x09, 4, 'user', 2, '43', 5, 'alice'));
  t.is(hex(await client.read(8)), NO_TOKEN);

  // Renewals keep the token: 0x0A again, 0x02 again, 0x04.
  t.deepEqual(await requestFenced(client, 'user', '42', 'alice'), { position: 1, token });
  t.is(await ask.request(client, 'user', '42', 'alice', { ttl: 30, ttw: 60, priority: 10 }), 1);
  t.true(await ask.renew(client, 'user', '42', 'alice'));
  t.is(await fence(client, 'user', '42', 'alice'), token);
  t.is(client.buffered, 0);
});

test('a second holder after a release gets a greater token; so does the first holder coming back', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  const alice = await requestFenced(client, 'k', '1', 'alice');
  t.deepEqual(await requestFenced(client, 'k', '1', 'bob'), { position: 2, token: 0 });
  t.is(await ask.release(client, 'k', '1', 'alice'), 1);
  const bob = await fence(client, 'k', '1', 'bob');
  t.true(bob > alice.token, `promoted bob ${bob} > alice ${alice.token}`);
  t.is(await ask.releaseAll(client, 'bob'), 1);
  const again = await requestFenced(client, 'k', '1', 'alice');
  t.is(again.position, 1);
  t.true(again.token > bob, `alice again ${again.token} > bob ${bob}`);
});

test('drain (SIGSYS): a new 0x0A gets position 0 and token 0; the owner still renews with its token', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  const alice = await requestFenced(client, 'k', '1', 'alice');
  const drainStarted = server.nextEvent('drain-started');
  server.signal('SIGSYS');
  await drainStarted;
  client.send(bytes(0x0a, 1, 'k', 1, '2', 5, 'carol', 0, 0, 0, 0, 0));
  t.is(hex(await client.read(10)), '0000' + NO_TOKEN);
  t.deepEqual(await requestFenced(client, 'k', '1', 'alice'), alice);
  t.is(await fence(client, 'k', '2', 'carol'), 0);
  const exited = server.waitForExit();
  t.is(await ask.release(client, 'k', '1', 'alice'), 1);
  t.deepEqual(await exited, { code: 0, signal: null });
});

test('SIGTERM and a restart on the same lock file: the owner keeps its token, the next grant is greater', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  const alice = await requestFenced(client, 'k', '1', 'alice');
  t.is((await requestFenced(client, 'k', '1', 'bob')).position, 2);
  const other = await requestFenced(client, 'k', '2', 'carol');
  t.is(await ask.release(client, 'k', '2', 'carol'), 1);
  server.signal('SIGTERM');
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });

  const restarted = await startServer(t, { dir: server.dir });
  const again = await restarted.accepted();
  t.is(await fence(again, 'k', '1', 'alice'), alice.token, 'the restored owner keeps its token');
  t.is(await fence(again, 'k', '1', 'bob'), 0, 'the restored waiter has none');
  t.is(await ask.release(again, 'k', '1', 'alice'), 1);
  const bob = await fence(again, 'k', '1', 'bob');
  t.true(bob > other.token && bob > alice.token, `bob ${bob} above every token before the restart`);
  const carol = await requestFenced(again, 'k', '2', 'carol');
  t.true(carol.token > bob, 'carol, granted anew, above the released grant of hers before the restart');
});

test('kill -9 after grants the lock file does not hold: the next grant is still above every token handed out', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  const alice = await requestFenced(client, 'k', '1', 'alice');
  t.is((await requestFenced(client, 'k', '1', 'bob')).position, 2);
  // SIGUSR1 saves the table now; every grant after it is only in memory when the process dies.
  const saved = server.nextEvent('locks-saved');
  server.signal('SIGUSR1');
  t.is((await saved).fields.count, '2');
  t.is(await ask.release(client, 'k', '1', 'alice'), 1);
  const handedOut = [alice.token, await fence(client, 'k', '1', 'bob')];
  t.is(await ask.release(client, 'k', '1', 'bob'), 1);
  for (let n = 0; n < 50; n++) {
    const grant = await requestFenced(client, 'k', '1', `worker-${n}`);
    handedOut.push(grant.token);
    t.is(await ask.release(client, 'k', '1', `worker-${n}`), 1);
  }
  server.signal('SIGKILL');
  t.is((await server.waitForExit()).signal, 'SIGKILL');
  const highest = Math.max(...handedOut);

  const restarted = await startServer(t, { dir: server.dir });
  t.is((await restarted.event('started')).fields.restored, '2');
  const again = await restarted.accepted();
  // The lock file is older than those grants: alice is back with her old token ...
  t.is(await fence(again, 'k', '1', 'alice'), alice.token);
  // ... but every grant from now on goes above all the lost ones, thanks to the wall-clock floor.
  t.is(await ask.release(again, 'k', '1', 'alice'), 1);
  const bob = await fence(again, 'k', '1', 'bob');
  t.true(bob > highest, `bob promoted with ${bob}, above ${highest}`);
  const fresh = await requestFenced(again, 'k', '2', 'dave');
  t.true(fresh.token > highest);
});

test('a version 2 lock file (no tokens) still loads: its owners get fresh tokens, its waiters none', async (t) => {
  const dir = await tempDir(t);
  await writeFile(serverFiles(dir).hostsFile, LOOPBACK_HOSTS);
  const v2 = 'lockserver-locks 2\nusers 42 alice 10 30 60 owner never\nusers 42 bob 5 30 60 waiter never\nusers 43 carol 0 0 0 owner never\nend 3\n';
  await writeFile(serverFiles(dir).lockFile, v2);
  const server = await startServer(t, { dir });
  t.is((await server.event('started')).fields.restored, '3');
  const client = await server.accepted();
  const alice = await fence(client, 'users', '42', 'alice');
  const carol = await fence(client, 'users', '43', 'carol');
  t.true(alice > 0 && carol > 0 && alice !== carol, `alice ${alice}, carol ${carol}`);
  t.is(await fence(client, 'users', '42', 'bob'), 0);
  t.is(await ask.release(client, 'users', '42', 'alice'), 1);
  t.true((await fence(client, 'users', '42', 'bob')) > alice);
});

test('an unknown command byte 0x0E closes the connection as before, after the replies to what came first', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  client.send(Buffer.concat([frames(fencedRequest('k', '1', 'alice')), bytes(0x0e), frames(req.request('k', '1', 'mallory'))]));
  const replies = await client.readUntilClose();
  t.is(replies.length, 10);
  t.is(hex(replies.subarray(0, 2)), '0001');
  const bystander = await server.accepted();
  t.is(await ask.location(bystander, 'k', '1', 'mallory'), 0);
  t.is(await ask.findOwner(bystander, 'k', '1'), 'alice');
});

test('a truncated 0x09 or 0x0A frame is a partial frame: the frame timeout closes only that connection', async (t) => {
  const server = await startServer(t, { args: ['--frame-timeout', '1'] });
  const idle = await server.accepted();
  const cuts: Array<[cut: Buffer, replyBytes: number]> = [
    [bytes(0x09, 1, 'k', 1, '1'), 0],
    [bytes(0x0a, 1, 'k', 1, '1', 1, 'o', 0x00, 0x1e, 0x00), 0],
    // A whole 0x0A first: its reply comes, then the partial one times out.
    [Buffer.concat([frames(fencedRequest('k', '1', 'a')), bytes(0x0a, 1)]), 10],
  ];
  for (const [cut, replyBytes] of cuts) {
    const client = await server.accepted();
    const timedOut = server.nextEvent('frame-timeout');
    client.send(cut);
    t.is((await client.readUntilClose()).length, replyBytes, hex(cut));
    await timedOut;
  }
  t.false(idle.isClosed);
  t.true((await fence(idle, 'k', '1', 'a')) > 0, 'the whole request was served');
  t.is(await ask.location(idle, 'k', '1', 'o'), 0, 'the cut one was not');
});

test('metrics count fence and request-fenced; the stats reply keeps its 0.9b layout, a request with fence counted as a lock request', async (t) => {
  const server = await startServer(t, { args: ['--metrics-port', '0', '--metrics-listen', '127.0.0.1'] });
  const metricsPort = Number((await server.event('metrics-started')).fields.port);
  const client = await server.accepted();
  await requestFenced(client, 'k', '1', 'alice');
  await requestFenced(client, 'k', '1', 'bob');
  for (const owner of ['alice', 'bob', 'carol']) await fence(client, 'k', '1', owner);
  t.is(await ask.request(client, 'k', '2', 'dave'), 1);
  client.send([0x08]);
  const stats = decodeReply(Command.Stats, await client.read(STATS_REPLY_LENGTH));
  t.is(client.buffered, 0, `exactly ${STATS_REPLY_LENGTH} bytes`);
  // A request with fence is a lock request (0x0A twice, 0x02 once); fence lookups have no 0.9b counter.
  t.like(stats, { lockRequests: 3, ownerLookups: 0, contenderLookups: 0, statsRequests: 1, owners: 2, contenders: 1 });

  const { body } = await get(metricsPort, '/metrics');
  t.is(sample(body, 'lockserver_commands_total{command="request-fenced"}'), 2);
  t.is(sample(body, 'lockserver_commands_total{command="fence"}'), 3);
  t.is(sample(body, 'lockserver_commands_total{command="request"}'), 1);
  t.is(sample(body, 'lockserver_command_duration_seconds_count{command="request-fenced"}'), 2);
  t.is(sample(body, 'lockserver_command_duration_seconds_count{command="fence"}'), 3);
});
