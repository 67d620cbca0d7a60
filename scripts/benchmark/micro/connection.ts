/**
 * Everything the server does per command except the socket and the kernel: batches of request
 * frames handed as 'data' events to real Connections (one per stand-in socket, 50 of them, in
 * turn), decoded, run against a LocalLockService (or a stub that answers at once, to see the
 * Connection and the decoder alone) and encoded, the replies flushed to a socket that takes them.
 * The batches are made before the clock starts, so the harness costs next to nothing itself.
 *
 *   node dist/scripts/benchmark/micro/connection.js [keySpace|own] [depth] [table|stub]
 *       prints CPU ns per op (median and best of 5 rounds)
 *   node dist/scripts/benchmark/micro/connection.js [keySpace|own] [depth] [table|stub] --ops N
 *       runs N ops and exits, for an instruction count that does not depend on the machine's
 *       load: under valgrind --tool=callgrind with node --single-threaded --predictable-gc-schedule,
 *       (count at 300k ops - count at 100k) / 200k is reproducible to about 0.1%
 */
import { idleTimers } from '../../../test/doubles/idleTimers.js';
import { FakeClock } from '../../../test/doubles/FakeClock.js';
import { LocalLockService } from '../../../src/locks/LocalLockService.js';
import { NO_WAITING, type LockService } from '../../../src/locks/LockService.js';
import { buildCycleRing, RandomCycles } from '../load/cycles.js';
import { StandInSocket, standInConnection, standInHost } from '../../../test/doubles/standIns.js';
import { cpuNsPerOp, opsArgument } from './cpuPerOp.js';

const CONNECTIONS = 50;
/** Batches made ahead per connection (enough that random keys do not come round too soon). */
const BATCH_BYTES_AHEAD = 8_192;
/** The fake clock moves 1 ms per this many ops. */
const OPS_PER_MS = 512;

const { fixedOps, rest } = opsArgument(process.argv.slice(2));
const [keySpaceArg = '100000', depthArg = '16', kind = 'table'] = rest;
const keySpace = keySpaceArg === 'own' ? 0 : Number(keySpaceArg);
const depth = Number(depthArg);
if (!(depth >= 1) || !(keySpace >= 0) || (kind !== 'table' && kind !== 'stub')) {
  console.error('usage: connection.js [keySpace|own] [depth] [table|stub] [--ops N]');
  process.exit(2);
}

const stub: LockService = {
  findOwner: () => '',
  request: () => 1,
  requestFenced: () => ({ position: 1, token: 1 }),
  acquire: () => ({ position: 1, token: 1 }),
  awaitLoss: () => 0,
  queues: () => [],
  waiting: NO_WAITING,
  fence: () => 1,
  location: () => 1,
  renew: () => true,
  release: () => 1,
  releaseKey: () => 1,
  releaseAll: () => 0,
  list: () => [],
  counts: async () => ({ owners: 0, waiters: 0 }),
  drainCounts: async () => ({ owners: 0, waiters: 0 }),
  snapshot: async () => [],
  highestToken: async () => 0,
  restore: async () => {},
  close: async () => {},
};

const clock = new FakeClock(1_000);
const service = kind === 'stub' ? stub : new LocalLockService(clock, idleTimers);
const host = standInHost(service, clock);

const batchesAhead = Math.max(64, Math.ceil(BATCH_BYTES_AHEAD / depth));
const batches = Array.from({ length: CONNECTIONS }, (_, n): Buffer[] => {
  if (keySpace === 0) {
    const ring = buildCycleRing('lockserver', `bench:micro:c${n}`, `c${n}`, depth).batches;
    return Array.from({ length: batchesAhead }, (_, i) => ring[i % ring.length]!);
  }
  const cycles = new RandomCycles('lockserver', 'k:', `client${n}`, keySpace, depth, n + 1);
  return Array.from({ length: batchesAhead }, () => Buffer.from(cycles.next()));
});
const sockets = batches.map(() => new StandInSocket(() => {})); // replies are dropped, not kept
for (const socket of sockets) standInConnection(socket, host);

let ops = 0;
let round = 0;
/** One 'data' event on each connection in turn. */
function pass(): void {
  const batch = round++ % batchesAhead;
  for (let n = 0; n < CONNECTIONS; n++) {
    sockets[n]!.emit('data', batches[n]![batch]);
    ops += depth;
    if (ops % OPS_PER_MS < depth) clock.advance(1);
  }
}

if (fixedOps !== undefined) {
  while (ops < fixedOps) pass();
} else {
  const measured = await cpuNsPerOp(
    () => {
      for (let i = 0; i < 16; i++) pass();
    },
    () => ops,
    800,
    400,
  );
  console.log(JSON.stringify({ keySpace: keySpaceArg, depth, service: kind, ...measured }));
}
