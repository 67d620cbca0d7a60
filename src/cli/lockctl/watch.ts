import type { ByteString } from '../../bytes.js';
import type { LockClient } from '../../client/LockClient.js';
import { pause } from '../../client/pause.js';
import { KeyLister } from './listing.js';
import { listingJson, listingSummary, listingTable, shown } from './render.js';

export interface WatchSpec {
  readonly key: ByteString;
  readonly intervalMs: number;
  /** Refreshes before stopping; 0 = until Ctrl-C. */
  readonly count: number;
  readonly json: boolean;
  /** Clear the screen before each refresh (stdout is a terminal). */
  readonly clearScreen: boolean;
  readonly write: (text: string) => void;
}

const CLEAR_SCREEN = '\x1b[H\x1b[2J';

/**
 * `lockctl watch`: lists the key as `lockctl list` does (the detailed list, 0x0D, or list, 0x07,
 * from a LockServer 0.9b) every interval, until --count refreshes are done or SIGINT / SIGTERM.
 * With --json, one JSON object per line (NDJSON) per refresh. It asks anew each time rather than
 * being told: the protocol has no notice of changes to a key (a wait, 0x0B, and the loss notice,
 * 0x0C, each follow one entry of one owner), and one list per interval costs the server the same
 * whatever happens meanwhile.
 */
export async function runWatch(client: LockClient, spec: WatchSpec): Promise<void> {
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.on('SIGINT', onSignal).on('SIGTERM', onSignal);
  const lister = new KeyLister(client);
  try {
    for (let refresh = 1; spec.count === 0 || refresh <= spec.count; refresh++) {
      const listing = await lister.list(spec.key);
      const at = new Date().toISOString();
      if (spec.json) {
        spec.write(JSON.stringify({ ts: at, ...listingJson(spec.key, listing) }) + '\n');
      } else {
        const title = `${at}  ${lister.address}  key ${shown(spec.key)}: ${listingSummary(listing)}\n`;
        spec.write((spec.clearScreen ? CLEAR_SCREEN : refresh > 1 ? '\n' : '') + title + listingTable(listing));
      }
      if (spec.count !== 0 && refresh >= spec.count) break;
      try {
        await pause(spec.intervalMs, stop.signal);
      } catch {
        break;
      }
    }
  } finally {
    process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
    await lister.close();
  }
}
