/**
 * A client process of the handoff scenario (lockctl hold, etcdctl lock), its output read line by
 * line with the time each line arrived, so a try can wait for the line that says "held" or the one
 * its command printed. Tracked by processes.ts, so the benchmark's end (or Ctrl-C) kills it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { trackChild } from '../processes.js';

/** One line of the process's output and performance.now() when it was read. */
export interface TimedLine {
  readonly text: string;
  readonly at: number;
}

interface LineWait {
  readonly match: (text: string) => boolean;
  readonly resolve: (line: TimedLine) => void;
  readonly reject: (error: Error) => void;
}

/** Lines kept for error messages. */
const TAIL_LINES = 10;

export class WatchedProcess {
  private readonly lines: TimedLine[] = [];
  private readonly waits = new Set<LineWait>();
  private exitCode: number | null | undefined;
  /** Resolves with the exit code (null when killed by a signal) once the process has ended. */
  readonly exited: Promise<number | null>;

  private constructor(
    readonly child: ChildProcess,
    private readonly name: string,
  ) {
    const reader = (): ((text: string) => void) => {
      let partial = '';
      return (text) => {
        const at = performance.now();
        const parts = (partial + text).split('\n');
        partial = parts.pop()!;
        for (const part of parts) if (part !== '') this.onLine({ text: part, at });
      };
    };
    child.stdout!.setEncoding('utf8').on('data', reader());
    child.stderr!.setEncoding('utf8').on('data', reader());
    this.exited = new Promise((resolve) => {
      const ended = (code: number | null, how: string): void => {
        if (this.exitCode !== undefined) return;
        this.exitCode = code;
        for (const wait of this.waits) wait.reject(new Error(`${this.name} ${how} before the line awaited: ${this.tail()}`));
        this.waits.clear();
        resolve(code);
      };
      child.once('error', (error) => ended(null, `failed (${error.message})`));
      // 'close': after the exit and after the last output was read.
      child.once('close', (code, signal) => ended(code, `ended (${code ?? signal})`));
    });
  }

  static start(command: string, args: readonly string[], env?: NodeJS.ProcessEnv): WatchedProcess {
    const child = trackChild(spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: env === undefined ? undefined : { ...process.env, ...env } }));
    return new WatchedProcess(child, command.split('/').pop()!);
  }

  /** The first line (read already or to come) that `match` accepts; rejects when the process ends first or after `limitMs`. */
  line(match: (text: string) => boolean, limitMs: number, what: string): Promise<TimedLine> {
    const seen = this.lines.find((l) => match(l.text));
    if (seen !== undefined) return Promise.resolve(seen);
    if (this.exitCode !== undefined) return Promise.reject(new Error(`${this.name} ended before ${what}: ${this.tail()}`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waits.delete(wait);
        reject(new Error(`${this.name}: no ${what} within ${limitMs} ms: ${this.tail()}`));
      }, limitMs);
      const wait: LineWait = {
        match,
        resolve: (line) => {
          clearTimeout(timer);
          resolve(line);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      this.waits.add(wait);
    });
  }

  /** Waits up to `limitMs` for the process to end by itself, then kills it (-9); resolves once it is gone. */
  async end(limitMs: number): Promise<void> {
    if (this.exitCode !== undefined) return;
    const timer = setTimeout(() => this.child.kill('SIGKILL'), limitMs);
    await this.exited;
    clearTimeout(timer);
  }

  private onLine(line: TimedLine): void {
    // Every line is kept: these processes print a handful.
    this.lines.push(line);
    for (const wait of this.waits) {
      if (!wait.match(line.text)) continue;
      this.waits.delete(wait);
      wait.resolve(line);
    }
  }

  private tail(): string {
    return (
      this.lines
        .slice(-TAIL_LINES)
        .map((l) => l.text)
        .join(' / ') || 'no output'
    );
  }
}
