import { run } from './ip.js';
import { labNamespaces, processAlive } from './names.js';

/**
 * Kills every process still running inside `ns` (SIGCONT first, so a paused one dies too), then
 * deletes the namespace; its veth ends go with it, and their peers in other namespaces too.
 * Synchronous: also used from a process 'exit' hook. Never throws.
 */
export function destroyNamespace(ns: string): void {
  const pids = run('ip', ['netns', 'pids', ns], { allowFailure: true })
    .split('\n')
    .map((line) => Number(line.trim()))
    .filter((pid) => Number.isInteger(pid) && pid > 0);
  for (const pid of pids) {
    for (const signal of ['SIGCONT', 'SIGKILL'] as const) {
      try {
        process.kill(pid, signal);
      } catch {
        // already gone
      }
    }
  }
  run('ip', ['netns', 'del', ns], { allowFailure: true });
}

/** Removes what crashed earlier runs left behind: labs whose creating process is gone. */
export function sweepLeftovers(): string[] {
  const removed: string[] = [];
  for (const { name, pid } of labNamespaces()) {
    if (pid === process.pid || processAlive(pid)) continue;
    destroyNamespace(name);
    removed.push(name);
  }
  return removed;
}

const atExit = new Set<() => void>();
let hooked = false;

/**
 * Runs `undo` (synchronous) when this process exits, unless the returned function was called
 * first: the safety net for a run that ends without its teardown (an uncaught error, a worker
 * that is torn down, Ctrl-C in the script).
 */
export function onProcessExit(undo: () => void): () => void {
  if (!hooked) {
    hooked = true;
    process.once('exit', () => {
      for (const fn of atExit) fn();
    });
  }
  atExit.add(undo);
  return () => atExit.delete(undo);
}
