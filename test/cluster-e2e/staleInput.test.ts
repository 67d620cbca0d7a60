import test from 'ava';
import { setTimeout as delay } from 'node:timers/promises';
import { needsEtcd, startCluster } from '../helpers/etcdCluster.js';
import { ask, frames, req } from '../helpers/wire.js';

// A node that stood still (SIGSTOP, a swap storm, a long GC pause) finds, when it resumes,
// commands that waited in its sockets all along. Their clients may have given up on them long ago
// and been answered by another node since: a release executed now would take a lock away from a
// client just told it owns it. A cluster node refuses such input: the command never takes effect,
// and its connection closes.

const etcdTest = needsEtcd(test);

etcdTest.serial(
  "a release that waited in a stopped node's socket is refused when the node resumes: the lock stays with the client that re-took it elsewhere",
  async (t) => {
    t.timeout(120_000);
    const { nodes } = await startCluster(t);
    const [a, b] = await Promise.all([nodes[0]!.accepted(), nodes[1]!.accepted()]);
    t.is(await ask.request(b, 'stale', '1', 'x', { ttl: 0 }), 1, 'x owns the lock');

    // x sends its release to node A, which is stopped: no answer. x gives up on A and carries on
    // through B, where it still owns the lock (it is told so), as a 0.9b client that failed over.
    const refused = nodes[0]!.nextEvent('stale-input-refused', () => true, 60_000);
    nodes[0]!.signal('SIGSTOP');
    a.send(frames(req.release('stale', '1', 'x')));
    t.is(await ask.findOwner(b, 'stale', '1'), 'x');
    t.is(await ask.location(b, 'stale', '1', 'x'), 1, 'x is told it owns the lock');
    // The fault itself: A stays stopped for longer than a node tolerates (STALE_INPUT_MS, 1 s).
    await delay(2_500);
    nodes[0]!.signal('SIGCONT');

    const event = await refused;
    t.true(Number(event.fields.stalled_ms) > 0);
    await a.waitForClose(30_000);
    // The release never took effect, on any node.
    t.is(await ask.findOwner(b, 'stale', '1'), 'x');
    const again = await nodes[0]!.accepted();
    t.is(await ask.findOwner(again, 'stale', '1'), 'x');
    t.is(await ask.location(again, 'stale', '1', 'x'), 1);
  },
);

// The same release on a connection made while the node was stopped: the kernel completes the
// handshake and takes the bytes, and the process accepts the connection only when it resumes, then
// reads the bytes in a later turn of its loop, past the stall's watch (found by an operator's run:
// such a release took effect 15 s after it was sent). The connection is refused as it is accepted.
etcdTest.serial(
  'a release sent on a connection made while the node was stopped is refused at accept when the node resumes: the lock stays with the client that re-took it elsewhere',
  async (t) => {
    t.timeout(120_000);
    const { nodes } = await startCluster(t);
    const b = await nodes[1]!.accepted();
    t.is(await ask.request(b, 'stale-new', '1', 'x', { ttl: 0 }), 1, 'x owns the lock');

    const refused = nodes[0]!.nextEvent('stale-input-refused', () => true, 60_000);
    nodes[0]!.signal('SIGSTOP');
    const late = await nodes[0]!.connect();
    late.send(frames(req.release('stale-new', '1', 'x')));
    t.is(await ask.findOwner(b, 'stale-new', '1'), 'x');
    t.is(await ask.location(b, 'stale-new', '1', 'x'), 1, 'x is told it owns the lock');
    await delay(2_500);
    nodes[0]!.signal('SIGCONT');

    t.true(Number((await refused).fields.stalled_ms) > 0);
    t.deepEqual([...(await late.readUntilClose(30_000))], [0x00], 'the refusal greeting, and nothing else: the release was never read');
    t.is(await ask.findOwner(b, 'stale-new', '1'), 'x');
    const again = await nodes[0]!.accepted();
    t.is(await ask.findOwner(again, 'stale-new', '1'), 'x');
    t.is(await ask.location(again, 'stale-new', '1', 'x'), 1);
  },
);
