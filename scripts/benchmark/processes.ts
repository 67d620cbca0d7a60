import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { promisify } from 'node:util';

const run = promisify(execFile);
/** Lines of a server's output kept for error messages. */
const TAIL_LINES = 30;

/** A server process started by the benchmark; its output is drained so it never blocks. */
export interface ServerProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** The first match of the ready pattern. */
  readonly ready: RegExpMatchArray;
  readonly exited: Promise<number | null>;
  tail(): string;
}

export interface SpawnOptions {
  /** Matched against each output line; the process is ready at the first match (null: once spawned). */
  readonly readyPattern: RegExp | null;
  readonly readyTimeoutMs: number;
  /** Appends everything the process writes to this file (e.g. --trace-gc output), if given. */
  readonly logFile?: string;
  /** Called with every output line, for the whole life of the process (events after readiness). */
  readonly onLine?: (line: string) => void;
  /** Working directory of the process. */
  readonly cwd?: string;
}

/** Every process the benchmark started and that has not exited: killed when the benchmark ends. */
const children = new Set<ChildProcess>();

/** Records a child so that killAllChildren (and the exit of the benchmark) ends it. */
export function trackChild(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** kill -9 (after SIGCONT, in case it was stopped) of every child still running. */
export function killAllChildren(): number {
  let killed = 0;
  for (const child of children) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    killed++;
  }
  return killed;
}

process.once('exit', () => void killAllChildren());

/** Starts a server process and resolves once it logs readiness; rejects (with its output) otherwise. */
export function spawnServer(command: string, args: readonly string[], options: SpawnOptions): Promise<ServerProcess> {
  const child = trackChild(spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: options.cwd }));
  const lines: string[] = [];
  const log = options.logFile === undefined ? undefined : createWriteStream(options.logFile, { flags: 'a' });
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      log?.end();
      resolve(code);
    }),
  );
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (action: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      action();
    };
    const tail = (): string => lines.join('\n');
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      settle(() => reject(new Error(`${command} not ready after ${options.readyTimeoutMs} ms:\n${tail()}`)));
    }, options.readyTimeoutMs);
    // Lines may arrive split across chunks: each stream keeps its unfinished last line.
    const reader = (): ((text: string) => void) => {
      let partial = '';
      return (text) => {
        log?.write(text);
        const parts = (partial + text).split('\n');
        partial = parts.pop()!;
        for (const line of parts) {
          if (line === '') continue;
          options.onLine?.(line);
          lines.push(line);
          if (lines.length > TAIL_LINES) lines.shift();
          const match = options.readyPattern === null ? null : line.match(options.readyPattern);
          if (match !== null) settle(() => resolve({ child, pid: child.pid!, ready: match, exited, tail }));
        }
      };
    };
    child.stdout!.setEncoding('utf8').on('data', reader());
    child.stderr!.setEncoding('utf8').on('data', reader());
    child.once('error', (error) => settle(() => reject(error)));
    if (options.readyPattern === null) {
      child.once('spawn', () => settle(() => resolve({ child, pid: child.pid!, ready: [] as unknown as RegExpMatchArray, exited, tail })));
    }
    void exited.then((code) => settle(() => reject(new Error(`${command} exited with code ${code}:\n${tail()}`))));
  });
}

/** Time a server run with extra node flags (a profiler, say) gets to exit by itself and write what they asked for. */
export const PROFILED_STOP_GRACE_MS = 60_000;

/** Ends a server: SIGTERM and a grace period when asked to be gentle (profiles get written), then SIGKILL. */
export async function stopServer(server: ServerProcess, graceMs: number): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  if (graceMs > 0) {
    server.child.kill('SIGTERM');
    const timer = new Promise<'late'>((r) => setTimeout(() => r('late'), graceMs));
    if ((await Promise.race([server.exited.then(() => 'exited' as const), timer])) === 'exited') return;
  }
  server.child.kill('SIGKILL');
  await server.exited;
}

