import test from 'ava';
import { FakeClock } from '../../src/locks/Clock.js';
import { LockTable, VACANCY_GRACE_MS } from '../../src/locks/LockTable.js';

test('a released key and owner linger for the grace period, then are forgotten; expired ones go at once', (t) => {
  const clock = new FakeClock(0);
  const table = new LockTable(clock);
  table.request('k', 'i', 'alice', 0, 0, 0);
  t.is(table.release('k', 'i', 'alice'), 1);
  t.is(table.pendingVacancies, 2, 'the key and the owner keep their slots');
  t.is(table.request('k', 'i', 'alice', 0, 0, 0), 1, 'taken again at once, as if new');
  t.is(table.release('k', 'i', 'alice'), 1);

  clock.advance(VACANCY_GRACE_MS - 1);
  table.forgetVacant();
  t.is(table.pendingVacancies, 2, 'not yet due');
  clock.advance(1);
  table.forgetVacant();
  t.is(table.pendingVacancies, 0, 'forgotten after the grace period');
  t.deepEqual(table.list('k'), []);

  table.request('x', 'i', 'bob', 1, 0, 0);
  clock.advance(1_000);
  t.is(table.expire(), 1);
  t.is(table.pendingVacancies, 0, 'expiry leaves no vacancy behind');
  t.is(table.request('x', 'i', 'carol', 0, 0, 0), 1);
  t.is(table.releaseAll('bob'), 0);
});
