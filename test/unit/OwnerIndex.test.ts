import test from 'ava';
import { LockEntry } from '../../src/locks/LockEntry.js';
import { LockQueue } from '../../src/locks/LockQueue.js';
import { OwnerIndex } from '../../src/locks/OwnerIndex.js';

const entry = (owner: string, index = '0'): LockEntry => new LockEntry(new LockQueue('k', index), owner, 0, 0, 0, 0);

test('an owner that empties and comes back keeps one vacancy record, queued once', (t) => {
  const index = new OwnerIndex();
  let e = entry('alice');
  index.add(e);
  for (let now = 0; now < 50; now++) {
    index.delete(e, now);
    t.deepEqual(index.entriesOf('alice'), []);
    e = entry('alice');
    index.add(e);
    t.deepEqual(index.entriesOf('alice'), [e]);
  }
  t.is(index.pendingVacancies, 1, 'fifty vacancies, one record');
  t.is(index.forgetVacant(1_000, 10), 1);
  t.deepEqual(index.entriesOf('alice'), [e], 'in use again: nothing forgotten');
  index.delete(e, 2_000);
  t.is(index.pendingVacancies, 1, 'queued again when it next empties');
  t.is(index.forgetVacant(1_999, 10), 0, 'not due before its time');
  t.is(index.forgetVacant(2_000, 10), 1);
  t.is(index.pendingVacancies, 0);
  const fresh = entry('alice');
  index.add(fresh);
  t.is(fresh.ownerVacancy, undefined, 'forgotten for good: a new life starts without the old record');
});

test('an owner emptied again after its record was queued waits out the latest vacancy', (t) => {
  const index = new OwnerIndex();
  const first = entry('bob');
  index.add(first);
  index.delete(first, 100);
  const second = entry('bob');
  index.add(second);
  index.delete(second, 900);
  t.is(index.forgetVacant(500, 10), 1, 'the record comes due at 500…');
  t.is(index.pendingVacancies, 1, '…and is queued again for the vacancy of 900');
  index.add(entry('bob'));
  t.is(index.entriesOf('bob').length, 1);
});

test('the record follows the owner through holding several entries', (t) => {
  const index = new OwnerIndex();
  const a = entry('carol', 'a');
  index.add(a);
  index.delete(a, 0);
  const b = entry('carol', 'b');
  const c = entry('carol', 'c');
  index.add(b);
  index.add(c);
  t.is(index.entriesOf('carol').length, 2);
  t.truthy(b.ownerVacancy);
  t.is(c.ownerVacancy, b.ownerVacancy);
  index.delete(b, 10);
  index.delete(c, 20);
  t.deepEqual(index.entriesOf('carol'), []);
  t.is(index.pendingVacancies, 1);
  t.is(index.forgetVacant(0, 10), 1, 'the first vacancy comes due');
  t.is(index.forgetVacant(20, 10), 1, 'then the latest');
  t.is(index.pendingVacancies, 0);
});
