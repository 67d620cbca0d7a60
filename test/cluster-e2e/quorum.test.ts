import test from 'ava';
import { needsEtcd, startCluster, untilAnswered } from '../helpers/etcdCluster.js';
import { ask, frames, hex, req } from '../helpers/wire.js';

// S4: a node cut off from the etcd quorum grants nothing, answers nothing it does not know, and
// closes the connection after --commit-timeout; service resumes by itself when the quorum returns.

const etcdTest = needsEtcd(test);

etcdTest.serial(
  'S4: with two of three etcd members paused, requests and reads on every node get no reply and are hung up on; after SIGCONT every node answers again',
  async (t) => {
    t.timeout(120_000);
    const { etcd, nodes } = await startCluster(t, { args: ['--commit-timeout', '1'] });
    const before = await nodes[0]!.accepted();
    t.is(await ask.request(before, 'k', '1', 'first', { ttl: 0 }), 1);

    const leader = await etcd.leader();
    const follower = etcd.others(leader)[0]!;
    etcd.pause(leader);
    etcd.pause(follower);

    const writes = await Promise.all(nodes.map((n) => n.accepted()));
    const reads = await Promise.all(nodes.map((n) => n.accepted()));
    const timeouts = nodes.map((n) => n.nextEvent('commit-timeout', () => true, 30_000));
    writes.forEach((c, i) => c.send(frames(req.request('k', '2', `cut-off-${i}`, { ttl: 5 }))));
    reads.forEach((c) => c.send(frames(req.findOwner('k', '1'))));
    for (const [i, c] of [...writes, ...reads].entries()) {
      // The whole wait is bounded; --commit-timeout is 1 s, nothing here measures it.
      t.is(hex(await c.readUntilClose(30_000)), '', `connection ${i}: closed without a single reply byte`);
    }
    await Promise.all(timeouts);
    t.true(
      nodes.every((n) => n.running),
      'the nodes stay up without a quorum',
    );

    etcd.resume(leader);
    etcd.resume(follower);
    // Resumes by itself: fresh connections to every node get answers (bounded, retried on close).
    for (const [i, node] of nodes.entries()) {
      t.is(await untilAnswered(node, (c) => ask.request(c, 'after', String(i), 'back')), 1);
      t.is(await untilAnswered(node, (c) => ask.findOwner(c, 'k', '1')), 'first');
    }
  },
);
