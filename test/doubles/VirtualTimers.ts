import { OrderedSet } from 'js-sdsl';
import type { Clock } from '../../src/runtime/Clock.js';
import { everyByAfter, type Timers } from '../../src/runtime/Timers.js';

interface Task {
  readonly at: number;
  /** Scheduling order: tasks due at the same time run first-scheduled first, as setTimeout's do. */
  readonly seq: number;
  readonly run: () => void;
}

/** Tasks waiting at most, by default: a simulation that schedules more is running away. */
export const DEFAULT_MAX_TASKS = 1_000_000;

/**
 * Virtual time for the seeded simulation: both the Timers the cluster code waits on and the Clock
 * it reads, so the two always agree. Time moves only when the simulation says so (`step`,
 * `runUntil`, `advance`), jumping straight to the next due task: an hour of simulated leases
 * costs what its events cost, and one seed replays the same run exactly.
 *
 * Promise continuations are not timers: after a task resolves a promise, the code awaiting it
 * runs in a microtask. The async `advance`/`advanceTo` let those run (one `setImmediate` turn,
 * which drains every microtask) after each task and before the next, so the cluster code sees
 * the same interleaving on every run. `setImmediate` is used only for that, never to measure time.
 */
export class VirtualTimers implements Timers, Clock {
  private time: number;
  private seq = 0;
  private readonly tasks = new OrderedSet<Task>([], (a, b) => a.at - b.at || a.seq - b.seq);

  constructor(
    start = 0,
    private readonly maxTasks = DEFAULT_MAX_TASKS,
  ) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  /** Tasks scheduled and not yet run or cancelled. */
  get pending(): number {
    return this.tasks.size();
  }

  /** When the next task is due, if any. */
  nextAt(): number | undefined {
    return this.tasks.front()?.at;
  }

  after(ms: number, task: () => void): () => void {
    if (this.tasks.size() >= this.maxTasks) throw new RangeError(`more than ${this.maxTasks} virtual timers pending`);
    // As setTimeout: a negative or NaN delay means "as soon as possible".
    const entry: Task = { at: this.time + (ms > 0 ? ms : 0), seq: this.seq++, run: task };
    this.tasks.insert(entry);
    return () => {
      this.tasks.eraseElementByKey(entry);
    };
  }

  every(ms: number, task: () => void): () => void {
    return everyByAfter((delay, run) => this.after(delay, run), ms, task);
  }

  soon(task: () => void): void {
    this.after(0, task);
  }

  /** Runs the earliest task, moving time to when it was due. False when nothing is scheduled. */
  step(): boolean {
    const next = this.tasks.front();
    if (next === undefined) return false;
    this.tasks.eraseElementByKey(next);
    if (next.at > this.time) this.time = next.at;
    next.run();
    return true;
  }

  /**
   * Runs every task due at or before `until` (including those they schedule), in order, then sets
   * the time to `until`. Synchronous: promise continuations run only after it returns. At most
   * `maxSteps` tasks, so a task that keeps rescheduling itself at once cannot hang the test.
   */
  runUntil(until: number, maxSteps = this.maxTasks): number {
    let steps = 0;
    while (this.due(until, steps++, maxSteps)) this.step();
    if (until > this.time) this.time = until;
    return steps - 1;
  }

  /** Whether a task is due at or before `until`; throws once `steps` tasks reached `maxSteps`. */
  private due(until: number, steps: number, maxSteps: number): boolean {
    const next = this.tasks.front();
    if (next === undefined || next.at > until) return false;
    if (steps >= maxSteps) throw new RangeError(`more than ${maxSteps} tasks before t=${until}`);
    return true;
  }

  /** Lets every pending promise continuation run (one macrotask turn; no time passes). */
  async settle(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /** As runUntil, but settles promise continuations before the first task and after each one. */
  async advanceTo(until: number, maxSteps = this.maxTasks): Promise<number> {
    await this.settle();
    let steps = 0;
    while (this.due(until, steps++, maxSteps)) {
      this.step();
      await this.settle();
    }
    if (until > this.time) this.time = until;
    return steps - 1;
  }

  /** advanceTo(now + ms). */
  advance(ms: number, maxSteps = this.maxTasks): Promise<number> {
    return this.advanceTo(this.time + ms, maxSteps);
  }

  /** Moves time on, 10 ms at a time, until `done` says so or `ms` have passed; whether it did. */
  async until(ms: number, done: () => boolean): Promise<boolean> {
    const end = this.time + ms;
    while (!done() && this.time < end) await this.advance(10);
    return done();
  }
}
