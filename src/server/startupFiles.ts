import { leftoverNames, removeLeftoverTemporaries } from '../files/leftovers.js';
import { PidFile, pidFilePath } from '../files/PidFile.js';
import { checkReplaceable } from '../files/writable.js';
import type { Logger } from '../runtime/Logger.js';

export interface StartupFileConfig {
  readonly lockFile: string;
  readonly statFile: string;
}

/**
 * The file checks before a server takes its lock file, in order: the lock file and stat file can
 * be written (found now, not at shutdown when the locks would be lost), no other server uses the
 * lock file (a pid file beside it is taken; a dead holder's is replaced), and temporary files that
 * saves of dead processes left behind are removed. Throws a message naming the file; on success
 * the caller owns the returned PidFile and releases it when the server ends.
 */
export async function claimServerFiles(config: StartupFileConfig, logger: Logger): Promise<PidFile> {
  await checkReplaceable(config.lockFile, 'lock file');
  await checkReplaceable(config.statFile, 'stat file');
  const pidFile = await PidFile.acquire(config.lockFile, (deadPid) =>
    logger.event('stale-pid-file-replaced', { file: pidFilePath(config.lockFile), dead_pid: deadPid }),
  );
  const leftovers = await removeLeftoverTemporaries([config.lockFile, config.statFile, pidFile.path]);
  if (leftovers.length > 0) {
    logger.event('leftovers-removed', {
      count: leftovers.length,
      bytes: leftovers.reduce((sum, leftover) => sum + leftover.bytes, 0),
      files: leftoverNames(leftovers),
    });
  }
  return pidFile;
}
