import test from 'ava';
import { EndReason, LockTable, type ReplicaTable } from '../../src/locks/LockTable.js';
import { ReplicaRules, type ReplicatedRequest } from '../../src/locks/ReplicaRules.js';
import { SingleNodeRules } from '../../src/locks/SingleNodeRules.js';
import { FakeClock } from '../doubles/FakeClock.js';

// Issue 37: a lock whose owner's TTL ran out is held back for the lock-delay before its next
// grant, so an old 0.9b client that stalled past its TTL (and cannot pass a fencing token) can stop
// touching the resource before anyone else gets it. A release is not held back; neither is a
// waiter's TTW running out. The table tells an observer of every grant and end, and why.

const SECOND = 1000;
const DELAY = 5 * SECOND;

function single(lockDelayMs = DELAY): { clock: FakeClock; table: LockTable } {
  const clock = new FakeClock(1_000_000);
  return { clock, table: new LockTable(clock, new SingleNodeRules(), { lockDelayMs }) };
}

const req = (owner: string, ttl = 10, ttw = 60, key = 'k', index = 'i') => ({ key, index, owner, ttl, ttw, priority: 0 });

test('an owner whose TTL ran out holds its lock back for the lock-delay: nobody is granted it meanwhile, then the first in line is', (t) => {
  const { clock, table } = single();
  table.request(req('alice'));
  table.request(req('bob'));
  clock.advance(10 * SECOND);
  t.is(table.expire(), 1, 'alice expired');
  t.is(table.findOwner('k', 'i'), '', 'held back: nobody owns it');
  t.is(table.location('k', 'i', 'bob'), 2, 'bob is still first in line');
  t.is(table.request(req('carol')), 3, 'a newcomer queues, even though nobody owns the lock');
  t.is(table.heldBack, 1);
  t.deepEqual(
    table.queues('k').map((q) => [q.index, q.heldForMs, q.entries.map((e) => e.owner)]),
    [['i', DELAY, ['bob', 'carol']]],
  );
  clock.advance(DELAY - 1);
  table.expire();
  t.is(table.findOwner('k', 'i'), '', 'not before the delay is over');
  clock.advance(1);
  table.expire();
  t.is(table.findOwner('k', 'i'), 'bob');
  t.is(table.heldBack, 0);
});

test('a held-back lock with nobody waiting stays held (a request only queues), and goes once its delay is over and nobody came', (t) => {
  const { clock, table } = single();
  table.request(req('alice'));
  clock.advance(10 * SECOND);
  table.expire();
  t.is(table.request(req('alice')), 2, 'not even its old owner gets it back at once');
  t.is(table.release('k', 'i', 'alice'), 1);
  t.deepEqual(
    table.queues('k').map((q) => [q.heldForMs, q.entries.length]),
    [[DELAY, 0]],
    'held and empty: still listed as held back',
  );
  clock.advance(DELAY);
  table.expire();
  t.deepEqual(table.queues('k'), [], 'gone once the delay is over');
  t.is(table.request(req('dave')), 1);
});

test('a release, a waiter running out of TTW, and a lock-delay of 0 hold nothing back', (t) => {
  const { clock, table } = single();
  table.request(req('alice'));
  table.request(req('bob'));
  t.is(table.release('k', 'i', 'alice'), 1);
  t.is(table.findOwner('k', 'i'), 'bob', 'a release hands the lock on at once');
  table.request(req('carol', 10, 1));
  clock.advance(SECOND);
  table.expire();
  t.is(table.location('k', 'i', 'carol'), 0, 'carol’s wait ran out');
  t.is(table.heldBack, 0);
  const none = single(0);
  none.table.request(req('alice'));
  none.table.request(req('bob'));
  none.clock.advance(10 * SECOND);
  none.table.expire();
  t.is(none.table.findOwner('k', 'i'), 'bob');
});

