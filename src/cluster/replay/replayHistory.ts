import { createHash } from 'node:crypto';
import type { ByteString } from '../../bytes.js';
import type { QueueView } from '../../protocol/messages.js';
import { commandPosition, decodeValue, isReference, isRefused, LogOp, type Batch, type LogCommand } from '../LogCodec.js';
import type { LogPosition, LogRecord, StoredSnapshot } from '../ReplicatedLog.js';
import { ReplicaState } from '../ReplicaState.js';
import { HistoryLostError, type ClusterHistory } from './ClusterHistory.js';

/** Which commands the replay reports: those on `key`, and on `index` of it when given. */
export interface ReplayFocus {
  readonly key: ByteString;
  readonly index?: ByteString;
}

/** One command on the focus, as apply ran it. */
export interface ReplayedCommand {
  /** The log value's version and revision, and the command's place in it (its log position is version × 65,536 + place). */
  readonly version: number;
  readonly revision: number;
  readonly place: number;
  readonly proposer: ByteString;
  readonly incarnation: number;
  readonly seq: number;
  readonly command: LogCommand;
  /** What apply returned (a request's position, a release's count…); 'duplicate' for a retried batch applied before, which changes nothing. */
  readonly result: number | 'duplicate';
  /** The focus key's queues right after the command (only the command's index, or the focus index, when it names one). */
  readonly queues: readonly QueueView[];
}

/** A part of a log value no node can read, met on the way (every node refused it alike). */
export interface ReplayedRefusal {
  readonly version: number;
  readonly reason: string;
}

/** How the replayed state compares with the cluster's newest snapshot. */
export type SnapshotCheck =
  | { readonly outcome: 'match' | 'mismatch'; readonly version: number; readonly expected: string; readonly replayed: string }
  /** Nothing to compare: no snapshot, or the replay began at it (the history before it is gone). */
  | { readonly outcome: 'not-checked'; readonly reason: string };

export interface ReplayReport {
  /** Where the replay began: version 0 (an empty table) or the snapshot it loaded. */
  readonly startedAt: LogPosition;
  readonly startedFrom: 'empty' | 'snapshot';
  /** The log's head as read, which the replay reached. */
  readonly head: LogPosition;
  readonly applied: LogPosition;
  /** The replayed state's digest at the head (ReplicaState.digest). */
  readonly digest: string;
  readonly batches: number;
  readonly duplicates: number;
  readonly refused: readonly ReplayedRefusal[];
  readonly check: SnapshotCheck;
}

export interface ReplayListener {
  readonly command?: (replayed: ReplayedCommand) => void;
  readonly refused?: (refusal: ReplayedRefusal) => void;
}

/** The replay dates no phase on a real clock: apply never reads it, and what is left of a TTL is no part of history. */
const STILL_CLOCK = { now: () => 0 };

/** The first 16 hex digits of the SHA-256 of a state's bytes, as ReplicaState.digest gives them. */
function digestOf(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex').slice(0, 16);
}

/**
 * Replays a cluster's history with the code every node runs: each log value decoded by
 * LogCodec.decodeValue and applied by ReplicaState, from the first version the store still holds
 * (from an empty table when that is version 1, else from the newest snapshot, with the batches
 * retained after it to bridge what compaction took). Tells `listener` of every command on the
 * focus, then compares the state, once it reaches the newest snapshot's version, with that
 * snapshot's bytes. HistoryLostError when the store lacks a version the replay needs.
 */
export async function replayHistory(history: ClusterHistory, focus: ReplayFocus, listener: ReplayListener = {}): Promise<ReplayReport> {
  const { head, records: logRecords } = await history.logVersions();
  const snapshot = await history.snapshot();
  const { state, startedFrom, records } = await startingPoint(history, head, logRecords, snapshot);
  const startedAt = state.position;
  let check: SnapshotCheck =
    snapshot === undefined
      ? { outcome: 'not-checked', reason: 'the cluster has written no snapshot' }
      : { outcome: 'not-checked', reason: `the replay began at the newest snapshot (version ${snapshot.position.version}); the history before it is gone` };
  const expected = snapshot === undefined ? undefined : { version: snapshot.position.version, digest: digestOf(snapshot.bytes) };
  let batches = 0;
  let duplicates = 0;
  const refused: ReplayedRefusal[] = [];
  for (const record of records) {
    if (record.version <= state.position.version) continue;
    if (isReference(record.value)) {
      throw new HistoryLostError(`version ${record.version} (revision ${record.revision}) is a reference whose retained batch the store no longer holds`);
    }
    const parts = decodeValue(record.value);
    let place = 0;
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      const inValue = { place, first: i === 0 };
      if (isRefused(part)) {
        state.refuse(record, inValue);
        const refusal = { version: record.version, reason: parts.length > 1 ? `batch ${i + 1} of a bundle of ${parts.length}: ${part.refused}` : part.refused };
        refused.push(refusal);
        listener.refused?.(refusal);
        continue;
      }
      batches++;
      if (!applyBatch(state, part, record, place, inValue.first, focus, listener)) duplicates++;
      place += part.commands.length;
    }
    if (expected !== undefined && record.version === expected.version) {
      const replayed = state.digest();
      check = { outcome: replayed === expected.digest ? 'match' : 'mismatch', version: expected.version, expected: expected.digest, replayed };
    }
  }
  if (state.position.version !== head.version) {
    throw new HistoryLostError(`the replay reached version ${state.position.version}, not the head's ${head.version}`);
  }
  return { startedAt, startedFrom, head, applied: state.position, digest: state.digest(), batches, duplicates, refused, check };
}

