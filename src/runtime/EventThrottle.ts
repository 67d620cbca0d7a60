import type { Clock } from './Clock.js';

/** Events let through per window, per key, before the rest are only counted. */
const DEFAULT_BURST = 10;
const DEFAULT_WINDOW_MS = 1_000;

/**
 * Limits how many log lines one kind of event may write: a flood of refused connections must not
 * become a flood of log lines. Within each window the first `burst` events pass; the rest are
 * counted, and the next line that passes reports how many were suppressed.
 */
export class EventThrottle {
  private windowStart = Number.NEGATIVE_INFINITY;
  private readonly passed = new Map<string, number>();
  private readonly suppressed = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly burst = DEFAULT_BURST,
    private readonly windowMs = DEFAULT_WINDOW_MS,
  ) {}

  /**
   * Whether an event of this kind may be logged now. Returns undefined when it must be dropped,
   * otherwise the number suppressed since the last one that passed (0 when none).
   */
  admit(kind: string): number | undefined {
    const now = this.clock.now();
    if (now - this.windowStart >= this.windowMs) {
      this.windowStart = now;
      this.passed.clear();
    }
    const passed = this.passed.get(kind) ?? 0;
    if (passed >= this.burst) {
      this.suppressed.set(kind, (this.suppressed.get(kind) ?? 0) + 1);
      return undefined;
    }
    this.passed.set(kind, passed + 1);
    const dropped = this.suppressed.get(kind) ?? 0;
    this.suppressed.delete(kind);
    return dropped;
  }
}
