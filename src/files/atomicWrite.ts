import { open, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

let sequence = 0;

/** The temporary file a write of `path` goes through: `.NAME.PID.N.tmp` beside it. */
export function temporaryName(path: string, pid = process.pid, n = sequence++): string {
  return join(dirname(path), `.${basename(path)}.${pid}.${n}.tmp`);
}

/**
 * The writer's pid when `entry` (a name in the directory of `path`) is one of the temporary files
 * a write of `path` goes through; undefined for any other name.
 */
export function temporaryOwnerPid(path: string, entry: string): number | undefined {
  const prefix = `.${basename(path)}.`;
  if (!entry.startsWith(prefix)) return undefined;
  const match = /^(\d{1,10})\.\d{1,16}\.tmp$/.exec(entry.slice(prefix.length));
  return match === null ? undefined : Number(match[1]);
}

/**
 * Replaces `path` with the given content so that a crash at any instant leaves either the old
 * file or the new one, never a mix: write a temporary file beside it, fsync it, rename it over
 * the target, then fsync the directory so the rename itself is durable.
 */
export async function writeFileAtomic(path: string, chunks: Iterable<string | Buffer>): Promise<void> {
  const directory = dirname(path);
  const temporary = temporaryName(path);
  const file = await open(temporary, 'w', 0o644);
  try {
    for (const chunk of chunks) await file.writeFile(chunk);
    await file.sync();
  } catch (error) {
    await file.close().catch(() => {});
    await unlink(temporary).catch(() => {});
    throw error;
  }
  await file.close();
  try {
    await rename(temporary, path);
  } catch (error) {
    await unlink(temporary).catch(() => {});
    throw error;
  }
  const dir = await open(directory, 'r').catch(() => undefined);
  if (dir !== undefined) {
    await dir.sync().catch(() => {});
    await dir.close();
  }
}
