import { randomBytes, randomInt } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { IRequestOp, IResponseOp, Watcher } from 'etcd3';
import { asBuffer } from '../bytes.js';
import { hasPrefix, isLeaseNotFound, isNoLeaderRefusal, prefixEnd } from './etcd/calls.js';
import { appendPuts } from './etcd/appendTransaction.js';
import { EndpointPool, type Endpoint, type EtcdConnection } from './etcd/EndpointPool.js';
import { defragmentMember, memberSpace } from './etcd/memberSpace.js';
import { NameLease } from './etcd/NameLease.js';
import { SnapshotStore } from './etcd/SnapshotStore.js';
import { WriterLeaseJanitor } from './etcd/WriterLeaseJanitor.js';
import { WriterLeases, type WriterLease } from './etcd/WriterLeases.js';
import type {
  Candidate,
  LogHead,
  LogListener,
  LogPosition,
  LogRecord,
  LogWatch,
  Member,
  NameClaim,
  ReplicatedLog,
  RetainedSince,
  StoredSnapshot,
} from './ReplicatedLog.js';
import {
  AppendRefusedError,
  leaseOutcomeOf,
  MAX_APPEND_BYTES,
  NodeTooOldError,
  type BundlePart,
  type LeaseOutcome,
  type LentLease,
  type MemberSpace,
} from './ReplicatedLog.js';
export { NodeTooOldError } from './ReplicatedLog.js';
import { BUNDLE_FORMAT, encodeBundle, GATED_FORMATS, isReference, LOG_FORMATS_READ, REFERENCE_FORMAT, REFERENCE_VALUE } from './LogCodec.js';
import type { PeerView } from './PeerDeclarations.js';
import { PEER_SECRET_BYTES } from './peer/PeerAuth.js';

export type { EtcdConnection } from './etcd/EndpointPool.js';

/** A comma-separated list of formats, as stored. */
function formatList(value: Buffer | undefined): string[] {
  const text = value?.toString('latin1') ?? '';
  return text === '' ? [] : text.split(',');
}

const ZERO_BYTE = Buffer.of(0);
/** The log key's value when it refers to the retained batch of its transaction (LogCodec's REFERENCE_FORMAT). */
const REFERENCE = Buffer.from(REFERENCE_VALUE);
export { SNAPSHOT_CHUNK_BYTES } from './etcd/SnapshotStore.js';

/** Retained batches deleted per transaction: etcd's default --max-txn-ops is 128. */
const RETAINED_DELETES_PER_TXN = 100;
/** Pages of deletes one snapshot may do (10,000 batches at most between snapshots by default, and leftovers). */
const MAX_RETAINED_PAGES = 1_000;

/**
 * Least time an append or read barrier is sent with, once its lease and the overdue revokes are
 * done: with less it is not sent (an append refused with nothing sent needs no fence; one sent
 * with a 1 ms deadline would time out, "maybe committed", and move the pool off a healthy member).
 */
const MIN_SEND_MS = 50;

/** Longest one attempt of an idempotent setup call (lease grant, name read) may hang on one member. */
const SETUP_ATTEMPT_MS = 1_000;

/**
 * ReplicatedLog on etcd, through the `etcd3` client. Every trap of that client listed in the
 * design note is handled here (and in ./etcd/), and only here:
 * 1. a watch is never resumed by the client: a stream that breaks ends the watch as 'broken' and
 *    the caller restarts it after the last batch it applied (its version check catches the rest);
 * 2. the receive limit is raised so a catch-up larger than 4 MiB is not dropped;
 * 3. the client's own retries are off (one call, one attempt); a batch sent twice by our retries
 *    carries its id, and ReplicaState applies it once;
 * 4. every unary call has a deadline (no hanging on a paused member);
 * 5. a watcher ended by compaction emits 'error', which we always listen to;
 * 6. leases and the name claim are raw transactions (create-if-absent), not the lock recipe;
 * 7. etcd never compacts by itself: the leader compacts after each snapshot;
 * 8. one client per endpoint (EndpointPool): an attempt that fails or hangs moves the next one to
 *    another member (one found silent by a probe is passed over for a while), a watch restarted
 *    after 'broken' goes to another member's fresh stream,
 *    every call and stream requires a leader (`hasleader`, so an isolated member refuses them),
 *    gRPC keepalive closes connections to silent members, and the name lease is kept alive
 *    through the pool (NameLease), not on one member's stream;
 * 9. appends are fenced by short writer leases (WriterLeases): a batch the caller gave up on
 *    commits within `lateCommitMs` or never; a new etcd leader renews every lease, so each one is
 *    announced and every node revokes the overdue ones (WriterLeaseJanitor), and a node seals
 *    the leases of its own sends with unknown outcome;
 * 10. compaction removes the log key's history, not live keys: every batch is also kept under a
 *    key of its own until a snapshot covers it (`since()`), and once every node reads references
 *    the log key holds only a reference to that copy; snapshots move their pointer by
 *    compare-and-swap only (SnapshotStore).
 * 11. a client's watchers share one stream, and a watcher etcd cancels as it is created (from a
 *    compacted revision) is paired with whichever watcher waits first, after which etcd3 throws
 *    out of its stream handler ("Failed to find watcher"): the log watch keeps a stream to itself
 *    (the writer-lease janitor watches on a client of its own, hence its own stream);
 * 12. etcd3 closes every channel of a client after any call of it fails with a "recoverable"
 *    status (etcd's "no leader", a deadline) and after any stream error, its own cancels included;
 *    a watch on a closed channel dies at the connection's next keepalive ping, on a healthy member
 *    too (every node fell silent again 11-13 s into a pause of one etcd member): the log watch, the
 *    janitor's watch and the calls each have a client of their own per member (Endpoint).
 */