/**
 * Where the replay begins and the records it applies from there: an empty table when the log's
 * history reaches back to version 1; else the newest snapshot, if it is at or past the version
 * before the first one the history holds; else the snapshot (or nothing) and the batches retained
 * after it, numbered on as the follower numbers them, up to that first version.
 */
async function startingPoint(
  history: ClusterHistory,
  head: LogPosition,
  logRecords: readonly LogRecord[],
  snapshot: StoredSnapshot | undefined,
): Promise<{ state: ReplicaState; startedFrom: 'empty' | 'snapshot'; records: readonly LogRecord[] }> {
  const first = logRecords[0]?.version ?? head.version + 1;
  if (first <= 1) return { state: new ReplicaState(STILL_CLOCK), startedFrom: 'empty', records: logRecords };
  if (snapshot !== undefined && snapshot.position.version >= first - 1) {
    return { state: ReplicaState.decode(snapshot.bytes, STILL_CLOCK), startedFrom: 'snapshot', records: logRecords };
  }
  const from = snapshot?.position ?? { version: 0, revision: 0 };
  const state = snapshot === undefined ? new ReplicaState(STILL_CLOCK) : ReplicaState.decode(snapshot.bytes, STILL_CLOCK);
  const missing = first - 1 - from.version;
  const before = logRecords[0]?.revision ?? Number.POSITIVE_INFINITY;
  const retained = (await history.retainedSince(from.revision)).filter((b) => b.revision < before);
  if (retained.length !== missing) {
    throw new HistoryLostError(
      `versions ${from.version + 1}-${first - 1} are compacted away and ${retained.length} of their ${missing} batches are retained ` +
        `(a member's WAL may still hold them; this tool reads etcd only)`,
    );
  }
  const bridged = retained.map((b, i) => ({ version: from.version + 1 + i, revision: b.revision, value: b.value }));
  return { state, startedFrom: snapshot === undefined ? 'empty' : 'snapshot', records: [...bridged, ...logRecords] };
}

/** Applies one batch, telling the listener of each command on the focus; false when it was a duplicate. */
function applyBatch(
  state: ReplicaState,
  batch: Batch,
  record: LogRecord,
  place: number,
  first: boolean,
  focus: ReplayFocus,
  listener: ReplayListener,
): boolean {
  const report = listener.command;
  const { proposer, incarnation, seq, commands } = batch;
  const event = (i: number, result: number | 'duplicate', queues: readonly QueueView[]): ReplayedCommand => ({
    version: record.version,
    revision: record.revision,
    place: place + i,
    proposer,
    incarnation,
    seq,
    command: commands[i]!,
    result,
    queues,
  });
  const duplicate = state.isDuplicate(batch);
  if (report === undefined || duplicate) {
    const results = state.apply(batch, record, undefined, { place, first });
    if (report !== undefined && results === undefined) {
      for (let i = 0; i < commands.length; i++) if (names(commands[i]!, focus)) report(event(i, 'duplicate', queuesOf(state, focus, commands[i]!)));
    }
    return results !== undefined;
  }
  // Between commands (ApplyStep): the queues after the one before, and before a keyless one
  // (release-all, an import's commit), which is reported only if it changed the focus key.
  const after = new Map<number, readonly QueueView[]>();
  let keylessBefore: string | undefined;
  const step = (i: number): void => {
    const done = commands[i - 1];
    if (done !== undefined) {
      if (names(done, focus)) after.set(i - 1, queuesOf(state, focus, done));
      else if (keylessBefore !== undefined) {
        const queues = queuesOf(state, focus, done);
        if (fingerprint(queues) !== keylessBefore) after.set(i - 1, queues);
      }
    }
    const next = commands[i];
    keylessBefore = next !== undefined && mayTouch(next) ? fingerprint(queuesOf(state, focus, next)) : undefined;
  };
  const results = state.apply(batch, record, step, { place, first });
  if (results === undefined) return false;
  for (const [i, queues] of after) report(event(i, results[i]!, queues));
  return true;
}

/** Whether the command names the focus key (and index, if the focus has one and the command names an index). */
function names(c: LogCommand, focus: ReplayFocus): boolean {
  if (!('key' in c) || c.key !== focus.key) return false;
  return focus.index === undefined || !('index' in c) || c.index === focus.index;
}

/** A command naming no key that can still change a key's queues. */
function mayTouch(c: LogCommand): boolean {
  return c.op === LogOp.ReleaseAll || c.op === LogOp.ImportCommit || c.op === LogOp.CancelWaitsOf;
}

/** The focus key's queues now: of the command's index or the focus index when one is named, else all of them. */
function queuesOf(state: ReplicaState, focus: ReplayFocus, c: LogCommand): QueueView[] {
  const index = focus.index ?? ('index' in c ? c.index : undefined);
  const queues = state.table.queues(focus.key);
  return index === undefined ? queues : queues.filter((q) => q.index === index);
}

/** What of the queues history decides (not the time left, which the replay's still clock does not know). */
function fingerprint(queues: readonly QueueView[]): string {
  return JSON.stringify(queues.map((q) => [q.index, q.heldForMs > 0, q.entries.map((e) => [e.owner, e.isOwner, e.token, e.ttl, e.ttw, e.priority])]));
}

/** A command's log position (its ticket): the version × 65,536 + its place in the value. */
export function positionOf(replayed: ReplayedCommand): number {
  return commandPosition(replayed.version, replayed.place);
}
