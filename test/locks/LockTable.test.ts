import test from 'ava';
import { FakeClock } from '../doubles/FakeClock.js';
import { LockTable } from '../../src/locks/LockTable.js';
import { SingleNodeRules } from '../../src/locks/SingleNodeRules.js';

const SECOND = 1000;

function setup(maxEntries?: number): { clock: FakeClock; table: LockTable } {
  const clock = new FakeClock(1_000_000);
  return { clock, table: new LockTable(clock, new SingleNodeRules(maxEntries)) };
}

test('a request on a free lock makes the requester owner; later ones queue behind', (t) => {
  const { table } = setup();
  t.is(table.request({ key: 'k', index: 'i', owner: 'alice', ttl: 30, ttw: 60, priority: 0 }), 1);
  t.is(table.request({ key: 'k', index: 'i', owner: 'bob', ttl: 30, ttw: 60, priority: 0 }), 2);
  t.is(table.request({ key: 'k', index: 'i', owner: 'carol', ttl: 30, ttw: 60, priority: 0 }), 3);
  t.is(table.findOwner('k', 'i'), 'alice');
  t.is(table.location('k', 'i', 'carol'), 3);
  t.is(table.location('k', 'i', 'nobody'), 0);
  t.is(table.findOwner('k', 'other'), '');
  t.deepEqual([table.owners, table.waiters], [1, 2]);
});

test('waiters are ordered by priority (higher first), then arrival; the owner is never preempted', (t) => {
  const { table } = setup();
  table.request({ key: 'k', index: 'i', owner: 'owner', ttl: 30, ttw: 60, priority: 0 });
  table.request({ key: 'k', index: 'i', owner: 'low-early', ttl: 30, ttw: 60, priority: 1 });
  table.request({ key: 'k', index: 'i', owner: 'high', ttl: 30, ttw: 60, priority: 200 });
  table.request({ key: 'k', index: 'i', owner: 'low-late', ttl: 30, ttw: 60, priority: 1 });
  t.is(table.request({ key: 'k', index: 'i', owner: 'top', ttl: 30, ttw: 60, priority: 255 }), 2);
  t.is(table.findOwner('k', 'i'), 'owner');
  t.deepEqual(
    table.list('k').map((c) => [c.owner, c.isOwner]),
    [
      ['owner', true],
      ['top', false],
      ['high', false],
      ['low-early', false],
      ['low-late', false],
    ],
  );
  t.is(table.location('k', 'i', 'low-late'), 5);
});

test('release promotes the first waiter, whose TTL clock starts at promotion', (t) => {
  const { clock, table } = setup();
  table.request({ key: 'k', index: 'i', owner: 'alice', ttl: 10, ttw: 100, priority: 0 });
  table.request({ key: 'k', index: 'i', owner: 'bob', ttl: 5, ttw: 100, priority: 0 });
  clock.advance(50 * SECOND);
  t.is(table.release('k', 'i', 'alice'), 1);
  t.is(table.findOwner('k', 'i'), 'bob');
  clock.advance(4.9 * SECOND);
  t.is(table.expire(), 0, 'bob has 5 s from promotion, not from his arrival');
  clock.advance(0.1 * SECOND);
  t.is(table.expire(), 1);
  t.is(table.findOwner('k', 'i'), '');
  t.is(table.size, 0);
});

test('an owner expires after TTL and a waiter after TTW; the next waiter is promoted', (t) => {
  const { clock, table } = setup();
  table.request({ key: 'k', index: 'i', owner: 'owner', ttl: 10, ttw: 0, priority: 0 });
  table.request({ key: 'k', index: 'i', owner: 'impatient', ttl: 10, ttw: 3, priority: 0 });
  table.request({ key: 'k', index: 'i', owner: 'patient', ttl: 10, ttw: 30, priority: 0 });
  clock.advance(3 * SECOND);
  t.is(table.expire(), 1);
  t.is(table.location('k', 'i', 'impatient'), 0);
  t.is(table.location('k', 'i', 'patient'), 2);
  clock.advance(7 * SECOND);
  t.is(table.expire(), 1);
  t.is(table.findOwner('k', 'i'), 'patient');
});

