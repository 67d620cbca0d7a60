import type { ByteString } from '../bytes.js';
import type { LockEntry } from './LockEntry.js';

/**
 * Every entry of each owner name, across all keys, so that release-all (0x06) and release with
 * index `*` cost O(entries of that owner). Most owners hold one entry; those are stored bare and
 * only get a Set when they hold a second, which keeps a million one-lock owners cheap.
 */
export class OwnerIndex {
  private readonly byOwner = new Map<ByteString, LockEntry | Set<LockEntry>>();

  add(entry: LockEntry): void {
    const current = this.byOwner.get(entry.owner);
    if (current === undefined) this.byOwner.set(entry.owner, entry);
    else if (current instanceof Set) current.add(entry);
    else this.byOwner.set(entry.owner, new Set([current, entry]));
  }

  delete(entry: LockEntry): void {
    const current = this.byOwner.get(entry.owner);
    if (current === entry) {
      this.byOwner.delete(entry.owner);
    } else if (current instanceof Set) {
      current.delete(entry);
      if (current.size === 1) this.byOwner.set(entry.owner, current.values().next().value!);
    }
  }

  /** A copy of the owner's entries, safe to iterate while they are being removed. */
  entriesOf(owner: ByteString): LockEntry[] {
    const current = this.byOwner.get(owner);
    if (current === undefined) return [];
    return current instanceof Set ? [...current] : [current];
  }
}
