/**
 * What each simulated client may believe it owns, from the replies it got, and S1 over it: no two
 * clients' ownership intervals on one (key, index) overlap.
 *
 * A client owns from receiving a reply that tells it so (0x02 position 1, 0x01 naming it, 0x03
 * location 1, 0x07 flagging it owner) until its release send or the end of its TTL, whichever
 * comes first. The TTL runs, at the earliest, from the latest of: its last renewing send (a
 * request or renewal answered), and the send of its last read that said it did not own the lock
 * yet (a waiter's TTL runs from its promotion, and a linearizable read sent at s that shows it
 * waiting proves the promotion committed after s). TTL 0 never ends. A renewing send whose
 * outcome is unknown may only shorten that end (a re-request with a smaller TTL), never lengthen.
 *
 * Fencing tokens: a reply that tells a client it owns may also tell it the token of that grant
 * (0x0A answering 1, 0x09 answering a token); the interval keeps it. Every reply within one
 * interval names the same grant (the client owns throughout), so the same token; and, intervals
 * taken in the order they began, a lock's tokens never go down, and two clients' intervals never
 * share one (a later grant's token is greater than every earlier grant's).
 */

/** A node's clock may run fast by at most this much; clients count TTL × (1 − margin). */
export const RATE_MARGIN = 0.001;

export interface Interval {
  readonly client: string;
  readonly start: number;
  end: number;
  /** When the client must consider the lock gone; infinite for TTL 0. */
  expires: number;
  /** How it learned it owned: which reply. */
  readonly via: string;
  /** The log's head when it was told: every replica past it has the client owning the lock. */
  readonly fromVersion: number;
  open: boolean;
  /** The fencing token of the grant, once a reply told it (0 until then). */
  token: number;
}

/** One client's knowledge of one lock. */
interface LockView {
  /** Send time of its last request or renewal of it (the TTL runs from no earlier). */
  renewedSent: number;
  /** Send time of its last read showing it waiting or absent. */
  notOwnerSent: number;
  /** The smallest TTL (ms; 0 = none) it may have set since it last released. */
  ttlMs: number;
  /** Send time of its last release of it. */
  releasedSent: number;
  requested: boolean;
  /** When a release of it was answered: the client's entry was gone then. */
  goneAt: number;
  /** Whether it requested the lock since that release was answered. */
  requestedSinceGone: boolean;
  /** The log's head when the release was answered. */
  goneVersion: number;
  /** When it next sent a request of the lock after that (infinite until it does). */
  nextRequestSent: number;
  interval: Interval | undefined;
}

export class Ownership {
  private readonly intervals = new Map<string, Interval[]>();
  private readonly views = new Map<string, LockView>();

  constructor(
    private readonly fail: (message: string) => never,
    /** The log's last committed version now. */
    private readonly headVersion: () => number,
    private readonly clock: () => number,
  ) {}

  get count(): number {
    let n = 0;
    for (const list of this.intervals.values()) n += list.length;
    return n;
  }

  private view(client: string, lock: string): LockView {
    const id = `${client} ${lock}`;
    let v = this.views.get(id);
    if (v === undefined) {
      v = {
        renewedSent: -Infinity,
        notOwnerSent: -Infinity,
        ttlMs: -1,
        releasedSent: -Infinity,
        requested: false,
        goneAt: -Infinity,
        requestedSinceGone: false,
        goneVersion: Infinity,
        nextRequestSent: Infinity,
        interval: undefined,
      };
      this.views.set(id, v);
    }
    return v;
  }

  private live(v: LockView, now: number): Interval | undefined {
    const i = v.interval;
    if (i === undefined || !i.open) return undefined;
    if (now >= i.expires) {
      this.close(i, now);
      return undefined;
    }
    return i;
  }

  /** A request with `ttlMs` is sent: whatever its outcome, the TTL may now be that one. */
  requestSent(client: string, lock: string, ttlMs: number): void {
    const v = this.view(client, lock);
    v.requested = true;
    if (!v.requestedSinceGone) v.nextRequestSent = Math.min(v.nextRequestSent, this.clock());
    v.requestedSinceGone = true;
    v.ttlMs = v.ttlMs < 0 ? ttlMs : minTtl(v.ttlMs, ttlMs);
  }

  /**
   * A request answered 1 (`ttlMs` set) or a renewal answered true: the phase restarted at `sent`.
   * `token`: the grant's fencing token, when the reply told it (0x0A); 0 when it did not.
   */
  renewed(client: string, lock: string, sent: number, now: number, ttlMs: number | undefined, via: string, token = 0): void {
    const v = this.view(client, lock);
    if (ttlMs !== undefined) v.ttlMs = ttlMs;
    v.renewedSent = Math.max(v.renewedSent, sent);
    const current = this.live(v, now);
    if (current !== undefined) {
      current.expires = bound(v.renewedSent, v.ttlMs);
      this.tokenTold(current, token, lock, sent, via);
      return;
    }
    if (ttlMs !== undefined) this.open(client, lock, v, now, via, token);
  }

