#!/usr/bin/env node
import { join, resolve } from 'node:path';
import { Command, CommanderError } from 'commander';
import { systemClock } from '../runtime/Clock.js';
import { DEFAULT_MAX_ENTRIES } from '../locks/LockTable.js';
import {
  DEFAULT_MAX_LOCKS_PER_CONNECTION,
  DEFAULT_MAX_LOCKS_PER_OWNER,
  DEFAULT_MAX_TABLE_BYTES,
  ENTRY_OVERHEAD_BYTES,
  MAX_TABLE_BYTES,
  MIN_TABLE_BYTES,
} from '../locks/TableLimits.js';
import { DEFAULT_PORT } from '../defaultPort.js';
import { DEFAULT_METRICS_LISTEN, serveMetrics } from '../metrics/serveMetrics.js';
import { PACKAGE_ROOT } from '../packageRoot.js';
import { PACKAGE_VERSION } from '../packageVersion.js';
import { readFile } from 'node:fs/promises';
import { ClusterLockService } from '../cluster/ClusterLockService.js';
import { DEFAULT_ETCD_QUOTA_BYTES, MAX_ETCD_QUOTA_BYTES, MIN_ETCD_QUOTA_BYTES } from '../cluster/EntryBytesRules.js';
import { hostname } from 'node:os';
import { DEFAULT_CLUSTER_NAME, DEFAULT_COMMIT_TIMEOUT_SECONDS, type ClusterConfig } from '../cluster/startClusterService.js';
import { Daemon, StartupError } from '../server/Daemon.js';
import type { Advertised } from '../cluster/peer/PeerAddress.js';
import { streamLogger, type Logger } from '../runtime/Logger.js';
import {
  ETCD_PASSWORD_VARIABLE,
  EtcdAuthUsageError,
  etcdCredentials,
  etcdPasswordSource,
  parseEtcdUser,
  type EtcdPasswordSource,
  type EtcdUserOption,
} from './etcdAuth.js';
import { startedByNpm, watchNpmParent } from './npmParent.js';
import {
  byteSizeIn,
  integerIn,
  parseCandidatePriority,
  parseClusterName,
  parseEndpoints,
  parseFileName,
  parseListenAddress,
  parseNodeName,
  parseAdvertise,
  parsePort,
  parseLockDelay,
} from './options.js';

export const DEFAULT_MAX_CONNECTIONS = 4096;
export const DEFAULT_FRAME_TIMEOUT_SECONDS = 10;
export const DEFAULT_LOCK_FILE = 'lockserver.locks';
export const DEFAULT_STAT_FILE = 'lockserver.stats';
/** Exit code for a bad command line, as many Unix tools use. */
const EXIT_USAGE = 2;
/** Exit code for a failed start (bad file, port taken). */
const EXIT_STARTUP = 1;

