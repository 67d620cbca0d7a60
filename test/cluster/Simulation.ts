import { writeFileSync } from 'node:fs';
import type { ByteString } from '../../src/bytes.js';
import { ClusterLockService } from '../../src/cluster/ClusterLockService.js';
import { MemoryStore, type MemoryFaults, type MemoryLog } from '../../src/cluster/MemoryLog.js';
import { mulberry32, type Random } from '../../src/cluster/random.js';
import type { Timers } from '../../src/cluster/Timers.js';
import { VirtualTimers } from '../../src/cluster/VirtualTimers.js';
import type { Clock } from '../../src/locks/Clock.js';
import type { Logger } from '../../src/server/Logger.js';

/**
 * A seeded, deterministic simulation of a lock cluster in one process: several ClusterLockService
 * nodes over a MemoryStore with etcd's semantics and faults, clocks that differ in offset and
 * rate, crashes and restarts, quorum loss, partitions, and clients issuing random commands. One
 * seed replays the whole run. After every slice of virtual time it checks that replicas agree at
 * equal log positions; at the end, S1 (no overlapping ownership, from the clients' send times)
 * and that every acknowledged never-expiring entry is still there, in order, on every node.
 */

/** Nodes' clocks run at a rate in [MIN_RATE, MAX_RATE] of true time, offsets anywhere. */
const MIN_RATE = 0.97;
const MAX_RATE = 1.001;
/**
 * The clock-rate assumption clients rely on (README, S1): a node's clock may run fast by at most
 * this much, so a client counts its TTL as TTL × (1 − RATE_MARGIN) from its send time.
 */
const RATE_MARGIN = MAX_RATE - 1;
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
}

export class SimulationFailure extends Error {
  override name = 'SimulationFailure';
}

/** A clock and timers seen by one node: its own offset and rate; nothing runs once it has crashed. */
class NodeTime implements Clock, Timers {
  dead = false;

  constructor(
    private readonly vt: VirtualTimers,
    private readonly offset: number,
    private readonly rate: number,
  ) {}

  now(): number {
    return this.offset + this.vt.now() * this.rate;
  }

  after(ms: number, task: () => void): () => void {
    if (this.dead) return () => {};
    return this.vt.after(ms / this.rate, () => {
      if (!this.dead) task();
    });
  }
}

interface SimNode {
  readonly name: string;
  readonly priority: number | undefined;
  time: NodeTime;
  log: MemoryLog;
  service: ClusterLockService;
  alive: boolean;
  incarnations: number;
}

/** One ownership interval of one client on one lock, in true (virtual) time. */
interface Interval {
  readonly client: string;
  readonly start: number;
  end: number;
  /**
   * When the client must consider the lock gone: the send time of its last renewing request plus
   * that request's TTL (less the clock-rate margin); infinite for TTL 0. A renewing request whose
   * outcome is unknown may have shortened it (a re-request with a smaller TTL), never lengthened.
   */
  expires: number;
  /** The TTL (ms) the entry may have now: the smallest of those the client could have set. */
  ttlMs: number;
  open: boolean;
}

interface SimClient {
  readonly name: string;
  node: number;
  busy: boolean;
  /** Commands issued so far; the number of the current one. */
  ops: number;
  /** Open interval per lock id (`key/index`). */
  readonly holding: Map<string, Interval>;
}

export interface SimulationReport {
  readonly seed: number;
  readonly batches: number;
  readonly commands: number;
  readonly answered: number;
  readonly failed: number;
  readonly crashes: number;
  readonly leaderChanges: number;
  readonly intervals: number;
}

export async function runSimulation(options: SimulationOptions): Promise<SimulationReport> {
  return new Simulation(options).run();
}

class Simulation {
  private readonly vt = new VirtualTimers(0, 200_000);
  private readonly rng: Random;
  private readonly store: MemoryStore;
  private readonly nodes: SimNode[] = [];
  private readonly clients: SimClient[] = [];
  private readonly intervals = new Map<string, Interval[]>();
  /** Never-expiring entries acknowledged: lock id → owners in acknowledged queue order. */
  private readonly durable = new Map<string, string[]>();
  private readonly digests = new Map<number, { digest: string; node: string }>();
  private readonly trace: string[] = [];
  private commands = 0;
  private answered = 0;
  private failed = 0;
  private crashes = 0;

