import test from 'ava';
import { BatchEncoder, LogOp, type LogCommand } from '../../../src/cluster/LogCodec.js';
import type { LogRecord, RetainedBatch, StoredSnapshot } from '../../../src/cluster/ReplicatedLog.js';
import { ReplicaState } from '../../../src/cluster/ReplicaState.js';
import { HistoryLostError, type ClusterHistory } from '../../../src/cluster/replay/ClusterHistory.js';
import { formatCommand, formatReport } from '../../../src/cluster/replay/formatReplay.js';
import { replayHistory, type ReplayedCommand } from '../../../src/cluster/replay/replayHistory.js';
import { mulberry32 } from '../../../src/runtime/Random.js';
import { MemoryStore, type MemoryLog } from '../../doubles/MemoryLog.js';
import { VirtualTimers } from '../../doubles/VirtualTimers.js';
import { settle } from '../memoryCluster.js';

// The log replay over the in-memory etcd: the same reader interface as EtcdHistory, so the
// replay's choices (where to begin, what to bridge, what to compare) are checked without etcd.

const CALL_MS = 5_000;
const still = { now: () => 0 };

/** The in-memory etcd read as scripts/replay reads etcd. */
function memoryHistory(store: MemoryStore, retained: (revision: number) => readonly RetainedBatch[] = (r) => store.retainedSince(r).batches): ClusterHistory {
  return {
    logVersions: () => Promise.resolve({ head: { ...store.logHead, storeRevision: store.revision }, records: [...store.logHistory] }),
    snapshot: () => Promise.resolve(store.readSnapshot()),
    retainedSince: (revision) => Promise.resolve(retained(revision)),
    close: () => Promise.resolve(),
  };
}

const request = (index: string, owner: string): LogCommand => ({
  op: LogOp.Request,
  key: 'k',
  index,
  owner,
  ttl: 0,
  ttw: 0,
  priority: 0,
  allowCreate: true,
  maxEntries: 100,
});
const release = (index: string, owner: string): LogCommand => ({ op: LogOp.Release, key: 'k', index, owner });

/** A store, a client, and a way to append batches of one proposer (seq counted, or given for a retry) and mirror them in a replica. */
function setup(): {
  vt: VirtualTimers;
  store: MemoryStore;
  client: MemoryLog;
  mirror: ReplicaState;
  append: (commands: LogCommand[], seq?: number, proposer?: string) => Promise<LogRecord>;
} {
  const vt = new VirtualTimers();
  const store = new MemoryStore({ timers: vt, clock: vt, random: mulberry32(7) });
  const client = store.client('n1');
  const mirror = new ReplicaState(still);
  const encoder = new BatchEncoder();
  const seqs = new Map<string, number>();
  const append = async (commands: LogCommand[], seq?: number, proposer = 'n1'): Promise<LogRecord> => {
    const next = seq ?? (seqs.get(proposer) ?? 0) + 1;
    seqs.set(proposer, Math.max(next, seqs.get(proposer) ?? 0));
    const batch = { proposer, incarnation: proposer === 'n1' ? 0xa1 : 0xb2, seq: next, commands };
    const value = new Uint8Array(encoder.encode(batch));
    const [position] = await settle(vt, client.append(value, CALL_MS));
    mirror.apply(batch, position);
    return { ...position, value };
  };
  return { vt, store, client, mirror, append };
}

async function saveSnapshot(vt: VirtualTimers, client: MemoryLog, snapshot: StoredSnapshot): Promise<void> {
  const [saved] = await settle(vt, client.saveSnapshot(snapshot, CALL_MS));
  if (!saved) throw new Error('snapshot not saved');
}