test('0 means no expiry for that phase', (t) => {
  const { clock, table } = setup();
  table.request({ key: 'k', index: 'i', owner: 'forever', ttl: 0, ttw: 0, priority: 0 });
  table.request({ key: 'k', index: 'i', owner: 'waits-forever', ttl: 5, ttw: 0, priority: 0 });
  clock.advance(1_000_000 * SECOND);
  t.is(table.expire(), 0);
  t.is(table.nextDeadline(), undefined);
  table.release('k', 'i', 'forever');
  t.is(table.findOwner('k', 'i'), 'waits-forever');
  clock.advance(5 * SECOND);
  t.is(table.expire(), 1, 'once owner, its TTL of 5 s applies');
});

test('renew restarts the timer of an owner or a waiter; a missing entry is not renewed', (t) => {
  const { clock, table } = setup();
  table.request({ key: 'k', index: 'i', owner: 'owner', ttl: 10, ttw: 10, priority: 0 });
  table.request({ key: 'k', index: 'i', owner: 'waiter', ttl: 10, ttw: 10, priority: 0 });
  clock.advance(9 * SECOND);
  t.true(table.renew('k', 'i', 'owner'));
  t.true(table.renew('k', 'i', 'waiter'));
  t.false(table.renew('k', 'i', 'stranger'));
  clock.advance(9 * SECOND);
  t.is(table.expire(), 0);
  clock.advance(1 * SECOND);
  t.is(table.expire(), 2);
});

test('a re-request renews with the new TTL/TTW, keeping priority and place', (t) => {
  const { clock, table } = setup();
  table.request({ key: 'k', index: 'i', owner: 'owner', ttl: 10, ttw: 10, priority: 0 });
  table.request({ key: 'k', index: 'i', owner: 'first', ttl: 10, ttw: 10, priority: 5 });
  table.request({ key: 'k', index: 'i', owner: 'second', ttl: 10, ttw: 10, priority: 5 });
  clock.advance(9 * SECOND);
  t.is(table.request({ key: 'k', index: 'i', owner: 'second', ttl: 7, ttw: 20, priority: 255 }), 3, 'the higher priority asked for now is ignored');
  t.is(table.request({ key: 'k', index: 'i', owner: 'owner', ttl: 2, ttw: 0, priority: 0 }), 1);
  const second = table.list('k').find((c) => c.owner === 'second')!;
  t.deepEqual([second.priority, second.ttl, second.ttw], [5, 7, 20]);
  clock.advance(2 * SECOND);
  t.is(table.expire(), 2, 'owner (new TTL 2) and first (TTW 10 from the start) go');
  t.is(table.findOwner('k', 'i'), 'second');
});

test('drain mode: no new entries (position 0), but existing ones still re-request', (t) => {
  const { table } = setup();
  table.request({ key: 'k', index: 'i', owner: 'owner', ttl: 10, ttw: 10, priority: 0 });
  t.is(table.request({ key: 'k', index: 'i', owner: 'newcomer', ttl: 10, ttw: 10, priority: 0 }, false), 0);
  t.is(table.request({ key: 'k', index: 'other', owner: 'owner', ttl: 10, ttw: 10, priority: 0 }, false), 0);
  t.is(table.request({ key: 'k', index: 'i', owner: 'owner', ttl: 10, ttw: 10, priority: 0 }, false), 1);
  t.is(table.size, 1);
});

