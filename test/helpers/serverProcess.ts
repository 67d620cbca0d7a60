import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExecutionContext } from 'ava';
import { PACKAGE_ROOT } from '../../src/packageRoot.js';
import { bounded } from './bounded.js';
import { RawClient, type ConnectOptions } from './rawClient.js';

/** The built CLI, started as a real process exactly as an operator would. */
export const CLI_PATH = join(PACKAGE_ROOT, 'dist', 'src', 'cli', 'lockserver.js');

/** Longest any single wait in the e2e helpers lasts unless a test asks otherwise. */
export const DEFAULT_WAIT_MS = 10_000;
/** Longest a server may take to log `event=started`. */
const START_WAIT_MS = 15_000;
/** Only loopback peers (see the project rules); the shipped hosts file allows the same. */
export const LOOPBACK_HOSTS = '127.0.0.1\n::1\n';

/** One `ts=… event=NAME key=value …` line of the operational log. */
export interface LogEvent {
  readonly event: string;
  readonly fields: Readonly<Record<string, string>>;
  readonly line: string;
}

export interface ProcessExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

const FIELD = /([A-Za-z_]+)=("(?:[^"\\]|\\.)*"|\S*)/g;

export function parseLogLine(line: string): LogEvent | undefined {
  if (!/^ts=\S+ event=/.test(line)) return undefined;
  const fields: Record<string, string> = {};
  for (const [, key, raw] of line.matchAll(FIELD)) {
    fields[key!] = raw!.startsWith('"') ? (JSON.parse(raw!) as string) : raw!;
  }
  return { event: fields.event!, fields, line };
}

/** A fresh directory under the system temp dir, removed when the test ends. */
export async function tempDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'lockserver-e2e-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

interface EventWaiter {
  readonly name: string;
  readonly match: (event: LogEvent) => boolean;
  readonly resolve: (event: LogEvent) => void;
  readonly reject: (error: Error) => void;
}

/**
 * A child process whose stderr is read line by line: every `event=` line is kept, and tests
 * await the ones they care about instead of sleeping. Every wait is bounded, and a process that
 * exits first fails the wait at once, with its stderr in the message.
 */
export class LoggedProcess {
  readonly events: LogEvent[] = [];
  readonly lines: string[] = [];
  /** Settles when the process has exited (never rejects). */
  readonly exited: Promise<ProcessExit>;
  private exit: ProcessExit | undefined;
  private waiters: EventWaiter[] = [];
  private partialLine = '';

