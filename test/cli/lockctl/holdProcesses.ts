import type { ExecutionContext } from 'ava';
import type { ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { bounded } from '../../helpers/bounded.js';
import { connectClient } from '../../helpers/lockClient.js';
import { startLockctl } from '../../helpers/lockctl.js';
import { pollUntil } from '../../helpers/poll.js';
import { startServer } from '../../helpers/serverProcess.js';
import { processTree } from '../../../src/cli/lockctl/processTree.js';

/** What the tests of `lockctl hold` share: a hold queued behind an owner, the processes under it. */

/** The owner a `lockctl hold` process uses for the owner it was given: unique to that process. */
export const ownerOf = (given: string, hold: ChildProcess): string => `${given}@${hold.pid}.${hostname()}`;

/**
 * A server where "first" owns jobs/n, and `lockctl hold [holdOptions] jobs n second -- command…`
 * queued behind it (bounded).
 */
export async function holdQueuedBehindFirst(t: ExecutionContext, holdOptions: readonly string[], command: readonly string[]) {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('jobs', 'n', 'first'), 1);
  const hold = startLockctl(['-p', String(server.port), 'hold', ...holdOptions, 'jobs', 'n', 'second', '--', ...command]);
  const owner = ownerOf('second', hold.child);
  await pollUntil('hold to queue', async () => ((await client.location('jobs', 'n', owner)) === 2 ? true : undefined));
  return { server, client, hold, owner };
}

/** The processes under `hold` whose command line has `part` in it. */
export async function processesUnder(hold: ChildProcess, part: string): Promise<number[]> {
  const tree = await processTree(hold.pid!);
  const pids = [...(tree?.keys() ?? [])].filter((pid) => pid !== hold.pid);
  const named = await Promise.all(pids.map(async (pid) => ((await readFile(`/proc/${pid}/cmdline`, 'latin1').catch(() => '')).includes(part) ? pid : 0)));
  return named.filter((pid) => pid !== 0);
}

/** The pid of `hold`'s watchdog, once it runs (bounded). */
export function watchdogOf(hold: ChildProcess): Promise<number> {
  return pollUntil('the watchdog to run while hold waits', async () => {
    const found = await processesUnder(hold, 'watchdog.js');
    return found.length === 1 ? found[0] : undefined;
  });
}

/** Whether process `pid` runs: it exists and is not a zombie (state Z, after the `(comm)` field). */
export async function running(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'latin1').catch(() => undefined);
  return stat !== undefined && !/^ [ZX]/.test(stat.slice(stat.lastIndexOf(')') + 1));
}

/** Whether process `pid` is gone (reaped: not even a zombie). */
export async function gone(pid: number): Promise<boolean> {
  return (await readFile(`/proc/${pid}/stat`, 'latin1').catch(() => undefined)) === undefined;
}

/** Resolves with the first line of the process's stdout that matches `pattern` (bounded). */
export function stdoutLine(child: ChildProcess, pattern: RegExp): Promise<string> {
  let seen = '';
  const line = new Promise<string>((resolve) => {
    child.stdout!.on('data', (text: string) => {
      seen += text;
      const found = seen.split('\n').find((l) => pattern.test(l));
      if (found !== undefined) resolve(found);
    });
  });
  return bounded(line, 10_000, () => `a stdout line matching ${pattern}; so far:\n${seen}`);
}

/** Test teardown: a command the watchdog failed to stop must not outlive the test. */
export function killIfRunning(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Gone, as it should be.
  }
}
