/**
 * A cluster node's own work per command, without etcd, gRPC or the kernel: three
 * ClusterLockService nodes on the simulation's in-memory etcd (test/doubles/MemoryLog.ts: no
 * faults, HOP_MS a hop, in virtual time), each serving 16 real Connections on stand-in sockets
 * that run the cluster bench's 48 × 16 load closed-loop (a connection sends its next 16 requests
 * once the replies to its last 16 have come). Everything a node's code does for a command is here:
 * decoding the request, the service and its answer, the round, encoding the batch, decoding and
 * applying every node's batches, the reply. That is what the null cluster nodes
 * (targets/nullClusterNode.ts) do not do; the in-memory store and the virtual timers add their own
 * cost per round (not per command), the same for any build.
 *
 *   node dist/scripts/benchmark/micro/clusterNode.js [seconds] [depth]
 *       prints CPU ns per command (median and best of 5 rounds) and commands per batch; depth 1
 *       runs the unpipelined load (48 × 1: a round carries at most a node's 16 commands, so what
 *       our code does per round, not per command, shows), the default is 16
 *   node dist/scripts/benchmark/micro/clusterNode.js [seconds] [depth] --ops N
 *       runs N commands and exits (for callgrind, as micro/connection.ts says)
 */
import { ClusterLockService } from '../../../src/cluster/ClusterLockService.js';
import { mulberry32 } from '../../../src/runtime/Random.js';
import { silentLogger } from '../../../src/runtime/Logger.js';
import { MemoryStore } from '../../../test/doubles/MemoryLog.js';
import { VirtualTimers } from '../../../test/doubles/VirtualTimers.js';
import { buildCycleRing } from '../load/cycles.js';
import { StandInSocket, standInConnection, standInHost } from '../../../test/doubles/standIns.js';
import { cpuNsPerOp, opsArgument } from './cpuPerOp.js';

const NODES = 3;
const CONNECTIONS_PER_NODE = 16;
/** Every reply of this load (a position, a count) is a u16. */
const REPLY_BYTES = 2;
/** One hop to or from the in-memory etcd. */
const HOP_MS = 1;
/** Virtual time each step of the run loop lets pass. */
const STEP_MS = 1;
/** Virtual time the nodes get to join and catch up. */
const START_LIMIT_MS = 60_000;

const { fixedOps, rest } = opsArgument(process.argv.slice(2));
const [secondsArg = '5', depthArg = '16'] = rest;
const seconds = Number(secondsArg);
const DEPTH = Number(depthArg);
if (!(seconds > 0) || !Number.isInteger(DEPTH) || DEPTH < 1) {
  console.error('usage: clusterNode.js [seconds] [depth] [--ops N]');
  process.exit(2);
}

const vt = new VirtualTimers(0);
const store = new MemoryStore({ timers: vt, clock: vt, random: mulberry32(1), latencyMs: [HOP_MS, HOP_MS], members: NODES });
const nodes = Array.from(
  { length: NODES },
  (_, i) =>
    new ClusterLockService(
      { nodeName: `n${i}`, candidatePriority: i + 1, commitTimeoutMs: 5_000, maxEntries: 10_000_000 },
      { log: store.client(`n${i}`, vt), clock: vt, timers: vt, random: mulberry32(100 + i), logger: silentLogger },
    ),
);

let started = 0;
for (const node of nodes) void node.start().then(() => started++);
while (started < NODES) {
  if (vt.now() > START_LIMIT_MS) throw new Error(`the nodes did not start within ${START_LIMIT_MS} ms of virtual time`);
  await vt.advance(STEP_MS);
}

let ops = 0;
/** One closed-loop client: the bench's own traffic, its next burst sent once every reply of the last has come. */
function client(node: number, c: number): void {
  const { batches } = buildCycleRing('lockserver', `bench:9ix.0:w${node}:c${c}`, `w${node}c${c}`, DEPTH);
  let next = 0;
  let awaited = 0;
  const send = (): void => {
    awaited = DEPTH * REPLY_BYTES;
    socket.emit('data', batches[next++ % batches.length]);
  };
  const socket = new StandInSocket((bytes) => {
    awaited -= bytes.length;
    ops += bytes.length / REPLY_BYTES;
    if (awaited === 0) queueMicrotask(send);
  });
  standInConnection(socket, standInHost(nodes[node]!, vt));
  send();
}
for (let node = 0; node < NODES; node++) for (let c = 0; c < CONNECTIONS_PER_NODE; c++) client(node, c);

const batchesBefore = store.logHead.version;
if (fixedOps !== undefined) {
  while (ops < fixedOps) await vt.advance(STEP_MS);
} else {
  const measured = await cpuNsPerOp(
    async () => {
      for (let i = 0; i < 16; i++) await vt.advance(STEP_MS);
    },
    () => ops,
    1500,
    (seconds * 1000) / 5,
  );
  console.log(JSON.stringify({ ...measured, commandsPerBatch: Math.round(ops / (store.logHead.version - batchesBefore)) }));
}
process.exit(0);
