import { Command, InvalidArgumentError } from 'commander';
import { netnsUnavailable } from '../../test/helpers/netns/ip.js';
import { describeFailure, dumpFailure, runNemesis } from '../../test/cluster-e2e/nemesis/runner.js';
import { FAULT_KINDS, type FaultKind } from '../../test/cluster-e2e/nemesis/schedule.js';

function whole(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`"${value}" is not a whole number.`);
  return Number(value);
}

function kinds(value: string): FaultKind[] {
  const list = value.split(',');
  const unknown = list.filter((k) => !(FAULT_KINDS as readonly string[]).includes(k));
  if (unknown.length > 0) throw new InvalidArgumentError(`unknown fault(s): ${unknown.join(', ')}`);
  return list as FaultKind[];
}

const options = new Command()
  .name('nemesis')
  .description('real-network fault runs: 3 lockserver nodes and 3 etcd members in network namespaces (needs root)')
  .option('--seed <n>', 'replay this one seed (its fault schedule)', whole)
  .option('--from <n>', 'first seed of a series', whole, 1)
  .option('--runs <n>', 'runs in the series (seeds from, from+1, …)', whole, 1)
  .option('--seconds <n>', 'seconds of load per run (the schedule is drawn to fit)', whole, 90)
  .option('--only <kinds>', `only these faults, comma-separated: ${FAULT_KINDS.join(', ')}`, kinds)
  .option('--busy <n>', "clients per node adding unchecked write load (bundles of several nodes' batches form at the sequencer under the faults)", whole, 0)
  .option('--quiet', "no progress lines, only each run's summary")
  .parse()
  .opts<{ seed?: number; from: number; runs: number; seconds: number; only?: FaultKind[]; busy: number; quiet?: boolean }>();

const unavailable = netnsUnavailable();
if (unavailable !== undefined) {
  console.error(`scripts/nemesis: cannot run: ${unavailable}`);
  process.exit(2);
}

// Ctrl-C: leave through 'exit', whose hooks remove the namespaces and kill the processes.
process.once('SIGINT', () => process.exit(130));
process.once('SIGTERM', () => process.exit(143));

const seeds = options.seed !== undefined ? [options.seed] : Array.from({ length: options.runs }, (_, i) => options.from + i);
let failures = 0;
for (const seed of seeds) {
  const report = await runNemesis({
    seed,
    seconds: options.seconds,
    only: options.only,
    busy: options.busy,
    log: options.quiet === true ? undefined : (line) => console.log(line),
  });
  const { violations, history, nodeLogs, ...summary } = report;
  console.log(JSON.stringify({ ...summary, violations: violations.length }, null, 1));
  if (violations.length > 0) {
    failures++;
    console.log(`${describeFailure(report)}\n${dumpFailure(report)}`);
  }
}
console.log(`${seeds.length - failures} passed, ${failures} failed`);
process.exitCode = failures > 0 ? 1 : 0;
