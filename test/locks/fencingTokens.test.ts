import test, { type ExecutionContext } from 'ava';
import { FakeClock } from '../doubles/FakeClock.js';
import { idleTimers } from '../doubles/idleTimers.js';
import { LocalLockService, TOKENS_PER_MS } from '../../src/locks/LocalLockService.js';
import type { SavedLock } from '../../src/locks/LockService.js';
import { COMPACT_AFTER_PEAK } from '../../src/locks/LockTable.js';
import { mulberry32 } from '../helpers/random.js';

/**
 * The fencing token rules on one node, under a long seeded history of every operation that can
 * grant, keep or drop a lock, with restarts in between:
 *   - every new grant of a (key, index) gets a token greater than every earlier grant of it had;
 *   - a renewal (0x02 or 0x0A again by the owner, 0x04) keeps the token;
 *   - fence (0x09) answers the owner's token, and 0 to a waiter or anyone else;
 *   - request with fence (0x0A) answers the token exactly when the position is 1, else 0.
 * Restarts: a clean one (snapshot and high-water, as a shutdown saves them) with the same token
 * floor or a later one, and a crash, restoring the last save while the wall clock moved on.
 */

const KEYS = ['a', 'b', '\xff'];
const INDEXES = ['1', '2', ''];
const OWNERS = ['x', 'y', 'z', 'w', '\x00'];
/** A wall clock in this century: the floors are the size the daemon uses. */
const WALL_START_MS = 1_790_000_000_000;
/** A process that died and was started again was down at least this long. */
const RESTART_MS = 1_000;

interface Grant {
  readonly owner: string;
  readonly token: number;
}

interface Save {
  readonly saved: SavedLock[];
  readonly highestToken: number;
}

class FencedHistory {
  readonly clock = new FakeClock(0);
  wallMs = WALL_START_MS;
  floor = WALL_START_MS * TOKENS_PER_MS;
  service = new LocalLockService(this.clock, idleTimers, { tokenFloor: this.floor });
  /** Per queue, the highest token any of its grants had so far, across restarts. */
  private readonly highest = new Map<string, number>();
  /** Per queue, the grant it holds now as last observed. */
  private current = new Map<string, Grant>();
  newGrants = 0;
  lastSave: Save = { saved: [], highestToken: 0 };

  constructor(private readonly t: ExecutionContext) {}

  /** How much time passes: the table's clock and the wall clock alike. */
  advance(ms: number): void {
    this.clock.advance(ms);
    this.wallMs += ms;
  }

  /**
   * Reads every queue's owner and token: a grant not seen before must be above every earlier
   * grant of its queue (unless `restoredFromOldSave`: then the grants are those the save held);
   * fence answers every other name 0.
   */
  observe(where: string, restoredFromOldSave = false): void {
    const t = this.t;
    const now = new Map<string, Grant>();
    for (const key of KEYS) {
      for (const index of INDEXES) {
        const queue = `${key}/${index}`;
        const owner = this.service.findOwner(key, index);
        for (const name of OWNERS) if (name !== owner) t.is(this.service.fence(key, index, name), 0, `${where}: ${queue} fence of a non-owner`);
        if (owner === '') continue;
        const token = this.service.fence(key, index, owner);
        t.true(token > 0, `${where}: ${queue} owner ${owner} has a token`);
        if (!restoredFromOldSave) this.checkGrant(queue, owner, token, where);
        now.set(queue, { owner, token });
      }
    }
    this.current = now;
  }

  /** The grant `owner` holds of `queue`, as seen after an operation, against the last one seen. */
  private checkGrant(queue: string, owner: string, token: number, where: string): void {
    const before = this.current.get(queue);
    // Nothing one operation does can end a grant and make the same owner a new one.
    if (before?.owner === owner) {
      this.t.is(token, before.token, `${where}: ${queue} owner ${owner} kept its grant, and its token`);
      return;
    }
    const highest = this.highest.get(queue) ?? 0;
    if (!(token > highest)) this.t.fail(`${where}: ${queue} new grant to ${owner} has token ${token}, not above ${highest}`);
    this.highest.set(queue, token);
    this.newGrants++;
  }

  /** The owners and tokens a client can see now. */
  grants(): Map<string, Grant> {
    this.observe('grants');
    return new Map(this.current);
  }

  async save(): Promise<void> {
    const saved = await this.service.snapshot();
    this.lastSave = { saved, highestToken: await this.service.highestToken() };
  }