test('a whole history: every command on the key with proposer, result and queue after, a duplicate counted, the snapshot matched', async (t) => {
  const { vt, store, client, mirror, append } = setup();
  await append([request('1', 'alice'), request('2', 'carol')]);
  await append([request('1', 'bob')], undefined, 'n2');
  const retried = await append([{ op: LogOp.ReleaseKey, key: 'other', owner: 'x' }]);
  await append([{ op: LogOp.ReleaseKey, key: 'other', owner: 'x' }], 2); // a retry of seq 2: a duplicate
  await append([release('1', 'alice')]);
  await saveSnapshot(vt, client, { position: mirror.position, bytes: mirror.encode() });
  await append(
    [
      { op: LogOp.ReleaseAll, owner: 'bob' },
      { op: LogOp.ReleaseAll, owner: 'nobody' },
    ],
    undefined,
    'n2',
  );

  const seen: ReplayedCommand[] = [];
  const report = await replayHistory(memoryHistory(store), { key: 'k', index: '1' }, { command: (c) => seen.push(c) });
  t.deepEqual(
    seen.map(formatCommand).map((line) => line.replace(/ rev \d+/, '')),
    [
      'v1:0 n1#000000a1 seq 1  request k/1 owner alice ttl 0 ttw 0 priority 0 -> 1  after: 1: alice* (token 65536)',
      'v2:0 n2#000000b2 seq 1  request k/1 owner bob ttl 0 ttw 0 priority 0 -> 2  after: 1: alice* (token 65536), bob',
      'v5:0 n1#000000a1 seq 3  release k/1 owner alice -> 1  after: 1: bob* (token 327680)',
      'v6:0 n2#000000b2 seq 2  release-all owner bob -> 1  after: (none)',
    ],
    'k/2 and other keys left out; the release-all that emptied k/1 in, the one that did not touch it out',
  );
  t.is(seen[0]!.revision, store.logHistory[0]!.revision);
  t.is(retried.version, 3);
  t.like(report, { startedFrom: 'empty', startedAt: { version: 0 }, head: { version: 6 }, batches: 6, duplicates: 1 });
  t.like(report.check, { outcome: 'match', version: 5, expected: ReplicaState.decode(store.readSnapshot()!.bytes, still).digest() });
  t.regex(formatReport(report).at(-1)!, /^snapshot at version 5: match \(snapshot [0-9a-f]{16}, replayed [0-9a-f]{16}\)$/);

  const all: ReplayedCommand[] = [];
  await replayHistory(memoryHistory(store), { key: 'k' }, { command: (c) => all.push(c) });
  t.is(all.length, 5, 'without an index, k/2 too');
  t.is(formatCommand(all[0]!).split('after: ')[1], '1: alice* (token 65536)', 'a command’s own index only');
});

test('a snapshot that a replica of this log could not have written is a mismatch', async (t) => {
  const { vt, client, store, append } = setup();
  await append([request('1', 'alice')]);
  await append([request('1', 'bob')]);
  const other = new ReplicaState(still);
  other.apply({ proposer: 'n1', incarnation: 0xa1, seq: 1, commands: [request('1', 'alice')] }, store.logHistory[0]!);
  other.apply({ proposer: 'n1', incarnation: 0xa1, seq: 2, commands: [request('1', 'mallory')] }, store.logHistory[1]!);
  await saveSnapshot(vt, client, { position: other.position, bytes: other.encode() });
  const report = await replayHistory(memoryHistory(store), { key: 'k' });
  t.like(report.check, { outcome: 'mismatch', version: 2, expected: other.digest() });
  t.not(report.digest, other.digest());
});

test('a compacted history begins at the snapshot, and the batches retained after it bridge what compaction took', async (t) => {
  const { vt, client, store, mirror, append } = setup();
  await append([request('1', 'alice')]);
  await saveSnapshot(vt, client, { position: mirror.position, bytes: mirror.encode() });
  await append([request('1', 'bob')]);
  await append([release('1', 'alice')]);
  store.compactByOthers(); // another cluster on the same etcd: the log key's history before now is gone
  await append([release('1', 'bob')]);
  t.is(store.logHistory[0]?.version, 3, 'the history holds version 3 on');

  const seen: ReplayedCommand[] = [];
  const report = await replayHistory(memoryHistory(store), { key: 'k' }, { command: (c) => seen.push(c) });
  t.deepEqual(
    seen.map((c) => [c.version, c.command.op, c.result]),
    [
      [2, LogOp.Request, 2],
      [3, LogOp.Release, 1],
      [4, LogOp.Release, 1],
    ],
  );
  t.like(report, { startedFrom: 'snapshot', startedAt: { version: 1 }, head: { version: 4 }, digest: mirror.digest() });
  t.like(report.check, { outcome: 'not-checked' });

  const lost = await t.throwsAsync(
    replayHistory(
      memoryHistory(store, () => []),
      { key: 'k' },
    ),
    { instanceOf: HistoryLostError },
  );
  t.regex(lost.message, /versions 2-2 are compacted away and 0 of their 1 batches are retained/);
});