const program = new Command()
  .name('lockserver')
  .description('LockServer 0.9b compatible TCP lock daemon')
  .version(PACKAGE_VERSION, '-V, --version')
  .option('-d, --debug', 'amusing, informative messages on stderr about each connection and command', false)
  .option('-p, --port <n>', 'TCP port to listen on (0 = any free port)', parsePort, DEFAULT_PORT)
  .option('--listen <addr>', 'address to bind (default: every interface)', parseListenAddress)
  .option('--hosts <file>', 'allowlist file', parseFileName, join(PACKAGE_ROOT, 'hosts'))
  .option('--lock-file <file>', 'where locks are saved and reloaded', parseFileName, DEFAULT_LOCK_FILE)
  .option('--stat-file <file>', 'where SIGUSR1 writes the statistics', parseFileName, DEFAULT_STAT_FILE)
  .option('--max-connections <n>', 'above this, new connections are refused as too busy', integerIn(1, 1_000_000), DEFAULT_MAX_CONNECTIONS)
  .option('--frame-timeout <seconds>', 'close a connection whose request stays incomplete this long', integerIn(1, 86_400), DEFAULT_FRAME_TIMEOUT_SECONDS)
  .option('--idle-timeout <seconds>', 'close a connection with no traffic this long (0 = never)', integerIn(0, 86_400 * 365), 0)
  .option('--max-locks <n>', 'most entries (owners + waiters) held; beyond, requests get position 0', integerIn(1, 100_000_000), DEFAULT_MAX_ENTRIES)
  .option(
    '--max-table-bytes <size>',
    `most bytes the entries take (names + ${ENTRY_OVERHEAD_BYTES} each; K, M, G suffixes); beyond, requests get position 0 (default 1G)`,
    byteSizeIn(MIN_TABLE_BYTES, MAX_TABLE_BYTES),
    DEFAULT_MAX_TABLE_BYTES,
  )
  .option(
    '--max-locks-per-owner <n>',
    'most entries one owner holds; beyond, its requests get position 0',
    integerIn(1, 100_000_000),
    DEFAULT_MAX_LOCKS_PER_OWNER,
  )
  .option(
    '--max-locks-per-connection <n>',
    'most entries created through one connection and still held; beyond, its requests get position 0',
    integerIn(1, 100_000_000),
    DEFAULT_MAX_LOCKS_PER_CONNECTION,
  )
  .option(
    '--lock-delay <seconds>',
    "hold a lock back this long after its owner's TTL ran out, before the next grant (0 = none, as 0.9b; a cluster uses its leader's)",
    parseLockDelay,
    0,
  )
  .option('--metrics-port <n>', 'serve Prometheus metrics over HTTP on this port (default: off)', parsePort)
  .option('--metrics-listen <addr>', 'address the metrics endpoint binds', parseListenAddress, DEFAULT_METRICS_LISTEN)
  .option('--etcd <urls>', 'cluster mode: etcd endpoints, comma-separated (e.g. http://127.0.0.1:2379)', parseEndpoints)
  .option('--cluster <name>', "cluster mode: the cluster's name, prefix of every etcd key it writes", parseClusterName, DEFAULT_CLUSTER_NAME)
  .option('--name <node>', "cluster mode: this node's name, unique in the cluster (default: host:port)", parseNodeName)
  .option('--candidate-priority <1-15|off>', 'cluster mode: stand for leader with this priority (smaller preferred), or never', parseCandidatePriority, 8)
  .option(
    '--commit-timeout <seconds>',
    'cluster mode: a command not committed this long closes its connection unanswered',
    integerIn(1, 3_600),
    DEFAULT_COMMIT_TIMEOUT_SECONDS,
  )
  .option('--etcd-cacert <file>', 'cluster mode: CA certificate to verify etcd (TLS)', parseFileName)
  .option('--etcd-cert <file>', 'cluster mode: client certificate for etcd (TLS)', parseFileName)
  .option('--etcd-key <file>', 'cluster mode: client key for etcd (TLS)', parseFileName)
  .option('--etcd-user <user>', `cluster mode: etcd user; its password from $${ETCD_PASSWORD_VARIABLE} or --etcd-password-file`, parseEtcdUser)
  .option('--etcd-password-file <file>', "cluster mode: a file holding the etcd user's password (one final line break is dropped)", parseFileName)
  .option(
    '--advertise <host[:port]>',
    "cluster mode: where the other nodes reach this node's lock port, to forward their batches to it while it leads (default: the address this machine reaches etcd from, and --port)",
    parseAdvertise,
  )
  .option('--import-lock-file <file>', "cluster mode: seed an empty cluster from a single node's lock file (refused if it holds entries)", parseFileName)
  .option(
    '--etcd-quota-bytes <bytes>',
    `cluster mode: etcd's --quota-backend-bytes; new entries are refused (position 0) once they would take a twentieth of it (default ${DEFAULT_ETCD_QUOTA_BYTES}, etcd's own)`,
    integerIn(MIN_ETCD_QUOTA_BYTES, MAX_ETCD_QUOTA_BYTES),
  )
  .option(
    '--snapshot-every <batches>',
    'cluster mode: the leader snapshots after this many batches (or 60 s with any change; default 10000)',
    integerIn(1, 1_000_000_000),
  )
  .exitOverride()
  .configureOutput({ outputError: (text, write) => write(text.replace(/\n+$/, '') + '\n') });

interface CliOptions {
  debug: boolean;
  port: number;
  listen?: string;
  hosts: string;
  lockFile: string;
  statFile: string;
  maxConnections: number;
  frameTimeout: number;
  idleTimeout: number;
  maxLocks: number;
  maxTableBytes: number;
  maxLocksPerOwner: number;
  maxLocksPerConnection: number;
  lockDelay: number;
  metricsPort?: number;
  metricsListen: string;
  etcd?: string[];
  cluster: string;
  name?: string;
  candidatePriority: number | 'off';
  commitTimeout: number;
  etcdCacert?: string;
  etcdCert?: string;
  etcdKey?: string;
  etcdUser?: EtcdUserOption;
  etcdPasswordFile?: string;
  importLockFile?: string;
  advertise?: Advertised;
  snapshotEvery?: number;
  etcdQuotaBytes?: number;
}

/** Cluster settings from the command line; undefined without --etcd (the single node). */
async function clusterConfig(options: CliOptions, etcdPassword: EtcdPasswordSource | undefined): Promise<ClusterConfig | undefined> {
  if (options.etcd === undefined) {
    const stray = [
      'name',
      'snapshotEvery',
      'etcdQuotaBytes',
      'etcdCacert',
      'etcdCert',
      'etcdKey',
      'etcdUser',
      'etcdPasswordFile',
      'importLockFile',
      'advertise',
    ].filter((o) => (options as unknown as Record<string, unknown>)[o] !== undefined);
    if (stray.length > 0)
      throw new StartupError('--name, --snapshot-every, --import-lock-file, --advertise and the --etcd-* options need --etcd (cluster mode)');
    return undefined;
  }
  if ((options.etcdCert === undefined) !== (options.etcdKey === undefined)) {
    throw new StartupError('--etcd-cert and --etcd-key go together');
  }
  const read = async (file: string | undefined): Promise<Buffer | undefined> => {
    if (file === undefined) return undefined;
    try {
      return await readFile(file);
    } catch (error) {
      throw new StartupError(`cannot read ${file}: ${(error as Error).message}`);
    }
  };
  if (options.etcdCert !== undefined && options.etcdCacert === undefined) {
    throw new StartupError('--etcd-cert and --etcd-key need --etcd-cacert (TLS)');
  }
  return {
    etcd: {
      endpoints: options.etcd,
      cluster: options.cluster,
      caCert: await read(options.etcdCacert),
      cert: await read(options.etcdCert),
      key: await read(options.etcdKey),
      user: options.etcdUser === undefined || etcdPassword === undefined ? undefined : await etcdCredentials(options.etcdUser, etcdPassword),
    },
    nodeName: options.name ?? `${hostname()}:${options.port}`,
    candidatePriority: options.candidatePriority === 'off' ? undefined : options.candidatePriority,
    commitTimeoutSeconds: options.commitTimeout,
    snapshotEveryBatches: options.snapshotEvery,
    etcdQuotaBytes: options.etcdQuotaBytes,
    advertise: options.advertise,
    importLockFile: options.importLockFile === undefined ? undefined : resolve(options.importLockFile),
  };
}

