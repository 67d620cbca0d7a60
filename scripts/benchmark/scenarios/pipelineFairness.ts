import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import { asciiBytes } from '../../../src/bytes.js';
import { Command, GREETING_ACCEPTED } from '../../../src/protocol/constants.js';
import { BenchClient, encodeRequests } from '../BenchClient.js';
import type { BenchConfig } from '../config.js';
import { fillLocks } from '../fill.js';
import { Histogram } from '../Histogram.js';
import type { Endpoint } from '../load/messages.js';
import type { Target } from '../targets/Target.js';

/** Issue 8's reproduction: owners this long make a 1,000-entry list reply ~212 KB. */
const OWNER_BYTES = 200;
const KEY = asciiBytes('K');
const INDEX = asciiBytes('1');
/** How often the other client asks for stats. */
const STATS_INTERVAL_MS = 10;
const HEAVY_LIMIT_MS = 300_000;

export interface PipelineFairnessResult {
  readonly entries: number;
  readonly listRequests: number;
  readonly listReplyBytes: number;
  /** From the heavy client's write to its last reply byte. */
  readonly heavyMs: number;
  /** The other client's stats calls (one every STATS_INTERVAL_MS) while the heavy one ran. */
  readonly statsCalls: number;
  readonly statsMs: { readonly p50: number; readonly p99: number; readonly max: number };
}

/**
 * One connection pipelines `fairnessRequests` list (0x07) requests for a key of `fairnessEntries`
 * entries in one write and reads at full speed; meanwhile another connection sends stats (0x08)
 * every 10 ms, one at a time. Reports how long the other client waited for its replies.
 */
export async function runPipelineFairness(target: Target, config: BenchConfig, log: (line: string) => void): Promise<PipelineFairnessResult> {
  const running = await target.start();
  const endpoint = running.endpoints[0]!;
  const setup = await BenchClient.connect(endpoint);
  const other = await BenchClient.connect(endpoint);
  try {
    const entries = config.fairnessEntries;
    await fillLocks(
      setup,
      entries,
      (n) => ({ command: Command.Request, key: KEY, index: INDEX, owner: asciiBytes(String(n).padStart(OWNER_BYTES, 'o')), ttl: 0, ttw: 0, priority: 0 }),
      (n) => n + 1,
    );
    const [sample] = await setup.call([{ command: Command.List, key: KEY }]);
    const listReplyBytes = sample!.length;
    setup.close();

    const requests = config.fairnessRequests;
    const batch = encodeRequests(Array.from({ length: requests }, () => ({ command: Command.List, key: KEY })));
    const timing = new Histogram();
    let heavyDone = false;
    const poll = (async () => {
      while (!heavyDone) {
        const t0 = performance.now();
        await other.call([{ command: Command.Stats }]);
        const elapsed = performance.now() - t0;
        timing.record(elapsed * 1000);
        if (elapsed < STATS_INTERVAL_MS && !heavyDone) await new Promise((resolve) => setTimeout(resolve, STATS_INTERVAL_MS - elapsed));
      }
    })();
    const heavyMs = await readEverything(endpoint, batch, requests * listReplyBytes);
    heavyDone = true;
    await poll;
    const result: PipelineFairnessResult = {
      entries,
      listRequests: requests,
      listReplyBytes,
      heavyMs,
      statsCalls: timing.count,
      statsMs: { p50: timing.percentile(50) / 1000, p99: timing.percentile(99) / 1000, max: timing.max / 1000 },
    };
    log(
      `fairness: ${requests} lists of ${listReplyBytes} bytes in ${(heavyMs / 1000).toFixed(1)} s; other client's stats: ` +
        `p99 ${result.statsMs.p99.toFixed(2)} ms, max ${result.statsMs.max.toFixed(2)} ms over ${result.statsCalls} calls`,
    );
    return result;
  } finally {
    setup.close();
    other.close();
    await running.stop();
  }
}

/** A heavy client: connects, writes `batch` at once, counts reply bytes at full speed until `expected`; returns the ms taken. */
function readEverything(endpoint: Endpoint, batch: Buffer, expected: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: endpoint.host, port: endpoint.port, noDelay: true });
    let greeted = false;
    let received = 0;
    let started = 0;
    const timer = setTimeout(() => fail(new Error(`heavy client: ${received} of ${expected} bytes after ${HEAVY_LIMIT_MS} ms`)), HEAVY_LIMIT_MS);
    const fail = (error: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(error);
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new Error(`heavy client: connection closed after ${received} of ${expected} bytes`)));
    socket.on('data', (chunk: Buffer) => {
      let bytes = chunk.length;
      if (!greeted) {
        if (chunk[0] !== GREETING_ACCEPTED) return fail(new Error('heavy client: refused'));
        greeted = true;
        bytes--;
        started = performance.now();
        socket.write(batch);
      }
      received += bytes;
      if (received >= expected) {
        const ms = performance.now() - started;
        clearTimeout(timer);
        socket.removeAllListeners('close');
        socket.destroy();
        resolve(ms);
      }
    });
  });
}
