import { writeFileSync } from 'node:fs';
import type { ByteString } from '../../src/bytes.js';
import { ClusterLockService } from '../../src/cluster/ClusterLockService.js';
import { COMMANDS_PER_VERSION, decodeValue, isRefused, LogOp, type BatchHeader } from '../../src/cluster/LogCodec.js';
import { LIVE_NODES_EVERY_MS } from '../../src/cluster/OrphanedWaits.js';
import { NO_ID } from '../../src/locks/HashIndex.js';
import type { LentLease, LogPosition } from '../../src/cluster/ReplicatedLog.js';
import { AppendRouter, type SequencerChannel } from '../../src/cluster/AppendRouter.js';
import { Sequencer } from '../../src/cluster/Sequencer.js';
import { MemoryStore, type FsyncProfile, type MemoryFaults, type MemoryLog } from '../doubles/MemoryLog.js';
import { mulberry32, type Random } from '../../src/runtime/Random.js';
import { VirtualTimers } from '../doubles/VirtualTimers.js';
import type { Contender } from '../../src/protocol/messages.js';
import type { Logger } from '../../src/runtime/Logger.js';
import { NodeTime } from './NodeTime.js';
import { Ownership, RATE_MARGIN } from './Ownership.js';

/**
 * A seeded, deterministic simulation of a lock cluster in one process: three ClusterLockService
 * nodes over a MemoryStore with etcd's semantics and faults, and nine clients. One seed replays
 * the whole run (every draw comes from it, every time from the virtual clock).
 *
 * Faults, drawn per seed then injected every 0.3–2 s for 20 s: node crashes (restarted later) and
 * full restarts (every node down, the store keeps its data); node pauses of 0.5–8 s (the event
 * loop stops, sometimes past the node's 2 s lease, and its clock jumps); clocks that differ in
 * offset and rate; quorum loss; a node cut from the store; an etcd member cut from the others,
 * leader changes and elections; a node's whole watch stream stalling; broken, gapped, repeated or
 * stalled watches; appends refused, with their answer lost, or landing late within the seed's
 * lateCommitMs (0–3000 ms); slow fsync; compaction by another cluster sharing the store; in half
 * the seeds a read-only etcd user keeps every lease alive, a crashed node's name lease included
 * (liveness and name takeover then rest on heartbeats alone).
 *
 * Clients act like 0.9b ones: holders wait in the request; pollers request with a short TTW and a
 * long TTL, then poll 0x03 / 0x01 / 0x07 until told they own the lock; after a release they ask
 * for the lock again; a closed connection sends them to another node at once (after a node's
 * crash they first wait lateCommitMs: a crash cannot wait for the fence). Half their requests are
 * requests with fence (0x0A), and some of their reads ask for the fence (0x09): each token they
 * are told joins the ownership checks (Ownership.ts: tokens only go up, a renewal keeps its token,
 * every replica holds the token the client was told).
 *
 * Checks: replicas at the same log version hold the same state; every reply that tells a client
 * it owns a lock opens an ownership interval, and no two clients' intervals on a lock overlap
 * (S1, see Ownership.ts); a replica never shows a client's ownership gone before its TTL could
 * have run out, nor an entry back after its release was answered (an effect after a hang-up or a
 * batch applied twice); no answer comes from a node that reached no leader since before the
 * command was sent (itself, or through a sequencer by an append attempt started since); every command is answered or closed within the commit timeout plus
 * lateCommitMs (plus its node's pauses); no entry a 0x0B left waiting through a crashed
 * incarnation is granted after its cancel landed, nor committed granted later than a commit's bound
 * after that cancel could have been proposed; at the end every node is ready, at the same version
 * and state, holding every acknowledged never-expiring entry in order and no wait of a dead incarnation.
 */

/** Nodes' clocks run at a rate in [MIN_RATE, MAX_RATE] of true time, offsets anywhere. */
const MIN_RATE = 0.97;
const MAX_RATE = 1 + RATE_MARGIN;
const NODE_COUNT = 3;
const CLIENTS_PER_NODE = 3;
const KEYS = ['k0', 'k1'];
const INDEXES = ['i0', 'i1'];
/** Longest wait, after the quiet phase, for every node to apply the store's last batch. */
const SETTLE_MS = 10_000;
const TRACE_LIMIT = Number(process.env.SIM_TRACE_LIMIT ?? 400);

export interface SimulationOptions {
  readonly seed: number;
  /** Virtual milliseconds with faults and load. */
  readonly faultyMs?: number;
  /** Virtual milliseconds of healed, quiet running before the final checks. */
  readonly healMs?: number;
  /**
   * Whether another cluster sharing the etcd compacts it now and then (default true). Off, a
   * failing seed can be replayed without it, to tell whether that fault is the one that matters.
   */
  readonly foreignCompaction?: boolean;
  /**
   * Whether live nodes revoke the writer leases a new leader renewed once overdue (EtcdLog's
   * WriterLeaseJanitor; default true). Off, only seals stop an append held across a leader
   * change: the landings after an unsealed give-up show what the janitor removes.
   */
  readonly overdueRevokes?: boolean;
  /** Whether a read-only user keeps every lease alive (MemoryStore.readerKeepsLeasesAlive); default: the even seeds. */
  readonly readerKeepsLeasesAlive?: boolean;
}

export class SimulationFailure extends Error {
  override name = 'SimulationFailure';
}

interface SimNode {
  readonly name: string;
  readonly priority: number | undefined;
  time: NodeTime;
  log: MemoryLog;
  service: ClusterLockService;
  /** Its sequencer, used while it leads (issue 20). */
  sequencer: Sequencer;
  alive: boolean;
  incarnations: number;
}

/** A client waiting for a lock it requested: it polls until told it owns it, or gives up. */
interface Poll {
  readonly key: string;
  readonly index: string;
  readonly lock: string;
  readonly until: number;
}

interface SimClient {
  readonly name: string;
  node: number;
  busy: boolean;
  /** Commands issued so far; the number of the current one. */
  ops: number;
  /** Pollers request with a short TTW and a long TTL, then poll; holders wait in the request. */
  readonly poller: boolean;
  poll: Poll | undefined;
  /**
   * The lock it just released: a client that works in a loop asks for it again at once (or first
   * checks it is gone).
   */
  again: { readonly key: string; readonly index: string; readonly check: boolean } | undefined;
}

/** A command sent and not yet answered or closed. */
interface InFlight {
  readonly client: SimClient;
  /** The client's command number at the send: only its own end frees the client. */
  readonly op: number;
  readonly what: string;
  readonly node: SimNode;
  readonly incarnation: number;
  readonly sent: number;
  /** The node's paused time at the send: a pause delays the answer by as much. */
  readonly pausedAtSend: number;
  /** An acquire-and-wait's bound (0x0B): it may wait that much longer for its grant before it is answered. */
  readonly waitMs: number;
}

