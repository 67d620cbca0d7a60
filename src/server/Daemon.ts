import { randomInt } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { loadLockFileVersioned, saveLockFile } from '../files/lockFile.js';
import { writeStatFile } from '../files/statFile.js';
import type { Clock } from '../runtime/Clock.js';
import { LocalLockService, TOKENS_PER_MS } from '../locks/LocalLockService.js';
import { realTimers, type Timers } from '../runtime/Timers.js';
import { keepingAlive } from '../runtime/keepAlive.js';
import type { LockRequest, LockService, SavedLock } from '../locks/LockService.js';
import type { ClusterObserver } from '../cluster/ClusterOptions.js';
import type { GrantObserver } from '../locks/Waiters.js';
import { STALE_INPUT_MS, startClusterService, type ClusterConfig, type ClusterNode } from '../cluster/startClusterService.js';
import { collectGarbage } from './collectGarbage.js';
import { EventThrottle } from '../runtime/EventThrottle.js';
import { REFUSAL_NAMES, type Refusal } from '../locks/TableLimits.js';
import { AllowList } from './AllowList.js';
import { LockServer } from './LockServer.js';
import type { Logger } from '../runtime/Logger.js';
import type { PidFile } from '../files/PidFile.js';
import { claimServerFiles } from './startupFiles.js';

export interface DaemonConfig {
  readonly port: number;
  /** Bind address; undefined = every interface (dual-stack where IPv6 exists). */
  readonly listen: string | undefined;
  readonly hostsFile: string;
  readonly lockFile: string;
  readonly statFile: string;
  readonly maxConnections: number;
  readonly frameTimeoutSeconds: number;
  /** Close connections with no traffic this long; 0 or absent = never. */
  readonly idleTimeoutSeconds?: number;
  readonly maxLocks: number;
  /** `--max-table-bytes`, `--max-locks-per-owner`, `--max-locks-per-connection` (single node; defaults in TableLimits). */
  readonly maxTableBytes?: number;
  readonly maxLocksPerOwner?: number;
  readonly maxLocksPerConnection?: number;
  /**
   * `--lock-delay` in ms (0 or absent: none, the 0.9b behaviour): an owner whose TTL runs out holds
   * its lock back this long before the next grant. In a cluster, the leader's setting applies.
   */
  readonly lockDelayMs?: number;
  /** Cluster mode (`--etcd`): the locks live in etcd, the lock file is only a backup. */
  readonly cluster?: ClusterConfig;
}

export interface DaemonDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly timers?: Timers;
  /**
   * The wall clock in milliseconds (Date.now by default). A single node's fencing tokens start
   * above it times TOKENS_PER_MS, so they still grow after a crash left an older lock file.
   */
  readonly wallClockMs?: () => number;
  /** Ends the process; injected so tests of the lifecycle can watch instead. */
  readonly exit: (code: number) => void;
  /**
   * Wire the process's signals to the daemon before `event=started` is logged: scripts signal
   * as soon as they see that line, and an unhandled SIGSYS or SIGINT would kill the process.
   */
  readonly handleSignals?: boolean;
  /** Told how many entries each expiry sweep removed (metrics). */
  readonly onExpired?: (count: number) => void;
  /** Cluster mode: told of each batch committed (metrics). */
  readonly clusterObserver?: ClusterObserver;
  /** Told of every grant (how long it was waited for) and every end (how): the metrics. */
  readonly grants?: GrantObserver;
}

/** Exit code after a fatal internal error (sysexits EX_SOFTWARE). */
export const EXIT_INTERNAL_ERROR = 70;
/** Longest the final goodbye waits for replies to reach clients before the process ends. */
const CLOSE_LIMIT_MS = 2_000;

/** A start-up failure with a message fit for the operator (bad file, port in use, …). */
export class StartupError extends Error {
  override name = 'StartupError';
}

/** Reads the hosts file; each warning (a likely mistake, an empty list) is logged `hosts-warning`. */
export async function loadAllowList(file: string, logger?: Logger): Promise<AllowList> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new StartupError(`cannot read hosts file ${file}: ${(error as Error).message}`);
  }
  const allowList = AllowList.parse(text, file);
  for (const { line, reason } of allowList.warnings) logger?.event('hosts-warning', { file, line, reason });
  return allowList;
}

