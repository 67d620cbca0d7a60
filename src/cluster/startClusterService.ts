import { randomInt } from 'node:crypto';
import type { Clock } from '../runtime/Clock.js';
import type { Logger } from '../runtime/Logger.js';
import { ClusterLockService, type ClusterObserver } from './ClusterLockService.js';
import type { EtcdConnection } from './EtcdLog.js';
import { realTimers } from '../runtime/Timers.js';
import { RoutedLog, type AppendRoute } from './RoutedLog.js';
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
  /** Prototype (issue 20): sequence on this port (127.0.0.1), or forward to this port. */
  readonly sequencerPort?: number;
  readonly forwardToPort?: number;
}

export const DEFAULT_CLUSTER_NAME = 'lockserver';
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
): Promise<ClusterLockService> {
  logger.event('cluster-starting', {
    etcd: config.etcd.endpoints.join(','),
    cluster: config.etcd.cluster,
    name: config.nodeName,
    candidate: config.candidatePriority ?? 'off',
  });
  // Loaded here, not at start-up: the etcd client and gRPC cost a single node ~28 MB of RSS it never uses.
  const { EtcdLog } = await import('./EtcdLog.js');
  const etcdLog = new EtcdLog(config.etcd);
  // Prototype wiring (issue 20): a fixed sequencer, chosen by environment; discovery comes later.
  let route: AppendRoute = { kind: 'direct' };
  if (config.sequencerPort !== undefined) {
    const { Sequencer, DEFAULT_SEQUENCER_OPTIONS } = await import('./Sequencer.js');
    const { SequencerListener } = await import('./PeerLink.js');
    const sequencer = new Sequencer(etcdLog, clock, realTimers, {
      ...DEFAULT_SEQUENCER_OPTIONS,
      gatherMs: Number(process.env.SEQ_GATHER_MS ?? DEFAULT_SEQUENCER_OPTIONS.gatherMs),
    });
    await new SequencerListener(sequencer).listen(config.sequencerPort, '127.0.0.1');
    route = { kind: 'here', sequencer };
  } else if (config.forwardToPort !== undefined) {
    const { SequencerLink } = await import('./PeerLink.js');
    route = { kind: 'forward', channel: new SequencerLink(config.forwardToPort, '127.0.0.1') };
  }
  const log = new RoutedLog(etcdLog, () => route, clock, realTimers);
  const service = new ClusterLockService(
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
  // A node waiting for its name or for etcd has nothing else to keep it up.
  await keepingAlive(service.start());
  return service;
}