  /** A renewing request not answered yet, or never (its outcome is unknown): the TTL may be its own from its send. */
  mayHaveShortened(client: string, lock: string, sent: number, ttlMs: number): void {
    const v = this.view(client, lock);
    const current = v.interval;
    if (current === undefined || !current.open) return;
    current.expires = Math.min(current.expires, bound(sent, ttlMs));
  }

  /**
   * A read sent at `sent`, answered at `now`, says whether the client owns the lock, and whether
   * it has an entry there at all (`present`; undefined when the reply does not say). Two more
   * checks: an entry the client owns is not gone before its TTL ran out (a read sent while it
   * owns and answered before that end must not say otherwise), and an entry whose release was answered comes back only by a
   * new request (a batch applied twice, or after it was given up, would bring it back). `token`:
   * the fencing token of the grant the reply says the client owns, when it told it (0x09).
   */
  observed(client: string, lock: string, sent: number, now: number, owns: boolean, present: boolean | undefined, via: string, token = 0): void {
    const v = this.view(client, lock);
    if ((owns || present === true) && sent > v.goneAt && !v.requestedSinceGone) {
      this.fail(
        `${client} is told by ${via} (sent at ${sent.toFixed(1)}) that it has an entry on ${lock}, released at ${v.goneAt.toFixed(1)} and not requested since`,
      );
    }
    if (!owns) {
      const held = v.interval;
      if (held !== undefined && held.open && sent >= held.start && now < held.expires) {
        this.fail(
          `${client} owns ${lock} since ${held.start.toFixed(1)} (told by ${held.via}) until at least ${held.expires.toFixed(1)}, ` +
            `but ${via} sent at ${sent.toFixed(1)} says at ${now.toFixed(1)} that it does not`,
        );
      }
      v.notOwnerSent = Math.max(v.notOwnerSent, sent);
      return;
    }
    if (sent < v.releasedSent) return;
    const current = this.live(v, now);
    if (current !== undefined) {
      this.tokenTold(current, token, lock, sent, via);
      return;
    }
    if (!v.requested) this.fail(`${client} was told by ${via} that it owns ${lock}, which it never requested`);
    this.open(client, lock, v, now, via, token);
  }

  /**
   * A reply sent at `sent` during the interval told the token of the grant the client owns: the
   * one the interval began with (the client owned throughout: a release would have ended it).
   */
  private tokenTold(interval: Interval, token: number, lock: string, sent: number, via: string): void {
    if (token === 0 || sent < interval.start) return;
    if (interval.token === 0) interval.token = token;
    else if (interval.token !== token) {
      this.fail(
        `${interval.client} owns ${lock} since ${interval.start.toFixed(1)} with token ${interval.token}, ` +
          `but ${via} sent at ${sent.toFixed(1)} tells it token ${token}`,
      );
    }
  }

  private open(client: string, lock: string, v: LockView, now: number, via: string, token: number): void {
    const from = Math.max(v.renewedSent, v.notOwnerSent);
    const interval: Interval = {
      client,
      start: now,
      end: Number.POSITIVE_INFINITY,
      expires: bound(from, v.ttlMs),
      via,
      fromVersion: this.headVersion(),
      open: true,
      token,
    };
    if (interval.expires <= now) return; // told too late to be of any use: it owns nothing
    v.interval = interval;
    let list = this.intervals.get(lock);
    if (list === undefined) this.intervals.set(lock, (list = []));
    list.push(interval);
  }

  /** A release (or release-all) sent: ownership ends at the send, whatever its outcome. */
  released(client: string, lock: string, sent: number): void {
    const v = this.view(client, lock);
    v.releasedSent = sent;
    if (v.interval !== undefined) this.close(v.interval, sent);
  }

  /** A release was answered: nothing of the client is left there, its next request sets the TTL afresh. */
  releaseAnswered(client: string, lock: string, now: number): void {
    const v = this.view(client, lock);
    v.ttlMs = -1;
    v.goneAt = now;
    v.requestedSinceGone = false;
    v.goneVersion = this.headVersion();
    v.nextRequestSent = Infinity;
  }