/**
 * The running LockServer process: files, signals and the lifecycle around the TCP server.
 * "Noble death" (the original's name) is the orderly end: stop accepting, finish what is in
 * flight, save every lock, close every connection, exit.
 */
export class Daemon {
  private dying: Promise<void> | undefined;
  private fatalSeen = false;
  private saving: Promise<void> = Promise.resolve();

  private constructor(
    readonly config: DaemonConfig,
    private readonly deps: DaemonDeps,
    readonly service: LockService,
    readonly server: LockServer,
    readonly address: AddressInfo,
    private readonly pidFile: PidFile,
  ) {}

  static async start(config: DaemonConfig, deps: DaemonDeps): Promise<Daemon> {
    const allowList = await loadAllowList(config.hostsFile, deps.logger);
    const pidFile = await claimServerFiles(config, deps.logger).catch((error: unknown) => {
      throw new StartupError(error instanceof Error ? error.message : String(error));
    });
    try {
      return await Daemon.startServing(config, deps, allowList, pidFile);
    } catch (error) {
      await pidFile.release();
      throw error;
    }
  }

  private static async startServing(config: DaemonConfig, deps: DaemonDeps, allowList: AllowList, pidFile: PidFile): Promise<Daemon> {
    const { logger, clock } = deps;
    let service: LockService;
    let restored = 0;
    let node: ClusterNode | undefined;
    if (config.cluster === undefined) {
      ({ service, restored } = await startLocal(config, deps));
    } else {
      // A bad file to import stops the start before the node joins anything.
      const toImport = config.cluster.importLockFile === undefined ? undefined : await readImport(config.cluster.importLockFile);
      node = await startClusterService(
        config.cluster,
        {
          maxEntries: config.maxLocks,
          maxTableBytes: config.maxTableBytes,
          maxEntriesPerOwner: config.maxLocksPerOwner,
          maxEntriesPerConnection: config.maxLocksPerConnection,
          onRefused: refusalLogger(logger, clock),
          lockDelayMs: config.lockDelayMs ?? 0,
        },
        clock,
        logger,
        deps,
      );
      const cluster = node.service;
      service = cluster;
      logger.event('lock-file-not-loaded', { file: config.lockFile, reason: 'cluster-mode' });
      if (toImport !== undefined) {
        try {
          restored = await keepingAlive(cluster.importLocks(toImport.locks, toImport.highestToken));
        } catch (error) {
          await cluster.close();
          throw new StartupError(`--import-lock-file ${toImport.file}: ${(error as Error).message}`);
        }
        logger.event('lock-file-imported', { file: toImport.file, entries: restored });
      }
    }
    let daemon: Daemon | undefined;
    const links = node;
    const server = new LockServer({
      service,
      allowList,
      maxConnections: config.maxConnections,
      frameTimeoutMs: config.frameTimeoutSeconds * 1000,
      idleTimeoutMs: (config.idleTimeoutSeconds ?? 0) * 1000,
      clock,
      logger,
      onDrained: () => void daemon?.nobleDeath('drained', 0),
      staleInputMs: config.cluster === undefined ? undefined : STALE_INPUT_MS,
      // Links between nodes arrive on the lock port (admitted by the hosts file, as any connection).
      adoptLink: links === undefined ? undefined : (socket, buffered) => links.adoptLink(socket, buffered),
    });
    let address: AddressInfo;
    try {
      address = await server.listen(config.port, config.listen);
    } catch (error) {
      await service.close();
      throw new StartupError(`cannot listen on ${config.listen ?? '*'}:${config.port}: ${(error as Error).message}`);
    }
    daemon = new Daemon(config, deps, service, server, address, pidFile);
    if (deps.handleSignals === true) daemon.installSignalHandlers();
    logger.event('started', {
      address: address.address,
      port: address.port,
      hosts_file: config.hostsFile,
      hosts_entries: allowList.size,
      lock_file: config.lockFile,
      stat_file: config.statFile,
      restored,
      // Said only when set: the 0.9b default (none) changes nothing to say.
      lock_delay_s: (config.lockDelayMs ?? 0) > 0 ? config.lockDelayMs! / 1000 : undefined,
      pid: process.pid,
    });
    if (config.cluster !== undefined) logger.event('ready', { name: config.cluster.nodeName, port: address.port });
    // Where the other nodes forward their batches while this node leads; until declared (or if it
    // cannot be), they append directly: slower, as safe.
    links?.announce(address.port, config.listen).catch((error: unknown) => logger.event('peer-address-failed', { error: (error as Error).message }));
    return daemon;
  }

