import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';

/**
 * Under `npm start` or `npx lockserver` the server is not npm: it is npm's child (`npm start`
 * execs it in the script's shell) or grandchild (npx runs the bin through `sh -c`). A signal sent
 * to npm is npm's: npm passes SIGINT and SIGTERM on to its child, but SIGHUP kills npm, and under
 * npx the child is the shell, which dies of SIGTERM without passing it on. Either way the server
 * would run on, orphaned and unsaved. So a server started by npm watches the processes between
 * itself and that npm, and ends (noble death: save, exit 0) once that chain breaks.
 */

/** Ancestors looked at for the npm process: npm start (1), npx (2), a script running a script (3). */
const MAX_ANCESTORS = 4;
/** How often the chain is checked: a server outlives npm by at most this long. */
export const PARENT_CHECK_INTERVAL_MS = 1_000;

/** What the watch reads about other processes (Linux: /proc); undefined when it cannot tell. */
export interface ProcessTable {
  parentOf(pid: number): Promise<number | undefined>;
  commandLine(pid: number): Promise<readonly string[] | undefined>;
}

/** The processes of this machine as /proc shows them; on a system without /proc every answer is undefined. */
export const procTable: ProcessTable = {
  async parentOf(pid) {
    try {
      // `pid (comm) state ppid …`; comm may hold spaces and parentheses, so read after the last ')'.
      const stat = await readFile(`/proc/${pid}/stat`, 'latin1');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      return Number.isInteger(ppid) ? ppid : undefined;
    } catch {
      return undefined;
    }
  },
  async commandLine(pid) {
    try {
      return (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
    } catch {
      return undefined;
    }
  },
};

/** Run by npm: npm sets npm_lifecycle_event for every script it runs (`start`) and for npx (`npx`). */
export function startedByNpm(env: Readonly<Record<string, string | undefined>>): boolean {
  return env.npm_lifecycle_event !== undefined;
}

/** npm names its process `npm <command> …` (process.title); else its script is npm-cli.js or npx-cli.js. */
function isNpm(commandLine: readonly string[]): boolean {
  if (/^np[mx](\s|$)/.test(commandLine[0] ?? '')) return true;
  return commandLine.slice(0, 2).some((argument) => /^np[mx](-cli\.js)?$/.test(basename(argument)));
}

/**
 * The processes from this one's parent up to the npm that started it: [npm] under `npm start`,
 * [sh, npm] under npx. When no npm is found among the nearest ancestors (or they cannot be read),
 * the parent alone.
 */
export async function npmAncestry(table: ProcessTable, parent: number): Promise<number[]> {
  const chain = [parent];
  for (let pid = parent; chain.length <= MAX_ANCESTORS;) {
    const commandLine = await table.commandLine(pid);
    if (commandLine === undefined) break;
    if (isNpm(commandLine)) return chain;
    const up = await table.parentOf(pid);
    if (up === undefined || up <= 1) break;
    chain.push(up);
    pid = up;
  }
  return [parent];
}

/** Whether every process of the chain is still the parent of the one before it (the first, of this process). */
export async function ancestryIntact(table: ProcessTable, parent: number, chain: readonly number[]): Promise<boolean> {
  if (parent !== chain[0]) return false;
  for (let i = 1; i < chain.length; i++) {
    // A process that has died is reparented (to init or a subreaper): its parent changes, whatever became of the pid.
    if ((await table.parentOf(chain[i - 1]!)) !== chain[i]) return false;
  }
  return true;
}

export interface ParentWatchOptions {
  readonly table?: ProcessTable;
  /** This process's parent now (process.ppid reads it afresh each time). */
  readonly parent?: () => number;
  readonly intervalMs?: number;
}

/**
 * Calls `onGone` once the chain from this process up to the npm that started it breaks (npm, or
 * the shell between, has ended). Checks every second, one check at a time; the timer does not
 * hold the process up. Returns a function that stops the watch.
 */
export function watchNpmParent(onGone: () => void, options: ParentWatchOptions = {}): () => void {
  const table = options.table ?? procTable;
  const parent = options.parent ?? (() => process.ppid);
  const chain = npmAncestry(table, parent());
  let stopped = false;
  let checking = false;
  const check = async (): Promise<void> => {
    if (await ancestryIntact(table, parent(), await chain)) return;
    stop();
    onGone();
  };
  const timer = setInterval(() => {
    if (checking || stopped) return;
    checking = true;
    void check().finally(() => (checking = false));
  }, options.intervalMs ?? PARENT_CHECK_INTERVAL_MS);
  timer.unref();
  const stop = (): void => {
    stopped = true;
    clearInterval(timer);
  };
  return stop;
}