export interface SimulationReport {
  readonly seed: number;
  readonly lateCommitMs: number;
  readonly batches: number;
  readonly commands: number;
  readonly answered: number;
  readonly failed: number;
  readonly crashes: number;
  readonly pauses: number;
  readonly leaderChanges: number;
  readonly intervals: number;
  /** Ownership intervals whose grant's fencing token a reply told (0x0A, 0x09). */
  readonly fencedIntervals: number;
  /** Rounds given up once a seal was confirmed, and on their time fence without one. */
  readonly sealedGiveUps: number;
  readonly unsealedGiveUps: number;
  /** Batches that first landed after their round was given up unsealed. */
  readonly landedAfterUnsealedGiveUp: number;
  /**
   * Of those, the ones that landed after an append or read barrier issued after the give-up had
   * executed: what a client was told since could be contradicted (the README's limit). With the
   * overdue revokes on, the simulation fails on any; off, it counts them.
   */
  readonly landedAfterLaterAnswer: number;
  /** Forwards sent to the leader's sequencer (issue 20), those answered committed, and those answered with a lie. */
  readonly forwards: number;
  readonly forwardsCommitted: number;
  readonly forwardsLied: number;
  /** Crashed incarnations, and those whose waits a CancelWaitsOf ended. */
  readonly deadIncarnations: number;
  readonly deadIncarnationsEnded: number;
  /** Incarnations whose waits were ended while they lived (a node paused past its name lease, taken for gone). */
  readonly liveIncarnationsEnded: number;
  /** Waits tied to a dead incarnation seen on a replica, and those of them granted (each before its cancel could be proposed). */
  readonly phantomWaitsSeen: number;
  readonly phantomGrants: number;
}

/**
 * A crashed node incarnation, whose waits (0x0B entries tied to it) must end: `cancellableAt` is
 * when their cancel could first be proposed (its node's next incarnation ready, or its name gone
 * while a node leads and that leader's next look), `cancelledAt` the log version its CancelWaitsOf
 * first landed at. `cancellableBy`: which way made it possible; while neither way is open (the next
 * incarnation crashed or paused, the name held again), it is not possible, and counts again from when one is.
 */
interface DeadIncarnation {
  readonly name: string;
  readonly incarnation: number;
  cancellableAt: number | undefined;
  cancellableBy?: 'restart' | 'leader';
  cancelledAt: number | undefined;
}

/** A wait tied to a dead incarnation, as last seen on a replica. */
interface Phantom {
  readonly dead: DeadIncarnation;
  readonly key: string;
  readonly index: string;
  readonly owner: string;
  readonly ticket: number;
}

export async function runSimulation(options: SimulationOptions): Promise<SimulationReport> {
  return new Simulation(options).run();
}

const COMMIT_TIMEOUT_MS = 1_500;
/** ClusterLockService's TICK_MS: a round past its deadline is closed at the next tick. */
const TICK_MS = 50;

class Simulation {
  private readonly vt = new VirtualTimers(0, 200_000);
  private readonly rng: Random;
  private readonly store: MemoryStore;
  private readonly nodes: SimNode[] = [];
  private readonly clients: SimClient[] = [];
  private readonly ownership: Ownership;
  /** Never-expiring entries acknowledged: lock id → owners in acknowledged queue order. */
  private readonly durable = new Map<string, string[]>();
  private readonly digests = new Map<number, { digest: string; node: string }>();
  private readonly inFlight = new Set<InFlight>();
  /** Commands being sent together (see send). */
  private burst: Array<() => void> | undefined;
  /** When each log version committed (true time), by version. */
  private readonly committedAt: number[] = [];
  /** Rounds given up (commit-timeout events), by proposer, incarnation and seq: whether a seal was confirmed, and when (true time). */
  private readonly givenUp = new Map<string, { readonly sealed: boolean; readonly at: number }>();
  /** Batches that landed, by the same key: a later copy is a duplicate, applied as a no-op. */
  private readonly landed = new Set<string>();
  private landedAfterUnsealedGiveUp = 0;
  private landedAfterLaterAnswer = 0;
  /** Crashed incarnations by `name/incarnation`. */
  private readonly dead = new Map<string, DeadIncarnation>();
  /** Waits tied to a dead incarnation seen on a replica and not yet seen gone, by `key/index/owner#ticket`. */
  private readonly phantoms = new Map<string, Phantom>();
  private phantomWaitsSeen = 0;
  private phantomGrants = 0;
  private liveIncarnationsEnded = 0;
  private replicaChecks = 0;
  private readonly trace: string[] = [];
  private readonly lateCommitMs: number;
  private commands = 0;
  private answered = 0;
  private failed = 0;
  private crashes = 0;
  private pauses = 0;
  /** Longest a command may stay unanswered and open, beyond its node's pauses. */
  private readonly hangUpBoundMs: number;

  private readonly peerRng: () => number;
  /**
   * The links' faults: hop delays, losses, slow hops, and lies: a sequencer that answers a forward
   * "committed" at a version far ahead without appending it (issue 36: a broken sequencer must
   * cost time, never a retry skipped, never a head a node believes etcd has).
   */
  private readonly peerFaults: { readonly hopMs: readonly [number, number]; readonly loss: number; readonly slow: number; readonly lie: number };
  /** Every peer link is cut (a fault of its own, beside the etcd ones). */
  private peerCut = false;
  /** Forwards sent to a sequencer, and those answered committed (the report). */
  private forwards = 0;
  private forwardsCommitted = 0;
  private forwardsLied = 0;

