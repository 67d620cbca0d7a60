import { readdir, readFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * A process and everything it started, as /proc shows them (Linux), for hold's watchdog: it must
 * stop the command's whole tree, not only the command, and nothing that merely reuses a pid.
 */

/** pid → its start time (clock ticks since boot): a pid reused by a later process has another. */
export type ProcessSnapshot = ReadonlyMap<number, string>;

interface ProcessStat {
  readonly parent: number;
  readonly startTime: string;
  /** Dead and waiting to be reaped: no longer running. */
  readonly zombie: boolean;
}

async function readStat(pid: number): Promise<ProcessStat | undefined> {
  let stat: string;
  try {
    stat = await readFile(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  // `pid (comm) state ppid … starttime …`: comm may hold spaces and parentheses, so the fields
  // are counted from after the last ')'; there the state is field 3 and starttime field 22.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  const parent = Number(fields[1]);
  const startTime = fields[19];
  if (state === undefined || startTime === undefined || !Number.isInteger(parent)) return undefined;
  return { parent, startTime, zombie: state === 'Z' || state === 'X' };
}

/**
 * `root` and its descendants that run now, each with its start time; undefined without /proc
 * (then only `root` itself can be signalled).
 */
export async function processTree(root: number): Promise<ProcessSnapshot | undefined> {
  let names: string[];
  try {
    names = await readdir('/proc');
  } catch {
    return undefined;
  }
  const children = new Map<number, number[]>();
  const stats = new Map<number, ProcessStat>();
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    const stat = await readStat(pid);
    if (stat === undefined) continue;
    stats.set(pid, stat);
    const siblings = children.get(stat.parent);
    if (siblings === undefined) children.set(stat.parent, [pid]);
    else siblings.push(pid);
  }
  const tree = new Map<number, string>();
  // Each pid has one parent, so the walk visits each at most once: bounded by the process count.
  const pending = [root];
  for (let pid = pending.pop(); pid !== undefined; pid = pending.pop()) {
    const stat = stats.get(pid);
    if (stat === undefined) continue;
    if (!stat.zombie) tree.set(pid, stat.startTime);
    pending.push(...(children.get(pid) ?? []));
  }
  return tree;
}

/**
 * The environment variable that marks the processes of one hold's command: set in the command's
 * environment and inherited by everything it starts, even a process reparented to init once its
 * parent died (which no walk from the command's pid finds). One name per hold, so that a hold
 * inside a held command marks its own command without unmarking the outer one's.
 */
export function holdMark(token: string): string {
  return `LOCKCTL_HOLD_${token}`;
}

/**
 * The running processes whose environment carries `mark` (holdMark), but `except`: each with its
 * start time. Only processes this user may read are seen; one that cleared its environment escapes.
 */
export async function markedProcesses(mark: string, except: ReadonlySet<number> = new Set()): Promise<Map<number, string>> {
  const marked = new Map<number, string>();
  let names: string[];
  try {
    names = await readdir('/proc');
  } catch {
    return marked;
  }
  const needle = `\0${mark}=`;
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (except.has(pid) || pid === process.pid) continue;
    let environ: string;
    try {
      environ = await readFile(`/proc/${pid}/environ`, 'latin1');
    } catch {
      continue;
    }
    if (!`\0${environ}`.includes(needle)) continue;
    const stat = await readStat(pid);
    if (stat !== undefined && !stat.zombie) marked.set(pid, stat.startTime);
  }
  return marked;
}

/** When process `pid` started (its ProcessSnapshot value), to know it again later; undefined if it is not running or without /proc. */
export async function startTimeOf(pid: number): Promise<string | undefined> {
  const stat = await readStat(pid);
  return stat === undefined || stat.zombie ? undefined : stat.startTime;
}

/** The processes of `snapshot` still running: same pid, same start time, not a zombie. */
export async function stillRunning(snapshot: ProcessSnapshot): Promise<Map<number, string>> {
  const running = new Map<number, string>();
  for (const [pid, startTime] of snapshot) {
    const stat = await readStat(pid);
    if (stat !== undefined && !stat.zombie && stat.startTime === startTime) running.set(pid, startTime);
  }
  return running;
}

/** Sends `signal` to every process of the snapshot; one that has ended meanwhile is passed over. */
export function signalAll(snapshot: ProcessSnapshot, signal: NodeJS.Signals): void {
  for (const pid of snapshot.keys()) {
    try {
      process.kill(pid, signal);
    } catch {
      // Ended since the snapshot (ESRCH): nothing to stop.
    }
  }
}

/** Whether process `pid` exists (a zombie counts: not yet reaped). */
function exists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** While a stop's grace runs, how often it looks whether everything has ended. */
const STOP_CHECK_MS = 100;

/** Where a hold's command is: its pid (with its start time, to know it again) and its mark (holdMark). */
export interface CommandProcesses {
  readonly root: number;
  readonly rootStartTime?: string;
  readonly mark?: string;
  /** Processes that carry the mark but are not the command's (the watchdog, started with its environment). */
  readonly except?: ReadonlySet<number>;
}

/**
 * Stops `root` and every process under it, and every process carrying the hold's mark (what the
 * command started and left running, even reparented to init): SIGTERM to all, then, once
 * `graceMs` has passed (looking every STOP_CHECK_MS whether all have ended), SIGKILL to what is
 * left and to what they started meanwhile. Returns when all have ended or were sent SIGKILL
 * (bounded by the grace and one look). Without /proc only `root` can be reached. With
 * `rootStartTime` (startTimeOf), a `root` that is not that process any more (ended, its pid
 * reused) is left alone, and so is what runs under it; the marked processes are stopped still.
 */
export async function stopTree(command: CommandProcesses, graceMs: number): Promise<void> {
  const { root, rootStartTime } = command;
  const deadline = performance.now() + graceMs;
  const own = await processTree(root);
  if (own === undefined) {
    if (rootStartTime !== undefined) return;
    signalAll(new Map([[root, '']]), 'SIGTERM');
    while (exists(root) && performance.now() < deadline) await delay(STOP_CHECK_MS);
    signalAll(new Map([[root, '']]), 'SIGKILL');
    return;
  }
  const rootIsOurs = rootStartTime === undefined || own.get(root) === rootStartTime;
  const tree = new Map([...(rootIsOurs ? own : []), ...(await marked(command))]);
  if (tree.size === 0) return;
  signalAll(tree, 'SIGTERM');
  let left = await stillRunning(tree);
  while (left.size > 0 && performance.now() < deadline) {
    await delay(STOP_CHECK_MS);
    left = await stillRunning(tree);
  }
  // What the tree started meanwhile, read again under the same root (same pid and start time, not a reused one) and by the mark.
  const now = rootIsOurs ? await processTree(root) : undefined;
  const started = now !== undefined && now.get(root) === own.get(root) ? now : new Map<number, string>();
  signalAll(new Map([...left, ...started, ...(await marked(command))]), 'SIGKILL');
}

function marked(command: CommandProcesses): Promise<Map<number, string>> {
  return command.mark === undefined ? Promise.resolve(new Map<number, string>()) : markedProcesses(command.mark, command.except);
}
