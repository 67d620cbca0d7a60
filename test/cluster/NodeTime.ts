import { everyByAfter, type Timers } from '../../src/runtime/Timers.js';
import type { VirtualTimers } from '../doubles/VirtualTimers.js';
import type { Clock } from '../../src/runtime/Clock.js';

/** Tasks a paused node may hold at once: more is a simulation running away. */
const MAX_HELD = 1_000_000;

/**
 * The clock and event loop of one simulated node process: its own offset and rate; nothing runs
 * once it has crashed; while it is paused (a stalled event loop: GC, swap, SIGSTOP) its due tasks
 * wait and run, in order, when it resumes, and its clock has jumped meanwhile.
 */
export class NodeTime implements Clock, Timers {
  dead = false;
  private paused = false;
  private held: Array<() => void> = [];
  /** True milliseconds spent paused, finished pauses only. */
  private pausedBefore = 0;
  private pausedAt = 0;

  constructor(
    private readonly vt: VirtualTimers,
    private readonly offset: number,
    private readonly rate: number,
  ) {}

  now(): number {
    return this.offset + this.vt.now() * this.rate;
  }

  get isPaused(): boolean {
    return this.paused;
  }

  /** True milliseconds this process has spent paused so far, the current pause included. */
  pausedMs(): number {
    return this.pausedBefore + (this.paused ? this.vt.now() - this.pausedAt : 0);
  }

  /**
   * As Node's setTimeout, a delay under 1 ms waits 1 ms (only 0 means "next"): a loop that waits
   * out a remaining 1e-12 ms would otherwise never see its clock move (8229.5 + 1e-12 is 8229.5).
   */
  after(ms: number, task: () => void): () => void {
    if (this.dead) return () => {};
    let cancelled = false;
    const delay = ms > 0 && ms < 1 ? 1 : ms;
    const cancel = this.vt.after(delay / this.rate, () => this.run(task, () => cancelled));
    return () => {
      cancelled = true;
      cancel();
    };
  }

  every(ms: number, task: () => void): () => void {
    return everyByAfter((delay, run) => this.after(delay, run), ms, task);
  }

  soon(task: () => void): void {
    this.after(0, task);
  }

  private run(task: () => void, cancelled: () => boolean): void {
    if (this.dead || cancelled()) return;
    if (!this.paused) {
      task();
      return;
    }
    if (this.held.length >= MAX_HELD) throw new RangeError(`a paused node holds more than ${MAX_HELD} tasks`);
    this.held.push(() => {
      if (!cancelled()) task();
    });
  }

  /** Stops the event loop for `ms` true milliseconds. */
  pause(ms: number): void {
    if (this.paused || this.dead) return;
    this.paused = true;
    this.pausedAt = this.vt.now();
    this.vt.after(ms, () => this.resume());
  }

  private resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.pausedBefore += this.vt.now() - this.pausedAt;
    const held = this.held;
    this.held = [];
    // Each as its own turn, in the order they fell due, so promise continuations run in between.
    for (const task of held) this.vt.after(0, () => this.run(task, () => false));
  }
}
