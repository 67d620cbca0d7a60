import { run } from './ip.js';

/**
 * Every namespace this project's nemesis creates is named `nmz<pid>x<lab>-<role>`: the pid of
 * the process that built it (several labs of one process differ by <lab>), so a leftover of a
 * crashed run is recognised, and removed, by the next run without touching a live run's labs.
 */
export const PREFIX = 'nmz';
const OURS = /^nmz(\d+)x(\d+)-\S+$/;

let labs = 0;

/** The namespace-name prefix of a new lab of this process. */
export function newLabPrefix(): string {
  labs += 1;
  return `${PREFIX}${process.pid}x${labs}`;
}

/** Names of the namespaces on this machine that a nemesis lab created, with their creator's pid. */
export function labNamespaces(): Array<{ name: string; pid: number }> {
  const out: Array<{ name: string; pid: number }> = [];
  for (const line of run('ip', ['netns', 'list']).split('\n')) {
    const name = line.split(' ')[0] ?? '';
    const match = OURS.exec(name);
    if (match !== null) out.push({ name, pid: Number(match[1]) });
  }
  return out;
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
