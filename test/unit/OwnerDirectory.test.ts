import test from 'ava';
import { EntryRecords } from '../../src/locks/EntryRecords.js';
import { NO_ID } from '../../src/locks/HashIndex.js';
import { NameStore } from '../../src/locks/NameStore.js';
import { OwnerDirectory } from '../../src/locks/OwnerDirectory.js';

test("an owner's entries come back in the order they were added, and leave in O(1) from anywhere", (t) => {
  const entries = new EntryRecords(false);
  const owners = new OwnerDirectory(entries, new NameStore(), 1);
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
  t.is(owners.count, 2);
  owners.remove(ids[1]!);
  owners.remove(ids[3]!);
  t.deepEqual(owners.entriesOf('alice'), []);
  t.is(owners.find('alice'), NO_ID, 'an owner without entries is forgotten');
  t.is(owners.count, 1);
  const again = entries.allocate();
  owners.add(again, 'alice');
  t.deepEqual(owners.entriesOf('alice'), [again]);
});