export class EtcdLog implements ReplicatedLog {
  private readonly pool: EndpointPool;
  private readonly writers: WriterLeases;
  private readonly janitor: WriterLeaseJanitor;
  private readonly snapshots: SnapshotStore;
  private readonly logKey: Buffer;
  private readonly namePrefix: string;
  private readonly candidatePrefix: string;
  /** `<formatsPrefix><name>`: the log value formats the node of that name reads, held by its name's lease. */
  private readonly formatsPrefix: string;
  /** `<peersPrefix><name>`: where the node of that name takes forwarded batches, held by its name's lease. */
  private readonly peersPrefix: string;
  /** `<fencePrefix><client id, 16 hex digits>`: each client's fence key. */
  private readonly fencePrefix: Buffer;
  /**
   * The cluster's peer secret (peer/PeerAuth), created by the first node that reads the
   * declarations: `/<cluster>:peer-secret`, outside the cluster's prefix, so a role that may read
   * `/<cluster>/` (monitoring) cannot read it, and so cannot forward batches.
   */
  private readonly peerSecretKey: Buffer;
  /**
   * Every log value format other than plain batches that was ever written (`/<cluster>/formats-written`,
   * comma-separated): a node that does not read one of them may not join (claimName), since it
   * would skip those values where newer nodes apply them. A format is written only once it is here
   * and every live node declares it reads it, both seen in one read (peerView).
   */
  private readonly formatsWrittenKey: Buffer;
  /** The formats besides plain batches that may be written now: every live node reads them and the record names them (peerView). */
  private writable = new Set<number>();
  /** This node's name and name lease while it holds one (a declared address is put with it). */
  private claimed: { readonly name: string; readonly lease: string } | undefined;
  /** The last op of every append: reads back the log key's version, the batch's number. */
  private readonly readLogVersion: IRequestOp;
  /** Where every batch is also kept, under a key of its own, until a snapshot covers it (see `since`). */
  private readonly retainedPrefix: Buffer;
  /** This client's retained-batch keys: `<retainedPrefix><client id>/<n>`, one per append attempt. */
  private readonly retainedOwn: string;
  private retainedCount = 0;
  /**
   * Every live name declared at the last peerView() that it reads references (REFERENCE_FORMAT):
   * appends then put their value once, under the retained key, and a reference under the log key.
   */
  private everyNodeReadsReferences = false;
  private readonly nameLeases = new Set<NameLease>();
  /** Stops of the watches not ended yet: close() ends them without a word to their listeners. */
  private readonly watches = new Set<() => void>();
  /** Where the last watch ran: a restarted watch goes elsewhere when it can (trap 8). */
  private lastWatchEndpoint: Endpoint | undefined;

  /** `host:port` where this node's lock port takes links from other nodes (declareAddress), once it listens. */
  private peerAddress: string | undefined;

