import test from 'ava';
import { FakeClock } from '../doubles/FakeClock.js';
import { LockTable } from '../../src/locks/LockTable.js';

const SECOND = 1000;

function setup(maxEntries?: number): { clock: FakeClock; table: LockTable } {
  const clock = new FakeClock(1_000_000);
  return { clock, table: new LockTable(clock, maxEntries === undefined ? {} : { maxEntries }) };
}

test('a request on a free lock makes the requester owner; later ones queue behind', (t) => {
  const { table } = setup();
  t.is(table.request('k', 'i', 'alice', 30, 60, 0), 1);
  t.is(table.request('k', 'i', 'bob', 30, 60, 0), 2);
  t.is(table.request('k', 'i', 'carol', 30, 60, 0), 3);
  t.is(table.findOwner('k', 'i'), 'alice');
  t.is(table.location('k', 'i', 'carol'), 3);
  t.is(table.location('k', 'i', 'nobody'), 0);
  t.is(table.findOwner('k', 'other'), '');
  t.deepEqual([table.owners, table.waiters], [1, 2]);
});

test('waiters are ordered by priority (higher first), then arrival; the owner is never preempted', (t) => {
  const { table } = setup();
  table.request('k', 'i', 'owner', 30, 60, 0);
  table.request('k', 'i', 'low-early', 30, 60, 1);
  table.request('k', 'i', 'high', 30, 60, 200);
  table.request('k', 'i', 'low-late', 30, 60, 1);
  t.is(table.request('k', 'i', 'top', 30, 60, 255), 2);
  t.is(table.findOwner('k', 'i'), 'owner');
  t.deepEqual(
    table.list('k').map((c) => [c.owner, c.isOwner]),
    [['owner', true], ['top', false], ['high', false], ['low-early', false], ['low-late', false]],
  );
  t.is(table.location('k', 'i', 'low-late'), 5);
});

test('release promotes the first waiter, whose TTL clock starts at promotion', (t) => {
  const { clock, table } = setup();
  table.request('k', 'i', 'alice', 10, 100, 0);
  table.request('k', 'i', 'bob', 5, 100, 0);
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
  table.request('k', 'i', 'owner', 10, 0, 0);
  table.request('k', 'i', 'impatient', 10, 3, 0);
  table.request('k', 'i', 'patient', 10, 30, 0);
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
  table.request('k', 'i', 'forever', 0, 0, 0);
  table.request('k', 'i', 'waits-forever', 5, 0, 0);
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
  table.request('k', 'i', 'owner', 10, 10, 0);
  table.request('k', 'i', 'waiter', 10, 10, 0);
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
  table.request('k', 'i', 'owner', 10, 10, 0);
  table.request('k', 'i', 'first', 10, 10, 5);
  table.request('k', 'i', 'second', 10, 10, 5);
  clock.advance(9 * SECOND);
  t.is(table.request('k', 'i', 'second', 7, 20, 255), 3, 'the higher priority asked for now is ignored');
  t.is(table.request('k', 'i', 'owner', 2, 0, 0), 1);
  const second = table.list('k').find((c) => c.owner === 'second')!;
  t.deepEqual([second.priority, second.ttl, second.ttw], [5, 7, 20]);
  clock.advance(2 * SECOND);
  t.is(table.expire(), 2, 'owner (new TTL 2) and first (TTW 10 from the start) go');
  t.is(table.findOwner('k', 'i'), 'second');
});

test('drain mode: no new entries (position 0), but existing ones still re-request', (t) => {
  const { table } = setup();
  table.request('k', 'i', 'owner', 10, 10, 0);
  t.is(table.request('k', 'i', 'newcomer', 10, 10, 0, false), 0);
  t.is(table.request('k', 'other', 'owner', 10, 10, 0, false), 0);
  t.is(table.request('k', 'i', 'owner', 10, 10, 0, false), 1);
  t.is(table.size, 1);
});

test('the table refuses (position 0) beyond maxEntries', (t) => {
  const { table } = setup(2);
  t.is(table.request('a', 'i', 'o', 1, 1, 0), 1);
  t.is(table.request('b', 'i', 'o', 1, 1, 0), 1);
  t.is(table.request('c', 'i', 'o', 1, 1, 0), 0);
  t.is(table.request('a', 'i', 'o', 1, 1, 0), 1, 'renewal still works when full');
});

test('release with index * removes the owner under that key across indexes only', (t) => {
  const { table } = setup();
  table.request('k', '1', 'alice', 10, 10, 0);
  table.request('k', '2', 'bob', 10, 10, 0);
  table.request('k', '2', 'alice', 10, 10, 0);
  table.request('other', '1', 'alice', 10, 10, 0);
  t.is(table.releaseKey('k', 'alice'), 2);
  t.is(table.findOwner('k', '1'), '');
  t.is(table.location('k', '2', 'alice'), 0);
  t.is(table.findOwner('other', '1'), 'alice');
  t.is(table.releaseKey('k', 'alice'), 0);
});