  constructor(private readonly options: SimulationOptions) {
    this.rng = mulberry32(options.seed);
    this.store = new MemoryStore({ timers: this.vt, clock: this.vt, random: mulberry32(options.seed ^ 0x5eed), latencyMs: [0.3, 4] });
    // Drawn now (the seed fixes them), switched on once the never-expiring entries are taken.
    this.faults = {
      appendUnknownOutcome: 0.03 * this.rng(),
      appendRejected: 0.03 * this.rng(),
      watchBreak: 0.02 * this.rng(),
      watchSilentGap: 0.02 * this.rng(),
      watchRepeat: 0.02 * this.rng(),
      watchStall: 0.005 * this.rng(),
      appendLate: 0,
    };
  }

  private readonly faults: MemoryFaults;

  private note(line: string): void {
    this.trace.push(`t=${this.vt.now().toFixed(1)} ${line}`);
    if (this.trace.length > TRACE_LIMIT) this.trace.splice(0, this.trace.length - TRACE_LIMIT);
  }

  private fail(message: string): never {
    if (process.env.SIM_TRACE_FILE !== undefined) {
      writeFileSync(process.env.SIM_TRACE_FILE, this.trace.join('\n') + '\n');
      writeFileSync(`${process.env.SIM_TRACE_FILE}.store`, this.store.trace.join('\n') + '\n');
    }
    throw new SimulationFailure(`${message}\n--- last events ---\n${this.trace.slice(-60).join('\n')}`);
  }