  constructor(connection: EtcdConnection) {
    this.pool = new EndpointPool(connection, randomInt(0, 2 ** 31));
    const root = `/${connection.cluster}/`;
    this.logKey = Buffer.from(`${root}log`);
    this.namePrefix = `${root}nodes/`;
    this.candidatePrefix = `${root}candidates/`;
    this.formatsPrefix = `${root}formats/`;
    this.peersPrefix = `${root}peers/`;
    this.readLogVersion = { request_range: { key: this.logKey, keys_only: true } };
    // One fence key per client: a restarted node has a new one, and the last lease's expiry deletes it.
    const clientId = randomBytes(8).toString('hex');
    const announcePrefix = Buffer.from(`${root}writers/`);
    this.janitor = new WriterLeaseJanitor(this.pool, announcePrefix);
    this.fencePrefix = Buffer.from(`${root}fences/`);
    this.peerSecretKey = Buffer.from(`/${connection.cluster}:peer-secret`);
    this.formatsWrittenKey = Buffer.from(`${root}formats-written`);
    this.writers = new WriterLeases(this.pool, Buffer.concat([this.fencePrefix, Buffer.from(clientId)]), announcePrefix, (id, ttlMs) =>
      this.janitor.announced(id, ttlMs),
    );
    this.retainedPrefix = Buffer.from(`${root}batches/`);
    this.retainedOwn = `${root}batches/${clientId}/`;
    this.snapshots = new SnapshotStore(this.pool, root);
  }

  /** Writer-lease TTL as granted + revoke slack (see WriterLeases). */
  get lateCommitMs(): number {
    return this.writers.lateCommitMs;
  }

  /** Other nodes' (and this node's) writer leases this node revoked as overdue. For tests and reports. */
  get overdueLeasesRevoked(): number {
    return this.janitor.revoked;
  }

  /** The writer-lease TTL etcd granted (ms; the one asked for before the first grant). For tests and reports. */
  get writerLeaseTtlMs(): number {
    return this.writers.grantedTtlMs;
  }

  async append(value: Uint8Array, timeoutMs: number): Promise<LogPosition> {
    const started = performance.now();
    const lease = await this.lendLease(timeoutMs);
    try {
      const position = await this.appendBundle([{ value, lease }], timeoutMs - (performance.now() - started));
      this.leaseReturned(lease, 'settled');
      return position;
    } catch (error) {
      this.leaseReturned(lease, leaseOutcomeOf(error));
      throw error;
    }
  }

  /**
   * A writer lease for one append attempt, sent by this node or by a sequencer it forwards the
   * batch to (its fence key is put in whichever transaction carries the batch): granted and
   * announced before it is lent, and only once every lease this node knows to be overdue is gone.
   * The lender must say how the attempt ended (leaseReturned). AppendRefusedError when none could
   * be had: nothing was sent.
   */
  async lendLease(timeoutMs: number): Promise<LentLease> {
    const started = performance.now();
    let lease: WriterLease;
    try {
      const overdue = this.janitor.untilOverdueGone(timeoutMs);
      if (overdue !== undefined) await overdue;
      lease = await this.writers.forSend(timeoutMs - (performance.now() - started));
    } catch (error) {
      // Nothing was sent: the transaction goes out only with a lease, and after the overdue revokes.
      throw new AppendRefusedError(`append not sent: ${(error as Error).message}`);
    }
    const left = timeoutMs - (performance.now() - started);
    if (left < MIN_SEND_MS) throw new AppendRefusedError(`append not sent: ${Math.max(0, Math.round(left))} ms left of ${timeoutMs} after its lease`);
    const lent: LentLease & { readonly lease: WriterLease } = { lease, leaseId: lease.id, fenceKey: this.writers.fenceKey, endsAt: lease.endsAt };
    return lent;
  }

  /**
   * How an attempt with a lent lease ended: 'settled' (committed, or refused where it can never
   * commit), 'lease-gone' (refused: etcd found a lease of its transaction gone; this one is not
   * used again), 'unsettled' (no answer: the request may still land; the next seal revokes it).
   */
  leaseReturned(lent: LentLease, outcome: LeaseOutcome): void {
    const lease = (lent as LentLease & { lease?: WriterLease }).lease;
    if (lease === undefined) return;
    if (outcome === 'lease-gone') this.writers.refused(lease);
    else if (outcome === 'unsettled') this.writers.unsettledSend(lease);
  }

