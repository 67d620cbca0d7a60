import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { EtcdCluster, LockCluster, needsEtcd } from '../helpers/etcdCluster.js';
import { pollUntil } from '../helpers/poll.js';
import type { ServerProcess } from '../helpers/serverProcess.js';
import { ask } from '../helpers/wire.js';

// etcd with auth on: the nodes write as a user whose role may read and write the cluster's keys, and
// a second user whose role may only read them keeps the leader's name lease alive (etcd 3.4 and 3.5
// check no permission on LeaseKeepAlive; any reader sees the lease id in `get -w json`). Liveness
// rests on each node's heartbeat, a write the reader cannot make: after kill -9 of the leader, an
// owner's short TTL still runs out and its waiter is granted, the survivors elect another leader,
// and the restarted node takes its name over from its silent incarnation and becomes ready.

const etcdTest = needsEtcd(test);
/** Generous against a loaded machine: the silence bound is the 5 s name lease. */
const RECOVERY_MS = 90_000;
const NODE_PASSWORD = 'node-password';
const READER_PASSWORD = 'reader-password';

function etcdctl(endpoints: string, args: readonly string[]): string {
  const run = spawnSync('etcdctl', ['--endpoints', endpoints, ...args], { encoding: 'utf8', timeout: 20_000 });
  if (run.status !== 0) throw new Error(`etcdctl ${args.join(' ')}: exit ${run.status}: ${run.stderr}`);
  return run.stdout;
}

/** Root, a read-write role on the cluster's keys for the nodes, a read-only role on `/<cluster>/` for the reader; then auth on. */
function enableAuth(endpoints: string, cluster: string): void {
  // prettier-ignore
  const steps: string[][] = [
    ['user', 'add', 'root:root-password'], ['user', 'grant-role', 'root', 'root'],
    ['role', 'add', 'lockserver'],
    ['role', 'grant-permission', 'lockserver', '--prefix=true', 'readwrite', `/${cluster}/`],
    ['role', 'grant-permission', 'lockserver', 'readwrite', `/${cluster}:peer-secret`],
    ['user', 'add', `node:${NODE_PASSWORD}`], ['user', 'grant-role', 'node', 'lockserver'],
    ['role', 'add', 'monitoring'], ['role', 'grant-permission', 'monitoring', '--prefix=true', 'read', `/${cluster}/`],
    ['user', 'add', `reader:${READER_PASSWORD}`], ['user', 'grant-role', 'reader', 'monitoring'],
    ['auth', 'enable'],
  ];
  for (const step of steps) etcdctl(endpoints, step);
}

/** The lease holding `key`, as the read-only user sees it (hex, as etcdctl takes it). */
function leaseOf(endpoints: string, key: string): string {
  const fields = etcdctl(endpoints, ['--user', `reader:${READER_PASSWORD}`, 'get', key, '-w', 'fields']);
  const lease = /"Lease" : (\d+)/.exec(fields)?.[1];
  if (lease === undefined || lease === '0') throw new Error(`no lease on ${key}: ${fields}`);
  return BigInt(lease).toString(16);
}

/** `etcdctl lease keep-alive` as the read-only user, until the test ends. */
function keepAliveAsReader(t: ExecutionContext, endpoints: string, lease: string): { child: ChildProcess; renewals: () => number } {
  const child = spawn('etcdctl', ['--endpoints', endpoints, '--user', `reader:${READER_PASSWORD}`, 'lease', 'keep-alive', lease], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let renewals = 0;
  child.stdout.on('data', (chunk: Buffer) => (renewals += chunk.toString().split('keepalived').length - 1));
  child.stderr.resume();
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  return { child, renewals: () => renewals };
}

etcdTest.serial(
  'a read-only etcd user keeping the killed leader’s name lease alive delays nothing: the expiry and its waiter’s grant, the next leader, the restarted node’s rejoin',
  async (t) => {
    t.timeout(240_000);
    const etcd = await EtcdCluster.start(t, { members: 1 });
    const cluster = new LockCluster(t, etcd);
    const endpoints = etcd.endpoints;
    enableAuth(endpoints, cluster.name);
    const passwordFile = join(etcd.dir, 'node-password');
    await writeFile(passwordFile, NODE_PASSWORD);
    const nodes = await cluster.startNodes(3, ['--etcd-user', 'node', '--etcd-password-file', passwordFile]);
    const leader = await Promise.any(nodes.map((n) => n.event('leader', (e) => e.fields.self === 'true', 30_000).then(() => n)));
    const [first, second] = nodes.filter((n) => n !== leader) as [ServerProcess, ServerProcess];
    const leaderName = cluster.nameOf(leader);

    // The reader renews the leader's name lease (its candidacy, declarations and formats share it).
    const lease = leaseOf(endpoints, `/${cluster.name}/nodes/${leaderName}`);
    const reader = keepAliveAsReader(t, endpoints, lease);
    await pollUntil('the reader to renew the lease', async () => (reader.renewals() > 0 ? true : undefined), 30_000);
    t.throws(() => etcdctl(endpoints, ['--user', `reader:${READER_PASSWORD}`, 'put', `/${cluster.name}/nodes/${leaderName}`, 'x']), {
      message: /permission denied/,
    });

    const alice = await first.accepted();
    const bob = await second.accepted();
    t.is(await ask.request(alice, 'k', '1', 'alice', { ttl: 6 }), 1);
    t.is(await ask.request(bob, 'k', '1', 'bob', { ttl: 600, ttw: 600 }), 2);
    t.is(await ask.location(bob, 'k', '1', 'bob'), 2, 'bob still waits when the leader is killed');
    const leaderSeen = [first, second].map((n) => n.eventsNamed('leader').length);
    leader.signal('SIGKILL');
    await leader.waitForExit();

    // alice's 6 s run out although the reader keeps the dead leader's name alive: bob owns.
    await pollUntil('bob to be granted', async () => ((await ask.location(bob, 'k', '1', 'bob')) === 1 ? true : undefined), RECOVERY_MS);
    t.is(await ask.findOwner(alice, 'k', '1'), 'bob');
    // Both survivors name a live leader, one of them.
    for (const [i, node] of [first, second].entries()) {
      await pollUntil(
        `${cluster.nameOf(node)} to name another leader`,
        async () => {
          const changes = node.eventsNamed('leader').slice(leaderSeen[i]);
          const last = changes[changes.length - 1];
          return last !== undefined && last.fields.leader !== leaderName && last.fields.leader !== 'none' ? true : undefined;
        },
        RECOVERY_MS,
      );
    }
    t.true(reader.child.exitCode === null && reader.child.signalCode === null, 'the reader kept the lease alive throughout');

    // The restarted node finds its name held by its dead incarnation's lease, proves it silent, takes it.
    const back = await cluster.restart(leader, false);
    await cluster.ready(back, RECOVERY_MS);
    t.truthy(back.eventsNamed('name-taken-over')[0], 'the name was taken over from the silent incarnation');
    const carol = await back.accepted();
    t.is(await ask.findOwner(carol, 'k', '1'), 'bob');
    t.is(await ask.request(carol, 'k', '1', 'carol'), 2);
  },
);
