import test from 'ava';
import { writeFile } from 'node:fs/promises';
import { batchesPerValue, needsEtcd, startCluster, untilAnswered } from '../helpers/etcdCluster.js';
import { bundlesSent, get, sample } from '../helpers/metrics.js';
import type { RawClient } from '../helpers/rawClient.js';
import type { ServerProcess } from '../helpers/serverProcess.js';
import { ask } from '../helpers/wire.js';

// Issues 20 and 36, on real etcd, with nothing configured: each node declares where the others reach
// its lock port (the address it reaches etcd from), the leader's sequencer appends the other nodes'
// batches with its own, one etcd write holding several nodes' batches; a node whose address the
// leader's hosts file does not admit is refused at its lock port and appends itself.

const etcdTest = needsEtcd(test);
/** Clients per node, each taking and releasing locks of its own in a loop. */
const CLIENTS_PER_NODE = 8;
const ROUNDS = 40;

/** CLIENTS_PER_NODE clients on each node, each doing ROUNDS request+release cycles on keys of its own. */
async function load(nodes: readonly ServerProcess[]): Promise<void> {
  await Promise.all(
    nodes.flatMap((node, n) =>
      Array.from({ length: CLIENTS_PER_NODE }, (_, c) =>
        untilAnswered(node, async (client: RawClient) => {
          for (let i = 0; i < ROUNDS; i++) {
            const key = `k${n}-${c}-${i}`;
            if ((await ask.request(client, key, '1', `o${n}-${c}`)) !== 1) throw new Error(`${key} not granted`);
            if ((await ask.release(client, key, '1', `o${n}-${c}`)) !== 1) throw new Error(`${key} not released`);
          }
        }),
      ),
    ),
  );
}

/** Whether `node` logged an append route matching `via` (`event=append-route via=…`). */
function routedAs(node: ServerProcess, via: RegExp): boolean {
  return node.lines.some((line) => {
    const m = /\bevent=append-route via=("[^"]*"|\S+)/.exec(line);
    return m !== null && via.test(m[1]!.replace(/^"|"$/g, ''));
  });
}

/** Loads until every node has routed an append as `via` (the routes are read within a second of the start), at most 10 rounds. */
async function loadUntilRouted(nodes: readonly ServerProcess[], via: RegExp): Promise<void> {
  for (let round = 0; round < 10; round++) {
    await load(nodes);
    if (nodes.every((n) => routedAs(n, via))) return;
  }
  throw new Error(`not every node routed its appends as ${via}`);
}

etcdTest.serial(
  'by default, the leader appends batches of several nodes in one write; every command is answered; the metrics count the routes and bundles',
  async (t) => {
    t.timeout(120_000);
    const { etcd, cluster, nodes } = await startCluster(t, { args: ['--metrics-port', '0', '--metrics-listen', '127.0.0.1'] });
    for (const node of nodes) {
      const declared = await node.event('peer-address', () => true, 10_000);
      t.deepEqual([declared.fields.address, declared.fields.how], [`127.0.0.1:${node.port}`, 'derived']);
    }
    await loadUntilRouted(nodes, /^(own-sequencer|forwarded)$/);
    // Bundles start once the declarations were read twice (every node reads them, then the record
    // says they may be written): load until one shows, at most 10 rounds.
    let sizes = await batchesPerValue(etcd.endpointList, cluster.name);
    for (let round = 0; round < 10 && !sizes.some((n) => n > 1); round++) {
      await load(nodes);
      sizes = await batchesPerValue(etcd.endpointList, cluster.name);
    }
    t.log(`log values retained: ${sizes.length}; batches in them: ${sizes.reduce((a, b) => a + b, 0)}; largest: ${Math.max(...sizes)}`);
    t.true(
      sizes.some((n) => n > 1),
      'some value holds batches of more than one node',
    );
    // Each node's metrics: the leader counts its sequencer's appends by batches carried, the others their forwards.
    const scraped = await Promise.all(nodes.map(async (node) => (await get(Number((await node.event('metrics-started')).fields.port), '/metrics')).body));
    const leaders = scraped.filter((body) => sample(body, 'lockserver_cluster_role{role="leader"}') === 1);
    t.is(leaders.length, 1);
    const lead = leaders[0]!;
    const bundles = bundlesSent(lead);
    t.log(`the sequencer's appends: ${sample(lead, 'lockserver_cluster_sequencer_append_batches_count')}, ${bundles} of them bundles`);
    t.true(bundles > 0, 'the leader counted appends carrying several batches');
    t.true(sample(lead, 'lockserver_cluster_append_attempts_total{route="own-sequencer",outcome="committed"}')! > 0);
    for (const body of scraped.filter((b) => b !== lead)) {
      t.true(sample(body, 'lockserver_cluster_append_attempts_total{route="forwarded",outcome="committed"}')! > 0, 'a follower counted its forwards');
      t.is(sample(body, 'lockserver_cluster_sequencer_append_batches_count'), 0, 'a follower sequenced nothing');
    }
  },
);

etcdTest.serial('a node the leader’s hosts file does not admit is refused at its lock port (greeting 00), says so, and appends itself', async (t) => {
  t.timeout(120_000);
  const { cluster, nodes } = await startCluster(t, { nodes: 1, args: ['--candidate-priority', '1'] });
  const leader = nodes[0]!;
  const follower = await cluster.startNode({ name: 'n2', args: ['--candidate-priority', 'off'] });
  await loadUntilRouted([leader, follower], /^(own-sequencer|forwarded)$/);
  t.true(routedAs(follower, /^forwarded$/), 'n2 forwards to n1');
  // The leader stops admitting 127.0.0.1 (SIGHUP reloads its hosts file; links made stay): a
  // node joining now is refused at the lock port, and its commands are appended all the same.
  await writeFile(leader.hostsFile, '169.254.0.1\n');
  leader.signal('SIGHUP');
  await leader.event('hosts-reloaded', () => true, 10_000);
  const late = await cluster.startNode({ name: 'n3', args: ['--candidate-priority', 'off'] });
  const failed = late.event('peer-link-failed', () => true, 20_000);
  await load([late]);
  t.regex((await failed).fields.reason ?? '', /greeting 00/);
  const refused = await leader.event('refused', () => true, 10_000);
  t.deepEqual([refused.fields.peer, refused.fields.reason], ['127.0.0.1', 'not-in-hosts-file']);
});