  /**
   * Appends `parts` as one log value (a bundle when more than one: the sequencer), in one
   * transaction with each part's fence put: etcd refuses all of it if any of those leases has
   * ended, so each part keeps its own node's lateCommitMs bound. Rejects with AppendRefusedError
   * (leaseGone set when a lease was found gone) only when none of it can ever commit.
   */
  async appendBundle(parts: readonly BundlePart[], timeoutMs: number): Promise<LogPosition> {
    const started = performance.now();
    const value = parts.length === 1 ? parts[0]!.value : encodeBundle(parts.map((p) => p.value));
    if (value.length > MAX_APPEND_BYTES) {
      throw new AppendRefusedError(
        `append: a batch of ${value.length} bytes is over the ${MAX_APPEND_BYTES} one append can carry (etcd refuses a request above 1.5 MiB)`,
      );
    }
    if (parts.length > 1) {
      try {
        const overdue = this.janitor.untilOverdueGone(timeoutMs);
        if (overdue !== undefined) await overdue;
      } catch (error) {
        throw new AppendRefusedError(`append not sent: ${(error as Error).message}`);
      }
    }
    const left = timeoutMs - (performance.now() - started);
    if (left < MIN_SEND_MS) throw new AppendRefusedError(`append not sent: ${Math.max(0, Math.round(left))} ms left of ${timeoutMs}`);
    // One transaction puts the batch and the fences (checked by etcd when it applies the txn), and
    // reads back the key's version: the batch's number.
    // The batch is also put under a key of its own: compaction never removes a live key, so a
    // follower can read it back whoever compacts. One key per try, not per call: two tries of one
    // call can both commit (the first unanswered, the second on another member), and each is a
    // version of the log that `since()` must find a retained batch for. Once every live node reads
    // references, the log key holds only a reference to it (the watch brings both puts of the
    // transaction together): etcd stores and replicates the batch once, not twice.
    const bytes = asBuffer(value);
    const logValue = this.everyNodeReadsReferences ? REFERENCE : bytes;
    const success = (): IRequestOp[] => {
      const [log, retained, ...fences] = appendPuts(
        this.logKey,
        logValue,
        Buffer.from(this.retainedOwn + (this.retainedCount++).toString(36)),
        bytes,
        parts,
      ).map((put): IRequestOp => ({
        request_put: put.lease === undefined ? { key: put.key, value: put.value } : { key: put.key, value: put.value, lease: put.lease },
      }));
      return [log!, retained!, this.readLogVersion, ...fences];
    };
    // The pool may try several members within this call (after a fast failure): what each try
    // got decides whether the call's batch can still commit.
    let tries = 0;
    let refusedTries = 0;
    let leaseGone = false;
    let responses: IResponseOp[];
    try {
      responses = (
        await this.pool.call('append', left, ({ client }, options) => {
          tries++;
          return client.kv.txn({ compare: [], success: success() }, options).catch((error: unknown) => {
            if (isLeaseNotFound(error)) leaseGone = true;
            if (isLeaseNotFound(error) || isNoLeaderRefusal(error)) refusedTries++;
            throw error;
          });
        })
      ).responses;
    } catch (error) {
      // Two refusals are final. etcd checks the fence leases when it applies a txn and refuses all
      // of it: once one try found a lease gone, no try (all name them) can be applied after. The
      // require-leader check refuses a call before its handler runs, so such a try was never
      // proposed; but a try before it that got no such answer may have been.
      const message = (error as Error).message;
      if (leaseGone) throw new AppendRefusedError(`append refused: ${message}`, true);
      if (isNoLeaderRefusal(error) && refusedTries === tries) throw new AppendRefusedError(`append refused: ${message}`);
      throw error;
    }
    const kv = responses[2]?.response_range.kvs[0];
    if (kv === undefined) throw new Error('append: the log key vanished');
    return { version: Number(kv.version), revision: Number(kv.mod_revision) };
  }

  seal(timeoutMs: number): Promise<void> {
    return this.writers.seal(timeoutMs);
  }

  async since(revision: number, timeoutMs: number): Promise<RetainedSince> {
    // One transaction: the log's head and the retained batches after `revision`, at one revision.
    const response = await this.pool.call('retained batches', timeoutMs, ({ client }, options) =>
      client.kv.txn(
        {
          compare: [],
          success: [
            this.readLogVersion,
            {
              request_range: {
                key: this.retainedPrefix,
                range_end: prefixEnd(this.retainedPrefix),
                min_create_revision: revision + 1,
                sort_target: 'Create',
                sort_order: 'Ascend',
              },
            },
          ],
        },
        options,
      ),
    );
    const storeRevision = Number(response.header.revision);
    const log = response.responses[0]?.response_range.kvs[0];
    const head =
      log === undefined ? { version: 0, revision: 0, storeRevision } : { version: Number(log.version), revision: Number(log.mod_revision), storeRevision };
    const batches = (response.responses[1]?.response_range.kvs ?? []).map((kv) => ({ revision: Number(kv.create_revision), value: kv.value }));
    return { head, batches };
  }

