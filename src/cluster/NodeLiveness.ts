/**
 * Which nodes are proven silent, judged on this node's own monotonic clock from what only a live
 * node can do: rewrite its name key (its heartbeat, MemberSession.beat), which needs write access
 * to the cluster's keys. A lease proves nothing: any client of etcd may keep any lease alive by
 * its id (etcd 3.4 and 3.5 check no permission on LeaseKeepAlive; src/cluster/README.md).
 *
 * A node is proven silent once its beat (the name key's mod revision) has stood still for
 * `silenceMs`, measured from the first read that showed it at that value to a later read that
 * still did, and only over time in which this node's own writes went through etcd with no gap
 * over `writeGapMs` (`wrote`): while etcd takes no writes (an election, a lost quorum, this node
 * cut off or paused) nobody can beat, and standing still then proves nothing. A node judged
 * silent is live again as soon as a read shows its beat moved.
 *
 * Pure bookkeeping (no I/O, no clock of its own): times are passed in.
 */
export class NodeLiveness {
  /** name → its beat as last read, when a read first showed that beat (its answer), and the send of the latest read that still did. */
  private readonly seen = new Map<string, { beat: number; since: number; through: number }>();
  /** Since when this node's writes have gone through without a failure or a gap over writeGapMs; undefined after a failure. */
  private writableSince: number | undefined;
  private lastWrite = Number.NEGATIVE_INFINITY;

  constructor(
    /** How long a beat must stand still to prove its node silent. */
    readonly silenceMs: number,
    /** Longest gap between two of this node's writes that still counts as etcd taking writes throughout. */
    readonly writeGapMs: number,
  ) {}

  /** One of this node's own writes (a heartbeat, a name claim) was confirmed by etcd at `at` (ok), or failed. */
  wrote(ok: boolean, at: number): void {
    if (!ok) {
      this.writableSince = undefined;
      return;
    }
    if (this.writableSince === undefined || at - this.lastWrite > this.writeGapMs) this.writableSince = at;
    this.lastWrite = Math.max(this.lastWrite, at);
  }

  /**
   * A read of every registered name (`members`) sent at `sentAt` and answered at `answeredAt`. A
   * name missing from it is forgotten: registered again, it counts from its next sighting.
   */
  observed(members: readonly { readonly name: string; readonly beat: number }[], sentAt: number, answeredAt: number): void {
    const present = new Set<string>();
    for (const { name, beat } of members) {
      present.add(name);
      const known = this.seen.get(name);
      // The beat read may have been current anywhere between send and answer: a new one counts from the answer.
      if (known === undefined || known.beat !== beat) this.seen.set(name, { beat, since: answeredAt, through: answeredAt });
      else known.through = Math.max(known.through, sentAt);
    }
    if (present.size === this.seen.size) return;
    for (const name of [...this.seen.keys()]) if (!present.has(name)) this.seen.delete(name);
  }

  /** How long `name`'s beat is proven to have stood still while etcd took this node's writes (0 when not at all). */
  silentForMs(name: string): number {
    const known = this.seen.get(name);
    if (known === undefined || this.writableSince === undefined) return 0;
    // This node's writes must still have been going through at the read that saw the beat unmoved.
    if (known.through - this.lastWrite > this.writeGapMs) return 0;
    return Math.max(0, known.through - Math.max(known.since, this.writableSince));
  }

  /** Whether `name` is proven silent: its beat stood still for silenceMs while etcd took writes. */
  isSilent(name: string): boolean {
    return this.silentForMs(name) >= this.silenceMs;
  }

  /** The beat last read for `name` (the name key's mod revision), if it was read. */
  beatOf(name: string): number | undefined {
    return this.seen.get(name)?.beat;
  }

  /** Every name read that is proven silent, in name order. */
  silentNames(): string[] {
    return [...this.seen.keys()].filter((name) => this.isSilent(name)).sort();
  }
}
