/**
 * scripts/bench: measures one LockServer node (throughput, latency, contention, scale) side by side
 * with Redis and with a null server, and a 3-node cluster on 3 etcd members side by side with
 * etcd's own lock (throughput, contention, failover, scale); prints markdown and writes JSON.
 * See `scripts/bench --help`.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg, release, totalmem, type } from 'node:os';
import { dirname, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { PACKAGE_ROOT } from '../../src/packageRoot.js';
import {
  defaultJsonPath,
  FULL_DEFAULTS,
  parseScenarios,
  QUICK_DEFAULTS,
  SCENARIO_GROUPS,
  SCENARIOS,
  type BenchConfig,
  type LoadShape,
  type ScenarioName,
} from './config.js';
import { renderMarkdown } from './report.js';
import type { BenchResults } from './results.js';
import { killAllChildren } from './processes.js';
import { runClusterScenarios } from './scenarios/cluster.js';
import { runContention } from './scenarios/contention.js';
import { runEntryBytes } from './scenarios/entryBytes.js';
import { runExpiry } from './scenarios/expiry.js';
import { runReleaseAll } from './scenarios/releaseAll.js';
import { runHandoff } from './scenarios/handoff.js';
import { runHeldLocks } from './scenarios/heldLocks.js';
import { runIdleConnections } from './scenarios/idleConnections.js';
import { runListKey } from './scenarios/listKey.js';
import { runMatrix } from './scenarios/matrix.js';
import { runPipelineFairness } from './scenarios/pipelineFairness.js';
import { runRandomKeys } from './scenarios/randomKeys.js';
import { LockServerTarget, lockserverCli } from './targets/LockServerTarget.js';
import { NullServerTarget } from './targets/NullServerTarget.js';
import { RedisTarget } from './targets/RedisTarget.js';

const EXIT_USAGE = 2;

function positiveInteger(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new InvalidArgumentError(`"${value}" is not a positive whole number.`);
  return Number(value);
}

function count(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`"${value}" is not a whole number.`);
  return Number(value);
}

function list<T>(parse: (item: string) => T): (value: string) => T[] {
  return (value) => value.split(',').map((item) => parse(item.trim()));
}

function scenarios(value: string): ScenarioName[] {
  try {
    return parseScenarios(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

function seconds(value: string): number {
  const parsed = Number(value);
  if (!(parsed > 0) || parsed > 3_600) throw new InvalidArgumentError(`"${value}" is not a number of seconds from 0 to 3600.`);
  return parsed * 1000;
}

function nameLength(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 8 || Number(value) > 255) throw new InvalidArgumentError(`"${value}" is not a name length from 8 to 255.`);
  return Number(value);
}

function delayRange(value: string): { min: number; max: number } {
  const match = value.match(/^(\d+),(\d+)$/);
  if (!match || Number(match[1]) > Number(match[2]) || Number(match[2]) > 60_000) {
    throw new InvalidArgumentError(`"${value}" is not MIN,MAX in ms (MIN ≤ MAX ≤ 60000), e.g. 200,1000.`);
  }
  return { min: Number(match[1]), max: Number(match[2]) };
}

function loadShape(value: string): LoadShape {
  const match = value.match(/^(\d+)x(\d+)$/);
  if (!match || Number(match[1]) < 1 || Number(match[2]) < 1) throw new InvalidArgumentError(`"${value}" is not CONNECTIONSxDEPTH, e.g. 50x16.`);
  return { connections: Number(match[1]), depth: Number(match[2]) };
}

const program = new Command()
  .name('scripts/bench')
  .description(
    'Benchmarks one LockServer node on loopback: throughput/latency, contention, scale, Redis side by side, generator ceiling;\n' +
      "and a cluster (3 etcd members, 3 nodes): throughput beside etcd's own lock, contention, failover, scale (--only cluster);\n" +
      "handoff latency (release -> the next owner told) beside etcd's lock, and what idle waiters cost etcd (--only handoff).\n" +
      'Starts every server itself; needs only `npm install` (Redis rows run when redis-server/redis-benchmark are installed,\n' +
      'cluster rows when etcd is on the PATH).',
  )
  .option('--quick', 'a short smoke run (about a minute): shorter phases, smaller sizes', false)
  .option(
    '--only <scenarios>',
    `run only these (comma-separated): ${SCENARIOS.join(',')}; "cluster" means every cluster-… one, "handoff" every handoff-… one`,
    scenarios,
  )
  .option('--skip <scenarios>', 'leave these out (comma-separated; "cluster" and "handoff" too)', scenarios)
  .option('--connections <list>', 'connection counts for the throughput matrix (default 1,50,500)', list(positiveInteger))
  .option('--pipeline <list>', 'pipeline depths for the throughput matrix (default 1,16)', list(positiveInteger))
  .option('--duration <seconds>', 'measured seconds per load phase (default 3, quick 1)', seconds)
  .option('--repeat <n>', 'rounds of the throughput matrix, each cell reporting its median (default 3, quick 1)', positiveInteger)
  .option('--warmup <seconds>', 'unmeasured seconds before each load phase (default 1, quick 0.3)', seconds)
  .option('--workers <n>', 'load-generator worker threads', positiveInteger, 1)
  .option('--contenders <n>', 'clients contending for one lock (default 200, quick 50)', positiveInteger)
  .option('--rounds <n>', 'contention rounds (default 3, quick 1)', positiveInteger)
  .option('--held <list>', 'held-lock table sizes (default 0,100000,1000000; quick 0,100000)', list(count))
  .option('--held-load <shapes>', 'loads run at each table size, CONNECTIONSxDEPTH', list(loadShape), [loadShape('50x1'), loadShape('50x16')])
  .option('--list-entries <n>', 'entries under the listed key (default 10000)', positiveInteger)
  .option('--fairness-requests <n>', 'list requests one client pipelines while another polls stats (default 20000, quick 2000)', positiveInteger)
  .option('--expire <n>', 'locks expiring in the same second (default 1000000, quick 100000)', positiveInteger)
  .option('--release-all <n>', 'locks, each with a waiter, one owner releases at once (default 400000, quick 100000)', positiveInteger)
  .option('--cluster-release-all <n>', 'cluster: locks, each with a waiter, one owner releases at once (default 400000, quick 100000)', positiveInteger)
  .option(
    '--entry-bytes-count <n>',
    'entry-bytes: entries filled for each figure (default 200000, quick 20000; a cluster row fills no more than the etcd entry-bytes bound holds)',
    positiveInteger,
  )
  .option('--entry-bytes-names <list>', 'entry-bytes: lengths of key, index and owner, one run each (default 255,12)', list(nameLength))
  .option('--idle <n>', 'idle connections held open (default 10000, quick 1000)', positiveInteger)
  .option('--server-node-flags <flags>', 'extra node flags for our server, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"', '')
  .option(
    '--server-root <dir>',
    "run another build as our server and every cluster node: DIR/dist/src/cli/lockserver.js (a worktree of an older commit, built), the bench's own code otherwise",
  )
  .option('--server-log <file>', "append our server's output to this file (with --server-node-flags=--trace-gc, say)")
  .option('--json <file>', 'where to write the JSON results (default: <os tmpdir>/lockserver-bench/bench-<time>.json)')
  .option('--redis-server <path>', 'redis-server to compare with (default: from PATH)')
  .option('--redis-benchmark <path>', 'redis-benchmark to drive it (default: from PATH)')
  .option('--key-space <list>', 'random-keys workload: key spaces shared by all connections (default 100000,10000000; quick 100000)', list(positiveInteger))
  .option('--random-load <shapes>', 'loads of the random-keys workload, CONNECTIONSxDEPTH', list(loadShape), [loadShape('50x1'), loadShape('50x16')])
  .option('--rss-settle <seconds>', 'random keys: read our RSS again this long after the load (default 10, quick 3)', seconds)
  .option('--cluster-connections <list>', 'cluster: connection counts (and etcd lockers) of the throughput rows (default 48,480)', list(positiveInteger))
  .option('--cluster-held <n>', 'cluster: locks held in the scale scenario (default 1000000, quick 100000)', positiveInteger)
  .option('--cluster-soak <seconds>', "cluster: seconds of full load before etcd's data dir is measured (default 600, quick 20)", seconds)
  .option('--handoff-tries <n>', 'handoff: tries of every row (default 6, quick 3)', positiveInteger)
  .option('--handoff-delay <min,max>', 'handoff: the owner lets go this many ms after the waiter queued, drawn in the range (default 200,1000)', delayRange)
  .option('--waiters <n>', 'idle waiters: locks held, each with one waiter queued behind it (default 1000)', positiveInteger)
  .option('--waiters-window <seconds>', "idle waiters: seconds over which etcd's requests are counted in each case (default 10, quick 3)", seconds)
  .option('--waiters-poll <seconds>', 'idle waiters: interval of the polling waiters (default 1)', seconds)
  .option('--seed <n>', "seed for contention priorities and order, handoff delays, pollers' phases", count, 1)
  .exitOverride()
  .configureOutput({ outputError: (text, write) => write(text.replace(/\n+$/, '') + '\n') });

interface CliOptions {
  quick: boolean;
  only?: ScenarioName[];
  skip?: ScenarioName[];
  connections?: number[];
  pipeline?: number[];
  duration?: number;
  repeat?: number;
  warmup?: number;
  workers: number;
  contenders?: number;
  rounds?: number;
  held?: number[];
  heldLoad: LoadShape[];
  listEntries?: number;
  fairnessRequests?: number;
  expire?: number;
  releaseAll?: number;
  clusterReleaseAll?: number;
  entryBytesCount?: number;
  entryBytesNames?: number[];
  idle?: number;
  serverNodeFlags: string;
  serverRoot?: string;
  serverLog?: string;
  json?: string;
  redisServer?: string;
  redisBenchmark?: string;
  clusterConnections?: number[];
  clusterHeld?: number;
  clusterSoak?: number;
  handoffTries?: number;
  handoffDelay?: { min: number; max: number };
  waiters?: number;
  waitersWindow?: number;
  waitersPoll?: number;
  seed: number;
  keySpace?: number[];
  randomLoad: LoadShape[];
  rssSettle?: number;
}

function configFrom(o: CliOptions): BenchConfig {
  const d = o.quick ? QUICK_DEFAULTS : FULL_DEFAULTS;
  const chosen = new Set<ScenarioName>(o.only ?? SCENARIOS);
  for (const s of o.skip ?? []) chosen.delete(s);
  return {
    quick: o.quick,
    scenarios: chosen,
    connections: o.connections ?? d.connections,
    pipelines: o.pipeline ?? d.pipelines,
    warmupMs: o.warmup ?? d.warmupMs,
    durationMs: o.duration ?? d.durationMs,
    repeats: o.repeat ?? d.repeats,
    workers: o.workers,
    contenders: o.contenders ?? d.contenders,
    rounds: o.rounds ?? d.rounds,
    roundLimitMs: d.roundLimitMs,
    held: o.held ?? d.held,
    heldLoads: o.heldLoad,
    listEntries: o.listEntries ?? d.listEntries,
    listCalls: d.listCalls,
    fairnessEntries: d.fairnessEntries,
    fairnessRequests: o.fairnessRequests ?? d.fairnessRequests,
    expireCount: o.expire ?? d.expireCount,
    releaseAllCount: o.releaseAll ?? d.releaseAllCount,
    clusterReleaseAllCount: o.clusterReleaseAll ?? d.clusterReleaseAllCount,
    entryBytesCount: o.entryBytesCount ?? d.entryBytesCount,
    entryBytesNames: o.entryBytesNames ?? d.entryBytesNames,
    serverRoot: o.serverRoot === undefined ? undefined : resolve(o.serverRoot),
    idleConnections: o.idle ?? d.idleConnections,
    serverNodeFlags: o.serverNodeFlags.split(/\s+/).filter((f) => f !== ''),
    serverLog: o.serverLog,
    jsonPath: o.json ?? defaultJsonPath(),
    redisServer: o.redisServer,
    redisBenchmark: o.redisBenchmark,
    seed: o.seed,
    keySpaces: o.keySpace ?? d.keySpaces,
    randomLoads: o.randomLoad,
    rssSettleMs: o.rssSettle ?? d.rssSettleMs,
    clusterConnections: o.clusterConnections ?? d.clusterConnections,
    clusterHeld: o.clusterHeld ?? d.clusterHeld,
    clusterSoakMs: o.clusterSoak ?? d.clusterSoakMs,
    failoverClients: d.failoverClients,
    failoverBaselineMs: d.failoverBaselineMs,
    failoverObserveMs: d.failoverObserveMs,
    failoverPauseMs: d.failoverPauseMs,
    handoffTries: o.handoffTries ?? d.handoffTries,
    handoffDelayMs: o.handoffDelay ?? d.handoffDelayMs,
    waiters: o.waiters ?? d.waiters,
    waitersWindowMs: o.waitersWindow ?? d.waitersWindowMs,
    waitersPollMs: o.waitersPoll ?? d.waitersPollMs,
  };
}

/** The checkout whose lockserver runs (--server-root, or this one), its commit, and whether it has uncommitted changes to tracked files. */
async function serverBuild(root: string | undefined): Promise<{ root: string; commit?: string; modified?: boolean }> {
  const dir = root ?? PACKAGE_ROOT;
  const git = (...args: string[]): Promise<string> => promisify(execFile)('git', ['-C', dir, ...args]).then(({ stdout }) => stdout.trim());
  try {
    return { root: dir, commit: await git('rev-parse', '--short', 'HEAD'), modified: (await git('status', '--porcelain', '--untracked-files=no')) !== '' };
  } catch {
    return { root: dir };
  }
}

