import type { ByteString } from '../bytes.js';
import type { LockEntry } from './LockEntry.js';
import { ShardedMap } from './ShardedMap.js';
import { MAX_LINGERING_VACANCIES, VacancyQueue } from './VacancyQueue.js';

/**
 * An owner name that has no entries left and keeps its slot for a grace period (see VacancyQueue
 * for why deleting at once is slow). One record per owner, reused however often the owner empties:
 * while the owner holds entries again they carry it (LockEntry.ownerVacancy).
 */
export class VacantOwner {
  /** Clock ms at which the owner last fell empty. */
  since = 0;
  /** Whether the VacancyQueue holds this record. */
  queued = false;

  constructor(readonly owner: ByteString) {}
}

/**
 * Every entry of each owner name, across all keys, so that release-all (0x06) and release with
 * index `*` cost O(entries of that owner). Most owners hold one entry; those are stored bare and
 * only get a Set when they hold a second, which keeps a million one-lock owners cheap.
 */
export class OwnerIndex {
  private readonly byOwner = new ShardedMap<LockEntry | Set<LockEntry> | VacantOwner>();
  private readonly vacancies = new VacancyQueue<VacantOwner>();

  add(entry: LockEntry): void {
    const current = this.byOwner.get(entry.owner);
    if (current === undefined) {
      this.byOwner.set(entry.owner, entry);
    } else if (current instanceof VacantOwner) {
      entry.ownerVacancy = current;
      this.byOwner.set(entry.owner, entry);
    } else if (current instanceof Set) {
      entry.ownerVacancy = current.values().next().value!.ownerVacancy;
      current.add(entry);
    } else {
      entry.ownerVacancy = current.ownerVacancy;
      this.byOwner.set(entry.owner, new Set([current, entry]));
    }
  }

  /**
   * Removes the entry. If it was the owner's last, the owner keeps its slot as vacant since
   * `vacantSince` (clock ms), or loses it at once when that is undefined.
   */
  delete(entry: LockEntry, vacantSince: number | undefined): void {
    const current = this.byOwner.get(entry.owner);
    if (current === entry) {
      if (vacantSince === undefined) {
        this.byOwner.delete(entry.owner);
        return;
      }
      const vacancy = entry.ownerVacancy ?? new VacantOwner(entry.owner);
      vacancy.since = vacantSince;
      // Too many lingering (see MAX_LINGERING_VACANCIES): the oldest goes now, whatever its age.
      if (!vacancy.queued && this.vacancies.size >= MAX_LINGERING_VACANCIES) this.forgetVacant(Number.POSITIVE_INFINITY, 1);
      if (!vacancy.queued) vacancy.queued = this.vacancies.offer(vacancy, vacantSince);
      if (vacancy.queued) this.byOwner.set(entry.owner, vacancy);
      else this.byOwner.delete(entry.owner);
    } else if (current instanceof Set) {
      current.delete(entry);
      if (current.size === 1) this.byOwner.set(entry.owner, current.values().next().value!);
    }
  }

  /** A copy of the owner's entries, safe to iterate while they are being removed. */
  entriesOf(owner: ByteString): LockEntry[] {
    const current = this.byOwner.get(owner);
    if (current === undefined || current instanceof VacantOwner) return [];
    return current instanceof Set ? [...current] : [current];
  }

  /** Deletes owners empty ever since `cutoff` or earlier, looking at most at `budget`; returns how many it looked at. */
  forgetVacant(cutoff: number, budget: number): number {
    this.cutoff = cutoff;
    return this.vacancies.drain(cutoff, budget, this.forgetDue);
  }

  /** The cutoff of the forgetVacant() call under way (kept here so its callback is made once, not per call). */
  private cutoff = 0;

  private readonly forgetDue = (vacancy: VacantOwner): void => {
    vacancy.queued = false;
    // Taken again: the owner's entries carry the record, to be queued when it next empties.
    if (this.byOwner.get(vacancy.owner) !== vacancy) return;
    if (vacancy.since <= this.cutoff) this.byOwner.delete(vacancy.owner);
    else if (this.vacancies.offer(vacancy, vacancy.since)) vacancy.queued = true;
    else this.byOwner.delete(vacancy.owner);
  };

  /** Number of emptied owners waiting to be deleted. */
  get pendingVacancies(): number {
    return this.vacancies.size;
  }
}
