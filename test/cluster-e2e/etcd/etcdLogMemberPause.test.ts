import test from 'ava';
import { bounded } from '../../helpers/bounded.js';
import { needsEtcd, startCluster, untilAnswered } from '../../helpers/etcdCluster.js';
import type { RawClient } from '../../helpers/rawClient.js';
import type { ServerProcess } from '../../helpers/serverProcess.js';
import { ask } from '../../helpers/wire.js';

// Defect 2 of issue 17: one etcd member of three stopped (SIGSTOP: its connections stay open and
// silent) must not starve any lockserver node while the other two make a quorum. Every node keeps
// answering writes and reads during the pause. Nothing here asserts how long anything took: the
// figures are logged; every wait is bounded.

const etcdTest = needsEtcd(test);
const PAUSE_MS = 15_000;
/** Longest one command may wait for its reply; a node closes the connection after --commit-timeout (5 s) anyway. */
const REPLY_MS = 30_000;

interface NodeLoad {
  answered: number;
  closed: number;
  /** ms after the pause of the first command answered. */
  firstAnswerMs: number | undefined;
  longestGapMs: number;
}

/** Until `until`: lock, read and unlock one key through `node`, on one connection while it lasts. */
async function serve(node: ServerProcess, i: number, pausedAt: number, until: number): Promise<NodeLoad> {
  const load: NodeLoad = { answered: 0, closed: 0, firstAnswerMs: undefined, longestGapMs: 0 };
  let lastAnswer = pausedAt;
  let client: RawClient | undefined;
  for (let n = 0; Date.now() < until; n++) {
    try {
      client ??= await node.accepted();
      const c = client;
      const owner = `o${n}`;
      await bounded(
        (async () => {
          await ask.request(c, 'pause', String(i), owner, { ttl: 60 });
          await ask.findOwner(c, 'pause', String(i));
          await ask.release(c, 'pause', String(i), owner);
        })(),
        REPLY_MS,
        `node ${i} to answer`,
      );
      const now = Date.now();
      load.answered++;
      load.firstAnswerMs ??= now - pausedAt;
      load.longestGapMs = Math.max(load.longestGapMs, now - lastAnswer);
      lastAnswer = now;
    } catch (error) {
      if (!/closed|ECONNRESET|EPIPE|incomplete reply/.test((error as Error).message)) throw error;
      load.closed++;
      client?.destroy();
      client = undefined;
    }
  }
  client?.destroy();
  load.longestGapMs = Math.max(load.longestGapMs, until - lastAnswer);
  return load;
}

etcdTest.serial(
  'one etcd member of three paused for 15 s (the one serving the most node watches): every node keeps answering writes and reads and keeps its name; after SIGCONT too',
  async (t) => {
    t.timeout(120_000);
    const { etcd, nodes } = await startCluster(t);
    for (const [i, node] of nodes.entries()) t.is(await untilAnswered(node, (c) => ask.request(c, 'warm', String(i), 'w')), 1);

    // Pause the member that serves the most of the nodes' watches (the case that starved nodes
    // before), a follower on a tie: a leader's pause adds an etcd election to the picture.
    const leader = await etcd.leader();
    const candidates = [...etcd.others(leader), leader];
    const watchers = await Promise.all(candidates.map((m) => etcd.watchersOn(m)));
    const most = watchers.reduce<number>((best, w, i) => ((w ?? 0) > (watchers[best] ?? 0) ? i : best), 0);
    const victim = candidates[most]!;
    t.log(
      `pausing ${victim.name}${victim === leader ? ' (the etcd leader)' : ''}; watchers per member: ${candidates.map((m, i) => `${m.name}=${watchers[i]}`).join(' ')}`,
    );

    const pausedAt = Date.now();
    etcd.pause(victim);
    let loads: NodeLoad[];
    try {
      loads = await Promise.all(nodes.map((node, i) => serve(node, i, pausedAt, pausedAt + PAUSE_MS)));
    } finally {
      etcd.resume(victim);
    }
    for (const [i, load] of loads.entries()) {
      t.log(
        `node n${i + 1}: ${load.answered} rounds answered, ${load.closed} connections closed unanswered, first answer ${load.firstAnswerMs} ms after the pause, longest gap ${load.longestGapMs} ms`,
      );
      t.true(load.answered > 0, `node n${i + 1} answered during the pause`);
    }
    for (const [i, node] of nodes.entries()) {
      t.is(await untilAnswered(node, (c) => ask.request(c, 'after', String(i), 'back')), 1);
      // The name lease is kept alive through the other members: no node lost its name and rejoined.
      t.deepEqual(
        node.lines.filter((line) => line.includes('event=name-lost')),
        [],
        `node n${i + 1} kept its name`,
      );
    }
  },
);
