import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { Clock } from '../runtime/Clock.js';
import { realTimers, type Timers } from '../runtime/Timers.js';
import type { LockCounts, LockService } from '../locks/LockService.js';
import { GREETING_ACCEPTED, GREETING_REFUSED } from '../protocol/constants.js';
import type { StatsReply } from '../protocol/messages.js';
import type { AllowList } from './AllowList.js';
import { Connection, type CommandObserver, type ConnectionHost } from './Connection.js';
import type { LogFields, Logger } from '../runtime/Logger.js';
import { EventThrottle } from '../runtime/EventThrottle.js';
import { ServerStats } from './ServerStats.js';

const ACCEPTED = Buffer.from([GREETING_ACCEPTED]);
const REFUSED = Buffer.from([GREETING_REFUSED]);
/** How often frame timeouts, idle connections and drain progress are checked. */
const HOUSEKEEPING_INTERVAL_MS = 250;
/** Longest a shutdown waits for requests already being answered. */
const QUIESCE_LIMIT_MS = 5_000;
/** While draining, what is left is logged when it changes, but at most this often. */
const DRAIN_PROGRESS_INTERVAL_MS = 1_000;

export interface LockServerOptions {
  readonly service: LockService;
  readonly allowList: AllowList;
  readonly maxConnections: number;
  /** An incomplete frame older than this closes its connection. */
  readonly frameTimeoutMs: number;
  /** A connection with no traffic this long is closed; 0 or absent = never. */
  readonly idleTimeoutMs?: number;
  readonly clock: Clock;
  /** Where housekeeping and the event-loop watch are scheduled; the real event loop by default. */
  readonly timers?: Timers;
  readonly logger: Logger;
  /** Called once when drain mode finds the table empty. */
  readonly onDrained?: () => void;
  /**
   * Cluster mode: input read after the event loop stood still longer than this (a SIGSTOP, a
   * swap storm, a long GC pause) is refused with its connection: it may have been sent before the
   * stall, by a client that has given up on it and been answered by another node since. So is a
   * command that changes the table when its bytes were read longer than this before it is
   * decoded (a deep pipeline behind slow answers), or after reading was paused that long (see
   * Connection.waitedTooLong). Undefined (a single node) runs everything: there is no other node
   * to contradict it.
   */
  readonly staleInputMs?: number;
  /**
   * Cluster mode: takes a connection that sent PEER_LINK_BYTE first (a link from another node of
   * the cluster, src/cluster/peer), with what it sent after that byte. The connection leaves this
   * server's count and timeouts; the cluster proves and bounds it.
   */
  readonly adoptLink?: (socket: Socket, buffered: Buffer) => void;
  /** Unread replies every connection together may hold, in bytes (DEFAULT_MAX_UNREAD_OUTPUT_BYTES). */
  readonly maxUnreadOutputBytes?: number;
}

/**
 * Unread replies all connections together may hold before the connection holding the most is
 * closed. Each connection holds at most one list answer at a time, but one list of a busy key is
 * up to ~35 MB (65,535 entries of 255-byte names), and --max-connections of them would be
 * gigabytes: a client that asks for big lists and does not read them must not take the server's
 * memory, nor force the long garbage collections that make a cluster node refuse input as stalled.
 */
export const DEFAULT_MAX_UNREAD_OUTPUT_BYTES = 256 * 1024 * 1024;

/** How often the event loop's progress is noted, for staleInputMs. */
const LOOP_WATCH_MS = 100;

/**
 * The TCP front: checks each peer against the allowlist and the connection limit, greets it,
 * and hands it to a Connection. Knows the lock state only through the LockService interface.
 */
