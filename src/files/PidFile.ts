import { link, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { temporaryName } from './atomicWrite.js';
import { isProcessAlive } from './processes.js';

/** The suffix of the pid file that marks a lock file as taken: `lockserver.locks.pid`. */
export const PID_FILE_SUFFIX = '.pid';

export function pidFilePath(file: string): string {
  return file + PID_FILE_SUFFIX;
}

/** Another running server holds the file. */
export class FileInUseError extends Error {
  override name = 'FileInUseError';
  constructor(
    readonly file: string,
    readonly pidFile: string,
    readonly holder: number,
  ) {
    super(`lock file ${file} is in use by another lockserver (pid ${holder}, recorded in ${pidFile})`);
  }
}

async function readHolder(pidFile: string): Promise<number | undefined> {
  const text = await readFile(pidFile, 'latin1');
  const match = /^\s*(\d{1,10})\s*$/.exec(text);
  return match === null ? undefined : Number(match[1]);
}

/**
 * An exclusive claim on a file (the lock file) by this process: a pid file beside it
 * (`FILE.pid`) holding our pid, created with link(2), which fails if the pid file exists, so two
 * processes can never both create it and it is never seen half-written.
 *
 * A pid file whose process no longer exists (the holder died by kill -9 or a crash) is stale: it
 * is replaced, and `onStale` is told the dead holder's pid.
 */
export class PidFile {
  private released = false;

  private constructor(
    readonly file: string,
    readonly path: string,
  ) {}

  static async acquire(file: string, onStale: (deadPid: number) => void = () => {}): Promise<PidFile> {
    const path = pidFilePath(file);
    const temporary = temporaryName(path);
    await writeFile(temporary, `${process.pid}\n`, { flag: 'wx', mode: 0o644 });
    try {
      // Two rounds: the second follows the removal of a stale pid file.
      for (let round = 0; round < 2; round++) {
        try {
          await link(temporary, path);
          return new PidFile(file, path);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        }
        const holder = await readHolder(path).catch(() => undefined);
        if (holder === undefined) {
          throw new Error(`${path} (which marks lock file ${file} as in use) holds no pid; remove it if no lockserver uses ${file}`);
        }
        if (holder === process.pid || isProcessAlive(holder)) throw new FileInUseError(file, path, holder);
        await PidFile.removeStale(path, holder);
        onStale(holder);
      }
      throw new Error(`cannot take ${path}: another process keeps creating it`);
    } finally {
      await unlink(temporary).catch(() => {});
    }
  }

  /**
   * Removes a stale pid file, unless another starting server replaced it meanwhile: it is first
   * moved aside, then checked, and put back if it is no longer the dead holder's.
   */
  private static async removeStale(path: string, deadPid: number): Promise<void> {
    const aside = temporaryName(path);
    try {
      await rename(path, aside);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    const holder = await readHolder(aside).catch(() => undefined);
    if (holder !== deadPid && holder !== undefined) await link(aside, path).catch(() => {});
    await unlink(aside).catch(() => {});
  }

  /** Gives the file up (at exit): removes the pid file if it is still ours. */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    const holder = await readHolder(this.path).catch(() => undefined);
    if (holder === process.pid) await unlink(this.path).catch(() => {});
  }
}
