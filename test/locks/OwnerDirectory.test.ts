import test from 'ava';
import { EntryRecords } from '../../src/locks/EntryRecords.js';
import { NO_ID } from '../../src/locks/HashIndex.js';
import { NameStore } from '../../src/locks/NameStore.js';
import { KEPT_EMPTY_OWNERS, OwnerDirectory } from '../../src/locks/OwnerDirectory.js';

function directory(): { entries: EntryRecords; owners: OwnerDirectory } {
  const entries = new EntryRecords();
  return { entries, owners: new OwnerDirectory(entries, new NameStore(), 1) };
}

test("an owner's entries come back in the order they were added, and leave in O(1) from anywhere", (t) => {
  const { entries, owners } = directory();
  const ids = Array.from({ length: 5 }, () => entries.allocate());
  for (const id of ids) owners.add(id, 'alice');
  const bob = entries.allocate();
  owners.add(bob, 'bob');
  t.deepEqual(owners.entriesOf('alice'), ids);
  t.is(owners.nameOf(entries.owner[ids[0]!]!), 'alice');
  owners.remove(ids[2]!); // middle
  owners.remove(ids[0]!); // first
  owners.remove(ids[4]!); // last
  t.deepEqual(owners.entriesOf('alice'), [ids[1], ids[3]]);
  t.deepEqual(owners.entriesOf('bob'), [bob]);
  owners.remove(ids[1]!);
  owners.remove(ids[3]!);
  t.deepEqual(owners.entriesOf('alice'), []);
  const again = entries.allocate();
  owners.add(again, 'alice');
  t.deepEqual(owners.entriesOf('alice'), [again], 'an owner emptied and taken again lists only its new entry');
  const second = entries.allocate();
  owners.add(second, 'alice');
  t.deepEqual(owners.entriesOf('alice'), [again, second]);
});

test('an emptied owner keeps its record until KEPT_EMPTY_OWNERS others have emptied since', (t) => {
  const { entries, owners } = directory();
  const take = (owner: string): number => {
    const entry = entries.allocate();
    owners.add(entry, owner);
    return entry;
  };
  owners.remove(take('alice'));
  const record = owners.find('alice');
  t.not(record, NO_ID, 'kept');
  owners.remove(take('alice'));
  t.is(owners.find('alice'), record, 'taken again, the same record');
  for (let i = 0; i < KEPT_EMPTY_OWNERS - 1; i++) owners.remove(take(`other-${i}`));
  t.is(owners.find('alice'), record, 'still among the most recently emptied');
  owners.remove(take('one-more'));
  t.is(owners.find('alice'), NO_ID, 'the least recently emptied goes');
  t.is(owners.keptEmpty, KEPT_EMPTY_OWNERS);
  t.is(owners.count, KEPT_EMPTY_OWNERS, 'nothing else is kept');
  const held = take('held');
  for (let i = 0; i < 2 * KEPT_EMPTY_OWNERS; i++) owners.remove(take(`churn-${i}`));
  t.deepEqual(owners.entriesOf('held'), [held], 'an owner with entries is never forgotten');
});