function log(line: string): void {
  process.stderr.write(`bench: ${line}\n`);
}

async function main(): Promise<void> {
  let options: CliOptions;
  try {
    options = program.parse(process.argv).opts<CliOptions>();
  } catch (error) {
    if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? 0 : EXIT_USAGE);
    throw error;
  }
  const config = configFrom(options);
  if (config.serverRoot !== undefined && !existsSync(lockserverCli(config.serverRoot))) {
    process.stderr.write(`scripts/bench: --server-root: ${lockserverCli(config.serverRoot)} is missing (run npm run build there)\n`);
    process.exit(EXIT_USAGE);
  }
  // Ctrl-C or a kill: every server, etcd member and node started so far goes with us.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      const killed = killAllChildren();
      log(`${signal}: stopped ${killed} process(es) the benchmark had started`);
      process.exit(130);
    });
  }
  const ours = new LockServerTarget(config.serverNodeFlags, config.serverLog, lockserverCli(config.serverRoot));
  const results: BenchResults = {
    startedAt: new Date().toISOString(),
    command: ['scripts/bench', ...process.argv.slice(2)].join(' '),
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown CPU',
      os: `${type()} ${release()}`,
      node: process.version,
      totalMemoryBytes: totalmem(),
      note: 'Load generator, servers and redis-benchmark all run on this one machine over loopback and share its cores.',
    },
    config: { ...config, scenarios: [...config.scenarios] },
    serverBuild: await serverBuild(config.serverRoot),
    loadAverages: [],
    errors: [],
  };

  const matrix = async (): Promise<void> => {
    const has = (name: ScenarioName): boolean => config.scenarios.has(name);
    const measured = await runMatrix(
      {
        ours: has('throughput') ? ours : undefined,
        ceiling: has('ceiling') ? new NullServerTarget() : undefined,
        redis: has('redis') ? new RedisTarget(config.redisServer) : undefined,
      },
      config,
      log,
    );
    Object.assign(results, measured);
  };
  const matrixNames: ScenarioName[] = ['throughput', 'ceiling', 'redis'];
  const steps: Array<[string, () => Promise<void>]> = [
    ['throughput/ceiling/redis', matrix],
    [
      'random',
      async () =>
        void (results.random = await runRandomKeys(
          {
            ours,
            // Side by side unless left out by name (--only random still runs them).
            ceiling: options.skip?.includes('ceiling') ? undefined : new NullServerTarget(),
            redis: options.skip?.includes('redis') ? undefined : new RedisTarget(config.redisServer),
          },
          config,
          log,
        )),
    ],
    ['contention', async () => void (results.contention = await runContention(ours, config, log))],
    ['held', async () => void (results.held = await runHeldLocks(ours, config, log))],
    ['list', async () => void (results.list = await runListKey(ours, config, log))],
    ['fairness', async () => void (results.fairness = await runPipelineFairness(ours, config, log))],
    ['expiry', async () => void (results.expiry = await runExpiry(ours, config, log))],
    ['release-all', async () => void (results.releaseAll = await runReleaseAll(ours, config, log))],
    ['entry-bytes', async () => void (results.entryBytes = await runEntryBytes(ours, config, log))],
    ['idle', async () => void (results.idle = await runIdleConnections(ours, config, log))],
    [
      'cluster',
      async () => {
        const cluster = await runClusterScenarios(config, log);
        results.cluster = cluster;
        results.errors.push(...cluster.errors);
      },
    ],
    [
      'handoff',
      async () => {
        const handoff = await runHandoff(ours, config, log);
        results.handoff = handoff;
        results.errors.push(...handoff.errors);
      },
    ],
  ];
  for (const [name, step] of steps) {
    const wanted = name.includes('/')
      ? matrixNames.some((n) => config.scenarios.has(n))
      : SCENARIO_GROUPS[name] !== undefined
        ? SCENARIO_GROUPS[name].some((n) => config.scenarios.has(n))
        : config.scenarios.has(name as ScenarioName);
    if (!wanted) continue;
    const before = loadavg()[0]!;
    log(`${name}: starting (load average ${before.toFixed(2)})`);
    try {
      await step();
    } catch (error) {
      results.errors.push({ scenario: name, message: (error as Error).stack ?? String(error) });
      log(`${name}: failed: ${(error as Error).message}`);
    }
    results.loadAverages.push({ scenario: name, before, after: loadavg()[0]! });
  }
  results.finishedAt = new Date().toISOString();

  await mkdir(dirname(config.jsonPath), { recursive: true });
  await writeFile(config.jsonPath, JSON.stringify(results, null, 2) + '\n');
  process.stdout.write(renderMarkdown(results));
  log(`JSON written to ${config.jsonPath}`);
  if (results.errors.length > 0) process.exitCode = 1;
}

void main();