  async head(timeoutMs: number): Promise<LogHead> {
    const started = performance.now();
    const overdue = this.janitor.untilOverdueGone(timeoutMs); // see WriterLeaseJanitor.untilOverdueGone
    if (overdue !== undefined) await overdue;
    const left = timeoutMs - (performance.now() - started);
    if (left < MIN_SEND_MS) throw new Error(`read barrier not sent: ${Math.max(0, Math.round(left))} ms left of ${timeoutMs} after the overdue revokes`);
    const response = await this.pool.call('read barrier', left, ({ client }, options) => client.kv.range({ key: this.logKey, keys_only: true }, options));
    const kv = response.kvs[0];
    const storeRevision = Number(response.header.revision);
    return kv === undefined ? { version: 0, revision: 0, storeRevision } : { version: Number(kv.version), revision: Number(kv.mod_revision), storeRevision };
  }

  watch(fromRevision: number, listener: LogListener): LogWatch {
    // A restarted log watch (its stream broke or stalled) takes the announcements' watch along: the
    // etcd3 client carries both on one stream per member.
    if (this.lastWatchEndpoint !== undefined) this.janitor.moveWatch();
    const endpoint = this.pool.preferredOtherThan(this.lastWatchEndpoint);
    this.lastWatchEndpoint = endpoint;
    let closed = false;
    // The watcher object at once (not create(), which waits for etcd's 'connected' and ignores a
    // stream that breaks before it): every outcome is heard and the watcher can always be cancelled.
    // The log key and the retained batches (a reference under the log key names the retained put of
    // its own revision); the range also holds candidates, fences and formats, which are skipped.
    const watcher: Watcher = endpoint.logWatch
      .watch()
      .inRange({ start: this.retainedPrefix, end: Buffer.concat([this.logKey, ZERO_BYTE]) })
      .startRevision(String(fromRevision))
      .watcher();
    const stop = (): void => {
      closed = true;
      this.watches.delete(stop);
      // On a silent stream the cancel never completes; the stream's end (keepalive, close()) settles it.
      void watcher.cancel().catch(() => {});
    };
    const end = (why: 'compacted' | 'broken', detail: string): void => {
      if (closed) return;
      stop();
      listener.onEnd(why, detail);
    };
    this.watches.add(stop);
    // Trap 1: the client would reattach to the same member and resume from the header's revision;
    // a broken stream ends this watch instead, and the next one goes to another member.
    watcher.on('disconnected', (error: Error) => {
      this.pool.leave(endpoint);
      end('broken', `stream to ${endpoint.url} broke: ${error.message}`);
    });
    watcher.on('data', (response) => {
      if (closed) return;
      const records: LogRecord[] = [];
      // etcd never splits one revision's events between two responses: a reference's batch is here.
      let retained: Map<string, Buffer> | undefined;
      for (const event of response.events) {
        if (event.type !== 'Put') continue;
        const key = event.kv.key;
        if (key.equals(this.logKey)) {
          records.push({ version: Number(event.kv.version), revision: Number(event.kv.mod_revision), value: event.kv.value });
        } else if (key.length > this.retainedPrefix.length && hasPrefix(key, this.retainedPrefix)) {
          (retained ??= new Map()).set(event.kv.mod_revision, event.kv.value);
        }
      }
      for (let i = 0; i < records.length; i++) {
        const record = records[i]!;
        // One without its batch stays a reference, which the follower refuses as it decodes it.
        const batch = isReference(record.value) ? retained?.get(String(record.revision)) : undefined;
        if (batch !== undefined) records[i] = { ...record, value: batch };
      }
      if (records.length > 0) listener.onRecords(records);
    });
    // Trap 5: compaction past the watcher cancels it with 'error'; unheard, it would crash us.
    // etcd 3.4 names no reason ("Watcher canceled: "); the caller's reload path copes with any cause.
    watcher.on('error', (error: Error) => end('compacted', `${endpoint.url}: ${error.message}`));
    return {
      close: () => {
        if (!closed) stop();
      },
    };
  }

  loadSnapshot(timeoutMs: number): Promise<StoredSnapshot | undefined> {
    return this.snapshots.load(timeoutMs);
  }

  async saveSnapshot(snapshot: StoredSnapshot, timeoutMs: number): Promise<boolean> {
    // Retained batches go only once a snapshot at or past them is the one a follower loads.
    if (!(await this.snapshots.save(snapshot, timeoutMs))) return false;
    await this.dropRetained(snapshot.position.revision, timeoutMs).catch(() => {
      // Left for the next snapshot to drop: a retained batch only costs space.
    });
    return true;
  }