test('the table refuses (position 0) beyond maxEntries', (t) => {
  const { table } = setup(2);
  t.is(table.request({ key: 'a', index: 'i', owner: 'o', ttl: 1, ttw: 1, priority: 0 }), 1);
  t.is(table.request({ key: 'b', index: 'i', owner: 'o', ttl: 1, ttw: 1, priority: 0 }), 1);
  t.is(table.request({ key: 'c', index: 'i', owner: 'o', ttl: 1, ttw: 1, priority: 0 }), 0);
  t.is(table.request({ key: 'a', index: 'i', owner: 'o', ttl: 1, ttw: 1, priority: 0 }), 1, 'renewal still works when full');
});

test('release with index * removes the owner under that key across indexes only', (t) => {
  const { table } = setup();
  table.request({ key: 'k', index: '1', owner: 'alice', ttl: 10, ttw: 10, priority: 0 });
  table.request({ key: 'k', index: '2', owner: 'bob', ttl: 10, ttw: 10, priority: 0 });
  table.request({ key: 'k', index: '2', owner: 'alice', ttl: 10, ttw: 10, priority: 0 });
  table.request({ key: 'other', index: '1', owner: 'alice', ttl: 10, ttw: 10, priority: 0 });
  t.is(table.releaseKey('k', 'alice'), 2);
  t.is(table.findOwner('k', '1'), '');
  t.is(table.location('k', '2', 'alice'), 0);
  t.is(table.findOwner('other', '1'), 'alice');
  t.is(table.releaseKey('k', 'alice'), 0);
});

test('release all removes every entry of the owner across keys, promoting waiters', (t) => {
  const { table } = setup();
  table.request({ key: 'a', index: '1', owner: 'alice', ttl: 10, ttw: 10, priority: 0 });
  table.request({ key: 'a', index: '1', owner: 'bob', ttl: 10, ttw: 10, priority: 0 });
  table.request({ key: 'b', index: '1', owner: 'bob', ttl: 10, ttw: 10, priority: 0 });
  table.request({ key: 'b', index: '1', owner: 'alice', ttl: 10, ttw: 10, priority: 0 });
  table.request({ key: 'c', index: '9', owner: 'alice', ttl: 10, ttw: 10, priority: 0 });
  t.is(table.releaseAll('alice'), 3);
  t.is(table.findOwner('a', '1'), 'bob');
  t.deepEqual(
    table.list('b').map((c) => c.owner),
    ['bob'],
  );
  t.is(table.releaseAll('alice'), 0);
  t.deepEqual([table.owners, table.waiters], [2, 0]);
});

test('counts beyond 65535 are exact in the table (the wire saturates them)', (t) => {
  const { table } = setup();
  for (let i = 0; i < 70_000; i++) table.request({ key: `key${i}`, index: 'i', owner: 'bulk', ttl: 0, ttw: 0, priority: 0 });
  t.is(table.releaseAll('bulk'), 70_000);
  t.is(table.size, 0);
});

test('list shows every index under a key, each in queue order, with TTL/TTW as last requested', (t) => {
  const { table } = setup();
  table.request({ key: 'k', index: 'x', owner: 'a', ttl: 1, ttw: 2, priority: 3 });
  table.request({ key: 'k', index: 'y', owner: 'b', ttl: 4, ttw: 5, priority: 6 });
  table.request({ key: 'k', index: 'x', owner: 'c', ttl: 7, ttw: 8, priority: 9 });
  table.request({ key: 'zz', index: 'x', owner: 'd', ttl: 1, ttw: 1, priority: 1 });
  t.deepEqual(table.list('k'), [
    { priority: 3, ttl: 1, ttw: 2, index: 'x', owner: 'a', isOwner: true },
    { priority: 9, ttl: 7, ttw: 8, index: 'x', owner: 'c', isOwner: false },
    { priority: 6, ttl: 4, ttw: 5, index: 'y', owner: 'b', isOwner: true },
  ]);
  t.is(table.list('k', 2).length, 2);
  t.deepEqual(table.list('missing'), []);
});

