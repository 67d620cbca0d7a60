import test from 'ava';
import type { ByteString } from '../../src/bytes.js';
import { Command } from '../../src/protocol/constants.js';
import type { FencedPosition } from '../../src/protocol/messages.js';
import { clusterImporting, needsEtcd, startCluster, untilAnswered } from '../helpers/etcdCluster.js';
import { pollUntil } from '../helpers/poll.js';
import type { RawClient } from '../helpers/rawClient.js';
import { startServer, type ServerProcess } from '../helpers/serverProcess.js';
import { ask, call } from '../helpers/wire.js';

// Fencing tokens in a cluster: a grant's token is the log position of the command that granted
// it, so every node tells the same one, and it only grows for a lock, through the owner's node
// dying, every node restarting (through a snapshot), and an import of a single node's lock file.

const etcdTest = needsEtcd(test);
/** Few batches between snapshots, so that the restarted nodes load one that holds the tokens. */
const SNAPSHOT_EVERY = 5;

interface Terms {
  ttl?: number;
  ttw?: number;
  priority?: number;
}

/** Request with fence (0x0A): the position, and the grant's token when it is 1. */
function requestFenced(
  c: RawClient,
  key: ByteString,
  index: ByteString,
  owner: ByteString,
  { ttl = 0, ttw = 0, priority = 0 }: Terms = {},
): Promise<FencedPosition> {
  return call(c, { command: Command.RequestFenced, key, index, owner, ttl, ttw, priority });
}

/** Fence (0x09): the owner's token, 0 for anyone else. */
function fence(c: RawClient, key: ByteString, index: ByteString, owner: ByteString): Promise<number> {
  return call(c, { command: Command.Fence, key, index, owner });
}

/** The token `owner` holds on key/index, as each node tells it. */
function fenceEverywhere(nodes: readonly ServerProcess[], key: ByteString, index: ByteString, owner: ByteString): Promise<number[]> {
  return Promise.all(nodes.map((node) => untilAnswered(node, (c) => fence(c, key, index, owner))));
}

etcdTest.serial(
  'every node tells the same token; it grows when the owner’s node is killed and the lock passes on, and again after every node restarts',
  async (t) => {
    t.timeout(180_000);
    const { cluster, nodes } = await startCluster(t, { args: ['--snapshot-every', String(SNAPSHOT_EVERY)] });
    const [a, b, c] = nodes as [ServerProcess, ServerProcess, ServerProcess];

    // 0x0A on node a; 0x09 on b and c tells the same token; a renewal keeps it, through any node.
    const onA = await a.accepted();
    const alice = await requestFenced(onA, 'fence', '1', 'alice', { ttl: 2 });
    t.is(alice.position, 1);
    t.true(alice.token > 0);
    t.deepEqual(await fenceEverywhere([b, c], 'fence', '1', 'alice'), [alice.token, alice.token]);
    t.deepEqual(await requestFenced(onA, 'fence', '1', 'alice', { ttl: 2 }), alice, 'a renewal answers the same token');
    t.deepEqual(await untilAnswered(b, (client) => requestFenced(client, 'fence', '1', 'alice', { ttl: 2 })), alice);
    const onB = await b.accepted();
    t.deepEqual(await requestFenced(onB, 'fence', '1', 'bob', { ttw: 120 }), { position: 2, token: 0 }, 'a waiter gets no token');
    t.is(await fence(onB, 'fence', '1', 'bob'), 0);

    // kill -9 alice's node: her TTL runs out, bob (polling through b) is promoted, with a greater token.
    a.signal('SIGKILL');
    await a.waitForExit();
    const bob = await pollUntil(
      'bob to be promoted once alice’s TTL ran out',
      async () => {
        const answer = await untilAnswered(b, (client) => requestFenced(client, 'fence', '1', 'bob', { ttw: 120 }));
        return answer.position === 1 ? answer : undefined;
      },
      60_000,
    );
    t.true(bob.token > alice.token, `bob's ${bob.token} above alice's ${alice.token}`);
    t.deepEqual(await fenceEverywhere([b, c], 'fence', '1', 'bob'), [bob.token, bob.token]);
    t.deepEqual(await fenceEverywhere([c], 'fence', '1', 'alice'), [0]);

    // Enough batches after bob's grant for a snapshot that holds it (a token is its command's
    // position: the batch number times 65,536 plus its place in the batch).
    const bobBatch = Math.floor(bob.token / 65_536);
    const snapshotted = Promise.any([b, c].map((n) => n.event('snapshot-written', (e) => Number(e.fields.version) > bobBatch, 60_000)));
    for (let i = 0; i < 3 * SNAPSHOT_EVERY; i++) await untilAnswered(c, (client) => ask.request(client, 'filler', String(i), 'f'));
    await snapshotted;

    // Every node stops and starts again: each loads the snapshot; bob keeps his token, and the
    // next grants are above every earlier one.
    await Promise.all(
      [b, c].map(async (n) => {
        n.signal('SIGTERM');
        t.like(await n.waitForExit(20_000), { code: 0 });
      }),
    );
    const restarted = await Promise.all([a, b, c].map((n) => cluster.restart(n)));
    // At least once: a node that joins while a new leader snapshots and compacts (here n1, held back
    // by its old name lease) finds its watch position compacted and loads the newer snapshot too.
    for (const node of restarted) t.true(node.eventsNamed('snapshot-loaded').length >= 1, 'loaded the snapshot');
    t.deepEqual(await fenceEverywhere(restarted, 'fence', '1', 'bob'), [bob.token, bob.token, bob.token]);
    const [a2, b2, c2] = restarted as [ServerProcess, ServerProcess, ServerProcess];
    const carol = await untilAnswered(a2, (client) => requestFenced(client, 'fence', '1', 'carol', { ttw: 120 }));
    t.deepEqual(carol, { position: 2, token: 0 });
    t.is(await untilAnswered(b2, (client) => ask.release(client, 'fence', '1', 'bob')), 1);
    const [carolToken] = await fenceEverywhere([c2], 'fence', '1', 'carol');
    t.true(carolToken! > bob.token, `carol's ${carolToken} above bob's ${bob.token}`);
    const fresh = await untilAnswered(c2, (client) => requestFenced(client, 'fence', '2', 'dave'));
    t.is(fresh.position, 1);
    t.true(fresh.token > carolToken!, 'a new lock’s grant too is above every earlier grant');
  },
);