test('release all removes every entry of the owner across keys, promoting waiters', (t) => {
  const { table } = setup();
  table.request('a', '1', 'alice', 10, 10, 0);
  table.request('a', '1', 'bob', 10, 10, 0);
  table.request('b', '1', 'bob', 10, 10, 0);
  table.request('b', '1', 'alice', 10, 10, 0);
  table.request('c', '9', 'alice', 10, 10, 0);
  t.is(table.releaseAll('alice'), 3);
  t.is(table.findOwner('a', '1'), 'bob');
  t.deepEqual(table.list('b').map((c) => c.owner), ['bob']);
  t.is(table.releaseAll('alice'), 0);
  t.deepEqual([table.owners, table.waiters], [2, 0]);
});

test('counts beyond 65535 are exact in the table (the wire saturates them)', (t) => {
  const { table } = setup();
  for (let i = 0; i < 70_000; i++) table.request(`key${i}`, 'i', 'bulk', 0, 0, 0);
  t.is(table.releaseAll('bulk'), 70_000);
  t.is(table.size, 0);
});

test('list shows every index under a key, each in queue order, with TTL/TTW as last requested', (t) => {
  const { table } = setup();
  table.request('k', 'x', 'a', 1, 2, 3);
  table.request('k', 'y', 'b', 4, 5, 6);
  table.request('k', 'x', 'c', 7, 8, 9);
  table.request('zz', 'x', 'd', 1, 1, 1);
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
  t.is(table.request('\xc3\xa9', '\x00', '\xff', 1, 1, 0), 1);
  t.is(table.request('\xe9', '\x00', '\xff', 1, 1, 0), 1, 'é in UTF-8 and in latin1 are different keys');
  t.is(table.request('\xc3\xa9', '', '\xff', 1, 1, 0), 1, 'an empty index is its own lock');
  t.is(table.findOwner('\xc3\xa9', '\x00'), '\xff');
});

test('expire honours its budget and resumes where it stopped', (t) => {
  const { clock, table } = setup();
  for (let i = 0; i < 10; i++) table.request(`k${i}`, 'i', 'o', 1, 1, 0);
  clock.advance(SECOND);
  t.is(table.expire(4), 4);
  t.is(table.expire(4), 4);
  t.is(table.expire(4), 2);
  t.is(table.size, 0);
});

test('snapshot and restore keep order, priority, TTL/TTW and the time left', (t) => {
  const { clock, table } = setup();
  table.request('k', 'i', 'owner', 10, 0, 1);
  table.request('k', 'i', 'low', 10, 20, 1);
  table.request('k', 'i', 'high', 10, 20, 9);
  table.request('k', 'j', 'solo', 0, 0, 0);
  clock.advance(4 * SECOND);
  const saved = [...table.snapshot()];
  t.deepEqual(
    saved.map((s) => [s.owner, s.isOwner, s.remainingMs]),
    [['owner', true, 6000], ['high', false, 16000], ['low', false, 16000], ['solo', true, null]],
  );

  const later = new FakeClock(42);
  const restored = new LockTable(later);
  restored.restore(saved);
  t.deepEqual(restored.list('k'), table.list('k'));
  t.is(restored.location('k', 'i', 'low'), 3);
  later.advance(6 * SECOND - 1);
  t.is(restored.expire(), 0, 'time did not run while the server was down');
  later.advance(1);
  t.is(restored.expire(), 1);
  t.is(restored.findOwner('k', 'i'), 'high');
  t.is(restored.request('k', 'i', 'newcomer', 1, 1, 1), 3, 'arrivals after a restore queue behind restored waiters');
});

test('restore refuses a second owner for one lock', (t) => {
  const { table } = setup();
  const base = { key: 'k', index: 'i', priority: 0, ttl: 1, ttw: 1, remainingMs: null };
  t.throws(() => table.restore([{ ...base, owner: 'a', isOwner: true }, { ...base, owner: 'b', isOwner: true }]));
});

test('a waiter whose wait ran out is never promoted, even before the sweep removes it', (t) => {
  const { clock, table } = setup();
  table.request('k', 'i', 'owner', 0, 0, 0);
  table.request('k', 'i', 'stale', 10, 2, 9);
  table.request('k', 'i', 'fresh', 10, 0, 0);
  clock.advance(3 * SECOND);
  t.is(table.release('k', 'i', 'owner'), 1, 'released before any expire() call');
  t.is(table.findOwner('k', 'i'), 'fresh');
  t.is(table.location('k', 'i', 'stale'), 0);
  t.is(table.waiters, 0);
  t.is(table.expire(), 0, 'nothing left for the sweep');
});
