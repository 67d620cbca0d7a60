import { Command, InvalidArgumentError } from 'commander';
import { runSimulation, SimulationFailure } from '../../test/cluster/Simulation.js';

function whole(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`"${value}" is not a whole number.`);
  return Number(value);
}

const options = new Command()
  .name('simulate')
  .description('seeded, deterministic simulation of a lock cluster over an in-memory etcd')
  .option('--seed <n>', 'replay this one seed', whole)
  .option('--from <n>', 'first seed of a range', whole, 1)
  .option('--count <n>', 'seeds in the range', whole, 100)
  .option('--faulty-ms <n>', 'virtual milliseconds of load with faults per seed', whole, 20_000)
  .option('--no-foreign-compaction', 'no compaction of the store by another cluster')
  .option('--no-overdue-revokes', "nodes do not revoke each other's overdue writer leases (only seals stop a renewed one)")
  .parse()
  .opts<{ seed?: number; from: number; count: number; faultyMs: number; foreignCompaction: boolean; overdueRevokes: boolean }>();

const seeds = options.seed !== undefined ? [options.seed] : Array.from({ length: options.count }, (_, i) => options.from + i);
let failures = 0;
for (const seed of seeds) {
  try {
    const report = await runSimulation({
      seed,
      faultyMs: options.faultyMs,
      foreignCompaction: options.foreignCompaction,
      overdueRevokes: options.overdueRevokes,
    });
    console.log(JSON.stringify(report));
  } catch (error) {
    // Anything else thrown is a failure of this seed too: a long run goes on to the next one.
    const message = error instanceof SimulationFailure ? error.message : ((error as Error).stack ?? String(error));
    failures++;
    const flags = `--faulty-ms ${options.faultyMs}${options.foreignCompaction ? '' : ' --no-foreign-compaction'}${options.overdueRevokes ? '' : ' --no-overdue-revokes'}`;
    console.log(`seed ${seed} FAILED: ${message}\nreplay: scripts/simulate --seed ${seed} ${flags}`);
  }
}
console.log(`${seeds.length - failures} passed, ${failures} failed`);
process.exitCode = failures > 0 ? 1 : 0;
