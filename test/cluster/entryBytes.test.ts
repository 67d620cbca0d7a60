import test from 'ava';
import { ENTRY_ETCD_OVERHEAD_BYTES, entryBytesBound, entryEtcdBytes, ENTRY_QUOTA_SHARE } from '../../src/cluster/EntryBytesRules.js';
import { BatchEncoder, decodeBatch, decodeValue, LogOp, type Batch, type LogCommand } from '../../src/cluster/LogCodec.js';
import { ReplicaState } from '../../src/cluster/ReplicaState.js';
import { mulberry32, type Random } from '../../src/runtime/Random.js';
import { FakeClock } from '../doubles/FakeClock.js';

const at = (version: number) => ({ version, revision: 10 * version + 3 });

function request(key: string, index: string, owner: string, fields: Partial<Extract<LogCommand, { op: 1 }>> = {}): LogCommand {
  return { op: LogOp.Request, key, index, owner, ttl: 0, ttw: 0, priority: 0, allowCreate: true, maxEntries: 1_000_000, ...fields };
}

/** A name of `length` bytes, distinct per `n`. */
const name = (n: number, length = 255): string => `${n}:`.padEnd(length, 'x');

/** Feeds batches at consecutive versions, one seq after another per proposer. */
class Feed {
  version = 0;
  private seq = 0;

  batch(commands: readonly LogCommand[], entryBytesBound?: number, proposer = 'A'): Batch {
    return { proposer, incarnation: 1, seq: ++this.seq, commands, entryBytesBound };
  }

  apply(state: ReplicaState, commands: readonly LogCommand[], entryBytesBound?: number): number[] {
    return state.apply(this.batch(commands, entryBytesBound), at(++this.version))!;
  }
}

/** What the entries of a replica cost, counted from scratch. */
function counted(state: ReplicaState): number {
  let bytes = 0;
  for (const e of state.table.replicaEntries()) bytes += entryEtcdBytes(e.key, e.index, e.owner);
  return bytes;
}

test('a request that would take the entries past the bound its batch carries is refused (0) like one at a full table; renewals are not', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  const one = entryEtcdBytes(name(0), name(0), name(0));
  t.is(one, ENTRY_ETCD_OVERHEAD_BYTES + 3 * 255);
  // Room for three entries of 255-byte names, not four.
  const bound = 4 * one - 1;
  const results = feed.apply(
    state,
    [0, 1, 2, 3].map((n) => request(name(n), name(n), name(n))),
    bound,
  );
  t.deepEqual(results, [1, 1, 1, 0]);
  t.is(state.table.size, 3);
  t.is(state.entryEtcdBytes, 3 * one);
  // A renewal (a request of an entry that exists) is never refused, a shorter name still fits, a waiter counts like an owner.
  t.deepEqual(feed.apply(state, [request(name(0), name(0), name(0), { ttl: 9 }), request('k', '', 'w'), request(name(3), name(3), name(3))], bound), [1, 1, 0]);
  t.deepEqual(feed.apply(state, [request('k', '', 'w2')], bound), [2]);
  t.is(state.entryEtcdBytes, counted(state));
  // A release gives back exactly what its entry took: the refused one now fits.
  t.deepEqual(feed.apply(state, [{ op: LogOp.Release, key: name(1), index: name(1), owner: name(1) }, request(name(3), name(3), name(3))], bound), [1, 1]);
  t.is(state.entryEtcdBytes, counted(state));
});

test('a batch without a bound (a version before it, or not every node reading it yet) refuses nothing for bytes', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  const commands = [0, 1, 2, 3, 4].map((n) => request(name(n), name(n), name(n)));
  t.deepEqual(feed.apply(state, commands, 0), [1, 1, 1, 1, 1]);
  t.deepEqual(feed.apply(state, [request('k', 'i', 'o')]), [1]);
  t.is(state.entryEtcdBytes, counted(state));
});

test('the bound travels in the batch header in KiB; a batch whose header word is 0 (every older version) carries none', (t) => {
  const encoder = new BatchEncoder();
  const commands = [request('k', 'i', 'o')];
  const bounded = decodeBatch(encoder.encode({ proposer: 'n1', incarnation: 7, seq: 3, commands, entryBytesBound: entryBytesBound(2 * 1024 ** 3) }));
  t.is(bounded.entryBytesBound, entryBytesBound(2 * 1024 ** 3));
  t.is(bounded.entryBytesBound! % 1024, 0);
  t.true(Math.abs(bounded.entryBytesBound! - 2 * 1024 ** 3 * ENTRY_QUOTA_SHARE) < 1024);
  const unbounded = encoder.encode({ proposer: 'n1', incarnation: 7, seq: 4, commands });
  t.is(decodeBatch(unbounded).entryBytesBound, undefined);
  // The header word an older version wrote as 0: the same bytes.
  const word = 1 + 1 + 1 + 2 + 4;
  t.is(unbounded.readUInt32BE(word), 0);
  const parts = decodeValue(unbounded);
  t.is((parts[0] as Batch).entryBytesBound ?? 0, 0);
});

const int = (random: Random, below: number): number => Math.floor(random() * below);

test('every replica counts the same bytes through requests, releases, release-all, expiries, promotions and a snapshot load, and refuses alike', (t) => {
  const random = mulberry32(5);
  const a = new ReplicaState(new FakeClock(0));
  const b = new ReplicaState(new FakeClock(7e9));
  const feed = new Feed();
  const bound = 40 * entryEtcdBytes('k', 'i', 'o') + 8 * 255;
  let refused = 0;
  for (let v = 1; v <= 600; v++) {
    const commands: LogCommand[] = [];
    for (let n = int(random, 8); n > 0; n--) {
      const key = `k${int(random, 6)}`.padEnd(1 + int(random, 200), '.');
      const index = `${int(random, 3)}`;
      const owner = `o${int(random, 5)}`;
      const roll = random();
      if (roll < 0.6) commands.push(request(key, index, owner, { ttl: 1 + int(random, 3) }));
      else if (roll < 0.8) commands.push({ op: LogOp.Release, key, index, owner });
      else if (roll < 0.85) commands.push({ op: LogOp.ReleaseAll, owner });
      else if (roll < 0.9) commands.push({ op: LogOp.ReleaseKey, key, owner });
      else {
        const due = [...a.table.replicaEntries()][int(random, Math.max(1, a.table.size))];
        if (due !== undefined) commands.push({ op: LogOp.Expire, key: due.key, index: due.index, owner: due.owner, version: due.version });
      }
    }
    const batch = feed.batch(commands, random() < 0.9 ? bound : 0);
    const ra = a.apply(batch, at(v))!;
    t.deepEqual(b.apply(batch, at(v)), ra);
    commands.forEach((c, i) => {
      if (c.op === LogOp.Request && ra[i] === 0) refused++;
    });
    t.is(a.entryEtcdBytes, counted(a));
    t.is(b.entryEtcdBytes, a.entryEtcdBytes);
    if (v % 100 === 0) {
      const copy = ReplicaState.decode(a.encode(), new FakeClock(1));
      t.is(copy.entryEtcdBytes, a.entryEtcdBytes);
    }
  }
  t.is(a.digest(), b.digest());
  t.true(refused > 20, `requests refused for bytes: ${refused}`);
});