function parseCommandLine(): { options: CliOptions; etcdPassword: EtcdPasswordSource | undefined } {
  try {
    program.parse(process.argv);
    const options = program.opts<CliOptions>();
    try {
      return { options, etcdPassword: etcdPasswordSource(options.etcdUser, options.etcdPasswordFile, process.env) };
    } catch (error) {
      if (error instanceof EtcdAuthUsageError) program.error(`error: ${error.message}`);
      throw error;
    }
  } catch (error) {
    // commander exits 1 on usage errors; scripts expect 2. Help and --version exit 0.
    if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? 0 : EXIT_USAGE);
    throw error;
  }
}

/** `--etcd-user user:password` still works, but says why it should not be used. */
function warnOfDeprecatedOptions(etcdPassword: EtcdPasswordSource | undefined, logger: Logger): void {
  if (etcdPassword?.from !== 'command-line') return;
  logger.event('option-deprecated', {
    option: '--etcd-user user:password',
    why: 'the password shows in ps to every user of this machine',
    instead: `--etcd-user user with ${ETCD_PASSWORD_VARIABLE} or --etcd-password-file`,
  });
}

async function main(): Promise<void> {
  const { options, etcdPassword } = parseCommandLine();
  // Once stderr is gone (its reader closed the pipe: EPIPE), the log is lost but serving goes on:
  // a write error there must not become an uncaught exception, whose fatal event would be written
  // to the same broken stream, and so on without end.
  let stderrOpen = true;
  process.stderr.on('error', () => (stderrOpen = false));
  const logger = streamLogger((line) => {
    if (stderrOpen) process.stderr.write(line);
  }, options.debug);
  warnOfDeprecatedOptions(etcdPassword, logger);
  try {
    const served =
      options.metricsPort === undefined
        ? undefined
        : await serveMetrics(options.metricsPort, options.metricsListen, logger, systemClock, {
            clusterMode: options.etcd !== undefined,
            catchUpLimitMs: options.commitTimeout * 1000,
          });
    const metrics = served?.metrics;
    const daemon = await Daemon.start(
      {
        port: options.port,
        listen: options.listen,
        hostsFile: resolve(options.hosts),
        lockFile: resolve(options.lockFile),
        statFile: resolve(options.statFile),
        maxConnections: options.maxConnections,
        frameTimeoutSeconds: options.frameTimeout,
        idleTimeoutSeconds: options.idleTimeout,
        maxLocks: options.maxLocks,
        maxTableBytes: options.maxTableBytes,
        maxLocksPerOwner: options.maxLocksPerOwner,
        maxLocksPerConnection: options.maxLocksPerConnection,
        lockDelayMs: Math.round(options.lockDelay * 1000),
        cluster: await clusterConfig(options, etcdPassword),
      },
      {
        clock: systemClock,
        logger,
        exit: (code) => process.exit(code),
        handleSignals: true,
        onExpired: metrics?.countExpired,
        clusterObserver: metrics,
        grants: metrics,
      },
    );
    // Under npm start or npx the server must not outlive the npm that started it (see npmParent.ts).
    if (startedByNpm(process.env)) watchNpmParent(() => void daemon.nobleDeath('parent-exited', 0));
    metrics?.attach(daemon);
    served?.readiness.attach(daemon);
    if (served !== undefined && daemon.service instanceof ClusterLockService) {
      const cluster = daemon.service;
      served.metrics.setCluster({
        role: () => (cluster.isLeader ? 'leader' : 'follower'),
        leaderChanges: () => cluster.leaderChanges,
        figures: () => cluster.figures(),
      });
      served.readiness.setCluster(() => cluster.figures());
    }
    logger.debug?.(`ready to hand out locks on port ${daemon.address.port}; may all your waits be short`);
  } catch (error) {
    // Like every other end, a failed start ends with its exit line, after the reason.
    logger.event('start-failed', { error: (error as Error).message });
    logger.event('exit', { code: EXIT_STARTUP });
    process.exit(EXIT_STARTUP);
  }
}

void main();