  private pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.rng() * items.length)]!;
  }

  private between(min: number, max: number): number {
    return min + (max - min) * this.rng();
  }

  private logger(node: string): Logger {
    const debug = process.env.SIM_TRACE_FILE === undefined ? undefined : (message: string): void => this.note(`${node} ${message}`);
    return { event: (name, fields) => this.note(`${node} ${name} ${JSON.stringify(fields ?? {})}`), debug };
  }

  private startNode(index: number): void {
    const existing = this.nodes[index];
    const name = existing?.name ?? `n${index}`;
    const priority = existing?.priority ?? (index === NODE_COUNT - 1 ? undefined : 1 + Math.floor(this.rng() * 3));
    const time = new NodeTime(this.vt, this.between(-1e6, 1e6), this.between(MIN_RATE, MAX_RATE));
    const log = this.store.client(name);
    const service = new ClusterLockService(
      { nodeName: name, candidatePriority: priority, commitTimeoutMs: 1_500, maxEntries: 10_000, leaseSeconds: 2, snapshotEveryBatches: 40 },
      { log, clock: time, timers: time, random: mulberry32(Math.floor(this.rng() * 2 ** 32)), logger: this.logger(name) },
    );
    const node: SimNode = { name, priority, time, log, service, alive: true, incarnations: (existing?.incarnations ?? 0) + 1 };
    this.nodes[index] = node;
    this.note(`${name} starts (incarnation ${node.incarnations})`);
    void service.start().catch((error: Error) => this.note(`${name} start failed: ${error.message}`));
  }

  private crashNode(index: number): void {
    const node = this.nodes[index]!;
    if (!node.alive) return;
    node.alive = false;
    node.time.dead = true;
    node.log.crash();
    this.crashes++;
    this.note(`${node.name} crashes (kill -9)`);
  }

  private readyNodes(): number[] {
    return this.nodes.flatMap((n, i) => (n.alive && n.service.isReady ? [i] : []));
  }

  async run(): Promise<SimulationReport> {
    for (let i = 0; i < NODE_COUNT; i++) this.startNode(i);
    for (let i = 0; i < NODE_COUNT * CLIENTS_PER_NODE; i++) {
      this.clients.push({ name: `c${i}`, node: i % NODE_COUNT, busy: false, ops: 0, holding: new Map() });
    }
    await this.advance(3_000, false);
    if (this.readyNodes().length !== NODE_COUNT) this.fail('not every node became ready on a healthy store');
    await this.takeDurableLocks();
    Object.assign(this.store.faults, this.faults);
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
    await this.advance(4_000, false);
    await this.settleReplicas();
    this.finalChecks();
    const leaderChanges = this.nodes.reduce((sum, n) => sum + n.service.leaderChanges, 0);
    return {
      seed: this.options.seed,
      batches: this.store.logHead.version,
      commands: this.commands,
      answered: this.answered,
      failed: this.failed,
      crashes: this.crashes,
      leaderChanges,
      intervals: [...this.intervals.values()].reduce((sum, list) => sum + list.length, 0),
    };
  }

  /** Moves virtual time on in small steps, checking replicas after each; clients act if `load`. */
  private async advance(ms: number, load: boolean): Promise<void> {
    const until = this.vt.now() + ms;
    while (this.vt.now() < until) {
      if (load) this.clientsAct();
      await this.vt.advance(Math.min(10, until - this.vt.now()), 50_000);
      this.checkReplicas();
    }
  }

  private heal(): void {
    this.store.setQuorum(true);
    for (const [i, node] of this.nodes.entries()) {
      if (!node.alive) this.startNode(i);
      else node.log.setPartitioned(false);
    }
    const f = this.store.faults;
    f.appendUnknownOutcome = f.appendRejected = f.watchBreak = f.watchSilentGap = f.watchRepeat = f.watchStall = 0;
    this.note('healed');
  }

  private injectFault(): void {
    const roll = this.rng();
    const alive = this.nodes.flatMap((n, i) => (n.alive ? [i] : []));
    if (roll < 0.3 && alive.length > 1) {
      const victim = this.pick(alive);
      this.crashNode(victim);
      this.vt.after(this.between(500, 3_000), () => {
        if (!this.nodes[victim]!.alive) this.startNode(victim);
      });
    } else if (roll < 0.45) {
      this.store.setQuorum(false);
      this.note('quorum lost');
      this.vt.after(this.between(200, 2_500), () => {
        this.store.setQuorum(true);
        this.note('quorum back');
      });
    } else if (roll < 0.65 && alive.length > 0) {
      const node = this.nodes[this.pick(alive)]!;
      node.log.setPartitioned(true);
      this.vt.after(this.between(200, 3_000), () => node.log.setPartitioned(false));
    } else if (roll < 0.8 && alive.length > 0) {
      this.nodes[this.pick(alive)]!.log.breakWatches();
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
          (error: Error) => this.fail(`durable request by ${owner} failed on a healthy store: ${error.message}`),
        ),
      );
      await this.vt.advance(5);
    }
    await this.vt.advance(500);
    await Promise.race([Promise.all(waits), this.vt.advance(2_000).then(() => this.fail('durable locks not acknowledged on a healthy store'))]);
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

  private act(client: SimClient, node: SimNode): void {
    const key = this.pick(KEYS);
    const index = this.pick(INDEXES);
    const lock = `${key}/${index}`;
    const roll = this.rng();
    const service = node.service;
    const sent = this.vt.now();
    client.busy = true;
    const op = ++client.ops;
    const incarnation = node.incarnations;
    // Only this op's own answer (or its loss) frees the client: one command at a time, plus an
    // occasional read pipelined behind a request.
    const done = (): void => {
      if (client.ops === op) client.busy = false;
    };
    // Answers from a node that crashed since are lost with its connection.
    const track = <T>(what: string, answer: Promise<T>, onAnswer: (value: T) => void, onLost?: () => void): void => {
      this.commands++;
      answer.then(
        (value) => {
          done();
          if (!node.alive || node.incarnations !== incarnation) return;
          this.answered++;
          this.note(`${client.name}@${node.name} ${what} → ${JSON.stringify(value)}`);
          onAnswer(value);
        },
        (error: Error) => {
          done();
          this.failed++;
          this.note(`${client.name}@${node.name} ${what} failed: ${error.message}`);
          onLost?.();
        },
      );
      // A crashed node never answers: free the client after its connection would have dropped.
      this.vt.after(3_000, () => {
        if (client.busy && (!node.alive || node.incarnations !== incarnation)) done();
      });
    };
    if (roll < 0.4) {
      const ttl = this.pick([1, 2, 3]);
      const ttw = this.pick([0, 1, 2]);
      const priority = this.pick([0, 1, 2]);
      let granted = false;
      track(
        `request ${lock} ttl=${ttl}`,
        service.request({ key, index, owner: client.name, ttl, ttw, priority }, true),
        (position) => {
          granted = position === 1;
          if (granted) this.renewed(client, lock, sent, ttl * 1000);
        },
        () => this.mayHaveShortened(client, lock, sent, ttl * 1000),
      );
      if (this.rng() < 0.3) {
        // Pipelined behind the request: answered in order, and it sees the client's own write.
        track(`owner ${lock} (pipelined)`, service.findOwner(key, index), (owner) => {
          if (granted && owner !== client.name) this.fail(`${client.name} was granted ${lock} but the read behind it says ${owner}`);
        });
      }
    } else if (roll < 0.55) {
      track(`renew ${lock}`, service.renew(key, index, client.name), (ok) => {
        if (ok) this.renewed(client, lock, sent, undefined);
      });
    } else if (roll < 0.75) {
      this.released(client, lock, sent);
      track(`release ${lock}`, service.release(key, index, client.name), () => {});
    } else if (roll < 0.78) {
      for (const held of client.holding.keys()) if (!held.startsWith('durable/')) this.released(client, held, sent);
      track(`release-all`, service.releaseAll(client.name), () => {});
    } else if (roll < 0.88) {
      track(`owner ${lock}`, service.findOwner(key, index), () => {});
    } else if (roll < 0.95) {
      track(`location ${lock}`, service.location(key, index, client.name), () => {});
    } else {
      track(`list ${key}`, service.list(key, 1000), () => {});
    }
  }

  /**
   * A position-1 reply to a request (`ttlMs` set: the phase restarted with that TTL) or an
   * acknowledged renewal (the phase restarted with the entry's TTL): the interval opens or its
   * end moves to this send time plus the TTL. Commands are sequential per client, so this send is
   * later than any before it.
   */
  private renewed(client: SimClient, lock: string, sent: number, ttlMs: number | undefined): void {
    const now = this.vt.now();
    const current = client.holding.get(lock);
    if (current !== undefined && current.open && !this.ended(current, now)) {
      if (ttlMs !== undefined) current.ttlMs = ttlMs;
      current.expires = this.bound(sent, current.ttlMs);
      return;
    }
    if (current !== undefined) this.close(current, now);
    if (ttlMs === undefined) return; // a renewal of an entry not known to be owned opens nothing
    const interval: Interval = { client: client.name, start: now, end: Number.POSITIVE_INFINITY, expires: this.bound(sent, ttlMs), ttlMs, open: true };
    client.holding.set(lock, interval);
    const list = this.intervals.get(lock) ?? [];
    list.push(interval);
    this.intervals.set(lock, list);
  }

  /** A request whose outcome is unknown may have restarted the phase with its (smaller) TTL. */
  private mayHaveShortened(client: SimClient, lock: string, sent: number, ttlMs: number): void {
    const current = client.holding.get(lock);
    if (current === undefined || !current.open) return;
    current.expires = Math.min(current.expires, this.bound(sent, ttlMs));
    current.ttlMs = Math.min(current.ttlMs === 0 ? Number.POSITIVE_INFINITY : current.ttlMs, ttlMs === 0 ? Number.POSITIVE_INFINITY : ttlMs);
    if (current.ttlMs === Number.POSITIVE_INFINITY) current.ttlMs = 0;
  }

  /** Send time plus TTL, less the clock-rate margin clients keep; TTL 0 never ends. */
  private bound(sent: number, ttlMs: number): number {
    return ttlMs === 0 ? Number.POSITIVE_INFINITY : sent + ttlMs * (1 - RATE_MARGIN);
  }

  private ended(interval: Interval, now: number): boolean {
    return now >= interval.expires;
  }

  private close(interval: Interval, at: number): void {
    if (!interval.open) return;
    interval.open = false;
    interval.end = Math.min(at, interval.expires);
  }

  private released(client: SimClient, lock: string, sent: number): void {
    const interval = client.holding.get(lock);
    if (interval === undefined) return;
    this.close(interval, sent);
    client.holding.delete(lock);
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
    const now = this.vt.now();
    for (const client of this.clients) for (const interval of client.holding.values()) this.close(interval, now);
    // S1: no two clients' intervals on one lock overlap.
    for (const [lock, list] of this.intervals) {
      const sorted = [...list].sort((a, b) => a.start - b.start);
      for (let i = 1; i < sorted.length; i++) {
        const earlier = sorted.slice(0, i).find((a) => a.client !== sorted[i]!.client && a.end > sorted[i]!.start);
        if (earlier !== undefined) {
          this.fail(
            `S1 broken on ${lock}: ${earlier.client} [${earlier.start.toFixed(1)}, ${earlier.end.toFixed(1)}) overlaps ` +
              `${sorted[i]!.client} from ${sorted[i]!.start.toFixed(1)}`,
          );
        }
      }
    }
    // Every node caught up to the same state, holding every durable entry in acknowledged order.
    const ready = this.nodes.filter((n) => n.alive && n.service.isReady);
    if (ready.length !== NODE_COUNT) this.fail(`only ${ready.length} of ${NODE_COUNT} nodes ready after healing`);
    const versions = new Set(ready.map((n) => n.service.replica.position.version));
    const digests = new Set(ready.map((n) => n.service.replica.digest()));
    if (versions.size !== 1 || digests.size !== 1) this.fail(`nodes did not converge: versions ${[...versions]} digests ${[...digests]}`);
    for (const [lock, owners] of this.durable) {
      const [key, index] = lock.split('/') as [ByteString, ByteString];
      for (const node of ready) {
        const present = node.service.replica.table.list(key).filter((c) => c.index === index).map((c) => c.owner);
        if (present.join(',') !== owners.join(',')) this.fail(`${node.name} lost durable entries: has [${present}] expected [${owners}]`);
      }
    }
  }
}
