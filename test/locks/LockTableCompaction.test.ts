import test from 'ava';
import { FakeClock } from '../doubles/FakeClock.js';
import { COMPACT_AFTER_PEAK, COMPACT_RATIO, LockTable } from '../../src/locks/LockTable.js';
import { ReplicaRules, type ReplicaHooks, type ReplicatedRequest } from '../../src/locks/ReplicaRules.js';
import { SingleNodeRules } from '../../src/locks/SingleNodeRules.js';
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
  const plain = new LockTable(clock, new SingleNodeRules());
  const compacted = new LockTable(clock, new SingleNodeRules());
  const both = <T>(f: (table: LockTable) => T, where: string): T => {
    const a = f(plain);
    t.deepEqual(f(compacted), a, where);
    return a;
  };
  const keys = ['a', 'b', 'c', 'multi'];
  const owners = ['x', 'y', 'z', '\x00'];
  const burst = COMPACT_AFTER_PEAK + 1_000;
  for (let n = 0; n < burst; n++)
    both((table) => table.request({ key: `burst:${n}`, index: '0', owner: `holder-${n % 7}`, ttl: 0, ttw: 0, priority: 0 }), 'burst');
  // Lasting entries of every kind among the burst: waiters, several indexes, deadlines.
  for (let step = 0; step < 400; step++) {
    const key = keys[step % keys.length]!;
    const index = key === 'multi' ? `row${step % 13}` : String(step % 2);
    both((table) => table.request({ key, index, owner: owners[step % owners.length]!, ttl: 1 + (step % 5), ttw: step % 3, priority: step % 4 }), 'lasting');
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
      both((table) => table.request({ key, index, owner, ttl, ttw, priority }), where);
    } else if (roll < 0.55) both((table) => table.location(key, index, owner), where);
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
  const rules = new ReplicaRules(hooks);
  const table = new LockTable<ReplicatedRequest, ReplicaRules>(clock, rules);
  let position = 0;
  const at = (origin = ''): void => rules.beginCommand(++position * 65_536, origin);
  const limits = { allowCreate: true, maxEntries: Number.MAX_SAFE_INTEGER };
  for (let n = 0; n < COMPACT_AFTER_PEAK; n++) {
    at('A');
    table.request({ key: `k${n}`, index: 'i', owner: `o${n}`, ttl: 0, ttw: 0, priority: 0, ...limits });
  }
  at('B');
  table.request({ key: 'kept', index: 'i', owner: 'first', ttl: 30, ttw: 60, priority: 1, ...limits });
  at('C');
  table.request({ key: 'kept', index: 'i', owner: 'second', ttl: 30, ttw: 60, priority: 2, ...limits });
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