  constructor(private readonly options: SimulationOptions) {
    this.peerRng = mulberry32(options.seed ^ 0x5e9e);
    this.peerFaults = {
      hopMs: [0.05, 0.3 + 2 * this.peerRng()],
      loss: 0.05 * this.peerRng(),
      slow: 0.02 * this.peerRng(),
      lie: this.peerRng() < 0.25 ? 0.05 * this.peerRng() : 0,
    };
    this.rng = mulberry32(options.seed);
    this.lateCommitMs = this.rng() < 0.2 ? 0 : Math.round(this.rng() * 3_000);
    this.store = new MemoryStore({
      timers: this.vt,
      clock: this.vt,
      random: mulberry32(options.seed ^ 0x5eed),
      latencyMs: [0.3, 4],
      lateCommitMs: this.lateCommitMs,
      members: 3,
    });
    this.store.overdueRevokes = options.overdueRevokes !== false;
    this.store.readerKeepsLeasesAlive = options.readerKeepsLeasesAlive ?? options.seed % 2 === 0;
    this.store.onAppend = (record) => {
      this.committedAt[record.version] = this.vt.now();
      const parts = decodeValue(record.value);
      for (const batch of parts) if (!isRefused(batch)) this.checkLanding(batch, record.version);
      for (const batch of parts) {
        if (isRefused(batch)) continue;
        for (const c of batch.commands) if (c.op === LogOp.CancelWaitsOf) this.waitsEnded(c.node, c.incarnation, record.version);
      }
      if (process.env.SIM_TRACE_FILE !== undefined) {
        for (const batch of parts) {
          if (isRefused(batch)) {
            this.note(`log v${record.version}: refused (${batch.refused})`);
            continue;
          }
          const commands = batch.commands.map((c) =>
            Object.entries(c)
              .filter(([k]) => k !== 'maxEntries' && k !== 'allowCreate')
              .map(([k, v]) => `${k}=${String(v)}`)
              .join(' '),
          );
          this.note(`log v${record.version}: ${batch.proposer}.${batch.incarnation % 1000}#${batch.seq} ${commands.join('; ')}`);
        }
      }
    };
    // Drawn now (the seed fixes them), switched on once the never-expiring entries are taken.
    this.faults = {
      appendUnknownOutcome: 0.03 * this.rng(),
      appendRejected: 0.03 * this.rng(),
      watchBreak: 0.02 * this.rng(),
      watchSilentGap: 0.02 * this.rng(),
      watchRepeat: 0.02 * this.rng(),
      watchStall: 0.005 * this.rng(),
      appendLate: 0.5 * this.rng(),
      // etcd's require-leader refusal during elections: its behaviour, not a fault (kept after the
      // heal). Drawn from a stream of its own so that every other draw of a seed stays as it was.
      refuseWithoutLeader: refusalOdds(options.seed),
      // etcd's too: every new leader renews every lease, the writer leases that fence appends
      // included, so only a seal stops an append held on the way across a leader change.
      newLeaderRenewsFences: 1,
    };
    this.fsync = { min: 0.1, max: 0.5 + 4 * this.rng(), slowChance: 0.02 * this.rng(), slowMs: 500 + 2_500 * this.rng() };
    // Round deadline after the command joined it, the tick that notices, the fence once honoured,
    // a slow clock's stretch, the hops there and back.
    this.hangUpBoundMs = (COMMIT_TIMEOUT_MS + this.lateCommitMs + 2 * TICK_MS) / MIN_RATE + 50;
    this.ownership = new Ownership(
      (message) => this.fail(message),
      () => this.store.logHead.version,
      () => this.vt.now(),
    );
  }

  private readonly faults: MemoryFaults;
  private readonly fsync: FsyncProfile;

  private note(line: string): void {
    this.trace.push(`t=${this.vt.now().toFixed(1)} ${line}`);
    if (this.trace.length > TRACE_LIMIT) this.trace.splice(0, this.trace.length - TRACE_LIMIT);
  }

  /** The first failure: thrown where it is found, and again by the run loop (a callback's throw is only a rejection). */
  private failure: SimulationFailure | undefined;

  /** With SIM_TRACE_FILE set, writes the run's trace there and the store's beside it. */
  private writeTrace(): void {
    if (process.env.SIM_TRACE_FILE === undefined) return;
    writeFileSync(process.env.SIM_TRACE_FILE, this.trace.join('\n') + '\n');
    writeFileSync(`${process.env.SIM_TRACE_FILE}.store`, this.store.trace.join('\n') + '\n');
  }

  private fail(message: string): never {
    if (this.failure !== undefined) throw this.failure;
    this.writeTrace();
    this.failure = new SimulationFailure(`${message}\n--- last events ---\n${this.trace.slice(-60).join('\n')}`);
    throw this.failure;
  }

