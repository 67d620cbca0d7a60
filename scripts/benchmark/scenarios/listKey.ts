import { performance } from 'node:perf_hooks';
import { asciiBytes } from '../../../src/bytes.js';
import { Command } from '../../../src/protocol/constants.js';
import { BenchClient } from '../BenchClient.js';
import type { BenchConfig } from '../config.js';
import { fillLocks } from '../fill.js';
import { Histogram } from '../Histogram.js';
import type { Target } from '../targets/Target.js';

/** Entries per index: one owner and the rest waiting, so the list walks queues as well as indexes. */
const ENTRIES_PER_INDEX = 100;
const KEY = asciiBytes('listed');

export interface ListResult {
  readonly entries: number;
  readonly indexes: number;
  readonly calls: number;
  readonly replyBytes: number;
  /** Time from sending the list request to holding the whole reply. */
  readonly ms: { readonly p50: number; readonly max: number; readonly min: number };
}

/** One key with `listEntries` entries spread over indexes; times list (0x07) on it, one call at a time. */
export async function runListKey(target: Target, config: BenchConfig, log: (line: string) => void): Promise<ListResult> {
  const running = await target.start();
  const client = await BenchClient.connect(running.endpoints[0]!);
  try {
    const perIndex = Math.min(ENTRIES_PER_INDEX, config.listEntries);
    await fillLocks(
      client,
      config.listEntries,
      (n) => ({
        command: Command.Request,
        key: KEY,
        index: asciiBytes(`row-${Math.floor(n / perIndex)}`),
        owner: asciiBytes(`client-${n % perIndex}`),
        ttl: 0,
        ttw: 0,
        priority: n % 4,
      }),
      (n) => {
        // Waiters go behind every waiter of higher or equal priority already queued.
        const slot = n % perIndex;
        if (slot === 0) return 1;
        const priority = n % 4;
        let ahead = 0;
        for (let s = 1; s < slot; s++) if ((n - slot + s) % 4 >= priority) ahead++;
        return 2 + ahead;
      },
    );
    const timing = new Histogram();
    let replyBytes = 0;
    for (let i = 0; i < config.listCalls; i++) {
      const t0 = performance.now();
      const [reply] = await client.call([{ command: Command.List, key: KEY }]);
      timing.record((performance.now() - t0) * 1000);
      replyBytes = reply!.length;
      const count = reply!.readUInt16BE(0);
      if (count !== Math.min(config.listEntries, 0xffff)) throw new Error(`list returned ${count} entries, expected ${config.listEntries}`);
    }
    const result: ListResult = {
      entries: config.listEntries,
      indexes: Math.ceil(config.listEntries / perIndex),
      calls: config.listCalls,
      replyBytes,
      ms: { p50: timing.percentile(50) / 1000, max: timing.max / 1000, min: timing.min / 1000 },
    };
    log(`list of ${result.entries} entries: p50 ${result.ms.p50.toFixed(2)} ms, max ${result.ms.max.toFixed(2)} ms, ${replyBytes} bytes`);
    return result;
  } finally {
    client.close();
    await running.stop();
  }
}