export class LockServer implements ConnectionHost {
  readonly stats: ServerStats;
  readonly service: LockService;
  readonly logger: Logger;
  private allowList: AllowList;
  private readonly connections = new Set<Connection>();
  private readonly partial = new Set<Connection>();
  private readonly server: Server;
  private stopHousekeeping: (() => void) | undefined;
  private stopLoopWatch: (() => void) | undefined;
  /** When a timer of ours last ran: the event loop's last sure progress (staleInputMs). */
  private lastTurnAt: number;
  /** Set by the loop watch when it finds a stall, until the I/O of that turn of the loop is read. */
  private stallJustSeen = false;
  /** Stalls seen so far, and the one whose refusals were last logged (one line tells each stall). */
  private stalls = 0;
  /** How long the last stall seen lasted. */
  private stallMs = 0;
  private staleLoggedFor = -1;
  private staleRefused = 0;
  private drainMode = false;
  private drainAnnounced = false;
  private checkingDrain = false;
  private drainReported: { readonly at: number; readonly counts: LockCounts } | undefined;
  private onAllClosed: (() => void) | undefined;
  /** Caps the log lines of refusals, idle timeouts and connections lost before their greeting. */
  private readonly eventLog: EventThrottle;
  private readonly timers: Timers;
  /** Times each command when set (metrics); undefined keeps the command path free of timing. */
  commandObserver: CommandObserver | undefined;
  /** Replies written to sockets and not yet taken by their clients, over every connection. */
  private unreadOutput = 0;

  constructor(private readonly options: LockServerOptions) {
    this.service = options.service;
    this.logger = options.logger;
    this.allowList = options.allowList;
    this.stats = new ServerStats(options.clock);
    this.lastTurnAt = options.clock.now();
    this.eventLog = new EventThrottle(options.clock);
    this.timers = options.timers ?? realTimers;
    this.server = createServer({ allowHalfOpen: true, pauseOnConnect: false }, (socket) => this.accept(socket));
    this.server.on('error', (error) => this.logger.event('server-error', { error: error.message }));
  }

  get draining(): boolean {
    return this.drainMode;
  }

  get activeConnections(): number {
    return this.connections.size;
  }

  /** The allowlist in force (the hosts file as last loaded). */
  get hosts(): AllowList {
    return this.allowList;
  }

  setAllowList(allowList: AllowList): void {
    this.allowList = allowList;
  }

  async listen(port: number, host?: string): Promise<AddressInfo> {
    await new Promise<void>((resolve, reject) => {
      const onError = (error: Error): void => reject(error);
      this.server.once('error', onError);
      this.server.listen({ port, host }, () => {
        this.server.off('error', onError);
        resolve();
      });
    });
    this.stopHousekeeping = this.timers.every(HOUSEKEEPING_INTERVAL_MS, () => this.housekeep());
    if (this.options.staleInputMs !== undefined) {
      // Timers run after the I/O that was waiting when a stopped process resumes: input read
      // before this one runs again finds lastTurnAt as old as the stall.
      this.lastTurnAt = this.options.clock.now();
      this.stopLoopWatch = this.timers.every(LOOP_WATCH_MS, () => this.watchLoop());
    }
    return this.server.address() as AddressInfo;
  }

  private accept(socket: Socket): void {
    const peer = socket.remoteAddress;
    if (peer === undefined) {
      // Reset before we got to it: its address cannot be read, so the allowlist can neither admit
      // nor refuse it. Not a refusal, not a connection; it is gone already.
      socket.on('error', () => {});
      socket.destroy();
      this.logThrottled('connection-lost-before-greeting', 'lost-before-greeting', {});
      this.logger.debug?.('someone knocked and ran off before we could see who it was');
      return;
    }
    socket.setNoDelay(true);
    if (!this.allowList.allows(peer)) {
      this.stats.rejectedNotInHosts++;
      this.logRefusal(peer, 'not-in-hosts-file');
      this.logger.debug?.(`${peer} knocked, but is not on the guest list; showing them the door`);
      this.refuse(socket);
      return;
    }
    if (this.connections.size >= this.options.maxConnections) {
      this.stats.rejectedTooBusy++;
      this.logRefusal(peer, 'too-busy');
      this.logger.debug?.(`${peer} wants in, but ${this.connections.size} is a crowd already`);
      this.refuse(socket);
      return;
    }
    if (this.inputIsStale()) {
      // Accepted in the first turn after a stall: the kernel completed the handshake while this
      // process stood still, and the client may have sent its commands then, given up on them and
      // been answered by another node since. Their bytes would only be read in a later turn, past
      // the stall's watch; the connection is refused before anything of it is read.
      this.staleInputRefused(peer);
      this.refuse(socket);
      return;
    }
    this.stats.accepted++;
    const connection = new Connection(socket, peer, this);
    this.connections.add(connection);
    this.stats.activeConnections = this.connections.size;
    socket.write(ACCEPTED);
    this.logger.debug?.(`${peer} is in; ${this.connections.size} connection(s) now`);
  }