  private pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.rng() * items.length)]!;
  }

  private between(min: number, max: number): number {
    return min + (max - min) * this.rng();
  }

  private logger(node: string, incarnation: () => number): Logger {
    const debug = process.env.SIM_TRACE_FILE === undefined ? undefined : (message: string): void => this.note(`${node} ${message}`);
    const event: Logger['event'] = (name, fields) => {
      this.note(`${node} ${name} ${JSON.stringify(fields ?? {})}`);
      if (name === 'commit-timeout')
        this.givenUp.set(`${node}.${incarnation()}#${String(fields?.seq)}`, { sealed: fields?.sealed === true, at: this.vt.now() });
    };
    return { event, debug };
  }

  /**
   * The README's promise to a client whose command got no reply: it never takes effect after its
   * connection closed, i.e. after anything a node told since. A batch whose round was given up
   * (its connections closed) must not first land after that once a seal was confirmed. After a
   * give-up on the time fence alone it may land while no node answered anything since (a new
   * leader renewed its fence; counted), but not after an append or read barrier issued after the
   * give-up: nodes revoke overdue fences before either (off, `--no-overdue-revokes`, counted).
   */
  private checkLanding(header: BatchHeader, version: number): void {
    const key = `${header.proposer}.${header.incarnation}#${header.seq}`;
    if (this.landed.has(key)) return;
    this.landed.add(key);
    const givenUp = this.givenUp.get(key);
    if (givenUp === undefined) return;
    if (givenUp.sealed) this.fail(`batch ${key} landed as v${version} after its round was given up on a confirmed seal`);
    this.landedAfterUnsealedGiveUp++;
    const answeredAt = this.store.answersIssuedUpTo;
    if (answeredAt <= givenUp.at) return;
    this.landedAfterLaterAnswer++;
    if (this.store.overdueRevokes) {
      this.fail(
        `batch ${key} landed as v${version} after its round was given up unsealed (t=${givenUp.at.toFixed(1)}) and after a call issued at t=${answeredAt.toFixed(1)} was answered`,
      );
    }
  }

  private startNode(index: number): void {
    const existing = this.nodes[index];
    const name = existing?.name ?? `n${index}`;
    const priority = existing?.priority ?? (index === NODE_COUNT - 1 ? undefined : 1 + Math.floor(this.rng() * 3));
    const time = new NodeTime(this.vt, this.between(-1e6, 1e6), this.between(MIN_RATE, MAX_RATE));
    const log = this.store.client(name, time);
    let incarnation = 0;
    const sequencer = new Sequencer(log, time, time, { gatherMs: 5, appendTimeoutMs: 2_000 });
    // Each append attempt goes where this node takes the sequencer to be, as in production.
    const router = this.routerFor(name, log, sequencer, time, () => incarnation);
    const service = new ClusterLockService(
      {
        nodeName: name,
        candidatePriority: priority,
        commitTimeoutMs: COMMIT_TIMEOUT_MS,
        maxEntries: 10_000,
        leaseSeconds: 2,
        snapshotEveryBatches: 40,
        // A third of the seeds hold an expired owner's lock back (a lock-delay), on every node alike.
        lockDelayMs: this.options.seed % 3 === 0 ? 1_500 : 0,
      },
      {
        log,
        router,
        clock: time,
        timers: time,
        random: mulberry32(Math.floor(this.rng() * 2 ** 32)),
        logger: this.logger(name, () => incarnation),
        onClose: () => router.close(),
      },
    );
    router.follow(service);
    incarnation = service.incarnation;
    const node: SimNode = { name, priority, time, log, service, sequencer, alive: true, incarnations: (existing?.incarnations ?? 0) + 1 };
    this.nodes[index] = node;
    this.note(`${name} starts (incarnation ${node.incarnations}, member m${log.member})`);
    time.after(0, () => void service.start().catch((error: unknown) => this.note(`${name} start failed: ${messageOf(error)}`)));
  }

  private crashNode(index: number): void {
    const node = this.nodes[index]!;
    if (!node.alive) return;
    node.alive = false;
    node.time.dead = true;
    node.sequencer.close();
    node.log.crash();
    this.crashes++;
    const incarnation = node.service.incarnation;
    this.dead.set(`${node.name}/${incarnation}`, { name: node.name, incarnation, cancellableAt: undefined, cancelledAt: undefined });
    this.note(`${node.name} crashes (kill -9)`);
    // Its connections close: every command in flight there ends unanswered. A crash cannot wait
    // for the fence (ReplicatedLog.lateCommitMs): its last batch may still commit that long after,
    // so its clients wait as long before their next command (a deliberate close needs no wait).
    for (const c of [...this.inFlight]) {
      if (c.node !== node) continue;
      this.hungUp(c);
      c.client.busy = true;
      const op = c.client.ops;
      this.vt.after(this.lateCommitMs, () => {
        if (c.client.ops === op) c.client.busy = false;
      });
    }
  }

  /**
   * Where node `name` sends an append attempt: an AppendRouter, as in production, to which every
   * live node declares its name as its address (read through no etcd: the declarations' lease is
   * the name lease, which the simulation does not model apart).
   */
  private routerFor(name: string, log: MemoryLog, sequencer: Sequencer, time: NodeTime, incarnation: () => number): AppendRouter {
    return new AppendRouter({
      name,
      log,
      addresses: { known: true, addressOf: (node) => (this.nodes.some((n) => n.name === node && n.alive) ? node : undefined) },
      dial: (_leader, address) => this.peerChannel(name, address),
      local: sequencer,
      clock: time,
      timers: time,
      logger: this.logger(name, incarnation),
    });
  }

  /**
   * The link from node `fromName` to the sequencer on node `toName`, in memory: down once closed,
   * while either is crashed or the links are cut (a forward out when it closes still settles); a forward takes a peer hop each way (longer now and then), is lost with
   * `peerFaults.loss`, and lands in whatever sequencer `to` runs when it arrives (a restarted node's
   * new one), read only while that node runs (a paused one reads it once resumed); its outcome is
   * lost if `from` restarted meanwhile. The lease a batch carries has no
   * end the sequencer could read in the in-memory etcd (see MemoryLog.lendLease).
   */
  private peerChannel(fromName: string, toName: string): SequencerChannel {
    const node = (name: string): SimNode | undefined => this.nodes.find((n) => n.name === name);
    const from = node(fromName)!;
    const fromIncarnation = from.incarnations;
    let closed = false;
    // The node of that name now: a restarted node's new self.
    const up = (): boolean => !closed && from.alive && from.incarnations === fromIncarnation && node(toName)?.alive === true && !this.peerCut;
    const hop = (): number => this.peerFaults.hopMs[0] + this.peerRng() * (this.peerRng() < this.peerFaults.slow ? 500 : this.peerFaults.hopMs[1]);
    const forward = (value: Uint8Array, fence: LentLease, timeoutMs: number): Promise<LogPosition> =>
      new Promise<LogPosition>((resolve, reject) => {
        let done = false;
        const finish = (settle: () => void): void => {
          if (done || from.incarnations !== fromIncarnation) return;
          done = true;
          settle();
        };
        from.time.after(timeoutMs, () => finish(() => reject(new Error(`no outcome from the sequencer within ${timeoutMs} ms`))));
        this.forwards++;
        if (this.peerRng() < this.peerFaults.loss) return; // lost on the way: the forwarder times out
        this.vt.after(hop(), () => {
          const to = node(toName);
          if (to === undefined || !to.alive || this.peerCut) return;
          // Read when the sequencer's node runs (a paused one reads it once resumed, as from a socket);
          // its outcome reaches the forwarder when that one runs.
          to.time.after(0, () => {
            if (this.peerRng() < this.peerFaults.lie) {
              // A broken sequencer: "committed", far ahead of the log, and nothing appended.
              this.forwardsLied++;
              const lie = { version: this.store.logHead.version + 1_000, revision: this.store.logHead.revision + 1_000 };
              this.vt.after(hop(), () => from.time.after(0, () => finish(() => resolve(lie))));
              return;
            }
            void to.sequencer.submit(value, fence, fromName).then(
              (position) => {
                this.forwardsCommitted++;
                this.vt.after(hop(), () => from.time.after(0, () => finish(() => resolve(position))));
              },
              (error: unknown) => this.vt.after(hop(), () => from.time.after(0, () => finish(() => reject(error)))),
            );
          });
        });
      });
    return {
      get up() {
        return up();
      },
      forward,
      close: () => (closed = true),
    };
  }

  private readyNodes(): number[] {
    return this.nodes.flatMap((n, i) => (n.alive && n.service.isReady ? [i] : []));
  }

  async run(): Promise<SimulationReport> {
    for (let i = 0; i < NODE_COUNT; i++) this.startNode(i);
    for (let i = 0; i < NODE_COUNT * CLIENTS_PER_NODE; i++) {
      this.clients.push({ name: `c${i}`, node: i % NODE_COUNT, busy: false, ops: 0, poller: i % 2 === 1, poll: undefined, again: undefined });
    }
    await this.advance(3_000, false);
    if (this.readyNodes().length !== NODE_COUNT) this.fail('not every node became ready on a healthy store');
    await this.takeDurableLocks();
    Object.assign(this.store.faults, this.faults);
    Object.assign(this.store.fsync, this.fsync);
    const faultyUntil = this.vt.now() + (this.options.faultyMs ?? 20_000);
    let nextFault = this.vt.now() + this.between(300, 1_500);
    while (this.vt.now() < faultyUntil) {
      if (this.vt.now() >= nextFault) {
        this.injectFault();
        nextFault = this.vt.now() + this.between(300, 2_000);
      }
      await this.advance(25, true);
    }
    this.heal();
    await this.advance(this.options.healMs ?? 8_000, true);
    // Quiet: no new commands, let every node catch up.
    await this.advance(4_000 + this.lateCommitMs, false);
    await this.settleReplicas();
    this.finalChecks();
    this.writeTrace();
    const leaderChanges = this.nodes.reduce((sum, n) => sum + n.service.leaderChanges, 0);
    return {
      seed: this.options.seed,
      lateCommitMs: this.lateCommitMs,
      batches: this.store.logHead.version,
      commands: this.commands,
      answered: this.answered,
      failed: this.failed,
      crashes: this.crashes,
      pauses: this.pauses,
      leaderChanges,
      intervals: this.ownership.count,
      fencedIntervals: this.ownership.fenced,
      sealedGiveUps: [...this.givenUp.values()].filter((g) => g.sealed).length,
      unsealedGiveUps: [...this.givenUp.values()].filter((g) => !g.sealed).length,
      landedAfterUnsealedGiveUp: this.landedAfterUnsealedGiveUp,
      landedAfterLaterAnswer: this.landedAfterLaterAnswer,

      forwards: this.forwards,
      forwardsCommitted: this.forwardsCommitted,
      forwardsLied: this.forwardsLied,
      deadIncarnations: this.dead.size,
      deadIncarnationsEnded: [...this.dead.values()].filter((d) => d.cancelledAt !== undefined).length,
      liveIncarnationsEnded: this.liveIncarnationsEnded,
      phantomWaitsSeen: this.phantomWaitsSeen,
      phantomGrants: this.phantomGrants,
    };
  }

  /** Moves virtual time on in small steps, checking replicas after each; clients act if `load`. */
  private async advance(ms: number, load: boolean): Promise<void> {
    const until = this.vt.now() + ms;
    while (this.vt.now() < until) {
      if (load) this.clientsAct();
      try {
        await this.vt.advance(Math.min(10, until - this.vt.now()), 50_000);
      } catch (error) {
        if (error instanceof SimulationFailure) throw error;
        // A task that reschedules itself at once, or code that throws: a failure of this seed.
        this.fail(`${(error as Error).name}: ${(error as Error).message}`);
      }
      if (this.failure !== undefined) throw this.failure;
      this.checkReplicas();
      this.checkHangUps();
      this.noteCancellable();
      if (++this.replicaChecks % 5 === 0) {
        this.checkOwnershipOnReplicas();
        this.checkPhantoms();
      }
    }
  }

  private heal(): void {
    this.peerCut = false;
    this.store.setQuorum(true);
    for (let m = 0; m < this.store.memberCount; m++) this.store.isolateMember(m, false);
    for (const [i, node] of this.nodes.entries()) {
      if (!node.alive) this.startNode(i);
      else node.log.setPartitioned(false);
    }
    const f = this.store.faults;
    f.appendUnknownOutcome = f.appendRejected = f.watchBreak = f.watchSilentGap = f.watchRepeat = f.watchStall = f.appendLate = 0;
    Object.assign(this.store.fsync, { min: 0.1, max: 0.5, slowChance: 0, slowMs: 0 });
    this.note('healed');
  }

  private injectFault(): void {
    // Peer links fail on their own too (a stream of its own: every other draw of a seed stays).
    if (!this.peerCut && this.peerRng() < 0.15) {
      this.peerCut = true;
      this.note('peer links cut');
      this.vt.after(200 + this.peerRng() * 2_800, () => {
        this.peerCut = false;
        this.note('peer links back');
      });
    }
    const roll = this.rng();
    const alive = this.nodes.flatMap((n, i) => (n.alive ? [i] : []));
    if (roll < 0.16 && alive.length > 1) {
      const victim = this.pick(alive);
      this.crashNode(victim);
      this.vt.after(this.between(500, 3_000), () => {
        if (!this.nodes[victim]!.alive) this.startNode(victim);
      });
    } else if (roll < 0.24) {
      this.store.setQuorum(false);
      this.note('quorum lost');
      this.vt.after(this.between(200, 2_500), () => {
        this.store.setQuorum(true);
        this.note('quorum back');
      });
    } else if (roll < 0.33 && alive.length > 0) {
      const node = this.nodes[this.pick(alive)]!;
      node.log.setPartitioned(true);
      this.vt.after(this.between(200, 3_000), () => node.log.setPartitioned(false));
    } else if (roll < 0.38 && alive.length > 0) {
      this.nodes[this.pick(alive)]!.log.breakWatches();
    } else if (roll < 0.46) {
      const m = Math.floor(this.rng() * this.store.memberCount);
      this.store.isolateMember(m, true);
      this.vt.after(this.between(300, 3_000), () => this.store.isolateMember(m, false));
    } else if (roll < 0.54) {
      this.store.changeLeader(this.between(150, 1_000));
    } else if (roll < 0.61 && alive.length > 0) {
      this.nodes[this.pick(alive)]!.log.stallStream(this.between(500, 5_000));
    } else if (roll < 0.73 && alive.length > 0) {
      // A stalled event loop, sometimes longer than the node's lease (2 s).
      const node = this.nodes[this.pick(alive)]!;
      const ms = this.between(500, 8_000);
      this.pauses++;
      this.note(`${node.name} pauses for ${ms.toFixed(0)} ms`);
      node.time.pause(ms);
    } else if (roll < 0.8) {
      if (this.options.foreignCompaction !== false) this.store.compactByOthers();
      this.note('another cluster compacts the store');
    } else if (roll < 0.83) {
      this.note('full restart: every node down, the store keeps its data');
      for (const i of alive) this.crashNode(i);
      this.vt.after(this.between(1_000, 4_000), () => {
        for (let i = 0; i < NODE_COUNT; i++) if (!this.nodes[i]!.alive) this.startNode(i);
      });
    }
  }

  /** Ownership as clients were told it, on every live replica's table (see Ownership.checkReplica). */
  private checkOwnershipOnReplicas(): void {
    for (const node of this.nodes) {
      if (!node.alive) continue;
      const replica = node.service.replica;
      const version = replica.position.version;
      const committedAt = this.committedAt[version];
      if (version === 0 || committedAt === undefined) continue;
      const lists = new Map<string, Contender[]>();
      this.ownership.checkReplica(
        node.name,
        version,
        committedAt,
        (lock, client) => {
          const [key, index] = lock.split('/') as [string, string];
          let list = lists.get(key);
          if (list === undefined) lists.set(key, (list = replica.table.list(key)));
          const entry = list.find((c) => c.index === index && c.owner === client);
          return entry === undefined ? undefined : entry.isOwner ? 'owner' : 'waiter';
        },
        (lock, client) => {
          const [key, index] = lock.split('/') as [string, string];
          return replica.table.fence(key, index, client);
        },
      );
    }
  }

  /** A CancelWaitsOf landed at `version`: the first for a dead incarnation is when its waits ended. */
  private waitsEnded(node: string, incarnation: number, version: number): void {
    const dead = this.dead.get(`${node}/${incarnation}`);
    if (dead === undefined) {
      if (this.nodes.some((n) => n.alive && n.name === node && n.service.incarnation === incarnation)) this.liveIncarnationsEnded++;
      return;
    }
    if (dead.cancelledAt !== undefined) return;
    dead.cancelledAt = version;
    this.note(`the waits of ${node}.${incarnation % 1000} end at v${version}`);
  }

  /**
   * Since when the cancel of each dead incarnation's waits could be proposed (OrphanedWaits), as
   * long as a way stays open: its node's next incarnation is ready and running (not paused), or its
   * name is gone while some ready node leads (then from that leader's next look), and the store can
   * commit. A way that closes before the cancel landed (that incarnation crashed or paused, the name
   * held again, no store leader) takes the time back until one opens again.
   */
  private noteCancellable(): void {
    let live: ReadonlySet<string> | undefined;
    const now = this.vt.now();
    for (const dead of this.dead.values()) {
      if (dead.cancelledAt !== undefined) continue;
      // Without a store leader (quorum lost, an election) no proposal can land, nor a grant.
      if (!this.store.hasLeader) {
        dead.cancellableAt = undefined;
        dead.cancellableBy = undefined;
        continue;
      }
      const next = this.nodes.find((n) => n.name === dead.name)!;
      if (next.alive && next.service.isReady && !next.time.isPaused && next.service.incarnation !== dead.incarnation) {
        if (dead.cancellableBy !== 'restart') {
          dead.cancellableAt = now;
          dead.cancellableBy = 'restart';
        }
        continue;
      }
      live ??= this.store.liveNodes();
      if (!live.has(dead.name) && this.nodes.some((n) => n.alive && n.service.isReady && n.service.isLeader)) {
        if (dead.cancellableBy !== 'leader') {
          dead.cancellableAt = now + LIVE_NODES_EVERY_MS;
          dead.cancellableBy = 'leader';
        }
        continue;
      }
      dead.cancellableAt = undefined;
      dead.cancellableBy = undefined;
    }
  }

  /**
   * No entry of a dead incarnation is granted after its cancel could have been proposed: every
   * wait tied to a dead incarnation that a replica shows is watched; one seen granted is a
   * failure if its grant (its token's log version) came after the cancel landed, or was committed
   * later than a commit's bound after the cancel could have been proposed. And none is still tied
   * on a replica that applied the cancel.
   */
  private checkPhantoms(): void {
    if (this.dead.size === 0) return;
    let replica: ClusterLockService['replica'] | undefined;
    for (const n of this.nodes) {
      if (n.alive && n.service.isReady && (replica === undefined || n.service.replica.position.version > replica.position.version)) replica = n.service.replica;
    }
    if (replica === undefined) return;
    const version = replica.position.version;
    const tied = new Set<string>();
    for (const w of replica.tiedWaitsHeld()) {
      const dead = this.dead.get(`${w.node}/${w.incarnation}`);
      if (dead === undefined) continue;
      const id = `${w.key}/${w.index}/${w.owner}#${w.ticket}`;
      tied.add(id);
      if (dead.cancelledAt !== undefined && version >= dead.cancelledAt) {
        this.fail(`${id} still waits tied to ${dead.name}.${dead.incarnation % 1000} at v${version}, after its cancel landed at v${dead.cancelledAt}`);
      }
      if (!this.phantoms.has(id)) {
        this.phantoms.set(id, { dead, key: w.key, index: w.index, owner: w.owner, ticket: w.ticket });
        this.phantomWaitsSeen++;
      }
    }
    const table = replica.table;
    for (const [id, phantom] of this.phantoms) {
      if (tied.has(id)) continue;
      this.phantoms.delete(id);
      const entry = table.entryOf(phantom.key, phantom.index, phantom.owner);
      if (entry === NO_ID || !table.owns(entry) || table.ticketOf(entry) !== phantom.ticket) continue;
      // Granted: the token is the granting command's log position (no import in the simulation, so no base).
      this.phantomGrants++;
      const grantedAt = Math.floor(table.tokenOf(entry) / COMMANDS_PER_VERSION);
      const { dead } = phantom;
      if (dead.cancelledAt !== undefined && grantedAt > dead.cancelledAt) {
        this.fail(`${id}, tied to ${dead.name}.${dead.incarnation % 1000}, granted at v${grantedAt} after its cancel landed at v${dead.cancelledAt}`);
      }
      const committed = this.committedAt[grantedAt];
      if (dead.cancellableAt !== undefined && committed !== undefined && committed > dead.cancellableAt + this.hangUpBoundMs) {
        this.fail(
          `${id}, tied to ${dead.name}.${dead.incarnation % 1000}, granted at v${grantedAt} (t=${committed.toFixed(1)}), ` +
            `though its cancel could be proposed from t=${dead.cancellableAt.toFixed(1)}`,
        );
      }
    }
  }

  /** Replicas at the same log version must hold the same state. */
  private checkReplicas(): void {
    for (const node of this.nodes) {
      if (!node.alive) continue;
      const replica = node.service.replica;
      const version = replica.position.version;
      if (version === 0) continue;
      const digest = replica.digest();
      const seen = this.digests.get(version);
      if (seen === undefined) this.digests.set(version, { digest, node: node.name });
      else if (seen.digest !== digest) this.fail(`replicas differ at version ${version}: ${seen.node} ${seen.digest}, ${node.name} ${digest}`);
    }
  }

  /**
   * Every command ends, answered or hung up, within the commit timeout plus lateCommitMs of its
   * send (plus the time its node spent paused, plus its wait's bound): during a quorum outage too.
   * Each is counted on the node's clock, which may run slow: a 4 s bound there is 4.12 s here.
   */
  private checkHangUps(): void {
    const now = this.vt.now();
    for (const c of this.inFlight) {
      const limit = c.sent + this.hangUpBoundMs + c.waitMs / MIN_RATE + (c.node.time.pausedMs() - c.pausedAtSend);
      if (now > limit && !c.node.time.isPaused) {
        this.fail(`${c.client.name}@${c.node.name} ${c.what} sent at ${c.sent.toFixed(1)} neither answered nor closed after ${(now - c.sent).toFixed(0)} ms`);
      }
    }
  }

  private async takeDurableLocks(): Promise<void> {
    // Entries that never expire: each must survive every crash, restart and compaction.
    const waits: Array<Promise<void>> = [];
    for (const [i, client] of this.clients.entries()) {
      if (i % 3 !== 0) continue;
      const node = this.nodes[client.node]!;
      const lock = 'durable/d0';
      const owner = `keep-${client.name}`;
      waits.push(
        node.service.request({ key: 'durable', index: 'd0', owner, ttl: 0, ttw: 0, priority: 0 }, true).then(
          (position) => {
            if (position < 1) this.fail(`durable request by ${owner} got ${position}`);
            const owners = this.durable.get(lock) ?? [];
            owners.push(owner);
            this.durable.set(lock, owners);
          },
          (error: unknown) => this.fail(`durable request by ${owner} failed on a healthy store: ${messageOf(error)}`),
        ),
      );
      await this.vt.advance(5);
    }
    await this.vt.advance(500);
    let acknowledged = false;
    await Promise.race([
      Promise.all(waits).then(() => {
        acknowledged = true;
      }),
      this.vt.advance(2_000).then(() => {
        if (!acknowledged) this.fail('durable locks not acknowledged on a healthy store');
      }),
    ]);
  }

  private clientsAct(): void {
    for (const client of this.clients) {
      if (client.busy || this.rng() < 0.5) continue;
      const ready = this.readyNodes();
      if (ready.length === 0) return;
      if (!ready.includes(client.node)) client.node = this.pick(ready);
      this.act(client, this.nodes[client.node]!);
    }
  }

  /** The connection to `node` closed unanswered: the client moves to another node at once. */
  private hungUp(c: InFlight): void {
    if (!this.inFlight.delete(c)) return;
    this.failed++;
    const client = c.client;
    if (client.ops === c.op) client.busy = false;
    const others = this.readyNodes().filter((i) => this.nodes[i] !== c.node);
    if (others.length > 0) client.node = this.pick(others);
  }

  /**
   * Sends one command through the node's event loop (a paused node reads it when it resumes) and
   * tracks it: an answer from a node that reached no leader since before the send is a failure
   * (nothing can commit or pass a read barrier then). A node whose own calls reach no leader may
   * still reach one through the leader's sequencer: an append attempt it started after the send
   * that committed that way counts as reaching it (read barriers go to its own member only). A
   * node that closes the connection sends the client elsewhere.
   */
  private send<T>(
    client: SimClient,
    node: SimNode,
    what: string,
    issue: () => PromiseLike<T>,
    onAnswer: (value: T, sent: number) => void,
    onLost?: () => void,
    waitMs = 0,
  ): void {
    const sent = this.vt.now();
    const op = client.ops;
    const c: InFlight = { client, op, what, node, incarnation: node.incarnations, sent, pausedAtSend: node.time.pausedMs(), waitMs };
    this.commands++;
    this.inFlight.add(c);
    const task = (): void => {
      issue()
        .then(
          (value) => {
            if (!this.inFlight.delete(c)) return; // the node crashed: the answer is lost with its connection
            if (client.ops === op) client.busy = false;
            this.answered++;
            // Cut off from every leader since before the send, unless an append attempt of its
            // that started after the send reached one through a sequencer (its batch, and the
            // commands and reads of that round, committed then). At the same virtual instant
            // counts: a command joins its round before that round's attempt starts.
            const cut = node.log.cutSince;
            if (cut !== undefined && sent > cut && !(node.log.sequencedAttemptStartedAt >= sent)) {
              this.fail(
                `${client.name}@${node.name} ${what} sent at ${sent.toFixed(1)} answered ${JSON.stringify(value)} while its node reached no leader (since ${cut.toFixed(1)})`,
              );
            }
            this.note(`${client.name}@${node.name} ${what} → ${JSON.stringify(value)}`);
            onAnswer(value, sent);
          },
          (error: unknown) => {
            this.note(`${client.name}@${node.name} ${what} closed: ${messageOf(error)}`);
            onLost?.();
            this.hungUp(c);
          },
        )
        .then(undefined, () => {}); // a failure found in a callback is kept in this.failure; advance() throws it
    };
    // Commands sent together reach the node in one read, as a pipelined burst does over TCP.
    if (this.burst !== undefined) this.burst.push(task);
    else node.time.after(0, task);
  }

  private act(client: SimClient, node: SimNode): void {
    client.busy = true;
    client.ops++;
    const poll = client.poll;
    if (poll !== undefined && this.vt.now() >= poll.until) {
      client.poll = undefined;
      this.release(client, node, poll.key, poll.index);
      return;
    }
    if (poll !== undefined && this.rng() < 0.8) {
      this.read(client, node, poll.key, poll.index, this.rng());
      return;
    }
    const again = client.again;
    client.again = undefined;
    if (again?.check === true) {
      this.read(client, node, again.key, again.index, 0);
      if (this.rng() < 0.7) client.again = { ...again, check: false };
      return;
    }
    // A holder checks now and then that it still owns what it holds (0x03).
    const held = this.ownership.holding(client.name, this.vt.now());
    if (again === undefined && held.length > 0 && this.rng() < 0.3) {
      const [k, i] = this.pick(held).split('/') as [string, string];
      this.read(client, node, k, i, 0);
      return;
    }
    const key = again?.key ?? this.pick(KEYS);
    const index = again?.index ?? this.pick(INDEXES);
    const lock = `${key}/${index}`;
    const roll = again !== undefined ? 0 : this.rng();
    const service = node.service;
    if (roll < 0.4) {
      // Holders wait in the request; pollers ask for a short wait and a long hold, then poll.
      const ttl = client.poller ? this.pick([3, 5, 8]) : this.pick([1, 2, 3]);
      const ttw = client.poller ? this.pick([1, 2]) : this.pick([0, 1, 2]);
      const priority = this.pick([0, 1, 2]);
      // A third of the requests are with fence (0x0A), a third wait for their grant (0x0B, bounded).
      const kind = this.rng();
      const fenced = kind < 0.33;
      const waits = kind >= 0.67;
      const waitMs = waits ? this.pick([0, 300, 1_500, 4_000]) : 0;
      const sent = this.vt.now();
      this.burst = [];
      // Until answered its outcome is unknown: it may already have restarted the phase with its TTL.
      this.ownership.requestSent(client.name, lock, ttl * 1000);
      this.ownership.mayHaveShortened(client.name, lock, sent, ttl * 1000);
      let granted = false;
      const request = { key, index, owner: client.name, ttl, ttw, priority };
      const via = fenced ? '0x0A' : waits ? '0x0B' : '0x02';
      this.send(
        client,
        node,
        `${fenced ? 'request-fenced' : waits ? `acquire-wait ${waitMs}ms` : 'request'} ${lock} ttl=${ttl} ttw=${ttw}`,
        () =>
          fenced
            ? service.requestFenced(request, true)
            : waits
              ? service.acquire(request, true, waitMs)
              : service.request(request, true).then((position) => ({ position, token: 0 })),
        // A grant after a wait began its TTL at the grant, after the send: the client can count on
        // it from its send only (as the library does, renewing at once), which this records.
        ({ position, token }, sent) => {
          granted = position === 1;
          if ((fenced || waits) && granted !== token > 0) this.fail(`${client.name}'s ${via} on ${lock} answered position ${position} with token ${token}`);
          if (granted) this.ownership.renewed(client.name, lock, sent, this.vt.now(), ttl * 1000, via, token);
          else if (position > 1) {
            this.ownership.observed(client.name, lock, sent, this.vt.now(), false, true, via);
            if (client.poll === undefined) client.poll = { key, index, lock, until: this.vt.now() + 10_000 };
          }
        },
        undefined,
        waitMs,
      );
      // Not behind a wait (0x0B): on a connection, a command behind one runs only once it is answered.
      if (!waits && this.rng() < 0.3) {
        // Pipelined behind the request: answered in order, and it sees the client's own write
        // (unless it is answered after that ownership could have ended).
        this.send(
          client,
          node,
          `owner ${lock} (pipelined)`,
          () => service.findOwner(key, index),
          (owner) => {
            if (granted && owner !== client.name && this.vt.now() < sent + ttl * 1000 * (1 - RATE_MARGIN)) {
              this.fail(`${client.name} was granted ${lock} but the read behind it says ${owner}`);
            }
          },
        );
      }
      const burst = this.burst ?? [];
      this.burst = undefined;
      node.time.after(0, () => {
        for (const task of burst) task();
      });
    } else if (roll < 0.55) {
      this.send(
        client,
        node,
        `renew ${lock}`,
        () => service.renew(key, index, client.name),
        (ok, sent) => {
          if (ok) this.ownership.renewed(client.name, lock, sent, this.vt.now(), undefined, '0x04');
        },
      );
    } else if (roll < 0.72) {
      this.release(client, node, key, index);
    } else if (roll < 0.75) {
      const sent = this.vt.now();
      for (const held of this.ownership.holding(client.name, sent)) this.ownership.released(client.name, held, sent);
      if (client.poll !== undefined) this.ownership.released(client.name, client.poll.lock, sent);
      client.poll = undefined;
      this.send(
        client,
        node,
        `release-all`,
        () => service.releaseAll(client.name),
        () => {},
      );
    } else {
      this.read(client, node, key, index, this.rng());
    }
  }

  private release(client: SimClient, node: SimNode, key: string, index: string): void {
    const lock = `${key}/${index}`;
    this.ownership.released(client.name, lock, this.vt.now());
    if (client.poll?.lock === lock) client.poll = undefined;
    this.send(
      client,
      node,
      `release ${lock}`,
      () => node.service.release(key, index, client.name),
      () => {
        this.ownership.releaseAnswered(client.name, lock, this.vt.now());
        const roll = this.rng();
        if (roll < 0.6) client.again = { key, index, check: roll < 0.2 };
      },
    );
  }

  /** 0x01, 0x03, 0x07 or 0x09: each tells the client whether it owns the lock, and each counts. */
  private read(client: SimClient, node: SimNode, key: string, index: string, roll: number): void {
    const lock = `${key}/${index}`;
    const service = node.service;
    const seen = (sent: number, owns: boolean, present: boolean | undefined, via: string, token?: number): void => {
      this.ownership.observed(client.name, lock, sent, this.vt.now(), owns, present, via, token);
      if (client.poll?.lock === lock && (owns || present === false)) client.poll = undefined;
    };
    if (roll < 0.3) {
      this.send(
        client,
        node,
        `location ${lock}`,
        () => service.location(key, index, client.name),
        (where, sent) => seen(sent, where === 1, where > 0, '0x03'),
      );
    } else if (roll < 0.5) {
      // A waiter and an absent client both get 0: the token says nothing of presence.
      this.send(
        client,
        node,
        `fence ${lock}`,
        () => service.fence(key, index, client.name),
        (token, sent) => seen(sent, token > 0, token > 0 ? true : undefined, '0x09', token),
      );
    } else if (roll < 0.75) {
      this.send(
        client,
        node,
        `owner ${lock}`,
        () => service.findOwner(key, index),
        (owner, sent) => seen(sent, owner === client.name, owner === client.name ? true : undefined, '0x01'),
      );
    } else {
      this.send(
        client,
        node,
        `list ${key}`,
        () => service.list(key, 1000),
        (list: Contender[], sent) => {
          for (const i of INDEXES) {
            const mine = list.find((c) => c.index === i && c.owner === client.name);
            const l = `${key}/${i}`;
            this.ownership.observed(client.name, l, sent, this.vt.now(), mine?.isOwner === true, mine !== undefined, '0x07');
            if (client.poll?.lock === l && (mine === undefined || mine.isOwner)) client.poll = undefined;
          }
        },
      );
    }
  }

  /**
   * Waits (bounded) until every ready node has applied the store's last batch. Queues of waiters
   * promoted one after another keep the leader proposing expiries long after the clients stopped,
   * so the quiet phase can end with a batch on its way to some watches: comparing versions then
   * (rather than at one log position) reports a divergence that is only a delivery in flight.
   */
  private async settleReplicas(): Promise<void> {
    for (let waited = 0; waited < SETTLE_MS; waited += 10) {
      const head = this.store.logHead.version;
      if (this.nodes.every((n) => n.alive && n.service.isReady && n.service.replica.position.version === head)) return;
      await this.advance(10, false);
    }
  }

  private finalChecks(): void {
    this.ownership.check(this.vt.now());
    // Every node caught up to the same state, holding every durable entry in acknowledged order.
    const ready = this.nodes.filter((n) => n.alive && n.service.isReady);
    if (ready.length !== NODE_COUNT) this.fail(`only ${ready.length} of ${NODE_COUNT} nodes ready after healing`);
    const versions = new Set(ready.map((n) => n.service.replica.position.version));
    const digests = new Set(ready.map((n) => n.service.replica.digest()));
    if (versions.size !== 1 || digests.size !== 1) this.fail(`nodes did not converge: versions ${[...versions].join(',')} digests ${[...digests].join(',')}`);
    // No node believes the log holds more than etcd has (a sequencer's word is not etcd's).
    for (const node of ready) {
      const lag = node.service.figures().lagBatches;
      if (lag !== 0) this.fail(`${node.name} believes it lags ${lag} batches behind a log head etcd never had`);
    }
    // No wait of a dead incarnation is left: every node restarted, and each ended its earlier incarnations' waits.
    for (const node of ready) {
      const phantom = node.service.replica.tiedWaitsHeld().find((w) => this.dead.has(`${w.node}/${w.incarnation}`));
      if (phantom !== undefined)
        this.fail(
          `${node.name} still holds ${phantom.key}/${phantom.index} ${phantom.owner} waiting, tied to dead ${phantom.node}.${phantom.incarnation % 1000}`,
        );
    }
    for (const [lock, owners] of this.durable) {
      const [key, index] = lock.split('/') as [ByteString, ByteString];
      for (const node of ready) {
        const present = node.service.replica.table
          .list(key)
          .filter((c) => c.index === index)
          .map((c) => c.owner);
        if (present.join(',') !== owners.join(',')) this.fail(`${node.name} lost durable entries: has [${present.join(',')}] expected [${owners.join(',')}]`);
      }
    }
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** How often a member without a leader refuses a request at once rather than holding it, for `seed`: never in a quarter of the seeds. */
function refusalOdds(seed: number): number {
  const draw = mulberry32(seed ^ 0x1ead);
  return draw() < 0.25 ? 0 : draw();
}
