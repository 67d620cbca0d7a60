import { randomBytes } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { Etcd3 } from 'etcd3';
import { EtcdLog } from '../../../src/cluster/EtcdLog.js';
import { bounded } from '../../helpers/bounded.js';
import { pollUntil } from '../../helpers/poll.js';
import { EtcdCluster, needsEtcd } from '../../helpers/etcdCluster.js';

// A node's janitor hears of every writer lease through a watch of the announcements. A watch on a
// paused member stays open and silent (until gRPC keepalive gives up, 10 s or more): the janitor
// would not hear of a lease another node announces meanwhile, nor revoke it if a new etcd leader
// renewed it. It notices when its own next announcement does not come back, and moves. Without
// that (checked by leaving it out) it stays blind for as long as the member is paused.

const etcdTest = needsEtcd(test);
const CALL_MS = 5_000;

etcdTest(
  'a janitor whose watch sits on a paused member moves off it once its own announcement does not come back, and hears of the others',
  async (t: ExecutionContext) => {
    t.timeout(60_000);
    const etcd = await EtcdCluster.start(t);
    const leader = await etcd.leader();
    const [paused, other] = etcd.others(leader) as [(typeof etcd.members)[number], (typeof etcd.members)[number]];
    const cluster = `t${randomBytes(5).toString('hex')}`;
    const node = new EtcdLog({ endpoints: [paused.clientUrl, other.clientUrl, leader.clientUrl], cluster });
    t.teardown(() => node.close());
    const writer = new EtcdLog({ endpoints: [leader.clientUrl], cluster });
    t.teardown(() => writer.close());
    // Everything of `node` starts on the member about to be paused, its janitor's watch too.
    const pool = node['pool'];
    while (pool.preferred.url !== paused.clientUrl) pool.leave(pool.preferred);
    const janitor = node['janitor'];
    await pollUntil('the janitor to watch', async () => (janitor['watcher'] !== undefined ? true : undefined), 5_000);

    etcd.pause(paused);
    t.teardown(() => etcd.resume(paused));
    // The writer keeps writing, so it always has a lease announced that is not about to end: the
    // janitor must hear of leases announced after its watch went silent (a lease heard of once
    // and ended since would pass for heard only by luck of timing: a writer lease lasts ~3 s).
    // An append that fails under load (a slow commit) does not end the writing: a writer that
    // stopped would leave its last lease to expire, and nothing new to hear of.
    let writing = true;
    const writerErrors: string[] = [];
    const writes = (async () => {
      while (writing) {
        await writer.append(Buffer.from('from the writer'), CALL_MS).catch((error: unknown) => {
          writerErrors.push((error as Error).message);
        });
      }
    })();
    t.teardown(async () => {
      writing = false;
      await writes;
    });
    await pollUntil('the writer to append', async () => (writer['writers']['current'] !== undefined ? true : undefined), 5_000);
    // The node's own append goes elsewhere after its grant attempt on the paused member times out.
    await node.append(Buffer.from('from the node'), CALL_MS);
    // Every lease the writer has used since the pause: each stays announced for its TTL (~3 s)
    // after the writer moves on to the next (every 0.5 s), so hearing of any of them counts; asking
    // only about the current one would race the rotation.
    const writerLeases = new Set<string>();
    await pollUntil(
      "the node's janitor to hear of a lease the writer announced while the member stays paused",
      async () => {
        const current = writer['writers']['current']?.id;
        if (current !== undefined) writerLeases.add(current);
        return [...writerLeases].some((id) => janitor.knows(id)) ? true : undefined;
      },
      8_000,
    ).catch((error: unknown) => {
      const seen = `${writerLeases.size} writer leases seen, janitor restarts ${janitor.restarts}, writer errors ${JSON.stringify(writerErrors)}`;
      throw new Error(`${(error as Error).message} (${seen})`);
    });
    t.true(janitor.restarts >= 1);
  },
);

// A node hears its own announcement back on the watch, often before the put's own answer: that
// must count as heard, or the watchdog would restart a healthy watch every 0.5 s, and each listing
// after a restart would revoke the live leases announced meanwhile (seen in review: refused appends
// on a healthy etcd).
etcdTest(
  'on a healthy etcd, nodes appending back to back never restart the watch of the announcements nor refuse each other an append',
  async (t: ExecutionContext) => {
    t.timeout(60_000);
    const etcd = await EtcdCluster.start(t);
    const cluster = `t${randomBytes(5).toString('hex')}`;
    const nodes = [0, 1].map(() => new EtcdLog({ endpoints: etcd.endpointList, cluster }));
    for (const node of nodes) t.teardown(() => node.close());
    const refused: string[] = [];
    await Promise.all(
      nodes.map(async (node, n) => {
        // Long enough for several lease rotations (one every 0.5 s while appending).
        for (let i = 0; i < 1_000; i++) {
          await node.append(Buffer.from(`n${n} ${i}`), CALL_MS).catch((error: unknown) => refused.push((error as Error).message));
        }
      }),
    );
    t.deepEqual(refused, []);
    t.deepEqual(
      nodes.map((node) => node['janitor'].restarts),
      [0, 0],
    );
    t.deepEqual(
      nodes.map((node) => node.overdueLeasesRevoked),
      [0, 0],
    );
  },
);

// etcd3 multiplexes a client's watchers on one stream. A watch started from a compacted revision
// is cancelled by etcd as it is created, and etcd3 then pairs the cancellation with whichever
// watcher waits first; with the janitor's watch on the same stream, the next response found no
// watcher and etcd3 threw out of its stream handler, killing the process (seen in CI: a node
// restarted after a snapshot and a compaction; 20 of 20 here). The janitor watches on a stream of
// its own.
etcdTest(
  'a log watch from a compacted revision, started while the janitor starts its own watch, ends "compacted" and nothing throws',
  async (t: ExecutionContext) => {
    t.timeout(60_000);
    const etcd = await EtcdCluster.start(t, { members: 1 });
    const cluster = `t${randomBytes(5).toString('hex')}`;
    const raw = new Etcd3({ hosts: etcd.endpointList });
    t.teardown(() => raw.close());
    for (let i = 0; i < 5; i++) await raw.put(`/${cluster}/log`).value(`v${i}`);
    const head = await raw.get(`/${cluster}/log`).exec();
    await raw.kv.compact({ revision: head.header.revision, physical: true });
    for (let round = 0; round < 5; round++) {
      const node = new EtcdLog({ endpoints: etcd.endpointList, cluster });
      const ended = new Promise<string>((resolve) => node.watch(1, { onRecords: () => {}, onEnd: (why) => resolve(why) }));
      t.is(await bounded(ended, 10_000, 'the watch from a compacted revision to end'), 'compacted');
      t.is((await node.append(Buffer.from(`after ${round}`), CALL_MS)).version, 6 + round);
      await node.close();
    }
  },
);