  private logRefusal(peer: string, reason: 'not-in-hosts-file' | 'too-busy'): void {
    this.logThrottled('refused', reason, { peer, reason, active: reason === 'too-busy' ? this.connections.size : undefined });
  }

  /** One log line per event, but a flood of one kind writes at most a few lines a second. */
  private logThrottled(event: string, kind: string, fields: LogFields): void {
    const suppressed = this.eventLog.admit(kind);
    if (suppressed === undefined) return;
    this.logger.event(event, { ...fields, suppressed: suppressed > 0 ? suppressed : undefined });
  }

  private refuse(socket: Socket): void {
    socket.on('error', () => {});
    socket.write(REFUSED);
    // Close fully once the byte is out: with allowHalfOpen, end() alone would wait for the peer.
    socket.destroySoon();
    socket.resume();
  }

  // ConnectionHost

  countCommand(command: number): void {
    this.stats.commands[command]!++;
  }

  statsSnapshot(locks: LockCounts): StatsReply {
    return this.stats.snapshot(locks);
  }

  now(): number {
    return this.options.clock.now();
  }

  /**
   * After a stall, libuv may run this timer before or after the sockets' input that waited
   * through it: input read before it runs finds lastTurnAt as old as the stall; input read in the
   * same turn after it finds stallJustSeen, which lasts until that turn's poll phase is over
   * (setImmediate callbacks run right after it).
   */
  private watchLoop(): void {
    const now = this.options.clock.now();
    if (this.stalledAt(now)) this.noteStall(now);
    this.lastTurnAt = now;
  }

  /** The loop stood still until `now`: input read until this turn's poll phase is over is stale. */
  private noteStall(now: number): void {
    this.stalls++;
    this.stallMs = now - this.lastTurnAt;
    this.lastTurnAt = now;
    this.stallJustSeen = true;
    this.timers.soon(() => (this.stallJustSeen = false));
  }

  private stalledAt(now: number): boolean {
    const limit = this.options.staleInputMs;
    return limit !== undefined && now - this.lastTurnAt > limit + LOOP_WATCH_MS;
  }

  inputIsStale(): boolean {
    if (this.stallJustSeen) return true;
    const now = this.options.clock.now();
    if (!this.stalledAt(now)) return false;
    this.noteStall(now); // seen here first: the loop watch has not run since the stall
    return true;
  }

  get staleInputMs(): number | undefined {
    return this.options.staleInputMs;
  }

  get stallsSeen(): number {
    return this.stalls;
  }

  staleInputRefused(peer: string): void {
    this.staleRefused++;
    if (this.staleLoggedFor === this.stalls) return;
    this.staleLoggedFor = this.stalls;
    this.logger.event('stale-input-refused', { peer, stalled_ms: Math.round(this.stallMs), refused_total: this.staleRefused });
  }

  onPartialFrame(connection: Connection): void {
    this.partial.add(connection);
  }

  get adoptLink(): ((socket: Socket, buffered: Buffer) => void) | undefined {
    return this.options.adoptLink;
  }

  handedOff(connection: Connection): void {
    this.onClosed(connection);
  }

  outputBuffered(_connection: Connection, delta: number): void {
    this.unreadOutput += delta;
    const limit = this.options.maxUnreadOutputBytes ?? DEFAULT_MAX_UNREAD_OUTPUT_BYTES;
    // Over the bound: the connections holding the most go first, until under it (each drop frees its share at once).
    while (delta > 0 && this.unreadOutput > limit) {
      let largest: Connection | undefined;
      for (const c of this.connections) if (largest === undefined || c.unreadOutput > largest.unreadOutput) largest = c;
      if (largest === undefined || largest.unreadOutput === 0) break;
      this.logThrottled('unread-output-dropped', 'unread-output-dropped', { peer: largest.peer, bytes: largest.unreadOutput });
      largest.drop();
    }
  }