  /** Drops the retained batches a saved snapshot covers (appended at or before `revision`), a page at a time. */
  private async dropRetained(revision: number, timeoutMs: number): Promise<void> {
    for (let page = 0; page < MAX_RETAINED_PAGES; page++) {
      const listed = await this.pool.call('retained batches', timeoutMs, ({ client }, options) =>
        client.kv.range(
          {
            key: this.retainedPrefix,
            range_end: prefixEnd(this.retainedPrefix),
            max_create_revision: revision,
            keys_only: true,
            limit: RETAINED_DELETES_PER_TXN,
          },
          options,
        ),
      );
      if (listed.kvs.length === 0) return;
      const deletes: IRequestOp[] = listed.kvs.map((kv) => ({ request_delete_range: { key: kv.key } }));
      await this.pool.call('drop retained batches', timeoutMs, ({ client }, options) => client.kv.txn({ compare: [], success: deletes }, options));
      if (!listed.more) return;
    }
  }

  async compact(revision: number, timeoutMs: number): Promise<void> {
    try {
      await this.pool.call('compaction', timeoutMs, ({ client }, options) => client.kv.compact({ revision: String(revision) }, options));
    } catch (error) {
      // Someone compacted this far already: the history before it is gone either way.
      if (!/compacted/i.test((error as Error).message)) throw error;
    }
  }

  async claimName(name: string, priority: number | undefined, leaseSeconds: number, timeoutMs: number, silentBeat?: number): Promise<NameClaim> {
    const started = performance.now();
    const grant = await this.pool.call(
      'lease grant',
      timeoutMs,
      ({ client }, options) => client.leaseClient.leaseGrant({ TTL: leaseSeconds, ID: 0 }, options),
      SETUP_ATTEMPT_MS,
    );
    const grantedAt = performance.now();
    const id = grant.ID;
    const revoke = (): Promise<void> =>
      this.pool
        .call('lease revoke', SETUP_ATTEMPT_MS, ({ client }, options) => client.leaseClient.leaseRevoke({ ID: id }, options))
        .then(
          () => undefined,
          () => undefined,
        );
    const nameKey = Buffer.from(this.namePrefix + name);
    const nameValue = Buffer.from(`${hostname()} pid ${process.pid}`);
    const success: IRequestOp[] = [
      { request_put: { key: nameKey, value: nameValue, lease: id } },
      { request_put: { key: Buffer.from(this.formatsPrefix + name), value: Buffer.from(LOG_FORMATS_READ.join(',')), lease: id } },
    ];
    if (this.peerAddress !== undefined) {
      success.push({ request_put: { key: Buffer.from(this.peersPrefix + name), value: Buffer.from(this.peerAddress), lease: id } });
    }
    if (priority !== undefined) {
      success.push({ request_put: { key: Buffer.from(this.candidatePrefix + name), value: Buffer.from(String(priority)), lease: id } });
    }
    if (silentBeat !== undefined) {
      // A takeover: whatever the silent holder declared and this claim does not is not this node's.
      if (priority === undefined) success.push({ request_delete_range: { key: Buffer.from(this.candidatePrefix + name) } });
      if (this.peerAddress === undefined) success.push({ request_delete_range: { key: Buffer.from(this.peersPrefix + name) } });
      // Read first (ops run in order): the lease the holder's keys leave, revoked once they are moved.
      success.unshift({ request_range: { key: nameKey } });
    }
    // Read in the same transaction: the formats written so far (a writer of a new one sees this
    // claim, or this claim sees its record: etcd orders both).
    success.push({ request_range: { key: this.formatsWrittenKey } });
    let holder: { value: Buffer; lease: string } | undefined;
    let written: string[];
    let silentLease: string | undefined;
    try {
      const response = await this.pool.call('name claim', timeoutMs - (grantedAt - started), ({ client }, options) =>
        client.kv.txn(
          {
            // Free, or (a takeover) still at the beat its holder was proven silent at.
            compare: [
              silentBeat === undefined
                ? { key: nameKey, target: 'Create', result: 'Equal', create_revision: 0 }
                : { key: nameKey, target: 'Mod', result: 'Equal', mod_revision: silentBeat },
            ],
            success,
            failure: [{ request_range: { key: nameKey } }, { request_range: { key: this.formatsWrittenKey } }],
          },
          options,
        ),
      );
      const last = response.responses[response.responses.length - 1]?.response_range.kvs[0];
      written = formatList(last?.value);
      if (!response.succeeded) holder = response.responses[0]?.response_range.kvs[0] ?? { value: Buffer.from('unknown'), lease: '0' };
      else if (silentBeat !== undefined) silentLease = response.responses[0]?.response_range.kvs[0]?.lease;
    } catch (error) {
      void revoke();
      throw error;
    }
    const unread = written.filter((format) => !LOG_FORMATS_READ.includes(Number(format)));
    if (unread.length > 0) {
      await revoke(); // the name it took goes with it
      throw new NodeTooOldError(`the log holds values of format ${unread.join(', ')}, which this version does not read: upgrade this node`);
    }
    // A claim sent twice (the first answer lost) finds the name held by its own lease: taken.
    if (holder !== undefined && holder.lease !== id) {
      void revoke();
      return { taken: false, holder: holder.value.toString() };
    }
    const session = new NameLease(
      this.pool,
      id,
      Number(grant.TTL) * 1000,
      grantedAt,
      (lease) => {
        this.nameLeases.delete(lease);
        if (this.claimed?.lease === id) this.claimed = undefined;
      },
      nameKey,
      nameValue,
    );
    this.nameLeases.add(session);
    this.claimed = { name, lease: id };
    // The silent holder's lease holds nothing of the name any more; revoked, nobody can keep it up.
    if (silentLease !== undefined && silentLease !== '0' && silentLease !== id) void this.revokeQuietly(silentLease);
    return { taken: true, session };
  }