  /** A new process: its own token floor, the table restored from `from`. */
  async restart(from: Save, floor: number): Promise<void> {
    await this.service.close();
    this.floor = floor;
    this.service = new LocalLockService(this.clock, idleTimers, { tokenFloor: floor });
    await this.service.restore(from.saved, from.highestToken);
  }
}

/** Fills the table past COMPACT_AFTER_PEAK (every one a grant), empties it again, and compacts. */
function burstAndCompact(t: ExecutionContext, history: FencedHistory, burst: number): void {
  const table = history.service.table;
  const holders = 7;
  let lastToken = 0;
  for (let n = 0; n < COMPACT_AFTER_PEAK + 1_000; n++) {
    const key = `burst${burst}:${n}`;
    const owner = `holder-${n % holders}`;
    t.is(table.request({ key, index: '0', owner, ttl: 0, ttw: 0, priority: 0 }), 1);
    const token = table.fence(key, '0', owner);
    if (!(token > lastToken)) t.fail(`burst grant ${n}: token ${token} after ${lastToken}`);
    lastToken = token;
  }
  for (let n = 0; n < holders; n++) table.releaseAll(`holder-${n}`);
  t.true(table.compactIfSparse(), 'the burst left the records sparse');
}

for (const seed of [3, 17, 256, 4099, 65537]) {
  test(`fencing tokens only grow per lock through a random history with restarts (seed ${seed})`, async (t) => {
    const random = mulberry32(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const history = new FencedHistory(t);
    let renewals = 0;
    let fencedGrants = 0;
    let restarts = 0;
    let bursts = 0;
    for (let step = 0; step < 4_000; step++) {
      const where = `seed ${seed} step ${step}`;
      const service = history.service;
      const [key, index, owner] = [pick(KEYS), pick(INDEXES), pick(OWNERS)];
      const ownToken = service.fence(key, index, owner);
      const roll = random();
      if (roll < 0.35) {
        const request = { key, index, owner, ttl: pick([0, 1, 2, 5]), ttw: pick([0, 1, 3]), priority: pick([0, 1, 5, 255]) };
        const allowCreate = random() > 0.1;
        if (random() < 0.5) {
          const answer = service.requestFenced(request, allowCreate);
          t.is(answer.token, answer.position === 1 ? service.fence(key, index, owner) : 0, where);
          if (answer.position === 1) fencedGrants++;
        } else {
          service.request(request, allowCreate);
        }
        if (ownToken > 0) {
          t.is(service.fence(key, index, owner), ownToken, `${where}: a re-request by the owner keeps its token`);
          renewals++;
        }
      } else if (roll < 0.45) {
        t.is(service.renew(key, index, owner), ownToken > 0 || service.location(key, index, owner) > 0, where);
        if (ownToken > 0) t.is(service.fence(key, index, owner), ownToken, `${where}: a renewal keeps the token`);
      } else if (roll < 0.6) {
        service.release(key, index, owner);
      } else if (roll < 0.65) {
        service.releaseKey(key, owner);
      } else if (roll < 0.68) {
        service.releaseAll(owner);
      } else if (roll < 0.9) {
        history.advance(pick([100, 500, 1_000, 2_500]));
        service.table.expire();
      } else if (roll < 0.94) {
        await history.save();
      } else if (roll < 0.97 || step === 1_000 || step === 3_000) {
        // A clean restart: the shutdown saves snapshot and high-water; the new process has the
        // same floor (its wall clock did not move, or went back) or a later one.
        const before = history.grants();
        await history.save();
        history.advance(RESTART_MS);
        await history.restart(history.lastSave, random() < 0.5 ? history.floor : history.wallMs * TOKENS_PER_MS);
        t.deepEqual(history.grants(), before, `${where}: every owner keeps its grant and token through a restart`);
        restarts++;
      } else if (roll < 0.995) {
        // A crash (kill -9): the last save is older than the latest grants; the wall clock floor
        // of the new process is above them all.
        history.advance(RESTART_MS);
        await history.restart(history.lastSave, history.wallMs * TOKENS_PER_MS);
        history.observe(`${where}, the saved grants back`, true);
        restarts++;
      } else if (bursts < 2) {
        burstAndCompact(t, history, bursts++);
      }
      history.observe(where);
    }
    t.log(`${history.newGrants} grants seen, ${fencedGrants} answered by 0x0A, ${renewals} renewals by the owner, ${restarts} restarts, ${bursts} bursts`);
    t.true(history.newGrants > 500 && renewals > 100 && restarts > 20 && bursts > 0, 'the history exercised every rule');
  });
}
