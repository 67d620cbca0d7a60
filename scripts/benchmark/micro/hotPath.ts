/**
 * The server's hot path without the network: request frames of the random-keys workload (keys
 * drawn from a shared key space, index "row", owners "client<N>", request then release, 16 per
 * batch) decoded, run against a LocalLockService and their replies encoded, as a Connection does.
 * Prints CPU ns per op (median and best of 5 rounds) and heap bytes allocated per op (run with a young generation big enough that no
 * scavenge happens inside the allocation sample, e.g. --max-semi-space-size=256 --min-semi-space-size=256).
 *
 *   node --max-semi-space-size=256 --min-semi-space-size=256 dist/scripts/benchmark/micro/hotPath.js [keySpace|own] [seconds]
 */
import { PerformanceObserver } from 'node:perf_hooks';
import { FakeClock } from '../../../test/doubles/FakeClock.js';
import { LocalLockService } from '../../../src/locks/LocalLockService.js';
import type { Timers } from '../../../src/runtime/Timers.js';
import { BufferWriter } from '../../../src/protocol/BufferWriter.js';
import { ANY_INDEX, Command } from '../../../src/protocol/constants.js';
import { RequestDecoder } from '../../../src/protocol/decodeRequest.js';
import { encodeCountReply, encodePositionReply } from '../../../src/protocol/encodeReply.js';
import { buildCycleRing, RandomCycles } from '../load/cycles.js';
import { cpuNsPerOp } from './cpuPerOp.js';

/** A number: random keys from that many; "own": each connection cycles over its own 32 keys (the bench's throughput rows). */
const keySpaceArg = process.argv[2] ?? '100000';
const keySpace = keySpaceArg === 'own' ? 0 : Number(keySpaceArg);
const seconds = Number(process.argv[3] ?? 3);
const CONNECTIONS = 50;
const DEPTH = 16;
/** Simulated rate: the fake clock moves 1 ms per this many ops. */
const OPS_PER_MS = 500;

let sweep: () => void = () => {};
const scheduler: Timers = {
  after: () => () => {},
  every: (_ms, task) => {
    sweep = task;
    return () => {};
  },
  soon: (task) => task(),
};
const clock = new FakeClock(0);
const service = new LocalLockService(clock, scheduler);
const ring = (n: number): { next(): Buffer } => {
  const { batches } = buildCycleRing('lockserver', `bench:micro:w0:c${n}`, `w0c${n}`, DEPTH);
  let i = 0;
  return { next: () => batches[i++ % batches.length]! };
};
const sources = Array.from({ length: CONNECTIONS }, (_, n) =>
  keySpace === 0 ? ring(n) : new RandomCycles('lockserver', 'k:', `client${n}`, keySpace, DEPTH, n + 1),
);
const decoders = sources.map(() => new RequestDecoder());
const out = new BufferWriter(256, 64 * 1024);

let ops = 0;
function batch(n: number): void {
  const decoder = decoders[n]!;
  decoder.push(Buffer.from(sources[n]!.next()));
  for (let request = decoder.next(); request !== undefined; request = decoder.next()) {
    if (request.command === Command.Request) encodePositionReply(out, service.request(request, true));
    else if (request.command === Command.Release) {
      const removed =
        request.index === ANY_INDEX ? service.table.releaseKey(request.key, request.owner) : service.release(request.key, request.index, request.owner);
      encodeCountReply(out, removed);
    }
    ops++;
    if (ops % OPS_PER_MS === 0) {
      clock.advance(1);
      if (ops % (OPS_PER_MS * 100) === 0) sweep();
    }
  }
  out.flush();
}

let next = 0;
const measured = await cpuNsPerOp(
  () => {
    for (let i = 0; i < 1024; i++) {
      batch(next);
      next = next + 1 === CONNECTIONS ? 0 : next + 1;
    }
  },
  () => ops,
  1000,
  (seconds * 1000) / 5,
);

let collections = 0;
const observer = new PerformanceObserver((list) => void (collections += list.getEntries().length));
observer.observe({ entryTypes: ['gc'] });
const SAMPLE = 50_000;
const heapBefore = process.memoryUsage().heapUsed;
const from = ops;
for (let n = 0; ops - from < SAMPLE; n = (n + 1) % CONNECTIONS) batch(n);
const allocated = (process.memoryUsage().heapUsed - heapBefore) / (ops - from);
setImmediate(() => {
  observer.disconnect();
  console.log(
    JSON.stringify({
      keySpace: keySpaceArg,
      ...measured,
      bytesPerOp: collections === 0 ? Math.round(allocated) : `unknown (${collections} GCs in the sample)`,
    }),
  );
});