  /**
   * The same two checks on a replica's state, between the replies: a replica at `version`
   * (committed at `committedAt`) that is past the point where a client was told it owns a lock,
   * and committed before that ownership's end, shows it owning; one past the answer of a release,
   * committed before the client's next request of that lock, holds no entry of it there.
   */
  checkReplica(
    node: string,
    version: number,
    committedAt: number,
    entry: (lock: string, client: string) => 'owner' | 'waiter' | undefined,
    token: (lock: string, client: string) => number,
  ): void {
    for (const [id, v] of this.views) {
      const space = id.indexOf(' ');
      const client = id.slice(0, space);
      const lock = id.slice(space + 1);
      const i = v.interval;
      if (i !== undefined && i.open && version >= i.fromVersion && committedAt < i.expires) {
        if (entry(lock, client) !== 'owner') {
          this.fail(
            `${node} at v${version} (committed at ${committedAt.toFixed(1)}) has ${client} no longer owning ${lock}, ` +
              `told by ${i.via} at ${i.start.toFixed(1)} (v${i.fromVersion}) it owns it until at least ${i.expires.toFixed(1)}`,
          );
        }
        // Still the grant the client was told of: the same token on every replica.
        if (i.token !== 0 && token(lock, client) !== i.token) {
          this.fail(`${node} at v${version} has ${client}'s grant of ${lock} with token ${token(lock, client)}; the client was told ${i.token}`);
        }
      }
      if (version >= v.goneVersion && committedAt < v.nextRequestSent && entry(lock, client) !== undefined) {
        this.fail(`${node} at v${version} holds an entry of ${client} on ${lock}, whose release was answered at v${v.goneVersion}, not requested since`);
      }
    }
  }

  /** Locks the client believes it holds now. */
  holding(client: string, now: number): string[] {
    const out: string[] = [];
    for (const [id, v] of this.views) {
      if (!id.startsWith(`${client} `)) continue;
      if (this.live(v, now) !== undefined) out.push(id.slice(client.length + 1));
    }
    return out;
  }

  private close(interval: Interval, at: number): void {
    if (!interval.open) return;
    interval.open = false;
    interval.end = Math.min(at, interval.expires);
  }

  /** Intervals whose grant's token a reply told. */
  get fenced(): number {
    let n = 0;
    for (const list of this.intervals.values()) for (const i of list) if (i.token !== 0) n++;
    return n;
  }

  /** S1 over every interval, those still open ending at `now`; then the tokens' order. */
  check(now: number): void {
    this.checkOverlaps(now);
    this.checkTokens();
  }

  /**
   * Per lock, intervals in the order they began (S1 holds: that is the order of their grants):
   * every token told is above every earlier interval's, or equal to it only for the same client
   * (the same grant, told again after the client's own view of it had run out).
   */
  private checkTokens(): void {
    for (const [lock, list] of this.intervals) {
      let highest: Interval | undefined;
      for (const b of [...list].sort((x, y) => x.start - y.start)) {
        if (b.token === 0) continue;
        if (highest !== undefined && (b.token < highest.token || (b.token === highest.token && b.client !== highest.client))) {
          this.fail(
            `tokens on ${lock} went down: ${b.client} is told token ${b.token} (by ${b.via} at ${b.start.toFixed(1)}) after ` +
              `${highest.client} was told ${highest.token} (by ${highest.via} at ${highest.start.toFixed(1)})`,
          );
        }
        highest = b;
      }
    }
  }

  private checkOverlaps(now: number): void {
    for (const v of this.views.values()) if (v.interval !== undefined) this.close(v.interval, now);
    for (const [lock, list] of this.intervals) {
      const sorted = [...list].sort((a, b) => a.start - b.start);
      // The two intervals reaching furthest among those started so far, of two different clients.
      let first: Interval | undefined;
      let second: Interval | undefined;
      for (const b of sorted) {
        const rival = first?.client !== b.client ? first : second;
        if (rival !== undefined && rival.end > b.start) {
          this.fail(
            `S1 broken on ${lock}: ${rival.client} (told by ${rival.via}) owns [${rival.start.toFixed(1)}, ${rival.end.toFixed(1)}), ` +
              `${b.client} is told by ${b.via} at ${b.start.toFixed(1)}`,
          );
        }
        if (first === undefined || b.end > first.end) {
          if (first !== undefined && first.client !== b.client) second = first;
          first = b;
        } else if (b.client !== first.client && (second === undefined || b.end > second.end)) {
          second = b;
        }
      }
    }
  }
}

function minTtl(a: number, b: number): number {
  if (a === 0) return b;
  if (b === 0) return a;
  return Math.min(a, b);
}

/** Send time plus TTL, less the clock-rate margin clients keep; TTL 0 never ends. */
function bound(sent: number, ttlMs: number): number {
  return ttlMs === 0 ? Number.POSITIVE_INFINITY : sent + ttlMs * (1 - RATE_MARGIN);
}
