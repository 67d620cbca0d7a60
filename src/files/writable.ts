import { open, stat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { temporaryName } from './atomicWrite.js';

/** Why a file in `directory` cannot be created, in words an operator can act on. */
function reason(error: NodeJS.ErrnoException, directory: string): string {
  switch (error.code) {
    case 'ENOENT':
      return `directory ${directory} does not exist`;
    case 'ENOTDIR':
      return `${directory} is not a directory`;
    case 'EACCES':
    case 'EPERM':
      return `no permission to create files in ${directory}`;
    case 'EROFS':
      return `${directory} is on a read-only file system`;
    default:
      return error.message;
  }
}

/**
 * Checks that `file` can be replaced the way writeFileAtomic replaces it (a temporary file
 * created beside it, then renamed over it): creates and removes such a temporary file. Throws,
 * naming `what` and the file, when it cannot.
 */
export async function checkReplaceable(file: string, what: string): Promise<void> {
  const directory = dirname(file);
  const existing = await stat(file).catch(() => undefined);
  if (existing?.isDirectory() === true) throw new Error(`cannot write ${what} ${file}: it is a directory`);
  const probe = temporaryName(file);
  try {
    const handle = await open(probe, 'wx', 0o644);
    await handle.close();
  } catch (error) {
    throw new Error(`cannot write ${what} ${file}: ${reason(error as NodeJS.ErrnoException, directory)}`);
  }
  await unlink(probe);
}
