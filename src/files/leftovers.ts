import { readdir, stat, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { temporaryOwnerPid } from './atomicWrite.js';
import { isProcessAlive } from './processes.js';

export interface Leftover {
  readonly path: string;
  readonly bytes: number;
}

/**
 * Removes the temporary files that writes of `files` left behind when their process died in the
 * middle (kill -9 during a save): `.NAME.PID.N.tmp` beside each file, whose PID is no running
 * process. A temporary file of a live process (a save in progress elsewhere) is left alone, and
 * so is every other name. Returns what was removed.
 */
export async function removeLeftoverTemporaries(files: readonly string[]): Promise<Leftover[]> {
  const removed: Leftover[] = [];
  for (const file of files) {
    const directory = dirname(file);
    const entries = await readdir(directory).catch(() => [] as string[]);
    for (const entry of entries) {
      const pid = temporaryOwnerPid(file, entry);
      if (pid === undefined || pid === process.pid || isProcessAlive(pid)) continue;
      const path = join(directory, entry);
      const info = await stat(path).catch(() => undefined);
      if (info === undefined || !info.isFile()) continue;
      try {
        await unlink(path);
        removed.push({ path, bytes: info.size });
      } catch {
        // Gone already, or not ours to remove: nothing to clean.
      }
    }
  }
  return removed;
}

/** `basename` of each leftover, for a log line. */
export function leftoverNames(leftovers: readonly Leftover[]): string {
  return leftovers.map((leftover) => basename(leftover.path)).join(',');
}