  /** The lock port is open: from start() until the orderly end begins (health probes). */
  get listening(): boolean {
    return this.dying === undefined;
  }

  /** Wires the signals of the protocol document (plus SIGTERM) and fatal errors to this daemon. */
  installSignalHandlers(): void {
    // One `event=signal` line per signal received, before the line of what it led to.
    const on = (signal: NodeJS.Signals, action: string, act: () => void): void => {
      process.on(signal, () => {
        this.deps.logger.event('signal', { signal, action });
        act();
      });
    };
    for (const signal of ['SIGINT', 'SIGTSTP', 'SIGTERM'] as const) {
      on(signal, 'shutdown', () => void this.nobleDeath(signal, 0));
    }
    on('SIGHUP', 'reload-hosts', () => void this.reloadHosts());
    on('SIGUSR1', 'dump-stats', () => void this.dumpStats());
    on('SIGSYS', 'drain', () => this.drain());
    process.on('uncaughtException', (error) => void this.fatal(error));
    process.on('unhandledRejection', (reason) => void this.fatal(reason));
  }

  /** SIGSYS: accept connections but no new entries; noble death once the table is empty. */
  drain(): void {
    if (this.server.draining || this.dying) return;
    this.deps.logger.event('drain-started', { signal: 'SIGSYS' });
    // The server logs drain-progress from here on, whenever what is left changes.
    this.server.startDrain();
  }

  /** SIGHUP: re-read the hosts file; a broken file keeps the old list. */
  async reloadHosts(): Promise<void> {
    try {
      const allowList = await loadAllowList(this.config.hostsFile, this.deps.logger);
      this.server.setAllowList(allowList);
      this.deps.logger.event('hosts-reloaded', { file: this.config.hostsFile, entries: allowList.size });
    } catch (error) {
      this.deps.logger.event('hosts-reload-failed', { error: (error as Error).message, kept: 'previous-list' });
    }
  }

  /** SIGUSR1: write the stat file and save the locks; keep running. */
  async dumpStats(): Promise<void> {
    try {
      const stats = this.server.stats.snapshot(await this.service.counts());
      await writeStatFile(this.config.statFile, stats);
      this.deps.logger.event('stats-written', { file: this.config.statFile });
    } catch (error) {
      this.deps.logger.event('stats-write-failed', { file: this.config.statFile, error: (error as Error).message });
    }
    await this.saveLocks().catch(() => {});
  }

  /**
   * Saves every lock and the token high-water; saves run one at a time so two signals never
   * interleave their writes.
   */
  saveLocks(): Promise<void> {
    const save = async (): Promise<void> => {
      const locks = await this.service.snapshot();
      // In the same turn as the snapshot (the local table answers at once), so each hold's place among its entries holds.
      const holds = (await this.service.savedHolds?.()) ?? [];
      // Read after the snapshot, so it is at or above every token the snapshot holds.
      const highestToken = await this.service.highestToken();
      try {
        await saveLockFile(this.config.lockFile, locks, highestToken, holds);
      } catch (error) {
        this.deps.logger.event('locks-save-failed', { file: this.config.lockFile, error: (error as Error).message });
        throw error;
      }
      this.deps.logger.event('locks-saved', { file: this.config.lockFile, count: locks.length });
    };
    const result = this.saving.then(save, save);
    this.saving = result.catch(() => {});
    return result;
  }

  /** The orderly end. Idempotent: a second signal while dying changes nothing. */
  nobleDeath(reason: string, exitCode: number): Promise<void> {
    if (this.dying !== undefined) {
      this.deps.logger.event('shutdown-in-progress', { reason });
      return this.dying;
    }
    this.dying = (async () => {
      this.deps.logger.event('shutdown', { reason });
      let code = exitCode;
      await this.server.stopServing();
      await this.service.close();
      try {
        await this.saveLocks();
      } catch {
        code = code === 0 ? 1 : code;
      }
      this.server.closeConnections();
      await this.server.whenAllClosed(CLOSE_LIMIT_MS);
      await this.pidFile.release();
      this.deps.logger.event('exit', { code });
      this.deps.exit(code);
    })();
    return this.dying;
  }

