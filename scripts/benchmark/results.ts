import type { BenchConfig } from './config.js';
import type { ClusterResult } from './scenarios/cluster.js';
import type { ContentionResult } from './scenarios/contention.js';
import type { EntryBytesResult } from './scenarios/entryBytes.js';
import type { ExpiryResult } from './scenarios/expiry.js';
import type { ReleaseAllResult } from './scenarios/releaseAll.js';
import type { HandoffResult } from './scenarios/handoff.js';
import type { HeldLocksRow } from './scenarios/heldLocks.js';
import type { IdleResult } from './scenarios/idleConnections.js';
import type { ListResult } from './scenarios/listKey.js';
import type { RedisResult, ThroughputRow } from './scenarios/matrix.js';
import type { PipelineFairnessResult } from './scenarios/pipelineFairness.js';
import type { RandomKeysRow } from './scenarios/randomKeys.js';

export interface MachineInfo {
  readonly cpus: number;
  readonly cpuModel: string;
  readonly os: string;
  readonly node: string;
  readonly totalMemoryBytes: number;
  readonly note: string;
}

/** One-minute load average around each scenario: how busy the machine was besides us. */
export interface LoadSample {
  readonly scenario: string;
  readonly before: number;
  readonly after: number;
}

/** Everything one run measured; written as JSON and rendered as markdown. */
export interface BenchResults {
  readonly startedAt: string;
  finishedAt?: string;
  readonly command: string;
  readonly machine: MachineInfo;
  readonly config: Omit<BenchConfig, 'scenarios'> & { readonly scenarios: string[] };
  /** The checkout whose dist/src/cli/lockserver.js ran as our server (--server-root, or the bench's own), its commit, and whether tracked files differed from it. */
  readonly serverBuild?: { readonly root: string; readonly commit?: string; readonly modified?: boolean };
  readonly loadAverages: LoadSample[];
  readonly errors: Array<{ readonly scenario: string; readonly message: string }>;
  throughput?: ThroughputRow[];
  ceiling?: ThroughputRow[];
  redis?: RedisResult;
  contention?: ContentionResult;
  held?: HeldLocksRow[];
  list?: ListResult;
  fairness?: PipelineFairnessResult;
  expiry?: ExpiryResult;
  releaseAll?: ReleaseAllResult;
  entryBytes?: EntryBytesResult;
  idle?: IdleResult;
  random?: RandomKeysRow[];
  cluster?: ClusterResult;
  handoff?: HandoffResult;
}
