import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { netnsUnavailable } from '../../test/helpers/netns/ip.js';
import { describeFailure, runNemesis } from '../../test/cluster-e2e/nemesis/runner.js';

function whole(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`"${value}" is not a whole number.`);
  return Number(value);
}

const options = new Command()
  .name('nemesis')
  .description('real-network fault runs: 3 lockserver nodes and 3 etcd members in network namespaces (needs root)')
  .option('--seed <n>', 'replay this one seed (its fault schedule)', whole)
  .option('--from <n>', 'first seed of a series', whole, 1)
  .option('--runs <n>', 'runs in the series (seeds from, from+1, …)', whole, 1)
  .option('--seconds <n>', 'seconds of load per run (the schedule is drawn to fit)', whole, 90)
  .option('--quiet', 'no progress lines, only each run\'s summary')
  .parse()
  .opts<{ seed?: number; from: number; runs: number; seconds: number; quiet?: boolean }>();

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
  const report = await runNemesis({ seed, seconds: options.seconds, log: options.quiet === true ? undefined : (line) => console.log(line) });
  const { violations, history, nodeLogs, ...summary } = report;
  console.log(JSON.stringify({ ...summary, violations: violations.length }, null, 1));
  if (violations.length > 0) {
    failures++;
    const dump = join(tmpdir(), `nemesis-seed-${seed}-history.json`);
    const logs = join(tmpdir(), `nemesis-seed-${seed}-nodes.log`);
    writeFileSync(dump, JSON.stringify({ violations, history }, null, 0).replace(/\},\{/g, '},\n{'));
    writeFileSync(logs, nodeLogs);
    console.log(`${describeFailure(report)}\nhistory: ${dump}; node logs: ${logs}`);
  }
}
console.log(`${seeds.length - failures} passed, ${failures} failed`);
process.exitCode = failures > 0 ? 1 : 0;
