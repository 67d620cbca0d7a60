/**
 * What one round of the cluster costs outside our own code, on this machine: the CPU of one
 * append (the gRPC call EtcdLog makes for a batch, through the etcd3 client), of one watch event
 * bringing a batch to a node, and of the etcd members committing it. A cluster round is one
 * append on the node that sends it, one watch event on every node, and one commit in etcd; so
 * these three figures, with the machine's cores, bound how many rounds per second any code of
 * ours could get (RESULTS.md's history has a run of it).
 *
 * Appends are serial (a node keeps one batch in flight), with values the size of a 16-command
 * batch of the bench's workload; watch events arrive one by one, as they do at a node. Three
 * watcher processes (this script with --watch), one per node of a cluster, follow the same log
 * key beside the appender, so the members deliver each batch three times, as they do for a
 * cluster.
 *
 *   node dist/scripts/benchmark/micro/etcdRound.js --endpoints http://127.0.0.1:2379[,…] \
 *       [--etcd-pids P1,P2,P3] [--appends 2000] [--value-bytes 700] [--together 1]
 *
 * --together 3 sends the appends of three clients at the same moment each time (as three nodes
 * would if their rounds coincided): etcd then commits them in one Raft round.
 *
 * Against a running etcd (scripts/cluster start, say; --etcd-pids from `pgrep -f 'etcd --name'`).
 * Writes under the cluster name `etcd-round-micro`, which no node uses, and deletes it at the end.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import { Etcd3 } from 'etcd3';
import { EtcdLog } from '../../../src/cluster/EtcdLog.js';
import type { LogRecord } from '../../../src/cluster/ReplicatedLog.js';
import { cpuSeconds } from '../processes.js';

const CLUSTER = 'etcd-round-micro';
const WATCHERS = 3;
const WARMUP = 200;
const CALL_TIMEOUT_MS = 5_000;
/** Longest the watcher may wait for the events it was told to expect. */
const WATCH_LIMIT_MS = 300_000;

interface WatchReport {
  readonly cpuUsPerEvent: number;
}

function cpuUs(): number {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
}

/** User + system CPU of the members so far, in µs. */
async function membersCpuUs(pids: readonly number[]): Promise<number> {
  const seconds = await Promise.all(pids.map(cpuSeconds));
  return seconds.reduce<number>((sum, s) => sum + (s ?? Number.NaN) * 1e6, 0);
}

/** --watch: follow the log from `from`, count `expect` records after the warm-up, report CPU per record. */
async function watchRole(endpoints: string[], from: number, warmup: number, expect: number): Promise<void> {
  const log = new EtcdLog({ endpoints, cluster: CLUSTER });
  let seen = 0;
  let startedCpu = 0;
  const done = new Promise<WatchReport>((resolve, reject) => {
    const limit = setTimeout(() => reject(new Error(`watch: ${seen} of ${warmup + expect} events in ${WATCH_LIMIT_MS} ms`)), WATCH_LIMIT_MS);
    log.watch(from, {
      onRecords(records: readonly LogRecord[]) {
        for (let i = 0; i < records.length; i++) {
          seen++;
          if (seen === warmup) startedCpu = cpuUs();
          if (seen === warmup + expect) {
            clearTimeout(limit);
            resolve({ cpuUsPerEvent: (cpuUs() - startedCpu) / expect });
          }
        }
      },
      onEnd: (why, detail) => reject(new Error(`watch ended (${why}): ${detail}`)),
    });
  });
  process.send!('watching');
  process.send!(await done);
  await log.close();
}

async function main(): Promise<void> {
  const options = new Command()
    .requiredOption('--endpoints <urls>', 'etcd client URLs, comma-separated')
    .option('--etcd-pids <pids>', "the members' pids, comma-separated, to measure their CPU", '')
    .addOption(new Option('--appends <n>', 'measured appends').default(2_000).argParser(Number))
    .addOption(new Option('--value-bytes <n>', 'bytes per batch (16 commands of the bench: about 700)').default(700).argParser(Number))
    .addOption(new Option('--together <n>', 'clients whose appends are sent at the same moment').default(1).argParser(Number))
    .addOption(new Option('--watch <from,warmup,expect>').hideHelp())
    .parse()
    .opts<{ endpoints: string; etcdPids: string; appends: number; valueBytes: number; together: number; watch?: string }>();
  const endpoints = options.endpoints.split(',');
  if (options.watch !== undefined) {
    const [from, warmup, expect] = options.watch.split(',').map(Number) as [number, number, number];
    return watchRole(endpoints, from, warmup, expect);
  }
  const pids = options.etcdPids === '' ? [] : options.etcdPids.split(',').map(Number);
  const logs = Array.from({ length: options.together }, () => new EtcdLog({ endpoints, cluster: CLUSTER }));
  const value = new Uint8Array(options.valueBytes).fill(0x61);
  const step = (): Promise<unknown> => Promise.all(logs.map((log) => log.append(value, CALL_TIMEOUT_MS)));
  const steps = Math.ceil(options.appends / options.together);
  const appends = steps * options.together;
  const from = (await logs[0]!.head(CALL_TIMEOUT_MS)).storeRevision + 1;
  const watchers = Array.from({ length: WATCHERS }, () =>
    fork(fileURLToPath(import.meta.url), [...process.argv.slice(2), '--watch', `${from},${WARMUP * options.together},${appends}`]),
  );
  const reports = watchers.map(
    (watcher) =>
      new Promise<WatchReport>((resolve, reject) => {
        watcher.on('message', (message) => {
          if (typeof message === 'object') resolve(message as unknown as WatchReport);
        });
        watcher.on('exit', (code) => reject(new Error(`a watcher exited (${code}) before reporting`)));
      }),
  );
  await Promise.all(watchers.map((watcher) => once(watcher, 'message'))); // 'watching'
  for (let i = 0; i < WARMUP; i++) await step();
  const etcdBefore = await membersCpuUs(pids);
  const cpuBefore = cpuUs();
  const started = performance.now();
  for (let i = 0; i < steps; i++) await step();
  const wallUs = ((performance.now() - started) * 1_000) / steps;
  const appendUs = (cpuUs() - cpuBefore) / appends;
  const etcdUs = pids.length === 0 ? undefined : ((await membersCpuUs(pids)) - etcdBefore) / appends;
  const watchUs = (await Promise.all(reports)).reduce((sum, report) => sum + report.cpuUsPerEvent, 0) / WATCHERS;
  await Promise.all(logs.map((log) => log.close()));
  const cleaner = new Etcd3({ hosts: endpoints });
  await cleaner.delete().prefix(`/${CLUSTER}/`);
  cleaner.close();
  const cores = availableParallelism();
  console.log(`${appends} appends of ${options.valueBytes} B, ${options.together} at a time, ${WATCHERS} watchers:`);
  console.log(`  append${options.together > 1 ? 's' : ''}, wall                 ${wallUs.toFixed(0)} µs`);
  console.log(`  append, CPU of the appender  ${appendUs.toFixed(0)} µs`);
  console.log(`  watch event, CPU of a node   ${watchUs.toFixed(0)} µs`);
  if (etcdUs !== undefined) {
    console.log(`  commit, CPU of the members   ${etcdUs.toFixed(0)} µs (all ${pids.length}, delivery to the watchers included)`);
    const perRound = etcdUs + appendUs + WATCHERS * watchUs;
    console.log(`  one round on 3 nodes         ${perRound.toFixed(0)} µs of CPU: at most ${Math.floor((cores * 1e6) / perRound)} rounds/s on ${cores} cores`);
  }
}

await main();
