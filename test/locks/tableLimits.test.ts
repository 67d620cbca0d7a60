import test from 'ava';
import { LockTable, type ReplicaTable } from '../../src/locks/LockTable.js';
import { ReplicaRules, type ReplicatedRequest } from '../../src/locks/ReplicaRules.js';
import { SingleNodeRules, type SingleNodeLimits } from '../../src/locks/SingleNodeRules.js';
import { ENTRY_OVERHEAD_BYTES, entryBytes, NO_CLIENT, Refusal } from '../../src/locks/TableLimits.js';
import { FakeClock } from '../doubles/FakeClock.js';

// The table is bounded by the bytes it takes (names as stored plus a measured cost per entry),
// and no one owner or connection may take more than its share; each refusal is a full table's:
// position 0, counted by limit. Bytes are charged from the names alone, so replicas agree.

const LONG = 255;
const name = (prefix: string, i: number, length = LONG): string => `${prefix}${i}`.padEnd(length, '.');
const long = (i: number, owner = name('o', i)) => ({ key: name('k', i), index: name('i', i), owner, ttl: 0, ttw: 0, priority: 0 });
const short = (key: string, owner: string, index = '1') => ({ key, index, owner, ttl: 0, ttw: 0, priority: 0 });

function single(limits: SingleNodeLimits): LockTable {
  return new LockTable(new FakeClock(0), new SingleNodeRules(limits));
}

test('an entry is charged its names as stored plus the measured cost: 1,168 bytes at the longest names', (t) => {
  t.is(entryBytes(255, 255, 255), 3 * 256 + ENTRY_OVERHEAD_BYTES);
  t.is(entryBytes(255, 255, 255), 1168);
  t.is(entryBytes(0, 1, 7), 3 * 8 + ENTRY_OVERHEAD_BYTES);
  t.is(entryBytes(8, 8, 8), 3 * 16 + ENTRY_OVERHEAD_BYTES);
  const table = single({});
  table.request(long(1));
  table.request(short('k', 'alice'));
  t.is(table.bytes, 1168 + entryBytes(1, 1, 5));
  table.release('k', '1', 'alice');
  table.release(name('k', 1), name('i', 1), name('o', 1));
  t.is(table.bytes, 0, 'every byte given back');
});

test('--max-table-bytes: a request that would pass the bound gets position 0, as a full table; a renewal still renews; a release makes room', (t) => {
  const table = single({ maxTableBytes: 3 * 1168 + 1167 });
  for (let i = 0; i < 3; i++) t.is(table.request(long(i)), 1);
  t.is(table.request(long(3)), 0);
  t.is(table.lastRefusal, Refusal.MaxTableBytes);
  t.is(table.refusals(Refusal.MaxTableBytes), 1);
  t.is(table.size, 3);
  t.is(table.request(long(0)), 1, 'an existing entry is renewed: it adds no bytes');
  // A smaller entry still fits in what is left.
  t.is(table.request(short('k', 'alice')), 1);
  t.is(table.release(name('k', 0), name('i', 0), name('o', 0)), 1);
  t.is(table.request(long(3)), 1);
  t.is(table.refusals(Refusal.MaxLocks), 0);
});

test('--max-locks-per-owner: an owner at its cap is refused a new entry; other owners are not; a release gives it room', (t) => {
  const table = single({ maxEntriesPerOwner: 2 });
  t.is(table.request(short('a', 'alice')), 1);
  t.is(table.request(short('b', 'alice')), 1);
  t.is(table.request(short('c', 'alice')), 0);
  t.is(table.lastRefusal, Refusal.MaxLocksPerOwner);
  t.is(table.request(short('a', 'alice')), 1, 'a renewal is no new entry');
  t.is(table.request(short('a', 'bob')), 2, 'bob waits behind alice');
  t.is(table.release('a', '1', 'alice'), 1);
  t.is(table.request(short('c', 'alice')), 1);
  t.is(table.refusals(Refusal.MaxLocksPerOwner), 1);
});

test('--max-locks-per-connection: the entries created through one connection and still held are capped, wherever they end', (t) => {
  const table = single({ maxEntriesPerConnection: 2 });
  const client = 7;
  t.is(table.request(short('a', 'alice'), true, client), 1);
  t.is(table.request(short('b', 'bob'), true, client), 1);
  t.is(table.request(short('c', 'carol'), true, client), 0);
  t.is(table.lastRefusal, Refusal.MaxLocksPerConnection);
  t.is(table.request(short('c', 'carol'), true, 8), 1, 'another connection has its own share');
  t.is(table.request(short('d', 'dave'), true, NO_CLIENT), 1, 'a request through no connection is not counted');
  // An entry released through any connection (or by release-all) gives its connection room back.
  t.is(table.releaseAll('bob'), 1);
  t.is(table.request(short('c', 'erin'), true, client), 2);
  t.is(table.request(short('e', 'erin'), true, client), 0);
  t.is(table.refusals(Refusal.MaxLocksPerConnection), 2);
});

test('the bounds hold across a rebuild of the records (compactIfSparse): bytes and per-connection counts carry over', (t) => {
  const table = single({ maxEntriesPerConnection: 3 });
  for (let i = 0; i < 70_000; i++) table.request(short(`k${i}`, 'x'));
  t.is(table.request(short('a', 'alice'), true, 5), 1);
  t.is(table.request(short('b', 'alice'), true, 5), 1);
  const held = table.bytes;
  t.is(table.releaseAll('x'), 70_000);
  const bytes = table.bytes;
  t.true(bytes < held);
  t.true(table.compactIfSparse());
  t.is(table.bytes, bytes);
  t.is(table.request(short('c', 'alice'), true, 5), 1);
  t.is(table.request(short('d', 'alice'), true, 5), 0, 'still three of its connection held');
});

test('a replica charges the same bytes as a single node and, on its own, refuses by --max-locks alone (its other bounds come with the batch)', (t) => {
  const replica: ReplicaTable = new LockTable(new FakeClock(0), new ReplicaRules({ added() {}, removed() {} }));
  const carried = (i: number, owner?: string): ReplicatedRequest => ({ ...long(i, owner), allowCreate: true, maxEntries: 3 });
  const lone = single({});
  for (const i of [0, 1, 2]) {
    t.is(replica.request(carried(i, 'same')), 1);
    lone.request(long(i, 'same'));
  }
  t.is(replica.bytes, lone.bytes);
  t.is(replica.request(carried(3)), 0);
  t.is(replica.lastRefusal, Refusal.MaxLocks);
});
