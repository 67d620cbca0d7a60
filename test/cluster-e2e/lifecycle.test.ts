import test from 'ava';
import { connect } from 'node:net';
import { EtcdCluster, freePorts, LockCluster, needsEtcd, startCluster } from '../helpers/etcdCluster.js';
import { ask, bytes, hex } from '../helpers/wire.js';
import { get, sample } from '../helpers/metrics.js';
import { Etcd3 } from 'etcd3';

// A node's life in the cluster: drain, start with etcd down, a name already taken.

const etcdTest = needsEtcd(test);

/** Resolves with the connect error's code ('ECONNREFUSED' when nothing listens), or 'connected'. */
function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

etcdTest.serial(
  'SIGSYS drains one node: its new requests get 0, the others are unaffected; it exits 0 once its entries are released through other nodes',
  async (t) => {
    t.timeout(90_000);
    const { nodes } = await startCluster(t);
    const [a, b, c] = await Promise.all(nodes.map((n) => n.accepted()));
    t.is(await ask.request(a!, 'k', '1', 'alice'), 1);
    t.is(await ask.request(a!, 'k', '1', 'bob'), 2);
    t.is(await ask.request(b!, 'k', '2', 'carol'), 1);

    const drainStarted = nodes[0]!.nextEvent('drain-started');
    nodes[0]!.signal('SIGSYS');
    await drainStarted;

    // Through the draining node: a new entry gets position 0 (literal bytes), the rest works.
    a!.send(bytes(0x02, 1, 'k', 1, '3', 4, 'dave', 0, 0, 0, 0, 0));
    t.is(hex(await a!.read(2)), '0000');
    t.is(await ask.location(a!, 'k', '3', 'dave'), 0);
    t.is(await ask.request(a!, 'k', '1', 'bob'), 2, 're-requesting an existing entry still works');
    // The other nodes create entries as usual.
    t.is(await ask.request(b!, 'k', '3', 'dave'), 1);
    t.is(await ask.request(c!, 'k', '3', 'erin'), 2);

    // alice's entry (made through A) released through B: bob, also A's, is promoted; A stays.
    t.is(await ask.release(b!, 'k', '1', 'alice'), 1);
    t.is(await ask.findOwner(a!, 'k', '1'), 'bob');
    t.true(nodes[0]!.running, 'the draining node waits for bob');

    // bob released through C: nothing made through A is left, A leaves with 0.
    const shutdown = nodes[0]!.nextEvent('shutdown', () => true, 20_000);
    t.is(await ask.release(c!, 'k', '1', 'bob'), 1);
    t.is((await shutdown).fields.reason, 'drained');
    t.deepEqual(await nodes[0]!.waitForExit(), { code: 0, signal: null });
    await a!.waitForClose();

    // The others still serve the cluster's table, entries of other origins intact.
    t.is(await ask.findOwner(b!, 'k', '2'), 'carol');
    t.deepEqual(
      (await ask.list(c!, 'k')).map((e) => [e.index, e.owner]),
      [
        ['2', 'carol'],
        ['3', 'dave'],
        ['3', 'erin'],
      ],
    );
    t.is(await ask.request(b!, 'k', '4', 'frank'), 1);
    t.true(nodes[1]!.running && nodes[2]!.running);
  },
);

etcdTest.serial('etcd unreachable at start: the node says so, keeps its lock port closed, and becomes ready once etcd is up', async (t) => {
  t.timeout(90_000);
  const etcd = await EtcdCluster.create(t);
  const cluster = new LockCluster(t, etcd);
  const [port] = await freePorts(1);
  const node = await cluster.startNode({ name: 'early', args: ['--port', String(port)], waitReady: false });

  const unreachable = await node.event('etcd-unreachable', () => true, 30_000);
  t.truthy(unreachable.fields.error);
  t.is(await tryConnect(port!), 'ECONNREFUSED');
  t.is(node.eventsNamed('started').length, 0);
  t.is(node.eventsNamed('ready').length, 0);
  t.true(node.running);

  await etcd.launch();
  await cluster.ready(node, 60_000);
  t.is(node.port, port!);
  t.is(node.eventsNamed('lock-file-not-loaded').length, 1);
  const client = await node.accepted();
  t.is(await ask.request(client, 'k', '1', 'alice'), 1);
  t.is(await ask.findOwner(client, 'k', '1'), 'alice');
});

etcdTest.serial(
  'a second node with a taken --name waits (event=name-held); once the first is killed -9 it gets the name within the lease and serves',
  async (t) => {
    t.timeout(90_000);
    const { cluster, nodes } = await startCluster(t, { nodes: 1 });
    const first = nodes[0]!;
    const c1 = await first.accepted();
    t.is(await ask.request(c1, 'k', '1', 'alice'), 1);

    const second = await cluster.startNode({ name: 'n1', waitReady: false });
    const held = await second.event('name-held', () => true, 30_000);
    t.is(held.fields.name, 'n1');
    t.regex(held.fields.holder ?? '', new RegExp(`pid ${first.child.pid}\\b`));
    t.is(second.eventsNamed('started').length, 0);

    first.signal('SIGKILL');
    await first.waitForExit();
    // The lease is 5 s and the name is retried every second: bounded well above that, nothing timed.
    await cluster.ready(second, 30_000);
    t.is(second.eventsNamed('cluster-joined').length, 1);
    const c2 = await second.accepted();
    t.is(await ask.findOwner(c2, 'k', '1'), 'alice', 'the lock made through the killed node is still there');
    t.is(await ask.request(c2, 'k', '1', 'bob'), 2);
  },
);

etcdTest.serial(
  'a log value no node can read is refused alike on every node (log-value-refused, counted), and the cluster goes on past it; a node started after it catches up',
  async (t) => {
    t.timeout(60_000);
    const { etcd, cluster, nodes } = await startCluster(t, { nodes: 2, args: ['--metrics-port', '0', '--metrics-listen', '127.0.0.1'] });
    const client = await nodes[0]!.accepted();
    t.is(await ask.request(client, 'k', '1', 'alice'), 1);
    // Issue 36: a value apply cannot decode (here a format number no version knows) stopped every
    // node for good; one restarted died again catching up, since the value stays in the log.
    const raw = new Etcd3({ hosts: etcd.endpointList });
    t.teardown(() => raw.close());
    const refused = nodes.map((node) => node.event('log-value-refused', () => true, 10_000));
    await raw.put(`/${cluster.name}/log`).value(Buffer.from([0x42, 9, 0, 0]));
    for (const event of await Promise.all(refused)) t.regex(event.fields.reason ?? '', /format 9 is not known/);
    t.is(await ask.request(client, 'k', '1', 'bob'), 2, 'bob queues behind alice: the cluster goes on');
    const other = await nodes[1]!.accepted();
    t.is(await ask.findOwner(other, 'k', '1'), 'alice');
    for (const node of nodes) {
      const body = (await get(Number((await node.event('metrics-started')).fields.port), '/metrics')).body;
      t.is(sample(body, 'lockserver_cluster_log_values_refused_total'), 1);
    }
    const late = await cluster.startNode({ name: 'n3' });
    t.regex((await late.event('log-value-refused', () => true, 10_000)).fields.reason ?? '', /format 9/);
    t.is(await ask.location(await late.accepted(), 'k', '1', 'bob'), 2);
    t.true(late.running);
  },
);