test('every grant and end is told to the observer, with how it ended', (t) => {
  const { clock, table } = single(0);
  const seen: string[] = [];
  // The entry is in the table while the observer is told (an ended one until the call returns).
  const name = (entry: number): string | undefined => ['alice', 'bob', 'carol', 'dave'].find((owner) => table.entryOf('k', 'i', owner) === entry);
  table.observe({
    granted: (entry) => seen.push(`granted ${name(entry)}`),
    ended: (entry, why) => seen.push(`ended ${name(entry)} ${Object.entries(EndReason).find(([, v]) => v === why)![0]}`),
    moved: () => {},
  });
  table.request(req('alice'));
  table.request(req('bob'));
  table.request(req('carol', 10, 5));
  table.release('k', 'i', 'alice');
  table.releaseAll('bob');
  table.request(req('dave'));
  t.is(table.cancelWaiter('k', 'i', 'dave'), 1, 'a waiter that stopped waiting goes');
  t.is(table.cancelWaiter('k', 'i', 'carol'), 0, 'an owner is left as it is');
  clock.advance(10 * SECOND);
  table.expire();
  t.deepEqual(seen, [
    'granted alice',
    'ended alice Released',
    'granted bob',
    'ended bob ReleasedAll',
    'granted carol',
    'ended dave Canceled',
    'ended carol Expired',
  ]);
});

test('how long the oldest waiter has waited, and how long an entry waited when it is granted', (t) => {
  const { clock, table } = single(0);
  t.is(table.oldestWaiterSince, undefined);
  table.request(req('alice'));
  const start = clock.now();
  table.request(req('bob'));
  clock.advance(3 * SECOND);
  table.request(req('carol'));
  t.is(table.oldestWaiterSince, start);
  const bob = table.entryOf('k', 'i', 'bob');
  t.is(table.requestedAt(bob), start);
  table.release('k', 'i', 'alice');
  t.is(table.oldestWaiterSince, start + 3 * SECOND, 'bob owns now: carol waits longest');
  table.release('k', 'i', 'bob');
  t.is(table.oldestWaiterSince, undefined);
});

function replica(): { clock: FakeClock; table: ReplicaTable; rules: ReplicaRules; at: (position: number) => void } {
  const clock = new FakeClock(1_000_000);
  const rules = new ReplicaRules({ added: () => {}, removed: () => {} });
  const table = new LockTable<ReplicatedRequest, ReplicaRules>(clock, rules);
  return { clock, table, rules, at: (position) => rules.beginCommand(position, 'n1') };
}

const replicated = (owner: string) => ({ ...req(owner), allowCreate: true, maxEntries: 100 });

test('in a replica, the expiry command carries the delay, and only a lift naming that expiry ends the hold, whatever the clock', (t) => {
  const { clock, table, at } = replica();
  at(100);
  table.request(replicated('alice'));
  at(101);
  table.request(replicated('bob'));
  at(200);
  t.is(table.expireVersion('k', 'i', 'alice', 100, DELAY), 1);
  t.is(table.findOwner('k', 'i'), '');
  clock.advance(DELAY);
  t.is(table.findOwner('k', 'i'), '', 'a replica never lifts by its clock');
  const due = table.takeDueHold();
  t.deepEqual(due, { key: 'k', index: 'i', version: 200 });
  t.is(table.takeDueHold(), undefined, 'handed out once');
  table.rearmHold(due!);
  t.deepEqual(table.takeDueHold(), due, 'given back when its proposal failed');
  at(300);
  t.is(table.liftHold('k', 'i', 199), 0, 'a lift of another expiry does nothing');
  t.is(table.liftHold('k', 'i', 200), 1);
  t.is(table.findOwner('k', 'i'), 'bob');
  t.is(table.fence('k', 'i', 'bob'), 300, 'granted by the lift: its position is the token');
  t.deepEqual([...table.holdsHeld()], []);
});

test('a compaction of the records keeps held-back locks (those without entries too) and when each entry was requested', (t) => {
  const { clock, table } = single();
  const many = 70_000;
  for (let n = 0; n < many; n++) table.request(req(`o${n}`, 0, 0, `k${n}`));
  table.request(req('held', 10, 60, 'h'));
  table.request(req('waiter', 10, 60, 'h'));
  const waiterSince = table.requestedAt(table.entryOf('h', 'i', 'waiter'));
  table.request(req('gone', 10, 60, 'g'));
  clock.advance(10 * SECOND);
  table.expire();
  for (let n = 0; n < many; n++) table.release(`k${n}`, 'i', `o${n}`);
  t.true(table.compactIfSparse());
  t.deepEqual(
    [...table.queues('h'), ...table.queues('g')].map((q) => [q.index, q.heldForMs, q.entries.map((e) => e.owner)]),
    [
      ['i', DELAY, ['waiter']],
      ['i', DELAY, []],
    ],
  );
  t.is(table.requestedAt(table.entryOf('h', 'i', 'waiter')), waiterSince);
  clock.advance(DELAY);
  table.expire();
  t.is(table.findOwner('h', 'i'), 'waiter');
  t.deepEqual(table.queues('g'), []);
});