test('keys, indexes and owners are raw bytes: distinct byte strings are distinct locks', (t) => {
  const { table } = setup();
  t.is(table.request({ key: '\xc3\xa9', index: '\x00', owner: '\xff', ttl: 1, ttw: 1, priority: 0 }), 1);
  t.is(table.request({ key: '\xe9', index: '\x00', owner: '\xff', ttl: 1, ttw: 1, priority: 0 }), 1, 'é in UTF-8 and in latin1 are different keys');
  t.is(table.request({ key: '\xc3\xa9', index: '', owner: '\xff', ttl: 1, ttw: 1, priority: 0 }), 1, 'an empty index is its own lock');
  t.is(table.findOwner('\xc3\xa9', '\x00'), '\xff');
});

test('expire honours its budget and resumes where it stopped', (t) => {
  const { clock, table } = setup();
  for (let i = 0; i < 10; i++) table.request({ key: `k${i}`, index: 'i', owner: 'o', ttl: 1, ttw: 1, priority: 0 });
  clock.advance(SECOND);
  t.is(table.expire(4), 4);
  t.is(table.expire(4), 4);
  t.is(table.expire(4), 2);
  t.is(table.size, 0);
});

test('snapshot and restore keep order, priority, TTL/TTW and the time left', (t) => {
  const { clock, table } = setup();
  table.request({ key: 'k', index: 'i', owner: 'owner', ttl: 10, ttw: 0, priority: 1 });
  table.request({ key: 'k', index: 'i', owner: 'low', ttl: 10, ttw: 20, priority: 1 });
  table.request({ key: 'k', index: 'i', owner: 'high', ttl: 10, ttw: 20, priority: 9 });
  table.request({ key: 'k', index: 'j', owner: 'solo', ttl: 0, ttw: 0, priority: 0 });
  clock.advance(4 * SECOND);
  const saved = [...table.snapshot()];
  t.deepEqual(
    saved.map((s) => [s.owner, s.isOwner, s.remainingMs]),
    [
      ['owner', true, 6000],
      ['high', false, 16000],
      ['low', false, 16000],
      ['solo', true, null],
    ],
  );

  const later = new FakeClock(42);
  const restored = new LockTable(later, new SingleNodeRules());
  restored.restore(saved);
  t.deepEqual(restored.list('k'), table.list('k'));
  t.is(restored.location('k', 'i', 'low'), 3);
  later.advance(6 * SECOND - 1);
  t.is(restored.expire(), 0, 'time did not run while the server was down');
  later.advance(1);
  t.is(restored.expire(), 1);
  t.is(restored.findOwner('k', 'i'), 'high');
  t.is(restored.request({ key: 'k', index: 'i', owner: 'newcomer', ttl: 1, ttw: 1, priority: 1 }), 3, 'arrivals after a restore queue behind restored waiters');
});

test('restore refuses a second owner for one lock', (t) => {
  const { table } = setup();
  const base = { key: 'k', index: 'i', priority: 0, ttl: 1, ttw: 1, token: 0, remainingMs: null };
  t.throws(() =>
    table.restore([
      { ...base, owner: 'a', isOwner: true },
      { ...base, owner: 'b', isOwner: true },
    ]),
  );
});

test('a waiter whose wait ran out is never promoted, even before the sweep removes it', (t) => {
  const { clock, table } = setup();
  table.request({ key: 'k', index: 'i', owner: 'owner', ttl: 0, ttw: 0, priority: 0 });
  table.request({ key: 'k', index: 'i', owner: 'stale', ttl: 10, ttw: 2, priority: 9 });
  table.request({ key: 'k', index: 'i', owner: 'fresh', ttl: 10, ttw: 0, priority: 0 });
  clock.advance(3 * SECOND);
  t.is(table.release('k', 'i', 'owner'), 1, 'released before any expire() call');
  t.is(table.findOwner('k', 'i'), 'fresh');
  t.is(table.location('k', 'i', 'stale'), 0);
  t.is(table.waiters, 0);
  t.is(table.expire(), 0, 'nothing left for the sweep');
});
