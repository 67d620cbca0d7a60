import type { ByteString } from '../bytes.js';
import type { LockEntry } from './LockEntry.js';
import { VacancyQueue } from './VacancyQueue.js';

/**
 * Every entry of each owner name, across all keys, so that release-all (0x06) and release with
 * index `*` cost O(entries of that owner). Most owners hold one entry; those are stored bare and
 * only get a Set when they hold a second, which keeps a million one-lock owners cheap.
 *
 * An owner whose last entry goes keeps its slot, holding the time it fell empty, until it has
 * stayed empty for a grace period (see VacancyQueue for why deleting at once is slow).
 */
export class OwnerIndex {
  private readonly byOwner = new Map<ByteString, LockEntry | Set<LockEntry> | number>();
  private readonly vacancies = new VacancyQueue<ByteString>();

  add(entry: LockEntry): void {
    const current = this.byOwner.get(entry.owner);
    if (current === undefined || typeof current === 'number') this.byOwner.set(entry.owner, entry);
    else if (current instanceof Set) current.add(entry);
    else this.byOwner.set(entry.owner, new Set([current, entry]));
  }

  /** Removes the entry; `now` (clock ms) dates the owner's vacancy if this was its last entry. */
  delete(entry: LockEntry, now: number): void {
    const current = this.byOwner.get(entry.owner);
    if (current === entry) {
      if (this.vacancies.offer(entry.owner, now)) this.byOwner.set(entry.owner, now);
      else this.byOwner.delete(entry.owner);
    } else if (current instanceof Set) {
      current.delete(entry);
      if (current.size === 1) this.byOwner.set(entry.owner, current.values().next().value!);
    }
  }

  /** A copy of the owner's entries, safe to iterate while they are being removed. */
  entriesOf(owner: ByteString): LockEntry[] {
    const current = this.byOwner.get(owner);
    if (current === undefined || typeof current === 'number') return [];
    return current instanceof Set ? [...current] : [current];
  }

  /** Deletes owners empty ever since `cutoff` or earlier, looking at most at `budget`; returns how many it looked at. */
  forgetVacant(cutoff: number, budget: number): number {
    return this.vacancies.drain(cutoff, budget, (owner, since) => {
      if (this.byOwner.get(owner) === since) this.byOwner.delete(owner);
    });
  }

  /** Number of emptied owners waiting to be deleted. */
  get pendingVacancies(): number {
    return this.vacancies.size;
  }
}
