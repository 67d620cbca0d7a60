import test from 'ava';
import { EtcdCluster, LockCluster, needsEtcd } from '../helpers/etcdCluster.js';
import { pollUntil } from '../helpers/poll.js';
import type { ServerProcess } from '../helpers/serverProcess.js';
import { ask } from '../helpers/wire.js';

// /readyz of a cluster node: not ready while it joins, ready once caught up, not ready while no
// etcd member answers (paused, then stopped), ready again by itself when they are back. /livez
// stays 200 throughout: the process serves its event loop.

const etcdTest = needsEtcd(test);
/** Longest the node may take to notice an outage or a return (its leader check calls etcd twice a second). */
const NOTICE_MS = 60_000;

interface Probe {
  readonly status: number;
  readonly lines: string[];
}

async function prober(node: ServerProcess): Promise<(path: string) => Promise<Probe>> {
  const port = Number((await node.event('metrics-started')).fields.port);
  return async (path) => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(10_000) });
    return { status: response.status, lines: (await response.text()).split('\n').filter((line) => line !== '') };
  };
}

etcdTest.serial('/readyz follows the node through its start and etcd outages; /livez stays 200', async (t) => {
  t.timeout(240_000);
  const etcd = await EtcdCluster.create(t);
  const cluster = new LockCluster(t, etcd);
  const node = await cluster.startNode({ name: 'n1', args: ['--metrics-port', '0', '--metrics-listen', '127.0.0.1'], waitReady: false });
  const probe = await prober(node);

  // Joining with no etcd yet: the lock port is closed and the node has not caught up.
  await node.event('etcd-unreachable', () => true, 30_000);
  t.deepEqual(await probe('/readyz'), { status: 503, lines: ['not listening', 'not caught up with the log'] });
  t.deepEqual(await probe('/livez'), { status: 200, lines: ['ok'] });

  await etcd.launch();
  await cluster.ready(node, NOTICE_MS);
  t.deepEqual(await probe('/readyz'), { status: 200, lines: ['ok'] });
  const client = await node.accepted();
  t.is(await ask.request(client, 'k', '1', 'alice', { ttl: 0 }), 1);

  const untilReadyz = (what: string, ready: boolean): Promise<Probe> =>
    pollUntil(
      what,
      async () => {
        const answer = await probe('/readyz');
        const unreachable = answer.status === 503 && answer.lines.includes('etcd unreachable');
        return (ready ? answer.status === 200 : unreachable) ? answer : undefined;
      },
      NOTICE_MS,
    );

  for (const outage of ['paused', 'stopped'] as const) {
    for (const member of etcd.members) {
      if (outage === 'paused') etcd.pause(member);
      else await etcd.stop(member);
    }
    const down = await untilReadyz(`/readyz to report etcd unreachable (all members ${outage})`, false);
    t.false(down.lines.includes('not listening'), outage);
    t.deepEqual(await probe('/livez'), { status: 200, lines: ['ok'] }, outage);

    for (const member of etcd.members) {
      if (outage === 'paused') etcd.resume(member);
      else await etcd.restart(member, false);
    }
    await etcd.waitHealthy();
    t.deepEqual(await untilReadyz(`/readyz to report ready (members no longer ${outage})`, true), { status: 200, lines: ['ok'] });
  }
  // The node serves again, its lock intact.
  t.is(await ask.findOwner(await node.accepted(), 'k', '1'), 'alice');
});
