import { randomInt } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Clock } from '../runtime/Clock.js';
import { EventThrottle } from '../runtime/EventThrottle.js';
import type { Logger } from '../runtime/Logger.js';
import { realTimers } from '../runtime/Timers.js';
import { keepingAlive } from '../runtime/keepAlive.js';
import { AppendRouter } from './AppendRouter.js';
import { ClusterLockService, type ClusterObserver, type ClusterOptions } from './ClusterLockService.js';
import type { GrantObserver } from '../locks/Waiters.js';
import { PeerDeclarations } from './PeerDeclarations.js';
import type { EtcdConnection } from './EtcdLog.js';
import { addressTowards, formatPeerAddress, parsePeerAddress, type Advertised } from './peer/PeerAddress.js';
import { PeerListener } from './peer/PeerListener.js';
import { SequencerLink } from './peer/SequencerLink.js';
import { DEFAULT_SEQUENCER_OPTIONS, Sequencer } from './Sequencer.js';

/** Cluster mode's settings (`--etcd` and friends). */
export interface ClusterConfig {
  readonly etcd: EtcdConnection;
  readonly nodeName: string;
  readonly candidatePriority: number | undefined;
  readonly commitTimeoutSeconds: number;
  /** `--import-lock-file`: a single node's lock file to seed an empty cluster with, once caught up. */
  readonly importLockFile?: string;
  /** The leader snapshots after this many batches (undefined: the default). */
  readonly snapshotEveryBatches?: number;
  /** `--etcd-quota-bytes`: etcd's backend quota, a share of which the entries may take (undefined: etcd's default). */
  readonly etcdQuotaBytes?: number;
  /**
   * `--advertise`: where the other nodes reach this node's lock port, to forward their batches to
   * its sequencer while it leads. Unset: the address this machine reaches etcd from (or `--listen`
   * when that names one address), with the lock port.
   */
  readonly advertise?: Advertised;
}

/** A cluster node: its LockService, and the links between nodes that arrive on its lock port. */
export interface ClusterNode {
  readonly service: ClusterLockService;
  /** Takes a lock-port connection that opened with PEER_LINK_BYTE (the lock server hands it over). */
  adoptLink(socket: Socket, buffered: Buffer): void;
  /**
   * The lock port listens on `port`, bound to `listen` (undefined: every interface): declares where
   * the other nodes reach it (see ClusterConfig.advertise). Resolves with that address; rejects if
   * it could not be told (the node then appends directly while it leads: slower, as safe).
   */
  announce(port: number, listen: string | undefined): Promise<string>;
}

export const DEFAULT_CLUSTER_NAME = 'lockserver';
export const DEFAULT_COMMIT_TIMEOUT_SECONDS = 5;
/**
 * A cluster node refuses input read after its event loop stood still longer than this (see
 * LockServerOptions.staleInputMs): a command sent to a node that then stalled takes effect within
 * this much of its send, plus the commit timeout and the log's lateCommitMs, or never.
 */
export const STALE_INPUT_MS = 1_000;
/** Links refused, by kind, are logged at most once a minute each (a refused node dials again and again). */
const REFUSAL_LOG_EVERY_MS = 60_000;
/** Longest the address this node announces may take to learn and declare. */
const ANNOUNCE_TIMEOUT_MS = 5_000;
const WILDCARD_LISTEN = new Set(['0.0.0.0', '::']);

/** The table's bounds and the lock-delay, as the daemon's options set them (see ClusterOptions). */
export type ClusterTableLimits = Pick<
  ClusterOptions,
  'maxEntries' | 'maxTableBytes' | 'maxEntriesPerOwner' | 'maxEntriesPerConnection' | 'onRefused' | 'lockDelayMs'
>;

/**
 * Joins the cluster through etcd and resolves once this node has caught up with the log, so the
 * lock port opens only then. While etcd is unreachable it keeps trying and says so in the log.
 *
 * Every node has a sequencer, used while it leads, and forwards its appends to the leader's over
 * a link to the leader's lock port (AppendRouter): one etcd write carries every node's batch.
 */
export async function startClusterService(
  config: ClusterConfig,
  limits: ClusterTableLimits,
  clock: Clock,
  logger: Logger,
  { clusterObserver: observer, grants }: { readonly clusterObserver?: ClusterObserver; readonly grants?: GrantObserver } = {},
): Promise<ClusterNode> {
  logger.event('cluster-starting', {
    etcd: config.etcd.endpoints.join(','),
    cluster: config.etcd.cluster,
    name: config.nodeName,
    candidate: config.candidatePriority ?? 'off',
  });
  // Loaded here, not at start-up: the etcd client and gRPC cost a single node ~28 MB of RSS it never uses.
  const { EtcdLog } = await import('./EtcdLog.js');
  const log = new EtcdLog(config.etcd);
  const refusals = new EventThrottle(clock, 1, REFUSAL_LOG_EVERY_MS);
  const declarations = new PeerDeclarations(log, realTimers);
  const sequencer = new Sequencer(log, clock, realTimers, {
    ...DEFAULT_SEQUENCER_OPTIONS,
    bundling: () => declarations.readsBundles,
    onSend: (batches) => observer?.bundleSent?.(batches),
  });
  const identity = { name: config.nodeName, fenceKey: log.fenceKey };
  const router = new AppendRouter({
    name: config.nodeName,
    log,
    addresses: declarations,
    dial: (leader, address) =>
      new SequencerLink(
        leader,
        parsePeerAddress(address),
        identity,
        () => declarations.secret,
        (reason) => {
          const suppressed = refusals.admit(`link to ${leader}`);
          if (suppressed !== undefined) logger.event('peer-link-failed', { leader, address, reason, suppressed: suppressed || undefined });
        },
      ),
    local: sequencer,
    clock,
    timers: realTimers,
    logger,
    observer,
  });
  const links = new PeerListener(sequencer, {
    name: config.nodeName,
    secret: () => declarations.secret,
    checkFenceKey: (fenceKey) => log.checkFenceKey(fenceKey),
    logger,
    clock,
  });
  const service = new ClusterLockService(
    {
      nodeName: config.nodeName,
      candidatePriority: config.candidatePriority,
      commitTimeoutMs: config.commitTimeoutSeconds * 1000,
      ...limits,
      snapshotEveryBatches: config.snapshotEveryBatches,
      etcdQuotaBytes: config.etcdQuotaBytes,
    },
    {
      log,
      router,
      clock,
      timers: realTimers,
      // The incarnation only has to differ between a node's restarts: any random source will do.
      random: () => randomInt(0, 2 ** 32) / 2 ** 32,
      logger,
      observer,
      grants,
      onClose: () => {
        router.close();
        declarations.close();
        sequencer.close();
        links.close();
      },
    },
  );
  router.follow(service);
  declarations.start();
  try {
    // A node waiting for its name or for etcd has nothing else to keep it up.
    await keepingAlive(service.start());
  } catch (error) {
    await service.close().catch(() => {});
    throw error;
  }
  return {
    service,
    adoptLink: (socket, buffered) => links.adopt(socket, buffered),
    announce: async (port, listen) => {
      const advertised = config.advertise;
      const host =
        advertised?.host ?? (listen !== undefined && !WILDCARD_LISTEN.has(listen) ? listen : await addressTowards(config.etcd.endpoints, ANNOUNCE_TIMEOUT_MS));
      const address = formatPeerAddress({ host, port: advertised?.port ?? port });
      await log.declareAddress(address, ANNOUNCE_TIMEOUT_MS);
      logger.event('peer-address', { address, how: advertised === undefined ? 'derived' : 'advertised' });
      return address;
    },
  };
}