  onClosed(connection: Connection): void {
    this.connections.delete(connection);
    this.partial.delete(connection);
    this.stats.activeConnections = this.connections.size;
    if (this.connections.size === 0) this.onAllClosed?.();
    this.logger.debug?.(`${connection.peer} has left the building; ${this.connections.size} connection(s) remain`);
  }

  afterRemoval(): void {
    if (this.drainMode) void this.checkDrained();
  }

  // Drain mode (SIGSYS)

  /** No new entries from now on; when the table is empty, onDrained fires. */
  startDrain(): void {
    if (this.drainMode) return;
    this.drainMode = true;
    void this.checkDrained();
  }

  private async checkDrained(): Promise<void> {
    if (this.checkingDrain || this.drainAnnounced) return;
    this.checkingDrain = true;
    try {
      const counts = await this.service.drainCounts();
      const empty = counts.owners + counts.waiters === 0;
      this.reportDrainProgress(counts, empty);
      if (empty && !this.drainAnnounced) {
        this.drainAnnounced = true;
        this.options.onDrained?.();
      }
    } catch (error) {
      // A cluster node cut off from etcd cannot tell; housekeeping asks again shortly.
      this.logger.debug?.(`drain check failed: ${(error as Error).message}`);
    } finally {
      this.checkingDrain = false;
    }
  }

  /** One `drain-progress` line when what is left has changed: at once when drained, else at most once a second. */
  private reportDrainProgress(counts: LockCounts, empty: boolean): void {
    const now = this.options.clock.now();
    const last = this.drainReported;
    if (last !== undefined) {
      if (last.counts.owners === counts.owners && last.counts.waiters === counts.waiters) return;
      if (!empty && now - last.at < DRAIN_PROGRESS_INTERVAL_MS) return;
    }
    this.drainReported = { at: now, counts };
    this.logger.event('drain-progress', { owners: counts.owners, waiters: counts.waiters });
  }

  private housekeep(): void {
    const now = this.options.clock.now();
    const idleLimit = this.options.idleTimeoutMs ?? 0;
    if (idleLimit > 0) {
      for (const connection of this.connections) {
        if (!connection.idleFor(idleLimit, now)) continue;
        this.logThrottled('idle-timeout', 'idle-timeout', { peer: connection.peer });
        this.logger.debug?.(`${connection.peer} has said nothing for ${idleLimit / 1000} s; showing them out`);
        connection.drop();
      }
    }
    for (const connection of this.partial) {
      if (connection.partialSince === undefined) {
        this.partial.delete(connection);
      } else if (now - connection.partialSince >= this.options.frameTimeoutMs) {
        this.partial.delete(connection);
        this.logger.event('frame-timeout', { peer: connection.peer });
        this.logger.debug?.(`${connection.peer} started a sentence and never finished it; hanging up`);
        connection.hangUp();
      }
    }
    if (this.drainMode) void this.checkDrained();
  }

  // Shutdown

  /** Stops accepting and stops reading requests; resolves once batches under way are answered. */
  async stopServing(): Promise<void> {
    this.stopHousekeeping?.();
    this.stopLoopWatch?.();
    this.server.close();
    await settledWithin(Promise.all([...this.connections].map((c) => c.quiesce())), QUIESCE_LIMIT_MS);
  }

  /** Ends every connection (after its written replies are delivered). */
  closeConnections(): void {
    for (const connection of this.connections) connection.end();
  }

  /** Resolves when every connection has closed, or after `limitMs`, whichever comes first. */
  async whenAllClosed(limitMs: number): Promise<void> {
    if (this.connections.size > 0) {
      await settledWithin(new Promise<void>((resolve) => (this.onAllClosed = resolve)), limitMs);
    }
    for (const connection of this.connections) connection.socket.destroy();
  }
}

/** Waits for `work`, but never longer than `limitMs`; the timer is cleared either way. */
async function settledWithin(work: Promise<unknown>, limitMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, limitMs);
  });
  try {
    await Promise.race([work, limit]);
  } finally {
    clearTimeout(timer);
  }
}