/** Resident set size of a process in bytes (Linux /proc, else ps); undefined if unknown. */
export async function rssBytes(pid: number): Promise<number | undefined> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const match = status.match(/^VmRSS:\s+(\d+)\s+kB/m);
    if (match) return Number(match[1]) * 1024;
  } catch {
    // not Linux, or the process is gone: try ps
  }
  try {
    const { stdout } = await run('ps', ['-o', 'rss=', '-p', String(pid)]);
    const kb = Number(stdout.trim());
    return Number.isFinite(kb) && kb > 0 ? kb * 1024 : undefined;
  } catch {
    return undefined;
  }
}

let clockTicks: number | undefined;

/** CPU seconds (user + system, all threads) a process has used so far; undefined off Linux. */
export async function cpuSeconds(pid: number): Promise<number | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    clockTicks ??= Number((await run('getconf', ['CLK_TCK'])).stdout.trim()) || 100;
    return (Number(fields[11]) + Number(fields[12])) / clockTicks;
  } catch {
    return undefined;
  }
}

/** The machine's CPU time so far, summed over its CPUs (clock ticks): all of it, and what the hypervisor stole. */
export interface HostCpuTicks {
  readonly total: number;
  readonly stolen: number;
}

/**
 * The first line of /proc/stat ("cpu  user nice system idle iowait irq softirq steal …", in clock
 * ticks over all CPUs) as HostCpuTicks; undefined when it is not that line. Guest time is left
 * out of the total: the kernel counts it inside user and nice already.
 */
export function parseHostCpuTicks(procStat: string): HostCpuTicks | undefined {
  const fields = procStat.split('\n', 1)[0]!.trim().split(/\s+/);
  if (fields[0] !== 'cpu' || fields.length < 9) return undefined;
  const ticks = fields.slice(1, 9).map(Number);
  if (!ticks.every((t) => Number.isSafeInteger(t) && t >= 0)) return undefined;
  return { total: ticks.reduce((sum, t) => sum + t, 0), stolen: ticks[7]! };
}

/** The machine's CPU ticks so far (see parseHostCpuTicks); undefined off Linux. */
export async function hostCpuTicks(): Promise<HostCpuTicks | undefined> {
  try {
    return parseHostCpuTicks(await readFile('/proc/stat', 'utf8'));
  } catch {
    return undefined;
  }
}

/** Share of the machine's CPU time the hypervisor took between two readings (0–1); undefined if either is missing. */
export function stolenShare(before: HostCpuTicks | undefined, after: HostCpuTicks | undefined): number | undefined {
  if (before === undefined || after === undefined || after.total <= before.total) return undefined;
  return (after.stolen - before.stolen) / (after.total - before.total);
}

/** CPU seconds each of some processes had used (cpuSeconds), and the machine's ticks, read together. */
export interface CpuReading {
  readonly seconds: ReadonlyArray<number | undefined>;
  readonly host: HostCpuTicks | undefined;
}

/** Reads the CPU used so far by each process (undefined for a pid that is undefined or gone) and by the machine. */
export async function readCpu(pids: ReadonlyArray<number | undefined>): Promise<CpuReading> {
  const seconds = await Promise.all(pids.map((pid) => (pid === undefined ? Promise.resolve(undefined) : cpuSeconds(pid))));
  return { seconds, host: await hostCpuTicks() };
}

/**
 * Between two readings of the same processes `elapsed` seconds apart: each one's share of one core
 * (undefined where either reading lacks it), and the share of the machine's time the hypervisor stole.
 */
export function cpuBetween(before: CpuReading, after: CpuReading, elapsed: number): { cores: Array<number | undefined>; stolen: number | undefined } {
  const cores = before.seconds.map((from, i) => {
    const until = after.seconds[i];
    return from === undefined || until === undefined || !(elapsed > 0) ? undefined : (until - from) / elapsed;
  });
  return { cores, stolen: stolenShare(before.host, after.host) };
}

/** A TCP port free on loopback right now, for servers (Redis) that cannot be told "port 0". */
export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen({ port: 0, host }, () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

/** The full path of an executable on PATH, or undefined. */
export async function which(name: string): Promise<string | undefined> {
  try {
    const { stdout } = await run('sh', ['-c', `command -v "$1"`, 'sh', name]);
    return stdout.trim() || undefined;
  } catch {
    return undefined;
  }
}
