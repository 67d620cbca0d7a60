import { randomInt } from 'node:crypto';
import type { Clock } from '../runtime/Clock.js';
import type { Logger } from '../runtime/Logger.js';
import { ClusterLockService, type ClusterObserver } from './ClusterLockService.js';
import type { EtcdConnection } from './EtcdLog.js';
import { realTimers } from '../runtime/Timers.js';
import { RoutedLog, type AppendRouter } from './RoutedLog.js';
import type { EtcdLog } from './EtcdLog.js';
import { formatPeerAddress, parsePeerAddress, type PeerAddress } from './PeerAddress.js';
import { SequencerLink, SequencerListener } from './PeerLink.js';
import { PeerRouting } from './PeerRouting.js';
import { DEFAULT_SEQUENCER_OPTIONS, Sequencer } from './Sequencer.js';
import { keepingAlive } from '../runtime/keepAlive.js';

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
  /**
   * `--peer`: where this node takes the other nodes' batches while it leads (its sequencer, issue
   * 20), declared to them beside its name. Unset: it sequences nothing, but still forwards to a
   * leader that declared one.
   */
  readonly peer?: PeerAddress;
}

export const DEFAULT_CLUSTER_NAME = 'lockserver';
/** A peer-refused line is logged at most this often per address and reason. */
const REFUSAL_LOG_EVERY_MS = 60_000;
export const DEFAULT_COMMIT_TIMEOUT_SECONDS = 5;
/**
 * A cluster node refuses input read after its event loop stood still longer than this (see
 * LockServerOptions.staleInputMs): a command sent to a node that then stalled takes effect within
 * this much of its send, plus the commit timeout and the log's lateCommitMs, or never.
 */
export const STALE_INPUT_MS = 1_000;

/**
 * Joins the cluster through etcd and resolves once this node has caught up with the log, so the
 * lock port opens only then. While etcd is unreachable it keeps trying and says so in the log.
 */
export async function startClusterService(
  config: ClusterConfig,
  maxEntries: number,
  clock: Clock,
  logger: Logger,
  observer?: ClusterObserver,
  peerAdmits: (address: string | undefined) => boolean = () => true,
): Promise<ClusterLockService> {
  logger.event('cluster-starting', {
    etcd: config.etcd.endpoints.join(','),
    cluster: config.etcd.cluster,
    name: config.nodeName,
    candidate: config.candidatePriority ?? 'off',
  });
  // Loaded here, not at start-up: the etcd client and gRPC cost a single node ~28 MB of RSS it never uses.
  const { EtcdLog } = await import('./EtcdLog.js');
  const { etcdLog, router } = await appendRouting(config, EtcdLog, peerAdmits, () => service, clock, logger, observer);
  const log = new RoutedLog(etcdLog, router, clock, realTimers, observer);
  const service: ClusterLockService = new ClusterLockService(
    {
      nodeName: config.nodeName,
      candidatePriority: config.candidatePriority,
      commitTimeoutMs: config.commitTimeoutSeconds * 1000,
      maxEntries,
      snapshotEveryBatches: config.snapshotEveryBatches,
    },
    // The incarnation only has to differ between a node's restarts: any random source will do.
    { log, clock, timers: realTimers, random: () => randomInt(0, 2 ** 32) / 2 ** 32, logger, observer },
  );
  router.start();
  try {
    // A node waiting for its name or for etcd has nothing else to keep it up.
    await keepingAlive(service.start());
  } catch (error) {
    await service.close().catch(() => {});
    throw error;
  }
  return service;
}

/**
 * The etcd log and where appends go (issue 20): with `--peer`, a listener for the other nodes'
 * batches (opened first, so a port 0 is known before it is declared) and a sequencer used while
 * this node leads; every node forwards to the leader's sequencer when the leader declared one.
 */
async function appendRouting(
  config: ClusterConfig,
  EtcdLogClass: typeof EtcdLog,
  peerAdmits: (address: string | undefined) => boolean,
  service: () => ClusterLockService | undefined,
  clock: Clock,
  logger: Logger,
  observer: ClusterObserver | undefined,
): Promise<{ etcdLog: EtcdLog; router: AppendRouter & { start(): void } }> {
  // Read through `routing` once it exists: a connection may come as soon as the listener listens.
  let routing: PeerRouting | undefined;
  let listener: SequencerListener | undefined;
  let declared: string | undefined;
  let etcdLog: EtcdLog | undefined;
  const peer = config.peer;
  if (peer !== undefined) {
    // peer-refused: once a minute per address and reason (a refused node dials again and again).
    const refusedAt = new Map<string, number>();
    listener = new SequencerListener({
      admits: peerAdmits,
      secret: () => routing?.secret,
      address: (port) => formatPeerAddress({ host: peer.host, port }),
      checkFence: (leaseId, fenceKey) => (etcdLog === undefined ? 'not ready' : etcdLog.checkLentFence(leaseId, fenceKey)),
      onRefused: (address, reason) => {
        const key = `${address} ${reason}`;
        const now = clock.now();
        if (now - (refusedAt.get(key) ?? Number.NEGATIVE_INFINITY) < REFUSAL_LOG_EVERY_MS) return;
        if (refusedAt.size > 1_000) refusedAt.clear();
        refusedAt.set(key, now);
        logger.event('peer-refused', { address: address ?? 'unknown', reason });
      },
    });
    try {
      await listener.listen(peer.port, peer.host);
    } catch (error) {
      throw new Error(`cannot listen on --peer ${formatPeerAddress(peer)}: ${(error as Error).message}`);
    }
    declared = formatPeerAddress({ host: peer.host, port: listener.port });
    logger.event('peer-listening', { address: declared });
  }
  etcdLog = new EtcdLogClass(config.etcd, declared);
  const sequencer =
    listener === undefined
      ? undefined
      : new Sequencer(etcdLog, clock, realTimers, {
          ...DEFAULT_SEQUENCER_OPTIONS,
          bundling: () => routing?.readsBundles ?? false,
          onSend: (batches) => observer?.bundleSent?.(batches),
        });
  if (sequencer !== undefined) listener?.serve(sequencer);
  routing = new PeerRouting(
    {
      get isLeader() {
        return service()?.isLeader ?? false;
      },
      get leader() {
        return service()?.leader;
      },
    },
    etcdLog,
    (address) => new SequencerLink(parsePeerAddress(address), () => routing?.secret),
    sequencer,
    realTimers,
    logger,
  );
  const started = routing;
  return {
    etcdLog,
    router: {
      start: () => started.start(),
      route: () => started.route(),
      close: () => {
        started.close();
        sequencer?.close();
        listener?.close();
      },
    },
  };
}