etcdTest.serial('an import of a single node’s lock file keeps its owners’ tokens, and every later grant is above every token that node granted', async (t) => {
  t.timeout(120_000);
  // A single node: owners with tokens, a waiter, and a grant released again (only the file's
  // high-water remembers its token).
  const single = await startServer(t);
  const client = await single.accepted();
  const alice = await requestFenced(client, 'jobs', 'a', 'alice', { ttl: 600 });
  t.deepEqual(await requestFenced(client, 'jobs', 'a', 'bob', { ttl: 600, ttw: 600 }), { position: 2, token: 0 });
  const dave = await requestFenced(client, 'jobs', 'b', 'dave');
  const zed = await requestFenced(client, 'jobs', 'z', 'zed');
  t.is(await ask.release(client, 'jobs', 'z', 'zed'), 1);
  t.true(alice.token > 0 && dave.token > alice.token && zed.token > dave.token);
  single.signal('SIGTERM');
  t.like(await single.waitForExit(), { code: 0 });

  const { importer, other, entries } = await clusterImporting(t, single.lockFile);
  t.is(entries, '3');

  // The imported owners keep their tokens, on every node.
  t.deepEqual(await fenceEverywhere([importer, other], 'jobs', 'a', 'alice'), [alice.token, alice.token]);
  t.deepEqual(await fenceEverywhere([importer, other], 'jobs', 'b', 'dave'), [dave.token, dave.token]);
  // A promotion and a new lock's grant: both above every token the single node granted.
  t.is(await untilAnswered(other, (c) => ask.release(c, 'jobs', 'a', 'alice')), 1);
  const [bob] = await fenceEverywhere([importer], 'jobs', 'a', 'bob');
  t.true(bob! > zed.token, `bob's ${bob} above the single node's last token ${zed.token}`);
  const again = await untilAnswered(importer, (c) => requestFenced(c, 'jobs', 'z', 'zed'));
  t.is(again.position, 1);
  t.true(again.token > zed.token, `zed's new grant ${again.token} above its old ${zed.token}`);
});