  /** A bug or an impossible state: try to save what we hold, then exit non-zero. */
  async fatal(error: unknown): Promise<void> {
    // Only the first is logged: an error raised by logging it, or while dying, must not start another round.
    if (this.fatalSeen) return this.dying;
    this.fatalSeen = true;
    const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
    this.deps.logger.event('fatal', { error: message });
    await this.nobleDeath('fatal-error', EXIT_INTERNAL_ERROR);
  }
}

/**
 * The `request-refused` line of a request refused at a limit: one line per limit a second at most
 * (and a count of those left out), so that a client filling the table does not flood the log.
 */
function refusalLogger(logger: Logger, clock: Clock): (why: Exclude<Refusal, 0>, request: LockRequest) => void {
  const refusals = new EventThrottle(clock, 1);
  return (why, request) => {
    const limit = REFUSAL_NAMES[why];
    const suppressed = refusals.admit(limit);
    if (suppressed === undefined) return;
    logger.event('request-refused', { limit, owner: request.owner, key: request.key, suppressed: suppressed > 0 ? suppressed : undefined });
  };
}

/** The single node: a LockTable in this process, filled from the lock file. */
async function startLocal(config: DaemonConfig, deps: DaemonDeps): Promise<{ service: LockService; restored: number }> {
  const { logger, clock } = deps;
  const service = new LocalLockService(clock, deps.timers ?? realTimers, {
    maxEntries: config.maxLocks,
    maxTableBytes: config.maxTableBytes,
    maxEntriesPerOwner: config.maxLocksPerOwner,
    maxEntriesPerConnection: config.maxLocksPerConnection,
    onRefused: refusalLogger(logger, clock),
    lockDelayMs: config.lockDelayMs,
    grants: deps.grants,
    // Above every token a crashed predecessor may have granted after its last save (see TOKENS_PER_MS).
    tokenFloor: Math.floor((deps.wallClockMs ?? Date.now)()) * TOKENS_PER_MS,
    // Clients must not be able to aim keys at one probe run of the table's hash indexes.
    hashSeed: randomInt(0, 2 ** 32) | 0,
    onExpired: (count) => {
      deps.onExpired?.(count);
      logger.debug?.(`${count} lock(s) overstayed their welcome and were shown out`);
    },
    // Keys created and emptied by the hundred thousand must not pin the memory they grew.
    onQuietAfterChurn: () => void collectGarbage(),
    onCompacted: () => void collectGarbage(),
  });
  let restored = 0;
  try {
    const file = await loadLockFileVersioned(config.lockFile);
    const saved = file?.locks;
    if (file !== undefined && saved !== undefined) {
      // A version 1 file has no end line: loaded as before, but said out loud (README, Files).
      if (!file.verified) logger.event('lock-file-unverified', { file: config.lockFile, version: file.version, entries: saved.length });
      if (saved.length > config.maxLocks) {
        throw new Error(`it holds ${saved.length} entries, more than --max-locks ${config.maxLocks}`);
      }
      await service.restore(saved, file.highestToken, file.holds);
      restored = saved.length;
    }
  } catch (error) {
    await service.close();
    const message = (error as Error).message;
    throw new StartupError(message.includes(config.lockFile) ? message : `lock file ${config.lockFile}: ${message}`);
  }
  return { service, restored };
}

/** Reads a single node's lock file for `--import-lock-file`; any problem names the file (and line). */
async function readImport(file: string): Promise<{ file: string; locks: SavedLock[]; highestToken: number }> {
  try {
    const parsed = await loadLockFileVersioned(file);
    if (parsed === undefined) throw new Error('no such file');
    return { file, locks: parsed.locks, highestToken: parsed.highestToken };
  } catch (error) {
    const message = (error as Error).message;
    throw new StartupError(message.includes(file) ? `--import-lock-file: ${message}` : `--import-lock-file ${file}: ${message}`);
  }
}
