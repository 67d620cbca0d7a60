import test from 'ava';
import { formatLockFile, parseLockFileVersioned } from '../../src/files/lockFile.js';
import { LockTable } from '../../src/locks/LockTable.js';
import { SingleNodeRules } from '../../src/locks/SingleNodeRules.js';
import { FakeClock } from '../doubles/FakeClock.js';

// A single node saves the locks its lock-delay holds back, with the time each delay has left, and
// a restart holds them back for that rest: time does not run while the server is down, for a
// delay as for an entry's TTL.

const SECOND = 1000;
const DELAY = 30 * SECOND;
const req = (owner: string, key = 'k', index = 'i', ttl = 2) => ({ key, index, owner, ttl, ttw: 600, priority: 0 });

function single(clock: FakeClock): LockTable {
  return new LockTable(clock, new SingleNodeRules(), { lockDelayMs: DELAY });
}

test('a held-back lock goes through the lock file and a restart with the rest of its delay, in its place among the queues', (t) => {
  const clock = new FakeClock(1_000_000);
  const before = single(clock);
  before.request(req('zed', 'a', '0', 600));
  before.request(req('alice'));
  before.request(req('bob'));
  // Held back with nobody waiting: its queue has no entry, only the hold.
  before.request(req('carol', 'k', 'empty'));
  before.request(req('dave', 'z', '9', 600));
  clock.advance(2 * SECOND);
  t.is(before.expire(), 2, 'alice and carol expired');
  clock.advance(1_500);
  const text = [...formatLockFile(before.snapshot(), 0, new Date(0), [...before.savedHolds()])].join('');
  const file = parseLockFileVersioned(text, 'locks');
  t.deepEqual(
    file.holds.map((hold) => [hold.key, hold.index, hold.remainingMs]),
    [
      ['k', 'i', DELAY - 1_500],
      ['k', 'empty', DELAY - 1_500],
    ],
  );

  // The server is down for an hour; the new one starts on another clock.
  const later = new FakeClock(9_000_000);
  const after = single(later);
  after.restore(file.locks, file.holds);
  t.deepEqual(
    after.queues('k').map((q) => [q.index, q.heldForMs, q.entries.map((e) => e.owner)]),
    [
      ['i', DELAY - 1_500, ['bob']],
      ['empty', DELAY - 1_500, []],
    ],
  );
  t.deepEqual(
    [...after.snapshot()].map((e) => e.key),
    [...before.snapshot()].map((e) => e.key),
    'queues in the same order',
  );
  t.is(after.request(req('erin', 'k', 'empty')), 2, 'a newcomer only queues behind the hold');
  later.advance(DELAY - 1_501);
  after.expire();
  t.is(after.findOwner('k', 'i'), '', 'not before the rest of the delay is over');
  later.advance(1);
  after.expire();
  t.is(after.findOwner('k', 'i'), 'bob');
  t.is(after.findOwner('k', 'empty'), 'erin');
  t.is(after.heldBack, 0);
});

test('restoring a held-back lock that the entries give an owner is refused', (t) => {
  const table = single(new FakeClock(0));
  const owner = { key: 'k', index: 'i', owner: 'alice', priority: 0, ttl: 0, ttw: 0, isOwner: true, token: 1, remainingMs: null };
  t.throws(() => table.restore([owner], [{ key: 'k', index: 'i', remainingMs: 5, entriesBefore: 0 }]), { message: /an owner of a lock held back/ });
  t.throws(() => single(new FakeClock(0)).restore([owner], [{ key: 'k', index: 'i', remainingMs: 5, entriesBefore: 1 }]), {
    message: /held-back lock with an owner/,
  });
});
