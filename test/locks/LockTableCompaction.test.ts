import test from 'ava';
import { FakeClock } from '../doubles/FakeClock.js';
import { COMPACT_AFTER_PEAK, COMPACT_RATIO, LockTable, type ReplicaHooks } from '../../src/locks/LockTable.js';
import { mulberry32 } from '../helpers/random.js';

const SECOND = 1_000;

/** Everything a client or the lock file can see of a table, in order. */
function observed(table: LockTable, keys: readonly string[]): unknown {
  return {
    snapshot: [...table.snapshot()],
    lists: keys.map((key) => table.list(key)),
    counts: [table.owners, table.waiters],
    next: table.nextDeadline(),
  };
}

/**
 * Two tables fed the same operations; `compacted` is compacted whenever it can be. A burst of
 * locks fills both past COMPACT_AFTER_PEAK, most go, and the random operations after each step
 * must be answered alike: queue order, waiters' positions, deadlines, owner lists.
 */
test('a table compacted after a burst answers everything exactly as one that was not', (t) => {
  const random = mulberry32(11);
  const clock = new FakeClock(0);
  const plain = new LockTable(clock);
  const compacted = new LockTable(clock);
  const both = <T>(f: (table: LockTable) => T, where: string): T => {
    const a = f(plain);
    t.deepEqual(f(compacted), a, where);
    return a;
  };
  const keys = ['a', 'b', 'c', 'multi'];
  const owners = ['x', 'y', 'z', '\x00'];
  const burst = COMPACT_AFTER_PEAK + 1_000;
  for (let n = 0; n < burst; n++) both((table) => table.request(`burst:${n}`, '0', `holder-${n % 7}`, 0, 0, 0), 'burst');
  // Lasting entries of every kind among the burst: waiters, several indexes, deadlines.
  for (let step = 0; step < 400; step++) {
    const key = keys[step % keys.length]!;
    const index = key === 'multi' ? `row${step % 13}` : String(step % 2);
    both((table) => table.request(key, index, owners[step % owners.length]!, 1 + (step % 5), step % 3, step % 4), 'lasting');
  }
  t.false(compacted.compactIfSparse(), 'nothing to gain while the burst is held');
  for (let n = 0; n < burst; n++) both((table) => table.releaseAll(`holder-${n % 7}`), 'burst released');
  t.true(plain.size * COMPACT_RATIO < burst);
  const before = observed(compacted, keys);
  t.true(compacted.compactIfSparse(), 'rebuilt once the burst is gone');
  t.false(compacted.compactIfSparse(), 'and only once');
  t.deepEqual(observed(compacted, keys), before, 'the rebuild changes nothing anyone can see');
  for (let step = 0; step < 3_000; step++) {
    const key = keys[Math.floor(random() * keys.length)]!;
    const index = key === 'multi' ? `row${Math.floor(random() * 13)}` : String(Math.floor(random() * 2));
    const owner = owners[Math.floor(random() * owners.length)]!;
    const roll = random();
    const where = `step ${step}`;
    if (roll < 0.4) {
      const [ttl, ttw, priority] = [Math.floor(random() * 4), Math.floor(random() * 4), Math.floor(random() * 3)];
      both((table) => table.request(key, index, owner, ttl, ttw, priority), where);
    }
    else if (roll < 0.55) both((table) => table.location(key, index, owner), where);
    else if (roll < 0.7) both((table) => table.release(key, index, owner), where);
    else if (roll < 0.75) both((table) => table.releaseKey(key, owner), where);
    else if (roll < 0.8) both((table) => table.releaseAll(owner), where);
    else if (roll < 0.9) both((table) => table.renew(key, index, owner), where);
    else {
      clock.advance(Math.floor(random() * 2) * SECOND);
      both((table) => table.expire(), where);
    }
    if (step % 100 === 0) t.deepEqual(observed(compacted, keys), observed(plain, keys), where);
  }
});

test("a replica's entries keep their tickets, versions, origins and deadlines through a rebuild; its hooks hear nothing", (t) => {
  const clock = new FakeClock(0);
  const heard: string[] = [];
  const hooks: ReplicaHooks = { added: (o) => heard.push(`+${o}`), removed: (o) => heard.push(`-${o}`) };
  const table = new LockTable(clock, { replica: hooks, maxEntries: Number.MAX_SAFE_INTEGER });
  let position = 0;
  const at = (): number => (table.position = ++position * 65_536);
  for (let n = 0; n < COMPACT_AFTER_PEAK; n++) {
    at();
    table.request(`k${n}`, 'i', `o${n}`, 0, 0, 0, true, Number.MAX_SAFE_INTEGER, 'A');
  }
  at();
  table.request('kept', 'i', 'first', 30, 60, 1, true, Number.MAX_SAFE_INTEGER, 'B');
  at();
  table.request('kept', 'i', 'second', 30, 60, 2, true, Number.MAX_SAFE_INTEGER, 'C');
  clock.advance(10 * SECOND);
  const due = { waiterEarlier: table.nextDeadline() };
  for (let n = 0; n < COMPACT_AFTER_PEAK; n++) {
    at();
    table.release(`k${n}`, 'i', `o${n}`);
  }
  const entries = [...table.replicaEntries()];
  heard.length = 0;
  t.true(table.compactIfSparse());
  t.deepEqual([...table.replicaEntries()], entries);
  t.deepEqual(heard, [], 'a rebuild is no entry coming or going');
  t.is(table.nextDeadline(), due.waiterEarlier, 'deadlines carried over, not restarted');
});
