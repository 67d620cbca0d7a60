import test from 'ava';
import { needsEtcd, startCluster } from '../helpers/etcdCluster.js';
import type { ServerProcess } from '../helpers/serverProcess.js';
import { ask } from '../helpers/wire.js';

// A node restarted after the log was snapshotted and compacted catches up through the snapshot.

const etcdTest = needsEtcd(test);
const SNAPSHOT_EVERY = 20;

etcdTest.serial('a node killed -9 while the leader snapshots and compacts comes back through event=snapshot-loaded with the same table', async (t) => {
  t.timeout(120_000);
  const { cluster, nodes } = await startCluster(t, { args: ['--snapshot-every', String(SNAPSHOT_EVERY)] });
  const leader = await Promise.any(nodes.map((n) => n.event('leader', (e) => e.fields.self === 'true', 30_000).then(() => n)));
  const [victim, worker] = nodes.filter((n) => n !== leader) as [ServerProcess, ServerProcess];
  victim.signal('SIGKILL');
  await victim.waitForExit();

  // Well over SNAPSHOT_EVERY batches (one request at a time: one batch each), some released again.
  const written = leader.nextEvent('snapshot-written', (e) => Number(e.fields.version) >= 3 * SNAPSHOT_EVERY, 60_000);
  const client = await worker.accepted();
  for (let i = 0; i < 3 * SNAPSHOT_EVERY; i++) {
    t.is(await ask.request(client, 'snap', String(i % 7), `o${i}`, { ttl: i % 2 === 0 ? 0 : 3600 }), Math.floor(i / 7) + 1);
  }
  for (let i = 0; i < 3 * SNAPSHOT_EVERY; i += 3) t.is(await ask.release(client, 'snap', String(i % 7), `o${i}`), 1);
  await written;
  const expected = await ask.list(client, 'snap');
  t.is(expected.length, 40);

  const back = await cluster.restart(victim);
  const loaded = await back.event('snapshot-loaded');
  t.true(Number(loaded.fields.version) >= 3 * SNAPSHOT_EVERY, loaded.line);
  t.deepEqual(await ask.list(await back.accepted(), 'snap'), expected);
  t.deepEqual(await ask.list(await leader.accepted(), 'snap'), expected);
});
