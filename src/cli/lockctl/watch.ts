import type { ByteString } from '../../bytes.js';
import type { LockClient } from '../../client/LockClient.js';
import { pause } from '../../client/pause.js';
import { listJson, listTable, shown } from './render.js';

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
 * `lockctl watch`: lists the key's entries every interval, until --count refreshes are done or
 * SIGINT / SIGTERM. With --json, one JSON object per line (NDJSON) per refresh.
 */
export async function runWatch(client: LockClient, spec: WatchSpec): Promise<void> {
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.on('SIGINT', onSignal).on('SIGTERM', onSignal);
  try {
    for (let refresh = 1; spec.count === 0 || refresh <= spec.count; refresh++) {
      const entries = await client.list(spec.key);
      const at = new Date().toISOString();
      if (spec.json) {
        spec.write(JSON.stringify({ ts: at, ...listJson(spec.key, entries) }) + '\n');
      } else {
        const title = `${at}  ${client.address}  key ${shown(spec.key)}: ${entries.length} entr${entries.length === 1 ? 'y' : 'ies'}\n`;
        const body = entries.length > 0 ? listTable(entries) : '';
        spec.write((spec.clearScreen ? CLEAR_SCREEN : refresh > 1 ? '\n' : '') + title + body);
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
  }
}