  /** This node's fence key: the only one a sequencer puts for the batches it forwards (peer/PeerAuth binds it to the link). */
  get fenceKey(): Buffer {
    return this.writers.fenceKey;
  }

  /**
   * Declares where this node's lock port takes links from other nodes (`host:port`), beside its
   * name and under its name lease (`/<cluster>/peers/<name>`), now and at every later claim: the
   * other nodes forward their batches there while this node leads. Called once the port listens.
   */
  async declareAddress(address: string, timeoutMs: number): Promise<void> {
    this.peerAddress = address;
    const claimed = this.claimed;
    if (claimed === undefined) return; // the next claim puts it
    await this.pool.call('peer address', timeoutMs, ({ client }, options) =>
      client.kv.put({ key: Buffer.from(this.peersPrefix + claimed.name), value: Buffer.from(address), lease: claimed.lease }, options),
    );
  }

  /**
   * What the live nodes declare (issue 20's sequencer), read at one revision: their peer
   * addresses, and whether every one of them reads bundles (a node whose name has no formats key
   * predates them).
   */
  async peerView(timeoutMs: number): Promise<PeerView> {
    const started = performance.now();
    const ranges = [this.namePrefix, this.formatsPrefix, this.peersPrefix].map((p) => Buffer.from(p));
    const response = await this.pool.call('peer view', timeoutMs, ({ client }, options) =>
      client.kv.txn(
        {
          compare: [],
          success: [
            ...ranges.map((key) => ({ request_range: { key, range_end: prefixEnd(key) } })),
            { request_range: { key: this.peerSecretKey } },
            { request_range: { key: this.formatsWrittenKey } },
          ],
          failure: [],
        },
        options,
      ),
    );
    const [names, formats, peers] = ranges.map((prefix, i) => {
      const kvs = response.responses[i]?.response_range.kvs ?? [];
      return new Map(kvs.map((kv) => [kv.key.subarray(prefix.length).toString(), kv.value.toString()]));
    }) as [Map<string, string>, Map<string, string>, Map<string, string>];
    const record = response.responses[4]?.response_range.kvs[0];
    const written = formatList(record?.value);
    const reads = (format: number): boolean =>
      names.size > 0 && [...names.keys()].every((name) => formatList(Buffer.from(formats.get(name) ?? '')).includes(String(format)));
    // A format is written once every live node reads it and the record names it, in this one read;
    // every live node reading it but the record not naming it yet, the record comes first.
    const wanted = GATED_FORMATS.filter(reads);
    const missing = wanted.filter((format) => !written.includes(String(format)));
    if (missing.length > 0) await this.recordFormats(record, written, missing, timeoutMs - (performance.now() - started)).catch(() => {});
    // Read here, where every node reads the declarations once a second (PeerDeclarations).
    this.writable = new Set(wanted.filter((format) => written.includes(String(format))));
    this.everyNodeReadsReferences = this.writable.has(REFERENCE_FORMAT);
    const secret = response.responses[3]?.response_range.kvs[0]?.value ?? (await this.createPeerSecret(timeoutMs - (performance.now() - started)));
    return { peers, readsBundles: this.writable.has(BUNDLE_FORMAT), secret };
  }

  mayWrite(format: number): boolean {
    return this.writable.has(format);
  }

