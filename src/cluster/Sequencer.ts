import { appendFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { BundlePart, LentFence } from './EtcdLog.js';
import { COMMANDS_PER_VERSION, MAX_BATCH_COMMANDS } from './LogCodec.js';
import { AppendRefusedError, MAX_APPEND_BYTES, type LogPosition } from './ReplicatedLog.js';

/** What the sequencer appends with (EtcdLog). */
export interface BundleAppender {
  appendBundle(parts: readonly BundlePart[], timeoutMs: number): Promise<LogPosition>;
}

/** Longest one bundle append may take (the store pool tries members within it). */
const BUNDLE_APPEND_TIMEOUT_MS = 2_000;
/**
 * A part whose lease has less than this left (by this node's reckoning of what its node said) is
 * not sent: etcd would refuse the whole bundle for it. Never sent, it is refused at once.
 */
const MIN_FENCE_LEFT_MS = 300;
/** Batches per bundle at most: each holds at most MAX_BATCH_COMMANDS, and a version numbers COMMANDS_PER_VERSION. */
const MAX_BUNDLE_PARTS = Math.floor(COMMANDS_PER_VERSION / MAX_BATCH_COMMANDS);
/** Parts waiting at most; beyond this a forwarded batch is refused (its node appends it itself). */
const MAX_WAITING_PARTS = 256;
const IN_FLIGHT = Number(process.env.SEQ_IN_FLIGHT ?? 1);
const GATHER_MS = Number(process.env.SEQ_GATHER_MS ?? 0);
/** A bundle's bytes besides its parts: its header and each part's length. */
const BUNDLE_HEADER_BYTES = 4;
const PART_HEADER_BYTES = 4;

interface Waiting {
  readonly part: BundlePart;
  readonly resolve: (position: LogPosition) => void;
  readonly reject: (error: Error) => void;
}

/**
 * The sequencer (issue 20): gathers the batches of every node that forwards to it, its own
 * included, and appends all it holds in one transaction, one append in flight; what arrives
 * meanwhile goes in the next. Each batch keeps its own node's fence (BundlePart), so a batch that
 * its node gave up on can land no later than that node's lateCommitMs allows, as if its node had
 * sent it. A bundle refused for a gone lease is refused to every part in it (none committed); a
 * bundle whose outcome is unknown is unknown to each part.
 */
export class Sequencer {
  private readonly waiting: Waiting[] = [];
  private sending = false;
  private closed = false;
  /** Appends sent and parts they carried (reports). */
  appends = 0;
  parts = 0;

  constructor(private readonly appender: BundleAppender) {
    if (process.env.SEQ_STATS !== undefined) {
      let last = { appends: 0, parts: 0, bytes: 0 };
      setInterval(() => {
        const now = { appends: this.appends, parts: this.parts, bytes: this.bytes };
        appendFileSync(process.env.SEQ_STATS!, `${new Date().toISOString()} appends/s ${(now.appends - last.appends) / 2} parts/append ${((now.parts - last.parts) / Math.max(1, now.appends - last.appends)).toFixed(2)} bytes/append ${Math.round((now.bytes - last.bytes) / Math.max(1, now.appends - last.appends))}\n`);
        last = now;
      }, 2_000).unref();
    }
  }
  bytes = 0;

  /** Appends `value` fenced by `fence` in the next bundle; settles as an append would (ReplicatedLog.append). */
  submit(value: Uint8Array, fence: LentFence): Promise<LogPosition> {
    if (this.closed) return Promise.reject(new AppendRefusedError('sequencer closed: not sent'));
    if (this.waiting.length >= MAX_WAITING_PARTS) return Promise.reject(new AppendRefusedError('sequencer full: not sent'));
    this.lastSeen.set(Buffer.from(fence.fenceKey).toString('latin1'), performance.now());
    return new Promise((resolve, reject) => {
      this.waiting.push({ part: { value, fence }, resolve, reject });
      this.gathered?.();
      if (!this.sending) void this.send();
    });
  }

  close(): void {
    this.closed = true;
    for (const w of this.waiting.splice(0)) w.reject(new AppendRefusedError('sequencer closed: not sent'));
  }

  private async send(): Promise<void> {
    this.sending = true;
    try {
      while (this.waiting.length > 0 && !this.closed) {
        if (GATHER_MS > 0) {
          // Wait (briefly) for a part from every node heard from lately, so one append carries them all.
          if (this.distinctWaiting() < this.activeNodes()) {
            await new Promise<void>((resolve) => {
              const timer = setTimeout(() => {
                this.gathered = undefined;
                resolve();
              }, GATHER_MS);
              this.gathered = () => {
                if (this.distinctWaiting() < this.activeNodes()) return;
                clearTimeout(timer);
                this.gathered = undefined;
                resolve();
              };
            });
          }
        }
        if (IN_FLIGHT > 1 && this.inFlight < IN_FLIGHT - 1) {
          const extra = this.take();
          if (extra.length > 0) void this.sendOne(extra);
          continue;
        }
        const bundle = this.take();
        if (bundle.length === 0) continue;
        this.appends++;
        this.parts += bundle.length;
        for (const w of bundle) this.bytes += w.part.value.length;
        try {
          const position = await this.appender.appendBundle(
            bundle.map((w) => w.part),
            BUNDLE_APPEND_TIMEOUT_MS,
          );
          for (const w of bundle) w.resolve(position);
        } catch (error) {
          for (const w of bundle) w.reject(error as Error);
        }
      }
    } finally {
      this.sending = false;
    }
  }

  private inFlight = 0;
  private gathered: (() => void) | undefined;
  /** Fence key → when a part of it last arrived. */
  private readonly lastSeen = new Map<string, number>();

  private distinctWaiting(): number {
    const keys = new Set<string>();
    for (const w of this.waiting) keys.add(Buffer.from(w.part.fence.fenceKey).toString('latin1'));
    return keys.size;
  }

  private activeNodes(): number {
    const now = performance.now();
    let n = 0;
    for (const at of this.lastSeen.values()) if (now - at < 1_000) n++;
    return n;
  }

  private async sendOne(bundle: Waiting[]): Promise<void> {
    this.inFlight++;
    this.appends++;
    this.parts += bundle.length;
    try {
      const position = await this.appender.appendBundle(
        bundle.map((w) => w.part),
        BUNDLE_APPEND_TIMEOUT_MS,
      );
      for (const w of bundle) w.resolve(position);
    } catch (error) {
      for (const w of bundle) w.reject(error as Error);
    } finally {
      this.inFlight--;
    }
  }

  /** The next bundle: waiting parts in arrival order within the byte and part limits; short-leased ones refused. */
  private take(): Waiting[] {
    const now = performance.now();
    const bundle: Waiting[] = [];
    const fenceKeys = new Set<string>();
    let bytes = BUNDLE_HEADER_BYTES;
    while (this.waiting.length > 0 && bundle.length < MAX_BUNDLE_PARTS) {
      const next = this.waiting[0]!;
      if (next.part.fence.endsAt - now < MIN_FENCE_LEFT_MS) {
        this.waiting.shift();
        next.reject(new AppendRefusedError('not sent: its writer lease ran short at the sequencer'));
        continue;
      }
      const size = PART_HEADER_BYTES + next.part.value.length;
      // One transaction puts each fence key once (etcd refuses a key twice); a node's second batch waits.
      const key = Buffer.from(next.part.fence.fenceKey).toString('latin1');
      if (bundle.length > 0 && (bytes + size > MAX_APPEND_BYTES || fenceKeys.has(key))) break;
      this.waiting.shift();
      fenceKeys.add(key);
      bytes += size;
      bundle.push(next);
    }
    return bundle;
  }
}