  constructor(readonly child: ChildProcess) {
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (text: string) => this.onStderr(text));
    this.exited = new Promise((resolve) => {
      // 'close' comes after both the exit and the end of stderr, so no log line is missed.
      child.once('close', (code, signal) => {
        this.flushPartialLine();
        this.exit = { code, signal };
        for (const waiter of this.waiters) {
          waiter.reject(new Error(`process exited (${describeExit(this.exit)}) before event=${waiter.name}\n${this.stderr}`));
        }
        this.waiters = [];
        resolve(this.exit);
      });
    });
  }

  get stderr(): string {
    return this.lines.join('\n');
  }

  get running(): boolean {
    return this.exit === undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  private onStderr(text: string): void {
    const parts = (this.partialLine + text).split('\n');
    this.partialLine = parts.pop()!;
    for (const line of parts) this.onLine(line);
  }

  private flushPartialLine(): void {
    if (this.partialLine !== '') this.onLine(this.partialLine);
    this.partialLine = '';
  }

  private onLine(line: string): void {
    this.lines.push(line);
    const event = parseLogLine(line);
    if (event === undefined) return;
    this.events.push(event);
    this.waiters = this.waiters.filter((waiter) => {
      if (waiter.name !== event.event || !waiter.match(event)) return true;
      waiter.resolve(event);
      return false;
    });
  }

  /**
   * The first `event=name` line (matching `match`) logged after this call. Call it before the
   * action that causes the event, then await it after.
   */
  nextEvent(name: string, match: (event: LogEvent) => boolean = () => true, ms = DEFAULT_WAIT_MS): Promise<LogEvent> {
    if (this.exit !== undefined) return Promise.reject(new Error(`process already exited before event=${name}`));
    const waiting = new Promise<LogEvent>((resolve, reject) => {
      this.waiters.push({ name, match, resolve, reject });
    });
    const waited = bounded(waiting, ms, () => `event=${name}\n${this.stderr}`);
    // A test that fails before awaiting this must not add an unhandled rejection to its report.
    waited.catch(() => {});
    return waited;
  }

  /** The first `event=name` line (matching `match`) logged at any time, past or future. */
  event(name: string, match: (event: LogEvent) => boolean = () => true, ms = DEFAULT_WAIT_MS): Promise<LogEvent> {
    const seen = this.events.find((e) => e.event === name && match(e));
    return seen !== undefined ? Promise.resolve(seen) : this.nextEvent(name, match, ms);
  }

  eventsNamed(name: string): LogEvent[] {
    return this.events.filter((e) => e.event === name);
  }

  /** Awaits the exit, bounded. */
  waitForExit(ms = DEFAULT_WAIT_MS): Promise<ProcessExit> {
    return bounded(this.exited, ms, () => `the process to exit\n${this.stderr}`);
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Kills the process if it is still running (test teardown). */
  async kill(): Promise<void> {
    if (this.running) this.child.kill('SIGKILL');
    await bounded(this.exited, DEFAULT_WAIT_MS, () => 'a killed process to exit').catch(() => {});
  }
}

function describeExit(exit: ProcessExit): string {
  return exit.signal !== null ? `signal ${exit.signal}` : `code ${exit.code}`;
}

/** Spawns the built CLI with these arguments (stderr piped for LoggedProcess). */
export function spawnLockserver(args: readonly string[], cwd: string): ChildProcess {
  return spawn(process.execPath, [CLI_PATH, ...args], { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Runs the CLI with these arguments; the process is killed when the test ends. */
export function spawnCli(t: ExecutionContext, args: readonly string[], cwd: string): LoggedProcess {
  const proc = new LoggedProcess(spawnLockserver(args, cwd));
  t.teardown(() => proc.kill());
  return proc;
}

export interface ServerOptions {
  /** Directory for the hosts, lock and stat files; a fresh temp dir by default. */
  readonly dir?: string;
  /** Hosts file content (written before start); LOOPBACK_HOSTS by default. */
  readonly hosts?: string;
  /** Bind address; 127.0.0.1 by default. */
  readonly listen?: string;
  /** Further CLI arguments (--max-connections, --frame-timeout, …). */
  readonly args?: readonly string[];
}

/** A running server: its process, its port, its files. */
export class ServerProcess extends LoggedProcess {
  constructor(
    child: ChildProcess,
    private readonly t: ExecutionContext,
    readonly dir: string,
    readonly hostsFile: string,
    readonly lockFile: string,
    readonly statFile: string,
    public port = 0,
  ) {
    super(child);
  }

  /** Connects a raw client to this server (closed when the test ends); does not read the greeting. */
  connect(options: Omit<ConnectOptions, 'port'> = {}): Promise<RawClient> {
    return RawClient.connect(this.t, { host: '127.0.0.1', ...options, port: this.port });
  }

  /** Connects and reads the greeting, failing unless it is 0x01 (accepted). */
  async accepted(options: Omit<ConnectOptions, 'port'> = {}): Promise<RawClient> {
    const client = await this.connect(options);
    const greeting = await client.read(1);
    if (greeting[0] !== 0x01) throw new Error(`expected greeting 0x01, got 0x${greeting.toString('hex')}`);
    return client;
  }
}

/** The files a server in `dir` uses. */
export function serverFiles(dir: string): { hostsFile: string; lockFile: string; statFile: string } {
  return { hostsFile: join(dir, 'hosts'), lockFile: join(dir, 'locks'), statFile: join(dir, 'stats') };
}

/** The command line of a test server in `dir`: any free port, loopback, the files of serverFiles(). */
export function serverArgs(dir: string, listen = '127.0.0.1'): string[] {
  const { hostsFile, lockFile, statFile } = serverFiles(dir);
  return ['--port', '0', '--listen', listen, '--hosts', hostsFile, '--lock-file', lockFile, '--stat-file', statFile];
}

/**
 * Starts the real server on a free loopback port, waits (bounded) for its `event=started` line,
 * and kills it when the test ends. A server that fails to start rejects with its stderr.
 */
export async function startServer(t: ExecutionContext, options: ServerOptions = {}): Promise<ServerProcess> {
  const dir = options.dir ?? (await tempDir(t));
  const { hostsFile, lockFile, statFile } = serverFiles(dir);
  if (options.hosts !== undefined || options.dir === undefined) {
    await writeFile(hostsFile, options.hosts ?? LOOPBACK_HOSTS);
  }
  const child = spawnLockserver([...serverArgs(dir, options.listen), ...(options.args ?? [])], dir);
  const server = new ServerProcess(child, t, dir, hostsFile, lockFile, statFile);
  t.teardown(() => server.kill());
  const started = await server.event('started', () => true, START_WAIT_MS);
  server.port = Number(started.fields.port);
  if (!Number.isInteger(server.port) || server.port <= 0) throw new Error(`bad port in: ${started.line}`);
  return server;
}