  /** Adds `formats` to the formats-written record, unless it changed since `record` was read (the next read tries again). */
  private async recordFormats(
    record: { mod_revision: string } | undefined,
    written: readonly string[],
    formats: readonly number[],
    timeoutMs: number,
  ): Promise<void> {
    const key = this.formatsWrittenKey;
    const value = Buffer.from([...written, ...formats.map(String)].join(','));
    await this.pool.call('formats written', timeoutMs, ({ client }, options) =>
      client.kv.txn(
        {
          compare:
            record === undefined
              ? [{ key, target: 'Create', result: 'Equal', create_revision: 0 }]
              : [{ key, target: 'Mod', result: 'Equal', mod_revision: record.mod_revision }],
          success: [{ request_put: { key, value } }],
          failure: [],
        },
        options,
      ),
    );
  }

  /** Puts a new peer secret unless one is there; either way returns the one etcd keeps. */
  private async createPeerSecret(timeoutMs: number): Promise<Buffer> {
    const key = this.peerSecretKey;
    const response = await this.pool.call('peer secret', timeoutMs, ({ client }, options) =>
      client.kv.txn(
        {
          compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
          success: [{ request_put: { key, value: randomBytes(PEER_SECRET_BYTES) } }, { request_range: { key } }],
          failure: [{ request_range: { key } }],
        },
        options,
      ),
    );
    const kv = response.responses[response.succeeded ? 1 : 0]?.response_range.kvs[0];
    if (kv === undefined) throw new Error('peer secret: not found right after it was put');
    return kv.value;
  }

  /**
   * Why a fence key a forwarding node names is not one a node of this cluster has (a key under
   * `/<cluster>/fences/`), or undefined when it could be. The sequencer puts it in its
   * transactions: nothing else may be written that way.
   */
  checkFenceKey(fenceKey: Uint8Array): string | undefined {
    const key = asBuffer(fenceKey);
    const client = key.subarray(this.fencePrefix.length);
    if (!hasPrefix(key, this.fencePrefix) || !/^[0-9a-f]{16}$/.test(client.toString('latin1'))) {
      return 'not a fence key of this cluster';
    }
    return undefined;
  }

  /** Revokes a lease, if etcd lets this user (a lease holding keys it may not write is refused); errors are dropped. */
  private async revokeQuietly(lease: string): Promise<void> {
    await this.pool.call('lease revoke', SETUP_ATTEMPT_MS, ({ client }, options) => client.leaseClient.leaseRevoke({ ID: lease }, options)).catch(() => {});
  }

  /** Every registered name with its heartbeat (the name key's mod revision) and candidacy, in one read. */
  async members(timeoutMs: number): Promise<Member[]> {
    const names = Buffer.from(this.namePrefix);
    const candidates = Buffer.from(this.candidatePrefix);
    const response = await this.pool.call('members', timeoutMs, ({ client }, options) =>
      client.kv.txn(
        {
          compare: [],
          success: [names, candidates].map((key) => ({ request_range: { key, range_end: prefixEnd(key) } })),
          failure: [],
        },
        options,
      ),
    );
    const standing = new Map(
      (response.responses[1]?.response_range.kvs ?? []).map((kv) => {
        const candidate = this.candidateOf(kv, candidates);
        return [candidate.name, candidate] as const;
      }),
    );
    return (response.responses[0]?.response_range.kvs ?? []).map((kv) => {
      const name = kv.key.subarray(names.length).toString();
      return { name, beat: Number(kv.mod_revision), candidate: standing.get(name) };
    });
  }

  private candidateOf(kv: { key: Buffer; value: Buffer; create_revision: string }, prefix: Buffer): Candidate {
    return { name: kv.key.subarray(prefix.length).toString(), priority: Number(kv.value.toString()), since: Number(kv.create_revision) };
  }

  async candidates(timeoutMs: number): Promise<Candidate[]> {
    const prefix = Buffer.from(this.candidatePrefix);
    const response = await this.pool.call('candidates', timeoutMs, ({ client }, options) =>
      client.kv.range({ key: prefix, range_end: prefixEnd(prefix) }, options),
    );
    return response.kvs.map((kv) => this.candidateOf(kv, prefix));
  }

  async space(timeoutMs: number): Promise<{ readonly asked: number; readonly members: readonly MemberSpace[] }> {
    const members = await Promise.all(this.pool.endpoints.map((endpoint) => memberSpace(endpoint, timeoutMs)));
    return { asked: members.length, members: members.filter((m): m is MemberSpace => m !== undefined) };
  }

  defragment(url: string, timeoutMs: number): Promise<void> {
    return defragmentMember(this.pool.endpoints, url, timeoutMs);
  }

  async close(): Promise<void> {
    // Name leases not released are left to expire (as a crashed node's would); their renewals stop.
    for (const lease of [...this.nameLeases]) lease.close();
    for (const stop of [...this.watches]) stop();
    this.writers.close();
    this.janitor.close();
    this.pool.close();
  }
}
